// Gated DeltaNet token mixer (Yang, Kautz, Hatamizadeh, arXiv 2412.06464, ICLR 2025), as the
// layer of flash-linear-attention (FLA, fla/layers/gated_deltanet.py) builds it. The derivations
// used here are written out below, beside the code that uses each.
//
// Shapes: x, y [B*T, D]; H = S.heads heads with d_k = d_v = Dh = D / H (the matched-width
// choice: every projection is D x D, like DotAttention's; FLA's default expand_v = 2 would
// double v, g and o_proj for a gain the notes do not argue for at these sizes).
//
//   q_pre = x W_q^T, k_pre = x W_k^T, v_pre = x W_v^T           [B*T, D]        (no bias)
//   q = SiLU(conv_q(q_pre)), k = SiLU(conv_k(k_pre)), v = SiLU(conv_v(v_pre))
//       conv: causal depthwise, kernel 4, no bias: conv(u)[t,c] = sum_j w[c,j] u[t-3+j, c]
//   per head h and token t (q, k, v restricted to the head's Dh columns):
//     q^_t = q_t / sqrt(|q_t|^2 + 1e-6) / sqrt(Dh),   k^_t = k_t / sqrt(|k_t|^2 + 1e-6)
//     beta_t = sigmoid(x_t . W_b[h]),   g_t = -exp(A_log[h]) softplus(x_t . W_a[h] + dt_bias[h])
//     alpha_t = exp(g_t)                                   (log-space decay, alpha in (0, 1])
//     state h_t [Dh(k) x Dh(v)] (FLA's layout, the transpose of the paper's S_t):
//       u_t = v_t - alpha_t h_{t-1}^T k^_t                (the memory's error on key k^_t)
//       h_t = alpha_t h_{t-1} + beta_t k^_t u_t^T         (= S_t^T with S_t = alpha_t S_{t-1}
//                                                            (I - beta_t k k^T) + beta_t v k^T)
//       o_t = h_t^T q^_t                                   h_{-1} = 0
//     n_t = o_t / sqrt(mean(o_t^2) + 1e-5),   z_t = n_t * w_norm * SiLU(x_t W_g^T [head h])
//   y = concat_h(z) W_o^T                                  (FLA's FusedRMSNormGated, then o_proj)
//
// The recurrence of each (sequence, head) runs through one of two forms, each in its own header
// with the same signature, which the tests check one by one against the reference:
//   gated_deltanet_recurrent.hpp   token by token (the form step() decodes with), and the
//                                  sequential BPTT backward both forms share
//   gated_deltanet_chunked.hpp     chunks of kChunk tokens through the UT transform (notes §A2.3)
// GatedDeltaNet, at the end of this file, picks one; the rule is written there and nowhere else.
//
// Backward: the recurrence's (gated_deltanet_recurrent.hpp). Around it, the layer's chain rule:
//   RMSNorm-gate: dw_norm += sum_t dz n s,  d(x W_g^T) = dz n w SiLU'(.),
//                 do = r (dn - n mean(dn n)) with dn = dz w s, r = 1/sqrt(mean(o^2) + 1e-5)
//   gates:  d(x W_b^T) = dbeta beta (1 - beta);  with z = x W_a^T + dt_bias:
//           dz = -dg exp(A_log) sigmoid(z) (into a_proj and dt_bias),  dA_log += dg g
//   l2 norm: dq = r (dq^ - q^ (q^ . dq^)) (per head, q^ before the 1/sqrt(Dh)),  SiLU'(p) =
//           sigmoid(p)(1 + p(1 - sigmoid(p))),  conv: du[t-3+j] += w[j] dp[t],
//           dw[j] += sum_t dp[t] u[t-3+j];  and the five Linear backwards into dx.
//
// Parameters (FLA's names; no biases), init as FLA's layer:
//   q_proj, k_proj, v_proj, g_proj, o_proj .weight [D, D], a_proj, b_proj .weight [H, D]:
//       PyTorch Linear default U(+-1/sqrt(D)), weight decay (FLA's *model* re-inits Linear
//       weights N(0, 0.02); the project keeps PyTorch's defaults for every mixer, like the paper);
//   q_conv1d, k_conv1d, v_conv1d .weight [D, 4] (FLA's [D, 1, 4]): PyTorch Conv1d default
//       U(+-1/sqrt(4)), no weight decay (not a projection);
//   A_log [H] = log(A), A ~ U(0, 16);  dt_bias [H] = softplus^{-1}(dt), dt = exp(U(log 1e-3,
//       log 1e-1)) floored at 1e-4 (Mamba's dt init);  o_norm.weight [Dh] = 1 (shared by heads).
// Parameter count: 5 D^2 + 2 H D + 12 D + 2 H + Dh (85,536 at D = 128, H = 8).
//
// Deviations from FLA, each exact or below rounding: softplus is max(z,0) + log1p(exp(-|z|))
// everywhere (FLA switches to the identity above z = 20; the two differ by < 2e-9 relative);
// g is clamped at -1000, where alpha = exp(g) is already exactly 0 in float and double, so
// that g and its sums within a chunk stay finite even when exp(A_log) overflows (the clamp
// changes no value; its gradient is 0 there, as is the true one since h~ = 0). The backward
// recomputes the conv, SiLU and l2 norm instead of keeping them.
//
// Memory kept for the backward, per token (floats): q_pre, k_pre, v_pre, gate pre-activation,
// the o_proj input and the core's q^, k^, v and o (9 D), a/b projections, g and beta (4 H), and
// one state per chunk (H Dh^2 / C = D Dh / C): 1,312 floats (5.1 KB) per token at D = 128,
// H = 8, C = 16 (every state would be D Dh = 2,048 more).
// The backward's scratch (d_* buffers) is another 9 D + 4 H per token, plus per-sequence partial
// sums of the shared parameters' gradients (summed in a fixed order: thread-count independent).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/gated_deltanet_chunked.hpp>
#include <emergent/mixers/gated_deltanet_recurrent.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/nn/softplus.hpp>
#include <string_view>
#include <vector>

