// One training step's forward and backward, split across threads by sequences.
//
// The model is small (a few hundred thousand parameters) and a step is a few thousand tokens,
// so the cheapest way to use every core is the one data-parallel training uses across GPUs:
// each thread runs the whole forward and backward of its own slice of the batch, serially, into
// its own gradient buffer, and the buffers are summed at the end. There is no synchronisation
// inside the step, every GEMM runs single-threaded on a cache-resident slice, and the result is
// deterministic for a given thread count (fixed slices, fixed summation order). Within a slice
// the OpenMP loops of the ops run on one thread (nested parallelism is off).
//
// A slice holds about kSliceTokens tokens (whole sequences, at least one), and a thread runs its
// slices one after the other, accumulating into its buffer: a slice's activations then stay in
// L2 between the forward and the backward. On an AMD EPYC Zen 3 (512 KiB L2) one thread trained
// 4,096-token steps of the linear map at 28.6k tokens/s as one slice and 40k as 512-token steps.
//
// A thread's slices share one workspace, so a step touches workers x (one slice's activations),
// not the whole batch's: on an Intel Xeon (2 MiB L2) that was 5-20% more tokens/s on one thread
// and 3-14% on two (linear map, 4,096 tokens; 81 MiB of RSS down to 17), interleaved runs. The
// per-token losses and hits of every slice are copied out, so the batch's metrics need no
// workspace. A step whose attention is analysed asks for every slice's workspace to be kept
// (`keep_every_slice`); the extra workspaces are freed again by the next step that does not.
#pragma once

#include <algorithm>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/model/model.hpp>
#include <memory>
#include <span>
#include <vector>

namespace emergent {

// Real is a template parameter (Net's Scalar), not a member alias: g++ 12 searches every typedef
// of `float` when it forms `const Real` (docs/design.md, "Build time").
template <class Net, class Real = typename Net::Scalar>
class DataParallelStep {
 public:
  // threads <= 0: OpenMP's default.
  explicit DataParallelStep(int threads = 0) : threads_(threads > 0 ? threads : thread_count()) {}

  static constexpr int kSliceTokens = 512;

  // grads <- d(loss)/d(params) over the whole batch (overwritten); returns the batch's loss.
  // keep_every_slice: keep each slice's workspace for workspaces() (attention analysis).
  double run(std::span<const Real> params, std::span<Real> grads, const ForwardInput& in,
             bool keep_every_slice = false) {
    require(grads.size() == Net::parameter_count, "DataParallelStep",
            "gradient buffer has the wrong size");
    const std::int64_t tokens = std::int64_t(in.batch) * in.length;
    const std::int64_t by_tokens = (tokens + kSliceTokens - 1) / kSliceTokens;
    const int slices = int(std::max<std::int64_t>(
        1, std::min<std::int64_t>(in.batch, std::max<std::int64_t>(threads_, by_tokens))));
    const int workers = std::min(threads_, slices);
    slices_.resize(slices);
    for (int k = 0; k < slices; ++k) {
      slices_[k].begin = int(std::int64_t(in.batch) * k / slices);
      slices_[k].batch = int(std::int64_t(in.batch) * (k + 1) / slices) - slices_[k].begin;
    }
    worker_grads_.resize(workers - 1);
    for (std::vector<Real>& g : worker_grads_) g.resize(Net::parameter_count);
    kept_every_slice_ = keep_every_slice;
    workspaces_.resize(keep_every_slice ? slices : workers);
    const std::size_t T = static_cast<std::size_t>(in.length);
    token_loss_.resize(std::size_t(in.batch) * T);
    token_correct_.resize(token_loss_.size());
    length_ = in.length;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static, 1) num_threads(workers) if (workers > 1)
#endif
    for (int w = 0; w < workers; ++w) {
      std::span<Real> g = w == 0 ? grads : std::span<Real>(worker_grads_[w - 1]);
      std::fill(g.begin(), g.end(), Real(0));
      for (int k = w; k < slices; k += workers) {  // worker w: slices w, w + workers, ...
        Slice& slice = slices_[k];
        typename Net::Workspace& ws = workspaces_[keep_every_slice ? k : w];
        ForwardInput part = in;
        part.batch = slice.batch;
        part.inputs = in.inputs.subspan(slice.begin * T, slice.batch * T);
        part.targets = in.targets.subspan(slice.begin * T, slice.batch * T);
        if (in.loss_weights.size() != T)  // per token: the slice's own
          part.loss_weights = in.loss_weights.subspan(slice.begin * T, slice.batch * T);
        if (!in.bias_pattern.empty() && in.bias_pattern.size() != T * T)  // per sequence
          part.bias_pattern = in.bias_pattern.subspan(slice.begin * T * T, slice.batch * T * T);
        slice.loss = Net::forward(params, part, ws);
        const std::size_t first = slice.begin * T, count = slice.batch * T;
        std::copy(ws.token_loss, ws.token_loss + count, token_loss_.begin() + first);
        std::copy(ws.token_correct, ws.token_correct + count, token_correct_.begin() + first);
        Net::backward(params, g, ws, Real(double(slice.batch) / in.batch));
      }
    }
    if (workers > 1) {
      const std::int64_t n = static_cast<std::int64_t>(Net::parameter_count);
      constexpr std::int64_t chunk = 8192;
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(workers)
#endif
      for (std::int64_t c = 0; c < (n + chunk - 1) / chunk; ++c)
        for (const std::vector<Real>& worker : worker_grads_) {
          const Real* src = worker.data();
          for (std::int64_t i = c * chunk; i < std::min(n, (c + 1) * chunk); ++i)
            grads[i] += src[i];
        }
    }
    double loss = 0;
    for (const Slice& slice : slices_) loss += slice.loss * slice.batch / in.batch;
    return loss;
  }

