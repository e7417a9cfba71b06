// Causal multi-head dot-product attention with an optional additive bias on the logits
// (the paper's attention-bias intervention, arXiv 2606.25010 App. B.3).
//
//   qkv    = x W_qkv^T + b_qkv                     x [B,T,D] -> q, k, v [B,T,D] each
//   per head h (d_head = D / H columns of q, k and v):
//     S_ij = q_i . k_j / sqrt(d_head) + c P_ij     j <= i  (causal; -inf for j > i)
//     A_i  = softmax_j(S_i)                        att [B,H,T,T], kept for analysis
//     o_i  = sum_j A_ij v_j
//   y      = concat_h(o) W_out^T + b_out           [B,T,D]
//
// Backward (per head): dV = A^T dO, dA = dO V^T, dS = A * (dA - rowsum(A * dA)),
// dQ = dS K / sqrt(d_head), dK = dS^T Q / sqrt(d_head).
// Any H from 1 to D that divides D works, d_head = 1 included.
//
// Per (sequence, head) the work runs on contiguous copies of that head's q, k, v [T, d_head]
// (attention_head_split.hpp), through one of four forms of causal attention, each in its own
// header with the same signature, which the tests check one by one against the reference:
//   causal_attention_direct.hpp    loops over the keys, d_head a compile-time constant
//   causal_attention_blocked.hpp   blocks of 128 queries, score rows as small Eigen GEMMs
//   causal_attention_short.hpp     AVX-512 / AVX2 register kernels, T <= 64 (CausalAttentionShort)
//   causal_attention_long.hpp      AVX-512 / AVX2 tiles (CausalAttentionLong)
// select_causal_attention below picks one; the rule is written there and nowhere else. Every
// form keeps the full probabilities, for the backward and for analysis.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <emergent/mixers/causal_attention_blocked.hpp>
#include <emergent/mixers/causal_attention_direct.hpp>
#include <emergent/mixers/causal_attention_long.hpp>
#include <emergent/mixers/causal_attention_short.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/mixers/multi_head.hpp>
#include <string_view>
#include <type_traits>

namespace emergent {

// Sequences up to this length take a short form (register kernels, or loops over keys with d_head
// a compile-time constant): no GEMM set-up, which dominates at the linear map's T = 31.
inline constexpr int kShortAttentionMaxLength = 64;
static_assert(kShortAttentionMaxLength <= CausalAttentionShort<float, 16>::max_length);

// The form of causal attention for one head of length T, in Real, with d_head Dh: calls
// f(std::type_identity<Form>{}). The rule:
//   T <= 64: CausalAttentionShort where available (float, AVX-512 or AVX2, d_head a multiple of
//            the lanes up to 64), else CausalAttentionDirect;
//   T >  64: CausalAttentionLong where available (the same condition), else
//            CausalAttentionBlocked.
template <class Real, int Dh, class F>
void select_causal_attention(int T, F&& f) {
  using Short = CausalAttentionShort<Real, Dh>;
  using Long = CausalAttentionLong<Real, Dh>;
  if (T <= kShortAttentionMaxLength) {
    if constexpr (Short::available)
      f(std::type_identity<Short>{});
    else
      f(std::type_identity<CausalAttentionDirect<Real, Dh>>{});
  } else {
    if constexpr (Long::available)
      f(std::type_identity<Long>{});
    else
      f(std::type_identity<CausalAttentionBlocked<Real, Dh>>{});
  }
}

// Its tensors (layout, and the offsets qkv_weight, qkv_bias, out_weight, out_bias) are
// attention_head::Tensors (multi_head.hpp): the causal and the bidirectional mixer share them.
template <Shape S, class Real = float>
class DotAttention : public attention_head::Tensors<S.d_model> {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "dot_attention";
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();

  struct Activations {
    Real* qkv = nullptr;      // [B*T, 3D] output of the qkv projection
    Real* q = nullptr;        // [B, H, T, d_head] each head's queries, contiguous
    Real* k = nullptr;        // [B, H, T, d_head]
    Real* v = nullptr;        // [B, H, T, d_head]
    Real* kt = nullptr;       // [B, H, d_head, T] k and v transposed, for the forms that vectorise
    Real* vt = nullptr;       // [B, H, d_head, T] over keys (the short ones, T <= 64)
    Real* att = nullptr;      // [B, H, T, T] softmax probabilities (zero above the diagonal)
    Real* heads = nullptr;    // [B*T, D] concatenated head outputs, input of the out projection
    Real* d_heads = nullptr;  // [B*T, D] backward scratch
    Real* d_qkv = nullptr;    // [B*T, 3D] backward scratch
    Real* d_q = nullptr;      // [B, H, T, d_head] backward scratch (also d_k, d_v)
    Real* d_k = nullptr;
    Real* d_v = nullptr;
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    acts.qkv = arena.take(tokens * 3 * D);
    acts.q = arena.take(tokens * D);
    acts.k = arena.take(tokens * D);
    acts.v = arena.take(tokens * D);
    acts.kt = arena.take(tokens * D);
    acts.vt = arena.take(tokens * D);
    acts.att = arena.take(static_cast<std::size_t>(batch) * H * length * length);
    acts.heads = arena.take(tokens * D);
    acts.d_heads = arena.take(tokens * D);
    acts.d_qkv = arena.take(tokens * 3 * D);
    acts.d_q = arena.take(tokens * D);
    acts.d_k = arena.take(tokens * D);
    acts.d_v = arena.take(tokens * D);
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int T = ctx.length;
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    attention_head::multi_head_forward<DotAttention>(
        params, x, y, acts, ctx.batch, T, [&](const attention_head::Problem& p) {
          const std::size_t head = p.offset;
          Real* att = acts.att + static_cast<std::size_t>(p.index) * T * T;
          Real* out = acts.heads + p.b * T * D + p.h * Dh;
          select_causal_attention<Real, Dh>(T, [&]<class Form>(std::type_identity<Form>) {
            attention_head::split<D, Dh>(acts.qkv + p.b * T * 3 * D, p.h, T, acts.q + head,
                                         acts.k + head, acts.v + head,
                                         Form::transposed ? acts.kt + head : nullptr,
                                         Form::transposed ? acts.vt + head : nullptr);
            Form::forward(head_inputs(acts, head), att, out, D, T, scale,
                          ctx.bias_pattern ? ctx.bias_pattern + p.b * ctx.bias_stride : nullptr,
                          ctx.bias_strength);
          });
        });
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int T = ctx.length;
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    attention_head::multi_head_backward<DotAttention>(
        params, grads, x, dy, dx, acts, ctx.batch, T, [&](const attention_head::Problem& p) {
          const std::size_t head = p.offset;
          const Real* att = acts.att + static_cast<std::size_t>(p.index) * T * T;
          const Real* d_out = acts.d_heads + p.b * T * D + p.h * Dh;
          select_causal_attention<Real, Dh>(T, [&]<class Form>(std::type_identity<Form>) {
            Form::backward(head_inputs(acts, head), att, d_out, D, acts.d_q + head, acts.d_k + head,
                           acts.d_v + head, T, scale);
          });
        });
  }

 private:
  // Head `head` (offset into q, k, v, kt, vt) of the activations as the forms take it.
  static attention_head::HeadInputs<Real> head_inputs(const Activations& acts, std::size_t head) {
    return {acts.q + head, acts.k + head, acts.v + head, acts.kt + head, acts.vt + head};
  }
};

}  // namespace emergent
