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
// (attention_head_split.hpp). In fp32 on AVX-512 with d_head a multiple of 16 up to 64, sequences
// up to T = 64 run the register kernels of short_causal_attention.hpp and longer ones the tiles of
// long_causal_attention.hpp. Otherwise (double, other d_head, other machines) short sequences loop
// over the keys with d_head a compile-time constant, and longer ones go in blocks of 128 queries
// whose score rows are small Eigen GEMMs. Either way the full probabilities are kept, for the
// backward and for analysis.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <vector>

#include "../core/layout.hpp"
#include "../core/parallel.hpp"
#include "../core/shape.hpp"
#include "../nn/linear.hpp"
#include "attention_head_split.hpp"
#include "long_causal_attention.hpp"
#include "mixer.hpp"
#include "short_causal_attention.hpp"

namespace emergent {

template <Shape S, class RealT = float>
class DotAttention {
 public:
  using Real = RealT;
  static constexpr std::string_view name = "dot_attention";
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"qkv.weight", 3 * D, D, true},
      TensorSpec{"qkv.bias", 0, 3 * D, false, Init::linear, D},
      TensorSpec{"out.weight", D, D, true},
      TensorSpec{"out.bias", 0, D, false, Init::linear, D},
  });
  static constexpr std::size_t qkv_weight = offset_of(layout, "qkv.weight");
  static constexpr std::size_t qkv_bias = offset_of(layout, "qkv.bias");
  static constexpr std::size_t out_weight = offset_of(layout, "out.weight");
  static constexpr std::size_t out_bias = offset_of(layout, "out.bias");

  struct Activations {
    Real* qkv = nullptr;      // [B*T, 3D] output of the qkv projection
    Real* q = nullptr;        // [B, H, T, d_head] each head's queries, contiguous
    Real* k = nullptr;        // [B, H, T, d_head]
    Real* v = nullptr;        // [B, H, T, d_head]
    Real* kt = nullptr;       // [B, H, d_head, T] k and v transposed, for the short path's
    Real* vt = nullptr;       // [B, H, d_head, T] vectors over keys (T <= 64 only)
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
    const int B = ctx.batch, T = ctx.length;
    nn::linear_forward(acts.qkv, x, params + qkv_weight, params + qkv_bias, B * T, D, 3 * D);
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const std::size_t head = static_cast<std::size_t>(bh) * T * Dh;
      attention_head::split<D, Dh>(acts.qkv + b * T * 3 * D, h, T, acts.q + head, acts.k + head,
                                   acts.v + head, T <= kDirectMaxLength ? acts.kt + head : nullptr,
                                   T <= kDirectMaxLength ? acts.vt + head : nullptr);
      const HeadInputs in{acts.q + head, acts.k + head, acts.v + head, acts.kt + head,
                          acts.vt + head};
      Real* att = acts.att + static_cast<std::size_t>(bh) * T * T;
      Real* out = acts.heads + b * T * D + h * Dh;
      if (T <= kDirectMaxLength)
        short_forward(in, att, out, T, scale, ctx);
      else
        long_forward(in, att, out, T, scale, ctx);
    });
    nn::linear_forward(y, acts.heads, params + out_weight, params + out_bias, B * T, D, D);
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    nn::linear_backward(acts.d_heads, grads + out_weight, grads + out_bias, dy, acts.heads,
                        params + out_weight, B * T, D, D);
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const std::size_t head = static_cast<std::size_t>(bh) * T * Dh;
      const HeadInputs in{acts.q + head, acts.k + head, acts.v + head, acts.kt + head,
                          acts.vt + head};
      const Real* att = acts.att + static_cast<std::size_t>(bh) * T * T;
      const Real* d_out = acts.d_heads + b * T * D + h * Dh;
      if (T <= kDirectMaxLength)
        short_backward(in, att, d_out, acts.d_q + head, acts.d_k + head, acts.d_v + head, T, scale);
      else
        long_backward(in, att, d_out, acts.d_q + head, acts.d_k + head, acts.d_v + head, T, scale);
      attention_head::merge_gradients<D, Dh>(acts.d_qkv + b * T * 3 * D, h, T, acts.d_q + head,
                                             acts.d_k + head, acts.d_v + head);
    });
    nn::linear_backward(dx, grads + qkv_weight, grads + qkv_bias, acts.d_qkv, x,
                        params + qkv_weight, B * T, D, 3 * D);
  }

 private:
  // Sequences up to this length take the short path (register kernels, or loops over keys with
  // d_head a compile-time constant): no GEMM set-up, which dominates at the linear map's T = 31.
  static constexpr int kDirectMaxLength = 64;
#if EMERGENT_SIMD_LANES > 0
  static_assert(kDirectMaxLength <= short_causal_attention::kMaxLength);
