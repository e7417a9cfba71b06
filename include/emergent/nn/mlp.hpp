// The transformer's position-wise MLP as a channel-mixing policy of Model (its default):
//
//   y = proj(GELU(fc(x)))      fc: D -> F (= Shape::d_ff), proj: F -> D, both with bias,
//                              GELU the exact erf form (nn/gelu.hpp)
//
// It has the TokenMixer contract (mixers/mixer.hpp) so that Model can take any channel mixer in
// its place, RWKV's channel mixing for one (mixers/rwkv_channel_mix.hpp). The context is unused:
// every row is independent.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/nn/gelu.hpp>
#include <emergent/nn/linear.hpp>
#include <emergent/nn/mixer_context.hpp>
#include <string_view>

namespace emergent {

template <Shape S, class Real = float>
class GeluMlp {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "gelu_mlp";
  static constexpr int D = S.d_model, F = S.d_ff;

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"fc.weight", F, D, true},
      TensorSpec{"fc.bias", 0, F, false, Init::linear, D},
      TensorSpec{"proj.weight", D, F, true},
      TensorSpec{"proj.bias", 0, D, false, Init::linear, F},
  });
  static constexpr std::size_t fc_weight = offset_of(layout, "fc.weight");
  static constexpr std::size_t fc_bias = offset_of(layout, "fc.bias");
  static constexpr std::size_t proj_weight = offset_of(layout, "proj.weight");
  static constexpr std::size_t proj_bias = offset_of(layout, "proj.bias");

  struct Activations {
    Real* fc = nullptr;        // [B*T, F] before GELU
    Real* gelu = nullptr;      // [B*T, F]
    Real* d_hidden = nullptr;  // [B*T, F] backward scratch
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    acts.fc = arena.take(tokens * F);
    acts.gelu = arena.take(tokens * F);
    acts.d_hidden = arena.take(tokens * F);
  }

  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int N = ctx.batch * ctx.length;
    nn::linear_forward(acts.fc, x, params + fc_weight, params + fc_bias, N, D, F);
    nn::gelu_forward(acts.gelu, acts.fc, static_cast<std::int64_t>(N) * F);
    nn::linear_forward(y, acts.gelu, params + proj_weight, params + proj_bias, N, F, D);
  }

  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int N = ctx.batch * ctx.length;
    nn::linear_backward(acts.d_hidden, grads + proj_weight, grads + proj_bias, dy, acts.gelu,
                        params + proj_weight, N, F, D);
    nn::gelu_backward(acts.d_hidden, acts.d_hidden, acts.fc, static_cast<std::int64_t>(N) * F);
    nn::linear_backward(dx, grads + fc_weight, grads + fc_bias, acts.d_hidden, x,
                        params + fc_weight, N, D, F);
  }
};

}  // namespace emergent