namespace emergent {

// The layer with the recurrence of each (sequence, head) in the form Form<Real, Dh>
// (GatedDeltaRecurrent or GatedDeltaChunked); GatedDeltaNet below is the one to use.
template <Shape S, class Real = float, template <class, int> class Form = GatedDeltaChunked>
class GatedDeltaNetMixer {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "gated_deltanet";
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();
  static constexpr int kConv = 4;                   // short-conv kernel (FLA conv_size)
  static constexpr int kChunk = 16;                 // chunk length of the training forward
  static constexpr double kL2Eps = 1e-6;            // FLA l2norm eps
  static constexpr double kNormEps = 1e-5;          // FLA norm_eps of FusedRMSNormGated
  static constexpr double kMinLogDecay = -1000;     // g clamp: exp(-1000) == 0 in float and double
  using Rule = Form<Real, Dh>;                      // forward and backward of a sequence
  using Recurrent = GatedDeltaRecurrent<Real, Dh>;  // step() of decoding
  static_assert(kChunk <= GatedDeltaChunked<Real, Dh>::kMaxChunk);

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"q_proj.weight", D, D, true},
      TensorSpec{"k_proj.weight", D, D, true},
      TensorSpec{"v_proj.weight", D, D, true},
      TensorSpec{"a_proj.weight", H, D, true},
      TensorSpec{"b_proj.weight", H, D, true},
      TensorSpec{"A_log", 0, H, false, Init::custom},
      TensorSpec{"dt_bias", 0, H, false, Init::custom},
      TensorSpec{"q_conv1d.weight", D, kConv, false},
      TensorSpec{"k_conv1d.weight", D, kConv, false},
      TensorSpec{"v_conv1d.weight", D, kConv, false},
      TensorSpec{"g_proj.weight", D, D, true},
      TensorSpec{"o_norm.weight", 0, Dh, false, Init::ones},
      TensorSpec{"o_proj.weight", D, D, true},
  });
  static constexpr std::size_t q_weight = offset_of(layout, "q_proj.weight");
  static constexpr std::size_t k_weight = offset_of(layout, "k_proj.weight");
  static constexpr std::size_t v_weight = offset_of(layout, "v_proj.weight");
  static constexpr std::size_t a_weight = offset_of(layout, "a_proj.weight");
  static constexpr std::size_t b_weight = offset_of(layout, "b_proj.weight");
  static constexpr std::size_t a_log = offset_of(layout, "A_log");
  static constexpr std::size_t dt_bias = offset_of(layout, "dt_bias");
  static constexpr std::size_t q_conv = offset_of(layout, "q_conv1d.weight");
  static constexpr std::size_t k_conv = offset_of(layout, "k_conv1d.weight");
  static constexpr std::size_t v_conv = offset_of(layout, "v_conv1d.weight");
  static constexpr std::size_t g_weight = offset_of(layout, "g_proj.weight");
  static constexpr std::size_t norm_weight = offset_of(layout, "o_norm.weight");
  static constexpr std::size_t o_weight = offset_of(layout, "o_proj.weight");

  static constexpr int chunks(int length) { return (length + kChunk - 1) / kChunk; }

  struct Activations {
    // Kept for the backward.
    Real* q_pre = nullptr;   // [B*T, D] x W_q^T (conv input)
    Real* k_pre = nullptr;   // [B*T, D]
    Real* v_pre = nullptr;   // [B*T, D]
    Real* g_pre = nullptr;   // [B*T, D] x W_g^T (output gate pre-activation)
    Real* a_pre = nullptr;   // [B*T, H] x W_a^T
    Real* b_pre = nullptr;   // [B*T, H] x W_b^T
    Real* q = nullptr;       // [B, H, T, Dh] q^ (l2-normalised, times 1/sqrt(Dh))
    Real* k = nullptr;       // [B, H, T, Dh] k^
    Real* v = nullptr;       // [B, H, T, Dh]
    Real* g = nullptr;       // [B, H, T] log decay
    Real* beta = nullptr;    // [B, H, T]
    Real* o = nullptr;       // [B, H, T, Dh] output of the recurrence
    Real* states = nullptr;  // [B, H, chunks, Dh, Dh] state entering each chunk
    Real* heads = nullptr;   // [B*T, D] normed, gated heads: input of o_proj
    // Backward scratch.
    Real* d_heads = nullptr;  // [B*T, D]
    Real *d_q_pre = nullptr, *d_k_pre = nullptr, *d_v_pre = nullptr,
         *d_g_pre = nullptr;                                              // [B*T, D]
    Real *d_a_pre = nullptr, *d_b_pre = nullptr;                          // [B*T, H]
    Real *d_o = nullptr, *d_q = nullptr, *d_k = nullptr, *d_v = nullptr;  // [B, H, T, Dh]
    Real *d_g = nullptr, *d_beta = nullptr;                               // [B, H, T]
    Real* d_conv = nullptr;                         // [B, 3, D, kConv] per-sequence partials
    Real* d_norm = nullptr;                         // [B, H, Dh] per-(sequence, head) partials
    Real *d_a_log = nullptr, *d_dt_bias = nullptr;  // [B, H]
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t N = static_cast<std::size_t>(batch) * length,
                      BH = static_cast<std::size_t>(batch) * H;
    acts.q_pre = arena.take(N * D);
    acts.k_pre = arena.take(N * D);
    acts.v_pre = arena.take(N * D);
    acts.g_pre = arena.take(N * D);
    acts.a_pre = arena.take(N * H);
    acts.b_pre = arena.take(N * H);
    acts.q = arena.take(N * D);
    acts.k = arena.take(N * D);
    acts.v = arena.take(N * D);
    acts.g = arena.take(N * H);
    acts.beta = arena.take(N * H);
    acts.o = arena.take(N * D);
    acts.states = arena.take(BH * chunks(length) * Dh * Dh);
    acts.heads = arena.take(N * D);
    acts.d_heads = arena.take(N * D);
    acts.d_q_pre = arena.take(N * D);
    acts.d_k_pre = arena.take(N * D);
    acts.d_v_pre = arena.take(N * D);
    acts.d_g_pre = arena.take(N * D);
    acts.d_a_pre = arena.take(N * H);
    acts.d_b_pre = arena.take(N * H);
    acts.d_o = arena.take(N * D);
    acts.d_q = arena.take(N * D);
    acts.d_k = arena.take(N * D);
    acts.d_v = arena.take(N * D);
    acts.d_g = arena.take(N * H);
    acts.d_beta = arena.take(N * H);
    acts.d_conv = arena.take(static_cast<std::size_t>(batch) * 3 * D * kConv);
    acts.d_norm = arena.take(BH * Dh);
    acts.d_a_log = arena.take(BH);
    acts.d_dt_bias = arena.take(BH);
  }

  // A_log and dt_bias as FLA's layer draws them (header), from Philox stream
  // "gated_deltanet.init" indexed by position in the whole parameter buffer.
  static void init(Real* params, std::uint64_t seed, std::size_t base, int /*layer*/) {
    const PhiloxStream stream(seed, stream_id_from_name("gated_deltanet.init"));
    // (0, 1): the 24-bit uniform shifted by half a step, so that log(A) and dt stay finite.
    auto open_uniform = [&](std::size_t local) {
      return double(stream.uniform(base + local)) + 0x1.0p-25;
    };
    for (int h = 0; h < H; ++h) {
      params[a_log + h] = Real(std::log(16.0 * open_uniform(a_log + h)));
      params[dt_bias + h] = Real(nn::initial_step_bias(open_uniform(dt_bias + h)));
    }
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    project(acts.q_pre, x, params + q_weight, N, D);
    project(acts.k_pre, x, params + k_weight, N, D);
    project(acts.v_pre, x, params + v_weight, N, D);
    project(acts.g_pre, x, params + g_weight, N, D);
    project(acts.a_pre, x, params + a_weight, N, H);
    project(acts.b_pre, x, params + b_weight, N, H);
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const std::size_t head = static_cast<std::size_t>(bh) * T * Dh,
                        rows = static_cast<std::size_t>(b) * T;
      const std::size_t col = static_cast<std::size_t>(h) * Dh;
      Real* q = acts.q + head;
      Real* k = acts.k + head;
      Real* v = acts.v + head;
      Real* g = acts.g + static_cast<std::size_t>(bh) * T;
      Real* beta = acts.beta + static_cast<std::size_t>(bh) * T;
      Real* o = acts.o + head;
      for (int t = 0; t < T; ++t) {
        const std::size_t row = rows + t;
        g[t] = log_decay(params[a_log + h], acts.a_pre[row * H + h] + params[dt_bias + h]);
        beta[t] = sigmoid(acts.b_pre[row * H + h]);
      }
      conv_silu_l2(acts.q_pre + rows * D + col, params + q_conv + col * kConv, T, q,
                   Real(1) / std::sqrt(Real(Dh)));
      conv_silu_l2(acts.k_pre + rows * D + col, params + k_conv + col * kConv, T, k, Real(1));
      conv_silu(acts.v_pre + rows * D + col, params + v_conv + col * kConv, T, v);
      std::vector<Real> state(static_cast<std::size_t>(Dh) * Dh, Real(0));  // h_{-1} = 0
      Rule::forward(q, k, v, g, beta, T, kChunk, o, state.data(),
                    acts.states + static_cast<std::size_t>(bh) * chunks(T) * Dh * Dh);
      for (int t = 0; t < T; ++t)
        norm_gate(o + t * Dh, acts.g_pre + (rows + t) * D + col, params + norm_weight,
                  acts.heads + (rows + t) * D + col);
    });
    project(y, acts.heads, params + o_weight, N, D);
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length, N = B * T;
    {  // o_proj
      ConstMap dY(dy, N, D), Heads(acts.heads, N, D), Wo(params + o_weight, D, D);
      Map(acts.d_heads, N, D).noalias() = dY * Wo;
      Map(grads + o_weight, D, D).noalias() += dY.transpose() * Heads;
    }
    std::fill(acts.d_conv, acts.d_conv + static_cast<std::size_t>(B) * 3 * D * kConv, Real(0));
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const std::size_t head = static_cast<std::size_t>(bh) * T * Dh,
                        rows = static_cast<std::size_t>(b) * T;
      const std::size_t col = static_cast<std::size_t>(h) * Dh;
      const Real *q = acts.q + head, *k = acts.k + head, *v = acts.v + head, *o = acts.o + head;
      const Real *g = acts.g + static_cast<std::size_t>(bh) * T,
                 *beta = acts.beta + static_cast<std::size_t>(bh) * T;
      Real *d_o = acts.d_o + head, *d_q = acts.d_q + head, *d_k = acts.d_k + head,
           *d_v = acts.d_v + head;
      Real *d_g = acts.d_g + static_cast<std::size_t>(bh) * T,
           *d_beta = acts.d_beta + static_cast<std::size_t>(bh) * T;
      // RMSNorm and output gate.
      Real* d_norm = acts.d_norm + static_cast<std::size_t>(bh) * Dh;
      std::fill(d_norm, d_norm + Dh, Real(0));
      for (int t = 0; t < T; ++t) {
        const std::size_t at = (rows + t) * D + col;
        norm_gate_backward(o + t * Dh, acts.g_pre + at, params + norm_weight, acts.d_heads + at,
                           d_o + t * Dh, acts.d_g_pre + at, d_norm);
      }
      // The recurrence.
      Rule::backward(q, k, v, g, beta, T, kChunk,
                     acts.states + static_cast<std::size_t>(bh) * chunks(T) * Dh * Dh, d_o, d_q,
                     d_k, d_v, d_g, d_beta);
      // Gates.
      const Real A = std::exp(params[a_log + h]);
      Real d_a_log = 0, d_dt = 0;
      for (int t = 0; t < T; ++t) {
        const std::size_t row = rows + t;
        const Real z = acts.a_pre[row * H + h] + params[dt_bias + h];
        const Real raw = -A * nn::softplus(z);
        const Real dz = raw < Real(kMinLogDecay) ? Real(0) : -d_g[t] * A * sigmoid(z);
        if (!(raw < Real(kMinLogDecay))) d_a_log += d_g[t] * raw;
        d_dt += dz;
        acts.d_a_pre[row * H + h] = dz;
        acts.d_b_pre[row * H + h] = d_beta[t] * beta[t] * (1 - beta[t]);
      }
      acts.d_a_log[bh] = d_a_log;
      acts.d_dt_bias[bh] = d_dt;
      // l2 norms, SiLU and the short convs.
      Real* d_conv = acts.d_conv + static_cast<std::size_t>(b) * 3 * D * kConv + col * kConv;
      conv_silu_l2_backward(acts.q_pre + rows * D + col, params + q_conv + col * kConv, T, d_q,
                            true, Real(1) / std::sqrt(Real(Dh)), acts.d_q_pre + rows * D + col,
                            d_conv);
      conv_silu_l2_backward(acts.k_pre + rows * D + col, params + k_conv + col * kConv, T, d_k,
                            true, Real(1), acts.d_k_pre + rows * D + col, d_conv + D * kConv);
      conv_silu_l2_backward(acts.v_pre + rows * D + col, params + v_conv + col * kConv, T, d_v,
                            false, Real(1), acts.d_v_pre + rows * D + col, d_conv + 2 * D * kConv);
    });
    // Per-sequence partial gradients, summed in a fixed order (independent of the threads).
    for (int b = 0; b < B; ++b) {
      const Real* d_conv = acts.d_conv + static_cast<std::size_t>(b) * 3 * D * kConv;
      for (int i = 0; i < D * kConv; ++i) {
        grads[q_conv + i] += d_conv[i];
        grads[k_conv + i] += d_conv[D * kConv + i];
        grads[v_conv + i] += d_conv[2 * D * kConv + i];
      }
      for (int h = 0; h < H; ++h) {
        const std::size_t bh = static_cast<std::size_t>(b) * H + h;
        grads[a_log + h] += acts.d_a_log[bh];
        grads[dt_bias + h] += acts.d_dt_bias[bh];
        for (int j = 0; j < Dh; ++j) grads[norm_weight + j] += acts.d_norm[bh * Dh + j];
      }
    }
    // The input projections.
    ConstMap X(x, N, D);
    Map dX(dx, N, D);
    dX.noalias() = ConstMap(acts.d_q_pre, N, D) * ConstMap(params + q_weight, D, D);
    const std::array<std::pair<const Real*, std::size_t>, 5> rest{{{acts.d_k_pre, k_weight},
                                                                   {acts.d_v_pre, v_weight},
                                                                   {acts.d_g_pre, g_weight},
                                                                   {acts.d_a_pre, a_weight},
                                                                   {acts.d_b_pre, b_weight}}};
    for (const auto& [d_pre, w] : rest) {
      const int out = (w == a_weight || w == b_weight) ? H : D;
      dX.noalias() += ConstMap(d_pre, N, out) * ConstMap(params + w, out, D);
    }
    Map(grads + q_weight, D, D).noalias() += ConstMap(acts.d_q_pre, N, D).transpose() * X;
    for (const auto& [d_pre, w] : rest) {
      const int out = (w == a_weight || w == b_weight) ? H : D;
      Map(grads + w, out, D).noalias() += ConstMap(d_pre, N, out).transpose() * X;
    }
  }

  // Token-by-token decoding of one sequence: the last kConv - 1 projections of q, k, v (the conv
  // windows) and the state h of every head.
  struct State {
    std::vector<Real> window;  // [3, kConv - 1, D] q, k, v pre-conv rows, oldest first
    std::vector<Real> h;       // [H, Dh, Dh]
  };

  static State initial_state() {
    return State{std::vector<Real>(static_cast<std::size_t>(3) * (kConv - 1) * D, Real(0)),
                 std::vector<Real>(static_cast<std::size_t>(H) * Dh * Dh, Real(0))};
  }

  // y_t[D] <- x_t[D], advancing the state by one token.
  static void step(const Real* params, const Real* x_t, Real* y_t, State& state) {
    std::array<Real, 4 * D> pre{};  // q, k, v, gate projections
    std::array<Real, 2 * H> ab{};
    project(pre.data(), x_t, params + q_weight, 1, D);
    project(pre.data() + D, x_t, params + k_weight, 1, D);
    project(pre.data() + 2 * D, x_t, params + v_weight, 1, D);
    project(pre.data() + 3 * D, x_t, params + g_weight, 1, D);
    project(ab.data(), x_t, params + a_weight, 1, H);
    project(ab.data() + H, x_t, params + b_weight, 1, H);
    // Short convs over the window plus this token; SiLU.
    std::array<Real, 3 * D> act{};
    const std::array<std::size_t, 3> conv{q_conv, k_conv, v_conv};
    for (int m = 0; m < 3; ++m) {
      Real* window = state.window.data() + static_cast<std::size_t>(m) * (kConv - 1) * D;
      const Real* w = params + conv[m];
      for (int c = 0; c < D; ++c) {
        Real acc = 0;
        for (int j = 0; j < kConv - 1; ++j) acc += w[c * kConv + j] * window[j * D + c];
        acc += w[c * kConv + kConv - 1] * pre[m * D + c];
        act[m * D + c] = silu(acc);
      }
      std::copy(window + D, window + (kConv - 1) * D, window);
      std::copy(pre.begin() + m * D, pre.begin() + (m + 1) * D, window + (kConv - 2) * D);
    }
    std::array<Real, D> heads{};
    for (int h = 0; h < H; ++h) {
      Real q[Dh], k[Dh], o[Dh];
      const Real* v = act.data() + 2 * D + h * Dh;
      l2_normalise(act.data() + h * Dh, Real(1) / std::sqrt(Real(Dh)), q);
      l2_normalise(act.data() + D + h * Dh, Real(1), k);
      const Real g = log_decay(params[a_log + h], ab[h] + params[dt_bias + h]);
      Recurrent::step(q, k, v, g, sigmoid(ab[H + h]),
                      state.h.data() + static_cast<std::size_t>(h) * Dh * Dh, o);
      norm_gate(o, pre.data() + 3 * D + h * Dh, params + norm_weight, heads.data() + h * Dh);
    }
    project(y_t, heads.data(), params + o_weight, 1, D);
  }

  // Numerically safe scalar functions (shared with the decoding path).
  // exp(-z) may overflow to inf for z < -88 (float): 1 / inf = 0, never NaN.
  static Real sigmoid(Real z) { return Real(1) / (Real(1) + std::exp(-z)); }
  static Real silu(Real z) { return z * sigmoid(z); }
  static Real silu_grad(Real z) {
    const Real s = sigmoid(z);
    return s * (Real(1) + z * (Real(1) - s));
  }
  // g = -exp(A_log) softplus(z), clamped below at kMinLogDecay (header).
  static Real log_decay(Real a_log_h, Real z) {
    const Real g = -std::exp(a_log_h) * nn::softplus(z);
    return g < Real(kMinLogDecay) ? Real(kMinLogDecay) : g;
  }

 private:
  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Map = Eigen::Map<RowMatrix>;
  using ConstMap = Eigen::Map<const RowMatrix>;

  // y[N,out] = x[N,D] w[out,D]^T (no bias)
  static void project(Real* y, const Real* x, const Real* w, int rows, int out) {
    Map(y, rows, out).noalias() = ConstMap(x, rows, D) * ConstMap(w, out, D).transpose();
  }

  using HeadArray = Eigen::Array<Real, Dh, 1>;
  using HeadMap = Eigen::Map<HeadArray>;
  using ConstHeadMap = Eigen::Map<const HeadArray>;
  using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;

  // pre[T, Dh] = causal depthwise conv of one head's channels: in has row stride D, w [Dh, kConv].
  static void conv(const Real* in, const Real* w, int T, Real* pre) {
    Real wt[kConv][Dh];  // transposed, so that the channel loop is contiguous
    for (int c = 0; c < Dh; ++c)
      for (int j = 0; j < kConv; ++j) wt[j][c] = w[c * kConv + j];
    for (int t = 0; t < T; ++t) {
      Real acc[Dh] = {};
      for (int j = std::max(0, kConv - 1 - t); j < kConv; ++j) {
        const Real* row = in + static_cast<std::size_t>(t - (kConv - 1) + j) * D;
        for (int c = 0; c < Dh; ++c) acc[c] += wt[j][c] * row[c];
      }
      std::copy(acc, acc + Dh, pre + t * Dh);
    }
  }

  // out [T, Dh] = SiLU(conv(in)), with Eigen's vectorised exp.
  static void conv_silu(const Real* in, const Real* w, int T, Real* out) {
    conv(in, w, T, out);
    ArrayMap a(out, T * Dh);
    a = a / (Real(1) + (-a).exp());
  }

  // out = scale * a / sqrt(|a|^2 + eps) for one head's vector a [Dh] (out may be a).
  static void l2_normalise(const Real* a, Real scale, Real* out) {
    const ConstHeadMap A(a);
    const Real r = scale / std::sqrt(A.square().sum() + Real(kL2Eps));
    HeadMap{out} = A * r;
  }

  // out [T, Dh] = scale * l2norm(SiLU(conv(in))) per token.
  static void conv_silu_l2(const Real* in, const Real* w, int T, Real* out, Real scale) {
    conv_silu(in, w, T, out);
    for (int t = 0; t < T; ++t) l2_normalise(out + t * Dh, scale, out + t * Dh);
  }

  // From d_out [T, Dh] (gradient of out of conv_silu_l2, or of conv_silu when !normalised):
  // d_in (row stride D, overwritten) and d_w [Dh, kConv] (accumulated). Recomputes the conv.
  static void conv_silu_l2_backward(const Real* in, const Real* w, int T, const Real* d_out,
                                    bool normalised, Real scale, Real* d_in, Real* d_w) {
    std::vector<Real> buffer(static_cast<std::size_t>(2) * T * Dh);
    Real* d_pre = buffer.data();  // pre-activations first, then their gradients in place
    Real* sig = d_pre + T * Dh;   // sigmoid(pre)
    conv(in, w, T, d_pre);
    ArrayMap(sig, T * Dh) = Real(1) / (Real(1) + (-ArrayMap(d_pre, T * Dh)).exp());
    for (int t = 0; t < T; ++t) {
      HeadMap P(d_pre + t * Dh);
      const ConstHeadMap Sg(sig + t * Dh), dY(d_out + t * Dh);
      HeadArray da;
      if (normalised) {  // y = scale * a r: da = scale r (dy - a^ (a^ . dy)), a^ = a r
        const HeadArray A = P * Sg;
        const Real r = Real(1) / std::sqrt(A.square().sum() + Real(kL2Eps));
        const HeadArray unit = A * r;
        da = (scale * r) * (dY - unit * (unit * dY).sum());
      } else {
        da = dY;
      }
      P = da * Sg * (Real(1) + P * (Real(1) - Sg));  // SiLU'(p) = s (1 + p (1 - s))
    }
    Real wt[kConv][Dh];
    for (int c = 0; c < Dh; ++c)
      for (int j = 0; j < kConv; ++j) wt[j][c] = w[c * kConv + j];
    Real dwt[kConv][Dh] = {};
    for (int t = 0; t < T; ++t) {  // d_in[t] = sum_j w[j] d_pre[t + kConv - 1 - j]
      Real acc[Dh] = {};
      const Real* row = in + static_cast<std::size_t>(t) * D;
      for (int j = 0; j < kConv; ++j) {
        const int s = t + kConv - 1 - j;
        if (s >= T) continue;
        const Real* dp = d_pre + s * Dh;
        for (int c = 0; c < Dh; ++c) {
          acc[c] += wt[j][c] * dp[c];
          dwt[j][c] += dp[c] * row[c];
        }
      }
      std::copy(acc, acc + Dh, d_in + static_cast<std::size_t>(t) * D);
    }
    for (int c = 0; c < Dh; ++c)
      for (int j = 0; j < kConv; ++j) d_w[c * kConv + j] += dwt[j][c];
  }

  // out [Dh] = o r * w * SiLU(gate),  r = 1/sqrt(mean(o^2) + eps).
  static void norm_gate(const Real* o, const Real* gate, const Real* w, Real* out) {
    const ConstHeadMap O(o), G(gate), W(w);
    const Real r = Real(1) / std::sqrt(O.square().sum() / Dh + Real(kNormEps));
    HeadMap{out} = (O * r) * W * (G / (Real(1) + (-G).exp()));
  }

  // d_o and d_gate (overwritten), d_w (accumulated) from d_out, for one token of one head.
  static void norm_gate_backward(const Real* o, const Real* gate, const Real* w, const Real* d_out,
                                 Real* d_o, Real* d_gate, Real* d_w) {
    const ConstHeadMap O(o), G(gate), W(w), dOut(d_out);
    const Real r = Real(1) / std::sqrt(O.square().sum() / Dh + Real(kNormEps));
    const HeadArray n = O * r, sig = Real(1) / (Real(1) + (-G).exp()), s = G * sig;
    HeadMap{d_w} += dOut * n * s;
    HeadMap{d_gate} = dOut * n * W * sig * (Real(1) + G * (Real(1) - sig));
    const HeadArray dn = dOut * W * s;
    const Real mean_dn_n = (dn * n).sum() / Dh;
    HeadMap{d_o} = r * (dn - n * mean_dn_n);
  }
};

// The form of the recurrence, chosen here and nowhere else: a whole sequence (training, and the
// forward of a prompt) goes through the chunked form, chunks of kChunk = 16 tokens (the form FLA
// trains with); decoding (step(), one token at a time) through the recurrent form's step. Both
// forms share the backward.
template <Shape S, class Real = float>
using GatedDeltaNet = GatedDeltaNetMixer<S, Real, GatedDeltaChunked>;

}  // namespace emergent
