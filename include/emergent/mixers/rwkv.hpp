// RWKV-4 time mixing (Peng et al., arXiv:2305.13048; BlinkDL/RWKV-LM RWKV-v4neo/src/model.py
// and cuda/wkv_cuda.cu), the token mixer of an RWKV-4 block. The block's other half is
// RwkvChannelMix (rwkv_channel_mix.hpp): the full block is Model<Rwkv, S, float, RwkvChannelMix>.
//
//   shifted_t = x_{t-1}, shifted_0 = 0                        token shift, x [B,T,D]
//   xk = x*mix_k + shifted*(1-mix_k); likewise xv (mix_v), xr (mix_r)     mix_* [D]
//   k = xk Wk^T, v = xv Wv^T, r = xr Wr^T                     Linear without bias, [B,T,D]
//   per channel c, decay rate w = exp(time_decay_c) > 0, bonus u = time_first_c:
//     wkv_t = (sum_{i<t} e^{-(t-1-i)w + k_i} v_i + e^{u+k_t} v_t)
//           / (sum_{i<t} e^{-(t-1-i)w + k_i}     + e^{u+k_t})
//   y = (sigmoid(r) * wkv) Wo^T                               [B,T,D]
// RWKV-4 has no heads: every one of the D channels is its own "head", and Shape::heads is
// ignored. The width of k, v, r (RWKV-LM's dim_att) is D.
//
// WKV runs as RWKV-LM's kernel_forward: the state a_t = sum_{i<t} e^{-(t-1-i)w + k_i} v_i,
// b_t = sum_{i<t} e^{-(t-1-i)w + k_i} is kept as (aa, bb) e^{pp} with pp the running maximum
// exponent, so no exp ever sees a positive argument (research notes A3.3):
//   output: q = max(pp, u+k_t),  D~_t = e^{pp-q} bb + e^{u+k_t-q} (>= 1),
//           wkv_t = sigma_t aa + lambda_t v_t,  lambda_t = e^{u+k_t-q}/D~_t,  sigma_t =
//           e^{pp-q}/D~_t
//   update: pp' = max(pp - w, k_t),  rho_t = e^{pp-w-pp'},  kappa_t = e^{k_t-pp'}   (both <= 1)
//           aa <- rho_t aa + kappa_t v_t,  bb <- rho_t bb + kappa_t,  pp <- pp'
// Of each pair of exponentials one is exactly 1, so a step costs two exp, of -|difference|.
// At t = 0 there is no state: wkv_0 = v_0 and the state becomes (v_0, 1) e^{k_0} (RWKV-LM gets
// the same by starting pp at -1e38). The recurrence runs over t per (sequence, block of 32
// channels), the parallel items; each step is elementwise over the block's channels (vectorised,
// exp through Eigen). The four projections are Eigen GEMMs over all B*T rows.
//
// Backward (derived here and checked against reference/rwkv.hpp, which differentiates WKV as a
// per-channel causal softmax). With g_t = dL/dwkv_t, alpha_t = e^{pp_{t+1}} dL/da_{t+1} and
// beta_t = -e^{pp_{t+1}} dL/db_{t+1}, running from alpha_{T-1} = beta_{T-1} = 0 down to t = 0:
//   dv_t  = g_t lambda_t + kappa_t alpha_t
//   dk_t  = g_t lambda_t (v_t - wkv_t) + kappa_t (v_t alpha_t - beta_t)
//   du   += g_t lambda_t (v_t - wkv_t)
//   dw   -= rho_t (alpha_t aa_t - beta_t bb_t)          (aa_t, bb_t: the state before step t)
//   alpha_{t-1} = rho_t alpha_t + g_t sigma_t,   beta_{t-1} = rho_t beta_t + g_t sigma_t wkv_t
//   d time_decay = dw * w
// (research notes A3.4 state the same in unscaled form: alpha_t e^{-pp_{t+1}} is their alpha_t.)
// Every factor is at most 1 and every accumulator at most sum |g|, so nothing overflows, and
// the backward needs no exp: the forward keeps lambda, sigma, rho, kappa, aa, bb per step.
// Then dr = dL/d(sigmoid(r) wkv) * wkv * s(1-s), and the Linear and token-shift backwards:
//   dx_t += d_xk_t * mix_k + d_xk_{t+1} * (1 - mix_k) (and v, r);  d mix_k += sum_t d_xk_t (x_t -
//   x_{t-1}).
//
// Deviations from RWKV-LM: its CUDA backward recomputes the forward in a second pass and caps T
// at a compile-time RWKV_T_MAX; here the forward keeps the per-step factors (6 floats per token
// and channel), so the backward is one exp-free reverse pass and T is unbounded. The WKV math
// and its numerics (running maximum, fp32) are the same.
//
// Init (RWKV-LM v4neo "fancy init", layer l of L, channel i of D; research notes A3.2):
//   ratio_0_to_1 = l / (L-1) (0 when L = 1, where RWKV-LM divides by zero),
//   ratio_1_to_almost0 = 1 - l / L,
//   time_decay_i = -5 + 8 (i/(D-1))^(0.7 + 1.3 ratio_0_to_1)    (w from e^-5 to e^3)
//   time_first_i = log 0.3 + 0.5 (((i+1) mod 3) - 1)
//   mix_k_i = (i/D)^ratio_1_to_almost0,  mix_v_i = mix_k_i + 0.3 ratio_0_to_1,
//   mix_r_i = (i/D)^(0.5 ratio_1_to_almost0)
//   key, receptance, output weights: 0 (RWKV-LM's generate_init_weight zeroes att.key,
//     att.receptance and att.output, so the branch starts at zero and only output.weight gets a
//     gradient on the first step);
//   value weight: PyTorch's Linear default U(+-1/sqrt(D)) (RWKV-LM: orthogonal, gain 1; we keep
//     the library's one init for Linear weights instead of adding a QR to init).
// Not followed: RWKV-LM's LN0 before layer 0, its embedding init and its per-parameter learning
// rates; they belong to the model and trainer, which are shared by all mixers.
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
#include <emergent/nn/linear.hpp>
#include <string_view>
#include <vector>

