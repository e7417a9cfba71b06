// nn/mlp.hpp's GeluMlp on the device, for an ensemble: the transformer's channel block
//
//   y = residual + proj(GELU(fc(x)))      fc: D -> F, proj: F -> D, both with bias
//
// as the twin of a channel block (cuda/mixer.cuh's contract, which EnsembleModel asks of its
// channel block as of its mixer). Each Linear is one strided-batched GEMM over the members; the
// bias and GELU are fused into one pass after fc, and proj's bias with the residual addition into
// one pass after proj (linear.cuh's epilogues). Activations: fc (before GELU) and GELU(fc),
// [tokens, F] each; Scratch: dL/d hidden, [tokens, F].
#pragma once

#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gelu.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/nn/mlp.hpp>

namespace emergent::cuda {

template <Shape S>
struct GeluMlp {
  using Cpu = ::emergent::GeluMlp<S, float>;
  static constexpr int D = S.d_model, F = S.d_ff;

  struct Activations {
    explicit Activations(const MixerGeometry& at) : fc(at.tokens() * F), gelu(at.tokens() * F) {}
    DeviceVector<float> fc;    // [tokens, F] x fc^T + b, before GELU
    DeviceVector<float> gelu;  // [tokens, F] GELU(fc), the input of proj
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) : d_hidden(at.tokens() * F) {}
    DeviceVector<float> d_hidden;  // [tokens, F] dL/d gelu, then dL/d fc in place
  };

  static void forward(const float* p, const float* x, float* y, const float* residual,
                      Activations& a, Scratch& /*scratch*/, const MixerGeometry& at,
                      AttentionBias /*bias: not an attention*/) {
    const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * at.length;
    {
      OpScope scope("mlp.fc.forward");
      linear_forward(raw(a.fc), x, p + Cpu::fc_weight, nullptr, stride, at.members, rows, D, F);
    }
    {
      OpScope scope("mlp.bias_gelu");  // fc += b, gelu = GELU(fc): one pass
      bias_gelu_forward(raw(a.fc), raw(a.gelu), p + Cpu::fc_bias, stride, at.members, rows, F);
    }
    {
      OpScope scope("mlp.proj.forward");
      linear_forward(y, raw(a.gelu), p + Cpu::proj_weight, nullptr, stride, at.members, rows, F, D);
    }
    OpScope scope("mlp.bias_residual");  // += b + residual: one pass
    if (residual) {
      bias_residual_forward(y, p + Cpu::proj_bias, residual, stride, at.members, rows, D);
    } else {
      const float* b = p + Cpu::proj_bias;
      for_each_index(at.members * rows * D, [=] EMERGENT_HD(std::int64_t i) {
        y[i] += b[(i / (rows * D)) * stride + i % D];
      });
    }
  }

  static void backward(const float* p, float* g, const float* x, const float* dy, float* dx,
                       Activations& a, Scratch& s, const MixerGeometry& at) {
    const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * at.length;
    {
      OpScope scope("mlp.proj.backward");
      linear_backward(raw(s.d_hidden), g + Cpu::proj_weight, g + Cpu::proj_bias, dy, raw(a.gelu),
                      p + Cpu::proj_weight, stride, at.members, rows, F, D);
    }
    {
      OpScope scope("gelu.backward");
      gelu_backward(raw(s.d_hidden), raw(s.d_hidden), raw(a.fc), at.tokens() * F);
    }
    OpScope scope("mlp.fc.backward");
    linear_backward(dx, g + Cpu::fc_weight, g + Cpu::fc_bias, raw(s.d_hidden), x,
                    p + Cpu::fc_weight, stride, at.members, rows, D, F);
  }
};
template <Shape S>
struct device_twin<::emergent::GeluMlp<S, float>> {
  using type = GeluMlp<S>;
};

}  // namespace emergent::cuda
