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

// out[e * out_stride + c] = (accumulate ? out[...] : 0) + sum_{r < rows} value(e, r, c), for
// e < members and c < cols, summed in T: value(e, r, c) is summed over chunks of kRowChunk rows
// in row order, then the chunks in order.
template <class T, class Out, class Value>
void column_sums(Out* out, std::int64_t out_stride, int members, std::int64_t rows, int cols,
                 bool accumulate, Value value) {
  const std::int64_t chunks = (rows + kRowChunk - 1) / kRowChunk;
  T* partial = reduction_scratch<T>(std::size_t(members) * chunks * cols);
  for_each_index(members * chunks * cols, [=] EMERGENT_HD(std::int64_t i) {
    const int c = int(i % cols);
    const std::int64_t chunk = (i / cols) % chunks, e = i / (cols * chunks);
    const std::int64_t end = (chunk + 1) * kRowChunk < rows ? (chunk + 1) * kRowChunk : rows;
    T sum = 0;
    for (std::int64_t r = chunk * kRowChunk; r < end; ++r) sum += T(value(e, r, c));
    partial[i] = sum;
  });
  for_each_index(std::int64_t(members) * cols, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t e = i / cols;
    const int c = int(i % cols);
    const T* p = partial + e * chunks * cols + c;
    T sum = 0;
    for (std::int64_t k = 0; k < chunks; ++k) sum += p[k * cols];
    Out& o = out[e * out_stride + c];
    o = accumulate ? Out(o + sum) : Out(sum);
  });
}

}  // namespace emergent::cuda
