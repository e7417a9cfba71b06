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
// Per (sequence, head) the work runs on contiguous copies of that head's q, k, v [T, d_head], in
// blocks of 128 queries whose score rows [128, keys] are small GEMMs (Eigen) followed by a softmax
// over the visible keys; the full probabilities are kept for the backward and for analysis.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "../core/layout.hpp"
#include "../core/parallel.hpp"
#include "../core/shape.hpp"
#include "../nn/linear.hpp"
#include "mixer.hpp"

namespace emergent {

template <Shape S, class RealT = float>
class DotAttention {
 public:
  using Real = RealT;
  static constexpr std::string_view name = "dot_attention";
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"qkv.weight", 3 * D, D, true},
      TensorSpec{"qkv.bias", 0, 3 * D, false},
      TensorSpec{"out.weight", D, D, true},
      TensorSpec{"out.bias", 0, D, false},
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
      split_head(acts.qkv + b * T * 3 * D, h, T, acts.q + head, acts.k + head, acts.v + head);
      const ConstHeadMap Q(acts.q + head, T, Dh), K(acts.k + head, T, Dh), V(acts.v + head, T, Dh);
      StridedHeadMap O(acts.heads + b * T * D + h * Dh, T, Dh, Stride(D, 1));
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
        // Probabilities of this query block, written in place into att rows [i0, i0+rows).
        AttentionBlock A(acts.att + (static_cast<std::size_t>(bh) * T + i0) * T, rows, keys, Stride(T, 1));
        A.noalias() = Q.middleRows(i0, rows) * K.topRows(keys).transpose();
        for (int r = 0; r < rows; ++r) {
          const int i = i0 + r;  // query position: keys 0..i are visible
          Real* row = &A(r, 0);
          RowArrayMap visible(row, i + 1);
          visible *= scale;
          if (ctx.bias_pattern)
            visible += ctx.bias_strength * ConstRowArrayMap(ctx.bias_pattern + static_cast<std::size_t>(i) * T, i + 1);
          visible = (visible - visible.maxCoeff()).exp();  // Eigen's vectorised exp
          visible *= Real(1) / visible.sum();
          std::fill(row + i + 1, row + T, Real(0));  // also the part of the row outside the block
        }
        O.middleRows(i0, rows).noalias() = A * V.topRows(keys);
      }
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
      const ConstHeadMap Q(acts.q + head, T, Dh), K(acts.k + head, T, Dh), V(acts.v + head, T, Dh);
      const ConstStridedHeadMap dO(acts.d_heads + b * T * D + h * Dh, T, Dh, Stride(D, 1));
      HeadMap dQ(acts.d_q + head, T, Dh), dK(acts.d_k + head, T, Dh), dV(acts.d_v + head, T, Dh);
      dK.setZero();
      dV.setZero();
      RowMatrix dS(std::min(kQueryBlock, T), T);  // dA, then dS, of one query block
      for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
        const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
        const ConstAttentionBlock A(acts.att + (static_cast<std::size_t>(bh) * T + i0) * T, rows, keys, Stride(T, 1));
        auto dA = dS.topLeftCorner(rows, keys);
        dA.noalias() = dO.middleRows(i0, rows) * V.topRows(keys).transpose();
        dV.topRows(keys).noalias() += A.transpose() * dO.middleRows(i0, rows);
        // dS = A * (dA - rowsum(A * dA)); A is zero above the diagonal, so dS is too.
        for (int r = 0; r < rows; ++r) {
          const int visible = i0 + r + 1;
          const ConstRowArrayMap a(A.data() + static_cast<std::size_t>(r) * T, visible);
          RowArrayMap da(&dA(r, 0), visible);
          const Real row_dot = (a * da).sum();
          da = a * (da - row_dot) * scale;
          std::fill(&dA(r, 0) + visible, &dA(r, 0) + keys, Real(0));
        }
        dQ.middleRows(i0, rows).noalias() = dA * K.topRows(keys);
        dK.topRows(keys).noalias() += dA.transpose() * Q.middleRows(i0, rows);
      }
      merge_head_gradients(acts.d_qkv + b * T * 3 * D, h, T, acts.d_q + head, acts.d_k + head, acts.d_v + head);
    });
    nn::linear_backward(dx, grads + qkv_weight, grads + qkv_bias, acts.d_qkv, x,
                        params + qkv_weight, B * T, D, 3 * D);
  }

 private:
  // Query rows per block: a block's scores [128, keys] stay in L2 while the softmax runs over
  // them, and K is packed for the GEMM T / 128 times per head.
  static constexpr int kQueryBlock = 128;

  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::Stride<Eigen::Dynamic, 1>;
  using HeadMap = Eigen::Map<RowMatrix>;
  using ConstHeadMap = Eigen::Map<const RowMatrix>;
  using StridedHeadMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstStridedHeadMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using AttentionBlock = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstAttentionBlock = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using RowArrayMap = Eigen::Map<Eigen::Array<Real, 1, Eigen::Dynamic>>;
  using ConstRowArrayMap = Eigen::Map<const Eigen::Array<Real, 1, Eigen::Dynamic>>;

  // Copies head h's columns of q, k and v out of qkv [T, 3D] into contiguous [T, d_head] blocks.
  static void split_head(const Real* qkv, int h, int T, Real* q, Real* k, Real* v) {
    for (int t = 0; t < T; ++t) {
      const Real* row = qkv + static_cast<std::size_t>(t) * 3 * D + h * Dh;
      for (int d = 0; d < Dh; ++d) {
        q[t * Dh + d] = row[d];
        k[t * Dh + d] = row[D + d];
        v[t * Dh + d] = row[2 * D + d];
      }
    }
  }

  // The inverse of split_head for gradients: writes head h's columns of d_qkv [T, 3D].
  static void merge_head_gradients(Real* d_qkv, int h, int T, const Real* dq, const Real* dk, const Real* dv) {
    for (int t = 0; t < T; ++t) {
      Real* row = d_qkv + static_cast<std::size_t>(t) * 3 * D + h * Dh;
      for (int d = 0; d < Dh; ++d) {
        row[d] = dq[t * Dh + d];
        row[D + d] = dk[t * Dh + d];
        row[2 * D + d] = dv[t * Dh + d];
      }
    }
  }
};

}  // namespace emergent
