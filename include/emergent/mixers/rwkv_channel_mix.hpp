// RWKV-4 channel mixing (Peng et al., arXiv:2305.13048; BlinkDL/RWKV-LM RWKV-v4neo/src/model.py,
// RWKV_ChannelMix), the second half of an RWKV-4 block after Rwkv (rwkv.hpp):
// Model<Rwkv, S, float, RwkvChannelMix>. It has the TokenMixer contract, since its token shift
// makes it causal, so it also runs alone in the token-mixer slot.
//
//   shifted_t = x_{t-1}, shifted_0 = 0                         x [B,T,D]
//   xk = x*mix_k + shifted*(1-mix_k),  xr = x*mix_r + shifted*(1-mix_r)      mix_* [D]
//   h  = relu(xk Wk^T)^2                                       Wk [F,D], h [B,T,F], F = S.d_ff
//   y  = sigmoid(xr Wr^T) * (h Wv^T)                           Wr [D,D], Wv [D,F], no biases
//
// Backward, with s = sigmoid(xr Wr^T) and kv = h Wv^T:
//   d_kv = dy * s,  d_r = dy * kv * s(1-s),  d_h = d_kv Wv,  d_pre = d_h * 2 relu(xk Wk^T),
//   d_xk = d_pre Wk,  d_xr = d_r Wr  (weights: dW += d_out^T input),
//   dx_t = d_xk_t mix_k + d_xk_{t+1} (1-mix_k) + (the same for r),
//   d mix_k = sum_t d_xk_t (x_t - x_{t-1}),  d mix_r likewise.
//
// Init (RWKV-LM v4neo, layer l of L, channel i of D): mix_k_i = mix_r_i = (i/D)^(1 - l/L);
// receptance and value weights 0 (RWKV-LM's generate_init_weight zeroes ffn.receptance and
// ffn.value, so the branch starts at zero); key weight PyTorch's Linear default U(+-1/sqrt(D))
// (RWKV-LM: orthogonal with gain sqrt(F/D); see rwkv.hpp for why).
// RWKV-LM fixes F = 4D; here F is Shape::d_ff (the linear-map shape has 512 = 4 * 128).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/nn/linear.hpp>
#include <string_view>
#include <vector>

namespace emergent {

template <Shape S, class Real = float>
class RwkvChannelMix {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "rwkv_channel_mix";
  static constexpr int D = S.d_model, F = S.d_ff;

