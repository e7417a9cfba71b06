// Sums over many rows in a fixed order, in parallel: the gradients of biases, LayerNorm's gamma
// and beta, the embedding tables, the gradient norm and the loss means all sum one value per row
// over thousands of rows. One index per output looping over every row (what this code did first)
// leaves the GPU nearly idle at small ensembles (an H200 spent 1.8 ms of a 5 ms step in
// LayerNorm's backward that way); here the rows are cut into chunks of kRowChunk, each chunk is
// summed by its own index, and the chunks' sums are added in chunk order: the same bits on every
// run, on every system (the order depends on the sizes alone), and rows x columns / kRowChunk
// indices at work.
#pragma once

#include <cstdint>
#include <deque>
#include <emergent/cuda/device_system.cuh>
#include <stdexcept>
#include <string>

namespace emergent::cuda {

inline constexpr std::int64_t kRowChunk = 32;

// Scratch space for the chunks' sums, shared by every reduction (they run one after another on
// the device's one stream). It only grows, and reaches its size in a step's first run, which is
// direct, so that a captured step (cuda/step.cuh) allocates nothing. Should a later reduction
// need more, the buffer it leaves stays allocated: a captured graph may hold its address. Growing
// during a capture is refused (the step then runs its kernels directly).
template <class T>
T* reduction_scratch(std::size_t count) {
  static std::deque<DeviceVector<T>>* buffers =  // never freed: no teardown order
      new std::deque<DeviceVector<T>>(1);        // a deque: growing it moves no buffer
  if (buffers->back().size() < count) {
#if EMERGENT_DEVICE_IS_CUDA
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    check_cuda(cudaStreamIsCapturing(device_stream(), &capturing), "cudaStreamIsCapturing");
    if (capturing != cudaStreamCaptureStatusNone)
      throw std::logic_error("the reduction scratch must grow to " + std::to_string(count) +
                             " values during a CUDA graph's capture (cuda/reduce.cuh)");
#endif
    if (buffers->back().size() == 0) buffers->pop_back();
    buffers->emplace_back(count);
  }
  return raw(buffers->back());
}

// K column sums over the same rows at once, in one pass over them (LayerNorm's gamma and beta):
// value(e, r, c) returns ColumnValues<T, K>, and sum k goes to out[k], each summed as
// column_sums below sums its one (the same order, so the same bits as K separate calls, in two
// launches instead of 2 K).
template <class T, int K>
struct ColumnValues {
  T v[K];
};
template <class T, int K, class Out, class Value>
void column_sums_of(Out* const (&out)[K], std::int64_t out_stride, int members, std::int64_t rows,
                    int cols, bool accumulate, Value value) {
  const std::int64_t chunks = (rows + kRowChunk - 1) / kRowChunk,
                     count = std::int64_t(members) * chunks * cols;
  T* partial = reduction_scratch<T>(std::size_t(K * count));
  for_each_index(count, [=] EMERGENT_HD(std::int64_t i) {
    const int c = int(i % cols);
    const std::int64_t chunk = (i / cols) % chunks, e = i / (cols * chunks);
    const std::int64_t end = (chunk + 1) * kRowChunk < rows ? (chunk + 1) * kRowChunk : rows;
    ColumnValues<T, K> sum{};
    for (std::int64_t r = chunk * kRowChunk; r < end; ++r) {
      const auto v = value(e, r, c);
      for (int k = 0; k < K; ++k) sum.v[k] += T(v.v[k]);
    }
    for (int k = 0; k < K; ++k) partial[k * count + i] = sum.v[k];
  });
  ColumnValues<Out*, K> outs;
  for (int k = 0; k < K; ++k) outs.v[k] = out[k];
  for_each_index(std::int64_t(members) * cols, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t e = i / cols;
    const int c = int(i % cols);
    for (int k = 0; k < K; ++k) {
      const T* p = partial + k * count + e * chunks * cols + c;
      T sum = 0;
      for (std::int64_t j = 0; j < chunks; ++j) sum += p[j * cols];
      Out& o = outs.v[k][e * out_stride + c];
      o = accumulate ? Out(o + sum) : Out(sum);
    }
  });
}

// out[e * out_stride + c] = (accumulate ? out[...] : 0) + sum_{r < rows} value(e, r, c), for
// e < members and c < cols, summed in T: value(e, r, c) is summed over chunks of kRowChunk rows
// in row order, then the chunks in order.
template <class T, class Out, class Value>
void column_sums(Out* out, std::int64_t out_stride, int members, std::int64_t rows, int cols,
                 bool accumulate, Value value) {
  Out* const outs[1] = {out};
  column_sums_of<T, 1>(outs, out_stride, members, rows, cols, accumulate,
                       [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int c) {
                         return ColumnValues<T, 1>{{T(value(e, r, c))}};
                       });
}

}  // namespace emergent::cuda
