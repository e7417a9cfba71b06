// mixers/mlp_mixer.hpp on the device, for an ensemble: the causal token-mixing matrix
//
//   Y_b = W~ X_b + b 1^T     W~ = the lower triangle of W [T, T], X_b, Y_b [T, D] per sequence
//   dX_b = W~^T dY_b;  dW_ij += sum_b dY_b[i,:] . X_b[j,:] (j <= i);  db_i += sum_b sum_d dY_b[i,
//   d]
//
// with W stored packed by rows (W[i, j] at i (i + 1) / 2 + j) as the CPU mixer stores it. One
// matrix per member is shared by its B sequences and D channels, so each member's sequences
// are laid side by side in time-major order, X_e [T, B * D] (sequence b in columns b * D ..),
// and every product is one strided-batched GEMM over the members: Y_e = W~_e X_e,
// dX_e = W~_e^T dY_e and dW_e = dY_e X_e^T (its upper triangle computed and dropped).
#pragma once

#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/reduce.cuh>
#include <emergent/mixers/mlp_mixer.hpp>

namespace emergent::cuda {

namespace mlp_mixer_detail {

// out[e, t, b * D + d] = in[((e * B + b) * T + t) * D + d]: each member's sequences side by side
inline void to_time_major(float* out, const float* in, const MixerGeometry& at, int D) {
  const int T = at.length, B = at.batch;
  for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t n) {
    const int d = int(n % D), t = int((n / D) % T);
    const std::int64_t sequence = n / (std::int64_t(T) * D), e = sequence / B;
    out[(e * T + t) * std::int64_t(B) * D + (sequence % B) * D + d] = in[n];
  });
}

}  // namespace mlp_mixer_detail

template <Shape S>
struct MlpMixer {
  using Cpu = ::emergent::MlpMixer<S, float>;
  static constexpr int D = S.d_model;

  struct Activations {
    explicit Activations(const MixerGeometry& at)
        : mix(std::size_t(at.members) * at.length * at.length), by_time(at.tokens() * D) {}
    DeviceVector<float> mix;      // [E, T, T] W~, dense, zero above the diagonal
    DeviceVector<float> by_time;  // [E, T, B * D] x in time-major order
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at)
        : product(at.tokens() * D),
          d_by_time(at.tokens() * D),
          d_mix(std::size_t(at.members) * at.length * at.length) {}
    DeviceVector<float> product;    // [E, T, B * D] W~ X in the forward, W~^T dY in the backward
    DeviceVector<float> d_by_time;  // [E, T, B * D] dy in time-major order
    DeviceVector<float> d_mix;      // [E, T, T] dY X^T
  };

  static void forward(const float* p, const float* x, float* y, const float* residual,
                      Activations& acts, Scratch& scratch, const MixerGeometry& at,
                      AttentionBias /*bias: config.hpp refuses one for this mixer*/) {
    const int T = at.length;
    const std::int64_t P = at.param_stride, square = std::int64_t(T) * T;
    float* mix = raw(acts.mix);
    {
      OpScope scope("mlp_mixer.unpack");
      const float* w = p + Cpu::weight;
      for_each_index(at.members * square, [=] EMERGENT_HD(std::int64_t n) {
        const std::int64_t e = n / square;
        const int i = int((n / T) % T), j = int(n % T);
        mix[n] = j <= i ? w[e * P + std::int64_t(i) * (i + 1) / 2 + j] : 0.0f;
      });
    }
    {
      OpScope scope("mlp_mixer.to_time_major");
      mlp_mixer_detail::to_time_major(raw(acts.by_time), x, at, D);
    }
    const int width = at.batch * D;
    const std::int64_t panel = std::int64_t(T) * width;
    {
      OpScope scope("mlp_mixer.mix");
      gemm_strided_batched(T, width, T, 1.0f, {mix, T, square}, {raw(acts.by_time), width, panel},
                           0.0f, raw(scratch.product), width, panel, at.members);
    }
    OpScope scope("mlp_mixer.bias_residual");
    const float* product = raw(scratch.product);
    const float* b = p + Cpu::bias;
    const int B = at.batch;
    for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t n) {
      const int d = int(n % D), t = int((n / D) % T);
      const std::int64_t sequence = n / (std::int64_t(T) * D), e = sequence / B;
      const float v =
          product[(e * T + t) * std::int64_t(B) * D + (sequence % B) * D + d] + b[e * P + t];
      y[n] = residual ? v + residual[n] : v;
    });
  }

  static void backward(const float* /*p: W~ kept by the forward*/, float* g,
                       const float* /*x: kept time-major*/, const float* dy, float* dx,
                       Activations& acts, Scratch& scratch, const MixerGeometry& at) {
    const int T = at.length, B = at.batch, width = B * D;
    const std::int64_t P = at.param_stride, square = std::int64_t(T) * T,
                       panel = std::int64_t(T) * width;
    {
      OpScope scope("mlp_mixer.to_time_major");
      mlp_mixer_detail::to_time_major(raw(scratch.d_by_time), dy, at, D);
    }
    {
      OpScope scope("mlp_mixer.bias.backward");  // db_t += sum over b and d of dy[b, t, d]
      column_sums<float>(g + Cpu::bias, P, at.members, std::int64_t(B) * D, T, true,
                         [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int t) {
                           return dy[((e * B + r / D) * T + t) * D + r % D];
                         });
    }
    {
      OpScope scope("mlp_mixer.dx");
      gemm_strided_batched(T, width, T, 1.0f, {raw(acts.mix), T, square, Op::T},
                           {raw(scratch.d_by_time), width, panel}, 0.0f, raw(scratch.product),
                           width, panel, at.members);
    }
    {
      OpScope scope("mlp_mixer.from_time_major");
      const float* product = raw(scratch.product);
      for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t n) {
        const int d = int(n % D), t = int((n / D) % T);
        const std::int64_t sequence = n / (std::int64_t(T) * D), e = sequence / B;
        dx[n] = product[(e * T + t) * std::int64_t(width) + (sequence % B) * D + d];
      });
    }
    {
      OpScope scope("mlp_mixer.weight.backward");
      gemm_strided_batched(T, T, width, 1.0f, {raw(scratch.d_by_time), width, panel},
                           {raw(acts.by_time), width, panel, Op::T}, 0.0f, raw(scratch.d_mix), T,
                           square, at.members);
    }
    OpScope scope("mlp_mixer.pack");  // the lower triangle into the packed gradient
    const float* d_mix = raw(scratch.d_mix);
    float* dw = g + Cpu::weight;
    for_each_index(at.members * square, [=] EMERGENT_HD(std::int64_t n) {
      const std::int64_t e = n / square;
      const int i = int((n / T) % T), j = int(n % T);
      if (j <= i) dw[e * P + std::int64_t(i) * (i + 1) / 2 + j] += d_mix[n];
    });
  }
};
template <Shape S>
struct device_twin<::emergent::MlpMixer<S, float>> {
  using type = MlpMixer<S>;
};

}  // namespace emergent::cuda