namespace emergent {

// Pieces shared by Rwkv and RwkvChannelMix.
namespace rwkv_detail {

template <class Real>
using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;

// Elementwise work over [count] values goes in chunks of this many, one per parallel item.
inline constexpr std::int64_t kChunk = 4096;

// The layer-dependent ratios of RWKV-LM's fancy init.
struct InitRatios {
  double zero_to_one;         // l / (L-1): 0 at the first layer, 1 at the last
  double one_to_almost_zero;  // 1 - l / L: 1 at the first layer, 1/L at the last
};

inline InitRatios init_ratios(int layer, int layers) {
  return {layers > 1 ? double(layer) / double(layers - 1) : 0.0,
          1.0 - double(layer) / double(layers)};
}

// RWKV-LM's time_mix curve (i/D)^power over the channels.
template <class Real>
void fill_mix_curve(Real* mix, int D, double power, double offset = 0.0) {
  for (int i = 0; i < D; ++i) mix[i] = Real(std::pow(double(i) / double(D), power) + offset);
}

// z[n] <- sigmoid(z[n]), through Eigen's vectorised exp (exp(-z) may overflow to inf for very
// negative z, and 1 / (1 + inf) = 0 as it should).
template <class Real>
void sigmoid_in_place(Real* z, std::int64_t count) {
  parallel_for((count + kChunk - 1) / kChunk, [&](std::int64_t chunk) {
    const std::int64_t begin = chunk * kChunk, n = std::min(count, begin + kChunk) - begin;
    ArrayMap<Real> a(z + begin, n);
    a = (Real(1) + (-a).exp()).inverse();
  });
}

// For every sequence b: mixed[b,t] = x[b,t] * mix + x[b,t-1] * (1 - mix), x[b,-1] = 0.
template <class Real>
void token_shift_mix(Real* mixed, const Real* x, const Real* mix, int B, int T, int D) {
  parallel_for(B, [&](std::int64_t b) {
    for (int t = 0; t < T; ++t) {
      const std::size_t row = (static_cast<std::size_t>(b) * T + t) * D;
      const Real* xt = x + row;
      Real* out = mixed + row;
      if (t == 0) {
        for (int c = 0; c < D; ++c) out[c] = xt[c] * mix[c];
      } else {
        const Real* prev = xt - D;
        for (int c = 0; c < D; ++c) out[c] = xt[c] * mix[c] + prev[c] * (Real(1) - mix[c]);
      }
    }
  });
}

// Backward of token_shift_mix: dx[b,t] (= or +=) d_mixed[b,t] * mix + d_mixed[b,t+1] * (1 - mix);
// d_mix_partial[b] = sum_t d_mixed[b,t] * (x[b,t] - x[b,t-1])  (one row of D per sequence, summed
// over b by the caller in a fixed order, so the result does not depend on the thread count).
template <class Real>
void token_shift_mix_backward(Real* dx, Real* d_mix_partial, const Real* d_mixed, const Real* x,
                              const Real* mix, int B, int T, int D, bool accumulate) {
  parallel_for(B, [&](std::int64_t b) {
    Real* d_mix = d_mix_partial + static_cast<std::size_t>(b) * D;
    std::fill(d_mix, d_mix + D, Real(0));
    for (int t = 0; t < T; ++t) {
      const std::size_t row = (static_cast<std::size_t>(b) * T + t) * D;
      const Real* dm = d_mixed + row;
      const Real* xt = x + row;
      Real* out = dx + row;
      if (accumulate)
        for (int c = 0; c < D; ++c) out[c] += dm[c] * mix[c];
      else
        for (int c = 0; c < D; ++c) out[c] = dm[c] * mix[c];
      if (t + 1 < T) {
        const Real* next = dm + D;
        for (int c = 0; c < D; ++c) out[c] += next[c] * (Real(1) - mix[c]);
      }
      if (t == 0) {
        for (int c = 0; c < D; ++c) d_mix[c] += dm[c] * xt[c];
      } else {
        const Real* prev = xt - D;
        for (int c = 0; c < D; ++c) d_mix[c] += dm[c] * (xt[c] - prev[c]);
      }
    }
  });
}

// grad[c] += sum_b partial[b, c], in the order b = 0, 1, ...
template <class Real>
void add_partials(Real* grad, const Real* partial, int B, int D) {
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < D; ++c) grad[c] += partial[static_cast<std::size_t>(b) * D + c];
}

}  // namespace rwkv_detail

