// Multi-head dot-product attention without the causal mask, the token mixer of an encoder (the
// self-pretraining study, docs/paper-notes.md §7): every query sees every real key of its
// sequence. The same parameters, names and init as DotAttention, so that a causal and a
// bidirectional model share checkpoints tensor by tensor.
//
//   qkv    = x W_qkv^T + b_qkv                     x [B,T,D] -> q, k, v [B,T,D] each
//   per head h (d_head = D / H columns of q, k and v), n = the sequence's real length:
//     S_ij = q_i . k_j / sqrt(d_head) + c_h P_ij   j < n   (-inf for padding keys j >= n)
//     A_i  = softmax_j(S_i)                        att [B,H,T,T], kept for analysis
//     o_i  = sum_j A_ij v_j
//   y      = concat_h(o) W_out^T + b_out
// with c_h = bias_strength + head_bias_strength[h] (MixerContext). Padding queries (i >= n) are
// computed like the others; nothing real reads them, so their gradient is whatever flows in.
//
// Backward (per head): dV = A^T dO, dA = dO V^T, G = A * (dA - rowsum(A * dA)) (dL/dS),
// dQ = G K / sqrt(d_head), dK = G^T Q / sqrt(d_head), and dL/dc_h = sum_ij G_ij P_ij, the
// directional derivative of the loss along the bias pattern (bias_strength_grad).
//
// Each (sequence, head) is a few small GEMMs through Eigen on contiguous copies of the head's
// q, k, v: the sequences this mixer is for (ListOps, 100 to 2,000 tokens) are long enough for
// them, and unlike causal training nothing here has been tuned yet.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/mixers/multi_head.hpp>
#include <limits>
#include <string_view>

namespace emergent {

// Its tensors (layout, and the offsets qkv_weight, qkv_bias, out_weight, out_bias) are
// attention_head::Tensors (multi_head.hpp): the causal and the bidirectional mixer share them.
template <Shape S, class Real = float>
class BidirectionalAttention : public attention_head::Tensors<S.d_model> {
 public:
  using Scalar = Real;  // for code outside: no member alias Real (docs/design.md, "Build time")
  static constexpr std::string_view name = "bidirectional_attention";
  static constexpr bool causal = false;
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();

