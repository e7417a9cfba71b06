// AdamW (Loshchilov & Hutter, arXiv 1711.05101) over flat buffers, with decoupled weight decay
// applied only to the tensors whose TensorSpec says so (Linear weight matrices), and global
// gradient-norm clipping before the update, as PyTorch's clip_grad_norm_ + AdamW do:
//   g <- g * min(1, max_norm / ||g||)
//   m <- b1 m + (1-b1) g;   v <- b2 v + (1-b2) g^2
//   p <- p - lr * wd * p   (decayed tensors only)
//   p <- p - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "../core/error.hpp"
#include "../core/parallel.hpp"

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
  AdamW(AdamWConfig config, std::vector<DecayRange> ranges, std::size_t parameter_count)
      : config_(config), ranges_(std::move(ranges)), m_(parameter_count, 0), v_(parameter_count, 0) {}

  // The global L2 norm of the gradients, before clipping.
  static double gradient_norm(std::span<const Real> grads) {
    double sum = 0;
    for (Real g : grads) sum += double(g) * double(g);
    return std::sqrt(sum);
  }

  // One update with learning rate `lr`; returns the gradient norm before clipping.
  double step(std::span<Real> params, std::span<const Real> grads, double lr) {
    require(params.size() == m_.size() && grads.size() == m_.size(), "AdamW::step",
            "parameter, gradient and moment buffers differ in size");
    const double norm = gradient_norm(grads);
    const double clip = (config_.max_grad_norm > 0 && norm > config_.max_grad_norm) ? config_.max_grad_norm / norm : 1.0;
    ++steps_;
    const double bias1 = 1.0 - std::pow(config_.beta1, double(steps_));
    const double bias2 = 1.0 - std::pow(config_.beta2, double(steps_));
    const Real b1 = Real(config_.beta1), b2 = Real(config_.beta2), eps = Real(config_.eps);
    const Real step_size = Real(lr / bias1), inv_sqrt_bias2 = Real(1.0 / std::sqrt(bias2));
    const Real scale = Real(clip);
    for (const DecayRange& range : ranges_) {
      const Real decay = range.weight_decay ? Real(1.0 - lr * config_.weight_decay) : Real(1);
      Real* p = params.data() + range.offset;
      const Real* g = grads.data() + range.offset;
      Real* m = m_.data() + range.offset;
      Real* v = v_.data() + range.offset;
      const std::int64_t n = static_cast<std::int64_t>(range.size);
      parallel_for((n + 8191) / 8192, [&](std::int64_t chunk) {
        const std::int64_t end = std::min<std::int64_t>(n, (chunk + 1) * 8192);
        for (std::int64_t i = chunk * 8192; i < end; ++i) {
          const Real gi = g[i] * scale;
          m[i] = b1 * m[i] + (Real(1) - b1) * gi;
          v[i] = b2 * v[i] + (Real(1) - b2) * gi * gi;
          p[i] = p[i] * decay - step_size * m[i] / (std::sqrt(v[i]) * inv_sqrt_bias2 + eps);
        }
      });
    }
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
  AdamWConfig config_;
  std::vector<DecayRange> ranges_;
  std::vector<Real> m_, v_;
  std::int64_t steps_ = 0;
};

}  // namespace emergent