  // Weighted means of the last step's per-token losses / argmax hits over the whole batch
  // (weights: one per position, or one per token of the batch).
  double weighted_mean(std::span<const float> weights) const {
    return batch_mean(token_loss_, weights);
  }
  double weighted_accuracy(std::span<const float> weights) const {
    return batch_mean(token_correct_, weights);
  }

  // The workspaces of the last step, one per slice in batch order (for attention analysis);
  // only after a step that kept every slice's.
  std::vector<const typename Net::Workspace*> workspaces() const {
    require(kept_every_slice_, "DataParallelStep::workspaces",
            "the last step did not keep every slice's workspace (run with keep_every_slice)");
    return held_workspaces();
  }

  // The workspaces the last step held: one per slice, or one per thread (memory estimates).
  std::vector<const typename Net::Workspace*> held_workspaces() const {
    std::vector<const typename Net::Workspace*> out;
    for (const typename Net::Workspace& ws : workspaces_) out.push_back(&ws);
    return out;
  }

  int threads() const { return threads_; }

 private:
  // Each slice's mean (nn::weighted_token_mean, as Model::weighted_mean takes it), weighted by
  // the slices' shares of the batch: the same bits as when every slice kept its workspace.
  double batch_mean(const std::vector<Real>& values, std::span<const float> weights) const {
    const std::size_t T = static_cast<std::size_t>(length_);
    const bool per_token = weights.size() == values.size() && weights.size() != T;
    require(weights.size() == T || per_token, "DataParallelStep",
            "weights must hold one per position or one per token");
    double mean = 0;
    int batch = 0;
    for (const Slice& s : slices_) {
      const std::size_t first = static_cast<std::size_t>(s.begin) * T;
      mean += (per_token ? nn::sequence_weighted_mean(values.data() + first, s.batch, length_,
                                                      weights.data() + first)
                         : nn::weighted_token_mean(values.data() + first, s.batch, length_,
                                                   weights.data())) *
              s.batch;
      batch += s.batch;
    }
    return mean / batch;
  }

  struct Slice {
    int begin = 0, batch = 0;
    double loss = 0;
  };
  int threads_;
  std::vector<Slice> slices_;
  std::vector<typename Net::Workspace> workspaces_;  // one per slice or one per worker
  bool kept_every_slice_ = false;
  std::vector<Real> token_loss_, token_correct_;  // [batch * length] of the last step
  int length_ = 0;
  std::vector<std::vector<Real>> worker_grads_;  // workers 1..; worker 0 writes into the caller's
};

}  // namespace emergent