  struct Activations {
    Real* qkv = nullptr;      // [B*T, 3D]
    Real* q = nullptr;        // [B, H, T, d_head]
    Real* k = nullptr;        // [B, H, T, d_head]
    Real* v = nullptr;        // [B, H, T, d_head]
    Real* att = nullptr;      // [B, H, T, T] probabilities (zero at padding keys)
    Real* heads = nullptr;    // [B*T, D] concatenated head outputs
    Real* d_heads = nullptr;  // [B*T, D]
    Real* d_qkv = nullptr;    // [B*T, 3D]
    Real* d_q = nullptr;      // [B, H, T, d_head]
    Real* d_k = nullptr;
    Real* d_v = nullptr;
    Real* d_scores = nullptr;   // [B, H, T, T] backward scratch
    Real* bias_grad = nullptr;  // [B, H] per (sequence, head), summed in a fixed order
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    const std::size_t maps = static_cast<std::size_t>(batch) * H * length * length;
    acts.qkv = arena.take(tokens * 3 * D);
    acts.q = arena.take(tokens * D);
    acts.k = arena.take(tokens * D);
    acts.v = arena.take(tokens * D);
    acts.att = arena.take(maps);
    acts.heads = arena.take(tokens * D);
    acts.d_heads = arena.take(tokens * D);
    acts.d_qkv = arena.take(tokens * 3 * D);
    acts.d_q = arena.take(tokens * D);
    acts.d_k = arena.take(tokens * D);
    acts.d_v = arena.take(tokens * D);
    acts.d_scores = arena.take(maps);
    acts.bias_grad = arena.take(static_cast<std::size_t>(batch) * H);
  }

  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int T = ctx.length;
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    attention_head::multi_head_forward<BidirectionalAttention>(
        params, x, y, acts, ctx.batch, T, [&](const attention_head::Problem& p) {
          const std::size_t head = p.offset;
          attention_head::split<D, Dh>(acts.qkv + p.b * T * 3 * D, p.h, T, acts.q + head,
                                       acts.k + head, acts.v + head, static_cast<Real*>(nullptr),
                                       static_cast<Real*>(nullptr));
          const int n = real_length(ctx, p.b);
          const ConstHeadMap Q(acts.q + head, T, Dh), K(acts.k + head, T, Dh),
              V(acts.v + head, T, Dh);
          HeadMap A(acts.att + static_cast<std::size_t>(p.index) * T * T, T, T);
          A.noalias() = Q * K.transpose();
          A *= scale;
          const Real strength = head_strength(ctx, p.h);
          if (ctx.bias_pattern && strength != Real(0))
            A += strength * ConstHeadMap(ctx.bias_pattern, T, T);
          A.rightCols(T - n).setZero();
          auto visible = A.leftCols(n).array();
          visible.colwise() -= visible.rowwise().maxCoeff();
          visible = visible.exp();
          visible.colwise() /= visible.rowwise().sum();
          StridedHeadMap O(acts.heads + p.b * T * D + p.h * Dh, T, Dh, Stride(D, 1));
          O.noalias() = A.leftCols(n) * V.topRows(n);
        });
  }

  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    attention_head::multi_head_backward<BidirectionalAttention>(
        params, grads, x, dy, dx, acts, B, T, [&](const attention_head::Problem& p) {
          const std::size_t head = p.offset;
          const int n = real_length(ctx, p.b);
          const ConstHeadMap Q(acts.q + head, T, Dh), K(acts.k + head, T, Dh),
              V(acts.v + head, T, Dh);
          const ConstHeadMap A(acts.att + static_cast<std::size_t>(p.index) * T * T, T, T);
          const ConstStridedHeadMap dO(acts.d_heads + p.b * T * D + p.h * Dh, T, Dh, Stride(D, 1));
          HeadMap dQ(acts.d_q + head, T, Dh), dK(acts.d_k + head, T, Dh),
              dV(acts.d_v + head, T, Dh);
          HeadMap G(acts.d_scores + static_cast<std::size_t>(p.index) * T * T, T, T);
          auto g = G.leftCols(n);
          g.noalias() = dO * V.topRows(n).transpose();  // dA
          const auto a = A.leftCols(n).array();
          const Eigen::Matrix<Real, Eigen::Dynamic, 1> row_dot = (a * g.array()).rowwise().sum();
          g.array() = a * (g.array().colwise() - row_dot.array());
          acts.bias_grad[p.index] =
              ctx.bias_pattern && ctx.bias_strength_grad
                  ? (g.array() * ConstHeadMap(ctx.bias_pattern, T, T).leftCols(n).array()).sum()
                  : Real(0);
          dV.setZero();
          dV.topRows(n).noalias() = A.leftCols(n).transpose() * dO;
          dQ.noalias() = scale * (g * K.topRows(n));
          dK.setZero();
          dK.topRows(n).noalias() = scale * (g.transpose() * Q);
        });
    if (ctx.bias_pattern && ctx.bias_strength_grad)  // the per-head sums, in a fixed order
      for (int h = 0; h < H; ++h)
        for (int b = 0; b < B; ++b) ctx.bias_strength_grad[h] += acts.bias_grad[b * H + h];
  }

 private:
  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::Stride<Eigen::Dynamic, 1>;
  using HeadMap = Eigen::Map<RowMatrix>;
  using ConstHeadMap = Eigen::Map<const RowMatrix>;
  using StridedHeadMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstStridedHeadMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;

  static int real_length(const MixerContext<Real>& ctx, std::int64_t b) {
    return ctx.lengths ? std::clamp(ctx.lengths[b], 1, ctx.length) : ctx.length;
  }
  static Real head_strength(const MixerContext<Real>& ctx, int h) {
    return ctx.bias_strength + (ctx.head_bias_strength ? ctx.head_bias_strength[h] : Real(0));
  }
};

}  // namespace emergent
