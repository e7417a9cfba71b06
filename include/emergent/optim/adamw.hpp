// AdamW (Loshchilov & Hutter, arXiv 1711.05101) over flat buffers, with decoupled weight decay
// applied only to the tensors whose TensorSpec says so (Linear weight matrices), and global
// gradient-norm clipping before the update, as PyTorch's clip_grad_norm_ + AdamW do:
//   g <- g * min(1, max_norm / ||g||)
//   m <- b1 m + (1-b1) g;   v <- b2 v + (1-b2) g^2
//   p <- p - lr * wd * p   (decayed tensors only)
//   p <- p - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <span>
#include <vector>

namespace emergent {

struct AdamWConfig {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double max_grad_norm = 1.0;  // <= 0: no clipping
};

// A range of the flat buffer that is or is not weight-decayed.
struct DecayRange {
  std::size_t offset = 0;
  std::size_t size = 0;
  bool weight_decay = false;
};

template <class Real>
class AdamW {
 public:
  AdamW(AdamWConfig config, const std::vector<DecayRange>& ranges, std::size_t parameter_count)
      : config_(config), m_(parameter_count, 0), v_(parameter_count, 0) {
    for (const DecayRange& range : ranges)
      for (std::size_t at = 0; at < range.size; at += kChunk)
        chunks_.push_back({range.offset + at, std::min<std::size_t>(kChunk, range.size - at),
                           range.weight_decay});
  }

  // The global L2 norm of the gradients, before clipping: in double, over fixed chunks summed in
  // order, so the same for every thread count.
  static double gradient_norm(std::span<const Real> grads) {
    const std::int64_t n = static_cast<std::int64_t>(grads.size()),
                       chunks = (n + kChunk - 1) / kChunk;
    std::vector<double> partial(static_cast<std::size_t>(chunks));
    parallel_for(chunks, [&](std::int64_t c) {
      constexpr int lanes = 8;  // independent accumulators, so that the loop vectorises
      double sums[lanes] = {};
      const std::int64_t begin = c * kChunk, end = std::min(n, begin + kChunk);
      std::int64_t i = begin;
      for (; i + lanes <= end; i += lanes)
        for (int l = 0; l < lanes; ++l) sums[l] += double(grads[i + l]) * double(grads[i + l]);
      for (; i < end; ++i) sums[0] += double(grads[i]) * double(grads[i]);
      double total = 0;
      for (double s : sums) total += s;
      partial[static_cast<std::size_t>(c)] = total;
    });
    double sum = 0;
    for (double s : partial) sum += s;
    return std::sqrt(sum);
  }

  // One update with learning rate `lr`; returns the gradient norm before clipping. One parallel
  // loop over fixed chunks of every tensor range (small tensors are one chunk each).
  double step(std::span<Real> params, std::span<const Real> grads, double lr) {
    require(params.size() == m_.size() && grads.size() == m_.size(), "AdamW::step",
            "parameter, gradient and moment buffers differ in size");
    const double norm = gradient_norm(grads);
    const double clip = (config_.max_grad_norm > 0 && norm > config_.max_grad_norm)
                            ? config_.max_grad_norm / norm
                            : 1.0;
    ++steps_;
    const double bias1 = 1.0 - std::pow(config_.beta1, double(steps_));
    const double bias2 = 1.0 - std::pow(config_.beta2, double(steps_));
    const Real b1 = Real(config_.beta1), b2 = Real(config_.beta2), eps = Real(config_.eps);
    const Real step_size = Real(lr / bias1), inv_sqrt_bias2 = Real(1.0 / std::sqrt(bias2));
    const Real scale = Real(clip);
    const Real decayed = Real(1.0 - lr * config_.weight_decay);
    parallel_for(static_cast<std::int64_t>(chunks_.size()), [&](std::int64_t c) {
      const Chunk& chunk = chunks_[static_cast<std::size_t>(c)];
      const Real decay = chunk.weight_decay ? decayed : Real(1);
      const auto size = static_cast<Eigen::Index>(chunk.size);
      // Eigen arrays, so that the square root and division vectorise (std::sqrt does not
      // without -fno-math-errno); the same operations in the same order as written.
      const Eigen::Map<const Values> g(grads.data() + chunk.begin, size);
      Eigen::Map<Values> p(params.data() + chunk.begin, size), m(m_.data() + chunk.begin, size),
          v(v_.data() + chunk.begin, size);
      m = b1 * m + (Real(1) - b1) * (g * scale);
      v = b2 * v + (Real(1) - b2) * (g * scale) * (g * scale);
      p = p * decay - step_size * m / (v.sqrt() * inv_sqrt_bias2 + eps);
    });
    return norm;
  }

  std::int64_t steps() const { return steps_; }
  std::span<Real> first_moment() { return m_; }
  std::span<Real> second_moment() { return v_; }
  std::span<const Real> first_moment() const { return m_; }
  std::span<const Real> second_moment() const { return v_; }
  // Restores the optimizer from a checkpoint (moments are filled through the spans above).
  void set_steps(std::int64_t steps) { steps_ = steps; }
  const AdamWConfig& config() const { return config_; }

 private:
  static constexpr std::int64_t kChunk = 8192;
  using Values = Eigen::Array<Real, Eigen::Dynamic, 1>;
  // A piece of one range of at most kChunk values: the unit of work of a step.
  struct Chunk {
    std::size_t begin = 0, size = 0;
    bool weight_decay = false;
  };
  AdamWConfig config_;
  std::vector<Chunk> chunks_;
  std::vector<Real> m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace emergent