#endif
  // Query rows per block: a block's scores [128, keys] stay in L2 while the softmax runs over
  // them, and K is packed for the GEMM T / 128 times per head.
  static constexpr int kQueryBlock = 128;

  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::Stride<Eigen::Dynamic, 1>;
  using HeadMap = Eigen::Map<RowMatrix>;
  using ConstHeadMap = Eigen::Map<const RowMatrix>;
  using StridedHeadMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstStridedHeadMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using RowArrayMap = Eigen::Map<Eigen::Array<Real, 1, Eigen::Dynamic>>;
  using ConstRowArrayMap = Eigen::Map<const Eigen::Array<Real, 1, Eigen::Dynamic>>;

  // One head of one sequence: q, k, v [T, d_head] and k, v transposed [d_head, T] (filled for the
  // short path only), contiguous.
  struct HeadInputs {
    const Real *q, *k, *v, *kt, *vt;
  };

  // row[0..i] <- softmax(scale * row[0..i] + c P[i, 0..i]); row[i+1..T) <- 0.
  static void softmax_row(Real* row, int i, int T, Real scale, const MixerContext<Real>& ctx) {
    RowArrayMap visible(row, i + 1);
    visible *= scale;
    if (ctx.bias_pattern)
      visible += ctx.bias_strength *
                 ConstRowArrayMap(ctx.bias_pattern + static_cast<std::size_t>(i) * T, i + 1);
    visible = (visible - visible.maxCoeff()).exp();  // Eigen's vectorised exp
    visible *= Real(1) / visible.sum();
    std::fill(row + i + 1, row + T, Real(0));
  }

  // att [T, T] and out (rows of stride D) for one head.
  static void direct_forward(const HeadInputs& in, Real* att, Real* out, int T, Real scale,
                             const MixerContext<Real>& ctx) {
    for (int i = 0; i < T; ++i) {
      Real* row = att + static_cast<std::size_t>(i) * T;
      const Real* q = in.q + i * Dh;
      std::fill(row, row + i + 1, Real(0));
      for (int d = 0; d < Dh; ++d) {  // scores, vectorised over the keys
        const Real qd = q[d];
        const Real* kt = in.kt + d * T;
        for (int j = 0; j <= i; ++j) row[j] += qd * kt[j];
      }
      softmax_row(row, i, T, scale, ctx);
      Real o[Dh] = {};
      for (int j = 0; j <= i; ++j) {
        const Real a = row[j];
        const Real* v = in.v + j * Dh;
        for (int d = 0; d < Dh; ++d) o[d] += a * v[d];
      }
      std::copy(o, o + Dh, out + static_cast<std::size_t>(i) * D);
    }
  }

  // dq, dk, dv [T, d_head] of one head from d_out (rows of stride D).
  static void direct_backward(const HeadInputs& in, const Real* att, const Real* d_out, Real* dq,
                              Real* dk, Real* dv, int T, Real scale) {
    std::fill(dk, dk + T * Dh, Real(0));
    std::fill(dv, dv + T * Dh, Real(0));
    Real d_att[kDirectMaxLength];
    for (int i = 0; i < T; ++i) {
      const Real* row = att + static_cast<std::size_t>(i) * T;
      const Real* dout = d_out + static_cast<std::size_t>(i) * D;
      const Real* q = in.q + i * Dh;
      std::fill(d_att, d_att + i + 1, Real(0));
      for (int d = 0; d < Dh; ++d) {  // dA_ij = dO_i . v_j, vectorised over the keys
        const Real od = dout[d];
        const Real* vt = in.vt + d * T;
        for (int j = 0; j <= i; ++j) d_att[j] += od * vt[j];
      }
      Real row_dot = 0;  // sum_j A_ij dA_ij
      for (int j = 0; j <= i; ++j) row_dot += row[j] * d_att[j];
      Real dq_i[Dh] = {};
      for (int j = 0; j <= i; ++j) {
        const Real a = row[j], ds = a * (d_att[j] - row_dot) * scale;
        const Real* k = in.k + j * Dh;
        Real* dk_j = dk + j * Dh;
        Real* dv_j = dv + j * Dh;
        for (int d = 0; d < Dh; ++d) {
          dv_j[d] += a * dout[d];
          dq_i[d] += ds * k[d];
          dk_j[d] += ds * q[d];
        }
      }
      std::copy(dq_i, dq_i + Dh, dq + i * Dh);
    }
  }

  // Short sequences: the AVX-512 or AVX2 register kernels of short_causal_attention.hpp where
  // they apply, else the loops below.
  static void short_forward(const HeadInputs& in, Real* att, Real* out, int T, Real scale,
                            const MixerContext<Real>& ctx) {
#if EMERGENT_SIMD_LANES > 0
    if constexpr (std::is_same_v<Real, float> && short_causal_attention::supports<Dh>)
      return short_causal_attention::forward<Dh>(in.q, in.kt, in.v, att, out, D, T, scale,
                                                 ctx.bias_pattern, ctx.bias_strength);
#endif
    direct_forward(in, att, out, T, scale, ctx);
  }

  static void short_backward(const HeadInputs& in, const Real* att, const Real* d_out, Real* dq,
                             Real* dk, Real* dv, int T, Real scale) {
#if EMERGENT_SIMD_LANES > 0
    if constexpr (std::is_same_v<Real, float> && short_causal_attention::supports<Dh>)
      return short_causal_attention::backward<Dh>(in.q, in.k, in.vt, att, d_out, D, dq, dk, dv, T,
                                                  scale);
#endif
    direct_backward(in, att, d_out, dq, dk, dv, T, scale);
  }

  // Long sequences: the AVX-512 or AVX2 kernels where they apply, else the Eigen blocks below.
  static void long_forward(const HeadInputs& in, Real* att, Real* out, int T, Real scale,
                           const MixerContext<Real>& ctx) {
#if EMERGENT_SIMD_LANES > 0
    if constexpr (std::is_same_v<Real, float> && long_causal_attention::supports<Dh>)
      return long_causal_attention::forward<Dh>(in.q, in.k, in.v, att, out, D, T, scale,
                                                ctx.bias_pattern, ctx.bias_strength);
#endif
    blocked_forward(in, att, out, T, scale, ctx);
  }

  static void long_backward(const HeadInputs& in, const Real* att, const Real* d_out, Real* dq,
                            Real* dk, Real* dv, int T, Real scale) {
#if EMERGENT_SIMD_LANES > 0
    if constexpr (std::is_same_v<Real, float> && long_causal_attention::supports<Dh>)
      return long_causal_attention::backward<Dh>(in.q, in.k, in.v, att, d_out, D, dq, dk, dv, T,
                                                 scale);
#endif
    blocked_backward(in, att, d_out, dq, dk, dv, T, scale);
  }

  // The same for long sequences, in blocks of kQueryBlock queries through Eigen GEMMs.
  static void blocked_forward(const HeadInputs& in, Real* att, Real* out, int T, Real scale,
                              const MixerContext<Real>& ctx) {
    const ConstHeadMap Q(in.q, T, Dh), K(in.k, T, Dh), V(in.v, T, Dh);
    StridedHeadMap O(out, T, Dh, Stride(D, 1));
    for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
      // Scores of this query block, written in place into att rows [i0, i0+rows).
      StridedHeadMap A(att + static_cast<std::size_t>(i0) * T, rows, keys, Stride(T, 1));
      A.noalias() = Q.middleRows(i0, rows) * K.topRows(keys).transpose();
      for (int r = 0; r < rows; ++r)
        softmax_row(att + static_cast<std::size_t>(i0 + r) * T, i0 + r, T, scale, ctx);
      O.middleRows(i0, rows).noalias() = A * V.topRows(keys);
    }
  }

  static void blocked_backward(const HeadInputs& in, const Real* att, const Real* d_out, Real* dq,
                               Real* dk, Real* dv, int T, Real scale) {
    const ConstHeadMap Q(in.q, T, Dh), K(in.k, T, Dh), V(in.v, T, Dh);
    const ConstStridedHeadMap dO(d_out, T, Dh, Stride(D, 1));
    HeadMap dQ(dq, T, Dh), dK(dk, T, Dh), dV(dv, T, Dh);
    dK.setZero();
    dV.setZero();
    RowMatrix dS(std::min(kQueryBlock, T), T);  // dA, then dS, of one query block
    for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
      const ConstStridedHeadMap A(att + static_cast<std::size_t>(i0) * T, rows, keys, Stride(T, 1));
      auto dA = dS.topLeftCorner(rows, keys);
      dA.noalias() = dO.middleRows(i0, rows) * V.topRows(keys).transpose();
      dV.topRows(keys).noalias() += A.transpose() * dO.middleRows(i0, rows);
      // dS = A * (dA - rowsum(A * dA)); A is zero above the diagonal, so dS is too.
      for (int r = 0; r < rows; ++r) {
        const int visible = i0 + r + 1;
        const ConstRowArrayMap a(att + static_cast<std::size_t>(i0 + r) * T, visible);
        RowArrayMap da(&dA(r, 0), visible);
        const Real row_dot = (a * da).sum();
        da = a * (da - row_dot) * scale;
        std::fill(&dA(r, 0) + visible, &dA(r, 0) + keys, Real(0));
      }
      dQ.middleRows(i0, rows).noalias() = dA * K.topRows(keys);
      dK.topRows(keys).noalias() += dA.transpose() * Q.middleRows(i0, rows);
    }
  }
};

}  // namespace emergent
