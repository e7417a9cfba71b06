// optim/adamw.hpp on the device, for an ensemble: each member's global gradient norm (in
// double, in reduce.cuh's fixed order), its own clipping factor, then one elementwise AdamW
// update of every member's buffer, weight decay where the member's layout says so; the norms
// and clipping factors never leave the device. The
// update is the CPU's, operation for operation, in float, and like the CPU's it leaves the
// values outside every tensor (the layout's padding) alone.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/reduce.cuh>
#include <emergent/optim/adamw.hpp>
#include <span>
#include <vector>

namespace emergent::cuda {

// A member's AdamW scalars of a step, written by the host (prepare), read by the update on the
// device. (At namespace scope: nvcc's device lambdas may not capture a class's private types.)
struct AdamWScalars {
  float step_size, inv_sqrt_bias2, decayed;
};

class EnsembleAdamW {
 public:
  using Scalars = AdamWScalars;
  EnsembleAdamW(AdamWConfig config, const std::vector<DecayRange>& ranges,
                std::size_t parameter_count, int members)
      : config_(config),
        members_(members),
        count_(parameter_count),
        m_(parameter_count * members, 0.0f),
        v_(parameter_count * members, 0.0f),
        norms_(members),
        columns_(std::size_t(members) * kNormColumns),
        clip_(members),
        scalars_(members),
        steps_(members, 0) {
    std::vector<std::uint8_t> kind(parameter_count, kPadding);
    for (const DecayRange& r : ranges)
      for (std::size_t i = r.offset; i < r.offset + r.size; ++i)
        kind[i] = r.weight_decay ? kDecayed : kUpdated;
    copy_to_device<std::uint8_t>(kind, kind_);
  }

  // The host's part of a step: counts it for each member and writes each member's scalars (its
  // learning rate lr[e] with the bias corrections of its own step count, computed on the host in
  // double as AdamW<float> does) to the device, where update() reads them; small launches, no
  // waiting. A member given lr 0 is left as it is (a member that has finished, in a mixed
  // ensemble whose members run different numbers of steps).
  void prepare(std::span<const double> lr) {
    require(lr.size() == std::size_t(members_), "EnsembleAdamW", "one learning rate per member");
    std::vector<Scalars> values(members_);
    for (int e = 0; e < members_; ++e) {
      const double count = double(++steps_[e]);
      const double bias1 = 1.0 - std::pow(config_.beta1, count);
      const double bias2 = 1.0 - std::pow(config_.beta2, count);
      values[e] = {float(lr[e] / bias1), float(1.0 / std::sqrt(bias2)),
                   float(1.0 - lr[e] * config_.weight_decay)};
    }
    OpScope scope("adamw.prepare");
    write_by_launches<Scalars>(values, raw(scalars_));
  }
  void prepare(double lr) { prepare(std::vector<double>(members_, lr)); }

  // The device's part: each member's gradient norm (in double, in reduce.cuh's order) and
  // clipping factor, then one elementwise update of every member, reading prepare()'s scalars.
  // Nothing waits for the host, so it can be captured in a graph (cuda/step.cuh).
  void update(float* params, const float* grads) {
    const std::int64_t n = std::int64_t(count_);
    {
      OpScope scope("adamw.gradient_norm");
      const std::int64_t rows = (n + kNormColumns - 1) / kNormColumns;
      column_sums<double>(raw(columns_), kNormColumns, members_, rows, kNormColumns, false,
                          [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int c) {
                            const std::int64_t j = r * kNormColumns + c;
                            const double g = j < n ? double(grads[e * n + j]) : 0.0;
                            return g * g;
                          });
      const double* columns = raw(columns_);
      double* norms = raw(norms_);
      float* clip = raw(clip_);
      const double max_norm = config_.max_grad_norm;
      for_each_index(members_, [=] EMERGENT_HD(std::int64_t e) {
        double sum = 0;
        for (int c = 0; c < kNormColumns; ++c) sum += columns[e * kNormColumns + c];
        norms[e] = sqrt(sum);
        clip[e] = float((max_norm > 0 && norms[e] > max_norm) ? max_norm / norms[e] : 1.0);
      });
    }
    OpScope scope("adamw.update");
    const float b1 = float(config_.beta1), b2 = float(config_.beta2), eps = float(config_.eps);
    float *m = raw(m_), *v = raw(v_);
    const float* scales = raw(clip_);
    const std::uint8_t* kind = raw(kind_);
    const Scalars* scalars = raw(scalars_);
    for_each_index(members_ * n, [=] EMERGENT_HD(std::int64_t i) {
      if (kind[i % n] == kPadding) return;
      const Scalars s = scalars[i / n];
      const float g = grads[i] * scales[i / n];
      m[i] = b1 * m[i] + (1.0f - b1) * g;
      v[i] = b2 * v[i] + (1.0f - b2) * g * g;
      params[i] = params[i] * (kind[i % n] == kDecayed ? s.decayed : 1.0f) -
                  s.step_size * m[i] / (sqrtf(v[i]) * s.inv_sqrt_bias2 + eps);
    });
  }

  // One update of every member with learning rate `lr`; returns the norms before clipping
  // (waits for them).
  std::vector<double> step(float* params, const float* grads, double lr) {
    prepare(lr);
    update(params, grads);
    return copy_to_host(norms_);
  }

  // Each member's gradient norm before clipping, of the last update (on the device).
  const double* norms() const { return raw(norms_); }

  // Member e's update count (AdamW's t, in its bias corrections).
  std::int64_t steps(int e) const { return steps_.at(e); }
  void set_steps(int e, std::int64_t steps) { steps_.at(e) = steps; }
  DeviceVector<float>& first_moment() { return m_; }
  DeviceVector<float>& second_moment() { return v_; }

 private:
  // The gradient norm views a member's buffer as rows of kNormColumns values.
  static constexpr int kNormColumns = 256;
  // What the update does to each value of a member's buffer.
  static constexpr std::uint8_t kPadding = 0, kUpdated = 1, kDecayed = 2;
  AdamWConfig config_;
  int members_;
  std::size_t count_;
  DeviceVector<float> m_, v_;
  DeviceVector<std::uint8_t> kind_;  // [P] kPadding, kUpdated or kDecayed
  DeviceVector<double> norms_, columns_;
  DeviceVector<float> clip_;
  DeviceVector<Scalars> scalars_;  // [E]
  std::vector<std::int64_t> steps_;
};

}  // namespace emergent::cuda