template <Shape S, class Real = float>
class Rwkv {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "rwkv";
  static constexpr int D = S.d_model;

  // Names as in RWKV-LM's state dict (blocks.N.att.*).
  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"time_decay", 0, D, false, Init::custom},
      TensorSpec{"time_first", 0, D, false, Init::custom},
      TensorSpec{"time_mix_k", 0, D, false, Init::custom},
      TensorSpec{"time_mix_v", 0, D, false, Init::custom},
      TensorSpec{"time_mix_r", 0, D, false, Init::custom},
      TensorSpec{"key.weight", D, D, true, Init::zeros},
      TensorSpec{"value.weight", D, D, true, Init::linear},
      TensorSpec{"receptance.weight", D, D, true, Init::zeros},
      TensorSpec{"output.weight", D, D, true, Init::zeros},
  });
  static constexpr std::size_t time_decay = offset_of(layout, "time_decay");
  static constexpr std::size_t time_first = offset_of(layout, "time_first");
  static constexpr std::size_t time_mix_k = offset_of(layout, "time_mix_k");
  static constexpr std::size_t time_mix_v = offset_of(layout, "time_mix_v");
  static constexpr std::size_t time_mix_r = offset_of(layout, "time_mix_r");
  static constexpr std::size_t key_weight = offset_of(layout, "key.weight");
  static constexpr std::size_t value_weight = offset_of(layout, "value.weight");
  static constexpr std::size_t receptance_weight = offset_of(layout, "receptance.weight");
  static constexpr std::size_t output_weight = offset_of(layout, "output.weight");

  // RWKV-LM's fancy init of the time_* vectors for layer `layer` of S.layers (the header).
  // Deterministic: no random draws, so seed and base are unused.
  static void init(Real* params, std::uint64_t /*seed*/, std::size_t /*base*/, int layer) {
    const rwkv_detail::InitRatios ratio = rwkv_detail::init_ratios(layer, S.layers);
    for (int i = 0; i < D; ++i) {
      const double position = D > 1 ? double(i) / double(D - 1) : 0.0;
      params[time_decay + i] = Real(-5.0 + 8.0 * std::pow(position, 0.7 + 1.3 * ratio.zero_to_one));
      params[time_first + i] = Real(std::log(0.3) + 0.5 * double((i + 1) % 3 - 1));
    }
    rwkv_detail::fill_mix_curve(params + time_mix_k, D, ratio.one_to_almost_zero);
    rwkv_detail::fill_mix_curve(params + time_mix_v, D, ratio.one_to_almost_zero,
                                0.3 * ratio.zero_to_one);
    rwkv_detail::fill_mix_curve(params + time_mix_r, D, 0.5 * ratio.one_to_almost_zero);
  }

  struct Activations {
    Real* xk = nullptr;  // [B*T, D] token-shift mixes, the inputs of key, value, receptance
    Real* xv = nullptr;
    Real* xr = nullptr;
    Real* k = nullptr;      // [B*T, D]
    Real* v = nullptr;      // [B*T, D]
    Real* gate = nullptr;   // [B*T, D] sigmoid(r)
    Real* wkv = nullptr;    // [B*T, D]
    Real* gated = nullptr;  // [B*T, D] sigmoid(r) * wkv, the input of output
    // The WKV tape (the header's lambda, sigma, rho, kappa and the state before each step).
    Real* current_weight = nullptr;  // [B*T, D] lambda_t
    Real* state_weight = nullptr;    // [B*T, D] sigma_t
    Real* decay_scale = nullptr;     // [B*T, D] rho_t
    Real* key_scale = nullptr;       // [B*T, D] kappa_t
    Real* aa = nullptr;              // [B*T, D]
    Real* bb = nullptr;              // [B*T, D]
    // Backward scratch.
    Real* d_wkv = nullptr;    // [B*T, D] dL/d gated, then dL/d wkv in place
    Real* d_k = nullptr;      // [B*T, D]
    Real* d_v = nullptr;      // [B*T, D]
    Real* d_r = nullptr;      // [B*T, D]
    Real* d_mixed = nullptr;  // [B*T, D] dL/d xk, then xv, then xr
    Real* partial =
        nullptr;  // [B, 3, D] per-sequence sums: dw, d time_first, d time_mix (k, v, r in turn)
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t n = static_cast<std::size_t>(batch) * length * D;
    for (Real** p :
         {&acts.xk, &acts.xv, &acts.xr, &acts.k, &acts.v, &acts.gate, &acts.wkv, &acts.gated,
          &acts.current_weight, &acts.state_weight, &acts.decay_scale, &acts.key_scale, &acts.aa,
          &acts.bb, &acts.d_wkv, &acts.d_k, &acts.d_v, &acts.d_r, &acts.d_mixed})
      *p = arena.take(n);
    acts.partial = arena.take(static_cast<std::size_t>(batch) * 3 * D);
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    rwkv_detail::token_shift_mix(acts.xk, x, params + time_mix_k, B, T, D);
    rwkv_detail::token_shift_mix(acts.xv, x, params + time_mix_v, B, T, D);
    rwkv_detail::token_shift_mix(acts.xr, x, params + time_mix_r, B, T, D);
    nn::linear_forward<Real>(acts.k, acts.xk, params + key_weight, nullptr, N, D, D);
    nn::linear_forward<Real>(acts.v, acts.xv, params + value_weight, nullptr, N, D, D);
    nn::linear_forward<Real>(acts.gate, acts.xr, params + receptance_weight, nullptr, N, D, D);
    rwkv_detail::sigmoid_in_place(acts.gate, static_cast<std::int64_t>(N) * D);
    const std::vector<Real> rate = decay_rates(params);
    parallel_for(static_cast<std::int64_t>(B) * kBlocks, [&](std::int64_t item) {
      const int b = static_cast<int>(item / kBlocks),
                c0 = static_cast<int>(item % kBlocks) * kChannelBlock;
      wkv_forward_block(acts, static_cast<std::size_t>(b) * T * D + c0, rate.data() + c0,
                        params + time_first + c0, T, std::min(kChannelBlock, D - c0));
    });
    nn::linear_forward<Real>(y, acts.gated, params + output_weight, nullptr, N, D, D);
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    nn::linear_backward<Real>(acts.d_wkv, grads + output_weight, nullptr, dy, acts.gated,
                              params + output_weight, N, D, D);
    // d_r = d_gated * wkv * s(1-s), then d_wkv = d_gated * s in place.
    const std::int64_t count = static_cast<std::int64_t>(N) * D;
    parallel_for((count + rwkv_detail::kChunk - 1) / rwkv_detail::kChunk, [&](std::int64_t chunk) {
      const std::int64_t begin = chunk * rwkv_detail::kChunk,
                         end = std::min(count, begin + rwkv_detail::kChunk);
      for (std::int64_t i = begin; i < end; ++i) {
        const Real s = acts.gate[i], d_gated = acts.d_wkv[i];
        acts.d_r[i] = d_gated * acts.wkv[i] * s * (Real(1) - s);
        acts.d_wkv[i] = d_gated * s;
      }
    });
    Real* partial_decay = acts.partial;
    Real* partial_first = acts.partial + static_cast<std::size_t>(B) * D;
    parallel_for(static_cast<std::int64_t>(B) * kBlocks, [&](std::int64_t item) {
      const int b = static_cast<int>(item / kBlocks),
                c0 = static_cast<int>(item % kBlocks) * kChannelBlock;
      const std::size_t at = static_cast<std::size_t>(b) * D + c0;
      wkv_backward_block(acts, static_cast<std::size_t>(b) * T * D + c0, partial_decay + at,
                         partial_first + at, T, std::min(kChannelBlock, D - c0));
    });
    const std::vector<Real> rate = decay_rates(params);
    for (int b = 0; b < B; ++b)  // d time_decay = dw * w, summed over sequences in order
      for (int c = 0; c < D; ++c)
        grads[time_decay + c] += partial_decay[static_cast<std::size_t>(b) * D + c] * rate[c];
    rwkv_detail::add_partials(grads + time_first, partial_first, B, D);

    struct Branch {
      const Real* d_out;
      const Real* input;
      std::size_t weight, mix;
    };
    const Branch branches[] = {{acts.d_k, acts.xk, key_weight, time_mix_k},
                               {acts.d_v, acts.xv, value_weight, time_mix_v},
                               {acts.d_r, acts.xr, receptance_weight, time_mix_r}};
    Real* partial_mix = acts.partial + 2 * static_cast<std::size_t>(B) * D;
    bool accumulate = false;
    for (const Branch& branch : branches) {
      nn::linear_backward<Real>(acts.d_mixed, grads + branch.weight, nullptr, branch.d_out,
                                branch.input, params + branch.weight, N, D, D);
      rwkv_detail::token_shift_mix_backward(dx, partial_mix, acts.d_mixed, x, params + branch.mix,
                                            B, T, D, accumulate);
      rwkv_detail::add_partials(grads + branch.mix, partial_mix, B, D);
      accumulate = true;
    }
  }

  // Token-by-token decoding of one sequence: the previous x and the WKV state per channel.
  struct State {
    std::vector<Real> previous, aa, bb, pp;
    int position = 0;
  };
  static State initial_state() {
    State s;
    s.previous.assign(D, Real(0));
    s.aa.assign(D, Real(0));
    s.bb.assign(D, Real(0));
    s.pp.assign(D, Real(0));
    return s;
  }

  // y_t[D] <- x_t[D], advancing the state; equal to the rows of forward.
  static void step(const Real* params, const Real* x_t, Real* y_t, State& state) {
    using Vec = Eigen::Matrix<Real, Eigen::Dynamic, 1>;
    using ConstWeight =
        Eigen::Map<const Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
    Vec xk(D), xv(D), xr(D);
    for (int c = 0; c < D; ++c) {
      const Real prev = state.previous[c];
      xk[c] = x_t[c] * params[time_mix_k + c] + prev * (Real(1) - params[time_mix_k + c]);
      xv[c] = x_t[c] * params[time_mix_v + c] + prev * (Real(1) - params[time_mix_v + c]);
      xr[c] = x_t[c] * params[time_mix_r + c] + prev * (Real(1) - params[time_mix_r + c]);
    }
    const Vec k = ConstWeight(params + key_weight, D, D) * xk;
    const Vec v = ConstWeight(params + value_weight, D, D) * xv;
    const Vec r = ConstWeight(params + receptance_weight, D, D) * xr;
    Vec gated(D);
    for (int c = 0; c < D; ++c) {
      const Real w = std::exp(params[time_decay + c]), u = params[time_first + c];
      Real& aa = state.aa[c];
      Real& bb = state.bb[c];
      Real& pp = state.pp[c];
      Real wkv;
      if (state.position == 0) {
        wkv = v[c];
        aa = v[c];
        bb = 1;
        pp = k[c];
      } else {
        const Real bonus = u + k[c];
        const Real e = std::exp(-std::abs(pp - bonus));
        const Real state_factor = pp > bonus ? Real(1) : e,
                   current_factor = pp > bonus ? e : Real(1);
        wkv = (state_factor * aa + current_factor * v[c]) / (state_factor * bb + current_factor);
        const Real decayed = pp - w;
        const Real e2 = std::exp(-std::abs(decayed - k[c]));
        const Real rho = decayed > k[c] ? Real(1) : e2, kappa = decayed > k[c] ? e2 : Real(1);
        aa = rho * aa + kappa * v[c];
        bb = rho * bb + kappa;
        pp = std::max(decayed, k[c]);
      }
      gated[c] = wkv / (Real(1) + std::exp(-r[c]));
      state.previous[c] = x_t[c];
    }
    Eigen::Map<Vec>(y_t, D) = ConstWeight(params + output_weight, D, D) * gated;
    ++state.position;
  }

 private:
  // Channels per parallel item of the WKV loops (items are sequences x channel blocks, so that
  // a batch of 4 long sequences still spreads over the cores).
  static constexpr int kChannelBlock = 32;
  static constexpr int kBlocks = (D + kChannelBlock - 1) / kChannelBlock;

  // w = exp(time_decay) per channel.
  static std::vector<Real> decay_rates(const Real* params) {
    std::vector<Real> rate(D);
    for (int c = 0; c < D; ++c) rate[c] = std::exp(params[time_decay + c]);
    return rate;
  }

  // WKV of channels [c0, c0+n) of one sequence; `at` = (b*T)*D + c0, rows of stride D. Vectorised
  // over the channels: the recurrence runs over t, each step is elementwise over the block.
  static void wkv_forward_block(Activations& acts, std::size_t at, const Real* rate,
                                const Real* bonus, int T, int n) {
    Real aa[kChannelBlock], bb[kChannelBlock], pp[kChannelBlock], e[2 * kChannelBlock];
    {  // t = 0: no state yet, wkv_0 = v_0; the state becomes (v_0, 1) e^{k_0}.
      const Real* k = acts.k + at;
      const Real* v = acts.v + at;
      for (int c = 0; c < n; ++c) {
        acts.wkv[at + c] = v[c];
        acts.gated[at + c] = acts.gate[at + c] * v[c];
        acts.current_weight[at + c] = 1;
        acts.state_weight[at + c] = 0;
        acts.decay_scale[at + c] = 0;
        acts.key_scale[at + c] = 1;
        acts.aa[at + c] = 0;
        acts.bb[at + c] = 0;
        aa[c] = v[c];
        bb[c] = 1;
        pp[c] = k[c];
      }
    }
    for (int t = 1; t < T; ++t) {
      const std::size_t row = at + static_cast<std::size_t>(t) * D;
      const Real* k = acts.k + row;
      for (int c = 0; c < n; ++c) {
        e[c] = -std::abs(pp[c] - (bonus[c] + k[c]));
        e[n + c] = -std::abs((pp[c] - rate[c]) - k[c]);
      }
      rwkv_detail::ArrayMap<Real> exps(e, 2 * n);
      exps = exps.exp();
      wkv_forward_row(n, k, acts.v + row, acts.gate + row, rate, bonus, e, e + n, aa, bb, pp,
                      acts.wkv + row, acts.gated + row, acts.current_weight + row,
                      acts.state_weight + row, acts.decay_scale + row, acts.key_scale + row,
                      acts.aa + row, acts.bb + row);
    }
  }

  // One step t >= 1 of the recurrence over n channels, given e_out = exp(-|pp - (u+k)|) and
  // e_update = exp(-|pp - w - k|). The restrict qualifiers let g++ vectorise the loop (it gives up
  // on the runtime alias checks between this many pointers).
  static void wkv_forward_row(int n, const Real* __restrict k, const Real* __restrict v,
                              const Real* __restrict gate, const Real* __restrict rate,
                              const Real* __restrict bonus, const Real* __restrict e_out,
                              const Real* __restrict e_update, Real* __restrict aa,
                              Real* __restrict bb, Real* __restrict pp, Real* __restrict wkv,
                              Real* __restrict gated, Real* __restrict lambda,
                              Real* __restrict sigma, Real* __restrict rho, Real* __restrict kappa,
                              Real* __restrict saved_aa, Real* __restrict saved_bb) {
    for (int c = 0; c < n; ++c) {
      const Real state_aa = aa[c], state_bb = bb[c], state_pp = pp[c], kc = k[c], vc = v[c];
      const bool state_larger = state_pp > bonus[c] + kc;
      const Real state_factor = state_larger ? Real(1) : e_out[c],
                 current_factor = state_larger ? e_out[c] : Real(1);
      const Real inverse = Real(1) / (state_factor * state_bb + current_factor);
      const Real l = current_factor * inverse, s = state_factor * inverse;
      const Real out = s * state_aa + l * vc;
      lambda[c] = l;
      sigma[c] = s;
      wkv[c] = out;
      gated[c] = gate[c] * out;
      saved_aa[c] = state_aa;
      saved_bb[c] = state_bb;
      const Real decayed = state_pp - rate[c];
      const bool decayed_larger = decayed > kc;
      const Real r = decayed_larger ? Real(1) : e_update[c],
                 q = decayed_larger ? e_update[c] : Real(1);
      rho[c] = r;
      kappa[c] = q;
      aa[c] = r * state_aa + q * vc;
      bb[c] = r * state_bb + q;
      pp[c] = decayed_larger ? decayed : kc;
    }
  }

  // The reverse pass of the header for channels [c0, c0+n) of one sequence: writes d_k, d_v and
  // this sequence's dL/dw (w = exp(time_decay)) and dL/du.
  static void wkv_backward_block(Activations& acts, std::size_t at, Real* d_rate, Real* d_bonus,
                                 int T, int n) {
    Real alpha[kChannelBlock] = {}, beta[kChannelBlock] = {}, dw[kChannelBlock] = {},
         du[kChannelBlock] = {};
    for (int t = T - 1; t >= 0; --t) {
      const std::size_t row = at + static_cast<std::size_t>(t) * D;
      wkv_backward_row(n, acts.d_wkv + row, acts.v + row, acts.wkv + row, acts.current_weight + row,
                       acts.state_weight + row, acts.decay_scale + row, acts.key_scale + row,
                       acts.aa + row, acts.bb + row, alpha, beta, dw, du, acts.d_k + row,
                       acts.d_v + row);
    }
    std::copy(dw, dw + n, d_rate);
    std::copy(du, du + n, d_bonus);
  }

  static void wkv_backward_row(int n, const Real* __restrict g, const Real* __restrict v,
                               const Real* __restrict wkv, const Real* __restrict lambda,
                               const Real* __restrict sigma, const Real* __restrict rho,
                               const Real* __restrict kappa, const Real* __restrict aa,
                               const Real* __restrict bb, Real* __restrict alpha,
                               Real* __restrict beta, Real* __restrict dw, Real* __restrict du,
                               Real* __restrict dk, Real* __restrict dv) {
    for (int c = 0; c < n; ++c) {
      const Real a = alpha[c], b = beta[c], direct = g[c] * lambda[c],
                 d_logit = direct * (v[c] - wkv[c]);
      dv[c] = direct + kappa[c] * a;
      dk[c] = d_logit + kappa[c] * (v[c] * a - b);
      du[c] += d_logit;
      dw[c] -= rho[c] * (a * aa[c] - b * bb[c]);
      const Real to_state = g[c] * sigma[c];
      alpha[c] = rho[c] * a + to_state;
      beta[c] = rho[c] * b + to_state * wkv[c];
    }
  }
};

}  // namespace emergent
