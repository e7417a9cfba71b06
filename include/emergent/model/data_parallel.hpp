// One training step's forward and backward, split across threads by sequences.
//
// The model is small (a few hundred thousand parameters) and a step is a few thousand tokens,
// so the cheapest way to use every core is the one data-parallel training uses across GPUs:
// each thread runs the whole forward and backward of its own slice of the batch, serially, into
// its own gradient buffer, and the buffers are summed at the end. There is no synchronisation
// inside the step, every GEMM runs single-threaded on a cache-resident slice, and the result is
// deterministic for a given thread count (fixed slices, fixed summation order). Within a slice
// the OpenMP loops of the ops run on one thread (nested parallelism is off).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "../core/error.hpp"
#include "../core/parallel.hpp"
#include "model.hpp"

namespace emergent {

template <class Net>
class DataParallelStep {
 public:
  using Real = typename Net::Real;

  // threads <= 0: OpenMP's default.
  explicit DataParallelStep(int threads = 0) : threads_(threads > 0 ? threads : thread_count()) {}

  // grads <- d(loss)/d(params) over the whole batch (overwritten); returns the batch's loss.
  double run(std::span<const Real> params, std::span<Real> grads, const ForwardInput& in) {
    require(grads.size() == Net::parameter_count, "DataParallelStep",
            "gradient buffer has the wrong size");
    const int slices = std::max(1, std::min(threads_, in.batch));
    slices_.resize(slices);
    for (int k = 0; k < slices; ++k) {
      Slice& slice = slices_[k];
      slice.begin = in.batch * k / slices;
      slice.batch = in.batch * (k + 1) / slices - slice.begin;
      if (k > 0) slice.grads.resize(Net::parameter_count);
    }
    const std::size_t T = static_cast<std::size_t>(in.length);
#if defined(_OPENMP)
#pragma omp parallel for schedule(static, 1) num_threads(slices) if (slices > 1)
#endif
    for (int k = 0; k < slices; ++k) {
      Slice& slice = slices_[k];
      ForwardInput part = in;
      part.batch = slice.batch;
      part.inputs = in.inputs.subspan(slice.begin * T, slice.batch * T);
      part.targets = in.targets.subspan(slice.begin * T, slice.batch * T);
      slice.loss = Net::forward(params, part, slice.workspace);
      std::span<Real> g = k == 0 ? grads : std::span<Real>(slice.grads);
      std::fill(g.begin(), g.end(), Real(0));
      Net::backward(params, g, slice.workspace, Real(double(slice.batch) / in.batch));
    }
    if (slices > 1) {
      const std::int64_t n = static_cast<std::int64_t>(Net::parameter_count);
      constexpr std::int64_t chunk = 8192;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(slices)
#endif
      for (std::int64_t c = 0; c < (n + chunk - 1) / chunk; ++c)
        for (int k = 1; k < slices; ++k) {
          const Real* src = slices_[k].grads.data();
          for (std::int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i)
            grads[i] += src[i];
        }
    }
    double loss = 0;
    for (const Slice& slice : slices_) loss += slice.loss * slice.batch / in.batch;
    return loss;
  }

  // Weighted means of the last step's per-token losses / argmax hits over the whole batch.
  double weighted_mean(std::span<const float> weights) const {
    return batch_mean(&Net::weighted_mean, weights);
  }
  double weighted_accuracy(std::span<const float> weights) const {
    return batch_mean(&Net::weighted_accuracy, weights);
  }

  // The workspaces of the last step, one per slice, in batch order (for attention analysis).
  std::vector<const typename Net::Workspace*> workspaces() const {
    std::vector<const typename Net::Workspace*> out;
    for (const Slice& s : slices_) out.push_back(&s.workspace);
    return out;
  }

  int threads() const { return threads_; }

 private:
  // A per-slice mean, weighted by the slices' shares of the batch.
  double batch_mean(double (*slice_mean)(const typename Net::Workspace&, std::span<const float>),
                    std::span<const float> weights) const {
    double total = 0;
    int batch = 0;
    for (const Slice& s : slices_)
      total += slice_mean(s.workspace, weights) * s.batch, batch += s.batch;
    return total / batch;
  }

  struct Slice {
    int begin = 0, batch = 0;
    double loss = 0;
    typename Net::Workspace workspace;
    std::vector<Real> grads;  // slice 0 writes straight into the caller's buffer
  };
  int threads_;
  std::vector<Slice> slices_;
};

}  // namespace emergent