  // Names as in RWKV-LM's state dict (blocks.N.ffn.*).
  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"time_mix_k", 0, D, false, Init::custom},
      TensorSpec{"time_mix_r", 0, D, false, Init::custom},
      TensorSpec{"key.weight", F, D, true, Init::linear},
      TensorSpec{"receptance.weight", D, D, true, Init::zeros},
      TensorSpec{"value.weight", D, F, true, Init::zeros},
  });
  static constexpr std::size_t time_mix_k = offset_of(layout, "time_mix_k");
  static constexpr std::size_t time_mix_r = offset_of(layout, "time_mix_r");
  static constexpr std::size_t key_weight = offset_of(layout, "key.weight");
  static constexpr std::size_t receptance_weight = offset_of(layout, "receptance.weight");
  static constexpr std::size_t value_weight = offset_of(layout, "value.weight");

  // RWKV-LM's fancy init of time_mix_k and time_mix_r (deterministic; seed and base unused).
  static void init(Real* params, std::uint64_t /*seed*/, std::size_t /*base*/, int layer) {
    const rwkv_detail::InitRatios ratio = rwkv_detail::init_ratios(layer, S.layers);
    rwkv_detail::fill_mix_curve(params + time_mix_k, D, ratio.one_to_almost_zero);
    rwkv_detail::fill_mix_curve(params + time_mix_r, D, ratio.one_to_almost_zero);
  }

  struct Activations {
    Real* xk = nullptr;  // [B*T, D] token-shift mixes, inputs of key and receptance
    Real* xr = nullptr;
    Real* relu = nullptr;      // [B*T, F] relu(xk Wk^T)
    Real* hidden = nullptr;    // [B*T, F] relu^2, the input of value
    Real* kv = nullptr;        // [B*T, D] hidden Wv^T
    Real* gate = nullptr;      // [B*T, D] sigmoid(xr Wr^T)
    Real* d_hidden = nullptr;  // [B*T, F] backward scratch
    Real* d_kv = nullptr;      // [B*T, D]
    Real* d_r = nullptr;       // [B*T, D]
    Real* d_mixed = nullptr;   // [B*T, D] dL/d xk, then xr
    Real* partial = nullptr;   // [B, D] per-sequence sums of d mix
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    acts.xk = arena.take(tokens * D);
    acts.xr = arena.take(tokens * D);
    acts.relu = arena.take(tokens * F);
    acts.hidden = arena.take(tokens * F);
    acts.kv = arena.take(tokens * D);
    acts.gate = arena.take(tokens * D);
    acts.d_hidden = arena.take(tokens * F);
    acts.d_kv = arena.take(tokens * D);
    acts.d_r = arena.take(tokens * D);
    acts.d_mixed = arena.take(tokens * D);
    acts.partial = arena.take(static_cast<std::size_t>(batch) * D);
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    rwkv_detail::token_shift_mix(acts.xk, x, params + time_mix_k, B, T, D);
    rwkv_detail::token_shift_mix(acts.xr, x, params + time_mix_r, B, T, D);
    nn::linear_forward<Real>(acts.relu, acts.xk, params + key_weight, nullptr, N, D, F);
    const std::int64_t hidden_count = static_cast<std::int64_t>(N) * F;
    elementwise(hidden_count, [&](std::int64_t i) {
      const Real r = std::max(acts.relu[i], Real(0));
      acts.relu[i] = r;
      acts.hidden[i] = r * r;
    });
    nn::linear_forward<Real>(acts.kv, acts.hidden, params + value_weight, nullptr, N, F, D);
    nn::linear_forward<Real>(acts.gate, acts.xr, params + receptance_weight, nullptr, N, D, D);
    const std::int64_t count = static_cast<std::int64_t>(N) * D;
    rwkv_detail::sigmoid_in_place(acts.gate, count);
    elementwise(count, [&](std::int64_t i) { y[i] = acts.gate[i] * acts.kv[i]; });
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    elementwise(static_cast<std::int64_t>(N) * D, [&](std::int64_t i) {
      const Real s = acts.gate[i];
      acts.d_kv[i] = dy[i] * s;
      acts.d_r[i] = dy[i] * acts.kv[i] * s * (Real(1) - s);
    });
    nn::linear_backward<Real>(acts.d_hidden, grads + value_weight, nullptr, acts.d_kv, acts.hidden,
                              params + value_weight, N, F, D);
    elementwise(static_cast<std::int64_t>(N) * F,
                [&](std::int64_t i) { acts.d_hidden[i] *= Real(2) * acts.relu[i]; });
    nn::linear_backward<Real>(acts.d_mixed, grads + key_weight, nullptr, acts.d_hidden, acts.xk,
                              params + key_weight, N, D, F);
    rwkv_detail::token_shift_mix_backward(dx, acts.partial, acts.d_mixed, x, params + time_mix_k, B,
                                          T, D, false);
    rwkv_detail::add_partials(grads + time_mix_k, acts.partial, B, D);
    nn::linear_backward<Real>(acts.d_mixed, grads + receptance_weight, nullptr, acts.d_r, acts.xr,
                              params + receptance_weight, N, D, D);
    rwkv_detail::token_shift_mix_backward(dx, acts.partial, acts.d_mixed, x, params + time_mix_r, B,
                                          T, D, true);
    rwkv_detail::add_partials(grads + time_mix_r, acts.partial, B, D);
  }

  // Token-by-token decoding of one sequence: the state is the previous x.
  struct State {
    std::vector<Real> previous;
  };
  static State initial_state() { return State{std::vector<Real>(D, Real(0))}; }

  // y_t[D] <- x_t[D]; equal to the rows of forward.
  static void step(const Real* params, const Real* x_t, Real* y_t, State& state) {
    using Vec = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
    using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using ConstWeight = Eigen::Map<const RowMatrix>;
    Vec xk(D), xr(D);
    for (int c = 0; c < D; ++c) {
      const Real prev = state.previous[c];
      xk[c] = x_t[c] * params[time_mix_k + c] + prev * (Real(1) - params[time_mix_k + c]);
      xr[c] = x_t[c] * params[time_mix_r + c] + prev * (Real(1) - params[time_mix_r + c]);
      state.previous[c] = x_t[c];
    }
    Vec hidden = ConstWeight(params + key_weight, F, D) * xk;
    for (int j = 0; j < F; ++j) {
      const Real r = std::max(hidden[j], Real(0));
      hidden[j] = r * r;
    }
    const Vec kv = ConstWeight(params + value_weight, D, F) * hidden;
    const Vec r = ConstWeight(params + receptance_weight, D, D) * xr;
    for (int c = 0; c < D; ++c) y_t[c] = kv[c] / (Real(1) + std::exp(-r[c]));
  }

 private:
  // body(i) for i in [0, count), in parallel chunks (the body vectorises within a chunk).
  template <class Body>
  static void elementwise(std::int64_t count, Body&& body) {
    parallel_for((count + rwkv_detail::kChunk - 1) / rwkv_detail::kChunk, [&](std::int64_t chunk) {
      const std::int64_t begin = chunk * rwkv_detail::kChunk,
                         end = std::min(count, begin + rwkv_detail::kChunk);
      for (std::int64_t i = begin; i < end; ++i) body(i);
    });
  }
};

}  // namespace emergent
