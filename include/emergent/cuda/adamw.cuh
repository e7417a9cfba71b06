// optim/adamw.hpp on the device, for an ensemble: each member's global gradient norm (in
// double, over fixed chunks summed in order), its own clipping factor, then one elementwise
// AdamW update of every member's buffer, weight decay where the member's layout says so. The
// update is the CPU's, operation for operation, in float, and like the CPU's it leaves the
// values outside every tensor (the layout's padding) alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "../optim/adamw.hpp"
#include "device_system.cuh"
#include "profile.cuh"

namespace emergent::cuda {

class EnsembleAdamW {
 public:
  EnsembleAdamW(AdamWConfig config, const std::vector<DecayRange>& ranges,
                std::size_t parameter_count, int members)
      : config_(config),
        members_(members),
        count_(parameter_count),
        chunks_((std::int64_t(parameter_count) + kChunk - 1) / kChunk),
        m_(parameter_count * members, 0.0f),
        v_(parameter_count * members, 0.0f),
        partial_(members * chunks_),
        norms_(members),
        clip_(members) {
    std::vector<std::uint8_t> kind(parameter_count, kPadding);
    for (const DecayRange& r : ranges)
      for (std::size_t i = r.offset; i < r.offset + r.size; ++i)
        kind[i] = r.weight_decay ? kDecayed : kUpdated;
    copy_to_device<std::uint8_t>(kind, kind_);
  }

  // Each member's gradient norm before clipping.
  std::vector<double> gradient_norms(const float* grads) {
    OpScope scope("adamw.gradient_norm");
    const std::int64_t n = std::int64_t(count_), chunks = chunks_;
    double* partial = raw(partial_);
    for_each_index(members_ * chunks, [=] EMERGENT_HD(std::int64_t i) {
      const std::int64_t e = i / chunks, begin = (i % chunks) * kChunk;
      const std::int64_t end = begin + kChunk < n ? begin + kChunk : n;
      double sum = 0;
      for (std::int64_t j = begin; j < end; ++j) {
        const double g = grads[e * n + j];
        sum += g * g;
      }
      partial[i] = sum;
    });
    double* norms = raw(norms_);
    for_each_index(members_, [=] EMERGENT_HD(std::int64_t e) {
      double sum = 0;
      for (std::int64_t c = 0; c < chunks; ++c) sum += partial[e * chunks + c];
      norms[e] = sqrt(sum);
    });
    return copy_to_host(norms_);
  }

  // One update of every member with learning rate `lr`; returns the norms before clipping.
  std::vector<double> step(float* params, const float* grads, double lr) {
    const std::vector<double> norms = gradient_norms(grads);
    std::vector<float> clip(norms.size());
    for (std::size_t e = 0; e < norms.size(); ++e)
      clip[e] = float((config_.max_grad_norm > 0 && norms[e] > config_.max_grad_norm)
                          ? config_.max_grad_norm / norms[e]
                          : 1.0);
    {
      OpScope scope("adamw.clip_upload");
      copy_to_device<float>(clip, clip_);
    }
    OpScope scope("adamw.update");
    ++steps_;
    const double bias1 = 1.0 - std::pow(config_.beta1, double(steps_));
    const double bias2 = 1.0 - std::pow(config_.beta2, double(steps_));
    const float b1 = float(config_.beta1), b2 = float(config_.beta2), eps = float(config_.eps);
    const float step_size = float(lr / bias1), inv_sqrt_bias2 = float(1.0 / std::sqrt(bias2));
    const float decayed = float(1.0 - lr * config_.weight_decay);
    const std::int64_t n = std::int64_t(count_);
    float *m = raw(m_), *v = raw(v_);
    const float* scales = raw(clip_);
    const std::uint8_t* kind = raw(kind_);
    for_each_index(members_ * n, [=] EMERGENT_HD(std::int64_t i) {
      if (kind[i % n] == kPadding) return;
      const float g = grads[i] * scales[i / n];
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      params[i] = params[i] * (kind[i % n] == kDecayed ? decayed : 1.0f) -
                  step_size * m[i] / (sqrtf(v[i]) * inv_sqrt_bias2 + eps);
    });
    return norms;
  }

  std::int64_t steps() const { return steps_; }
  void set_steps(std::int64_t steps) { steps_ = steps; }
  DeviceVector<float>& first_moment() { return m_; }
  DeviceVector<float>& second_moment() { return v_; }

 private:
  static constexpr std::int64_t kChunk = 8192;
  // What the update does to each value of a member's buffer.
  static constexpr std::uint8_t kPadding = 0, kUpdated = 1, kDecayed = 2;
  AdamWConfig config_;
  int members_;
  std::size_t count_;
  std::int64_t chunks_;
  DeviceVector<float> m_, v_;
  DeviceVector<std::uint8_t> kind_;  // [P] kPadding, kUpdated or kDecayed
  DeviceVector<double> partial_, norms_;
  DeviceVector<float> clip_;
  std::int64_t steps_ = 0;
};

}  // namespace emergent::cuda
