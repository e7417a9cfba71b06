// Causal attention of one head, the blocked form: queries in blocks of 128, each block's scores
// [128, keys] one small Eigen GEMM, written in place into att and softmaxed there while they are
// in L2, then the block's outputs another GEMM. Any Real, any d_head, any T. The selector of
// dot_attention.hpp takes it for long sequences (T > 64) where the tiles of
// causal_attention_long.hpp do not apply (double, d_head not a multiple of the lanes, no SIMD).
//
// The math is that of dot_attention.hpp, per block of rows [i0, i0 + rows) and keys [0, keys):
//   A  = softmax_rows(scale Q K^T + c P) (causal)         O = A V
// Backward: dA = dO V^T, dV += A^T dO, dS = scale A * (dA - rowsum(A * dA)), dQ = dS K,
//   dK += dS^T Q.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <emergent/mixers/attention_head_split.hpp>

namespace emergent {

template <class Real, int Dh>
struct CausalAttentionBlocked {
  static constexpr const char* name = "blocked";
  static constexpr bool available = true;    // every Real, d_head and machine
  static constexpr bool transposed = false;  // reads q, k, v only

  // Query rows per block: a block's scores [128, keys] stay in L2 while the softmax runs over
  // them, and K is packed for the GEMM T / 128 times per head.
  static constexpr int kQueryBlock = 128;

  // att [T, T] (row i: softmax over j <= i, zeros after) and out (rows of stride out_stride) of
  // one head; bias: [T, T] pattern or null.
  static void forward(const attention_head::HeadInputs<Real>& in, Real* att, Real* out,
                      std::int64_t out_stride, int T, Real scale, const Real* bias,
                      Real bias_strength) {
    const ConstHeadMap Q(in.q, T, Dh), K(in.k, T, Dh), V(in.v, T, Dh);
    StridedHeadMap O(out, T, Dh, Stride(out_stride, 1));
    for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
      // Scores of this query block, written in place into att rows [i0, i0+rows).
      StridedHeadMap A(att + static_cast<std::size_t>(i0) * T, rows, keys, Stride(T, 1));
      A.noalias() = Q.middleRows(i0, rows) * K.topRows(keys).transpose();
      for (int r = 0; r < rows; ++r)
        attention_head::causal_softmax_row(att + static_cast<std::size_t>(i0 + r) * T, i0 + r, T,
                                           scale, bias, bias_strength);
      O.middleRows(i0, rows).noalias() = A * V.topRows(keys);
    }
  }

  // dq, dk, dv [T, d_head] (overwritten) of one head from d_out (rows of stride d_out_stride);
  // in and att as the forward had them.
  static void backward(const attention_head::HeadInputs<Real>& in, const Real* att,
                       const Real* d_out, std::int64_t d_out_stride, Real* dq, Real* dk, Real* dv,
                       int T, Real scale) {
    const ConstHeadMap Q(in.q, T, Dh), K(in.k, T, Dh), V(in.v, T, Dh);
    const ConstStridedHeadMap dO(d_out, T, Dh, Stride(d_out_stride, 1));
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

 private:
  using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::Stride<Eigen::Dynamic, 1>;
  using HeadMap = Eigen::Map<RowMatrix>;
  using ConstHeadMap = Eigen::Map<const RowMatrix>;
  using StridedHeadMap = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  using ConstStridedHeadMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using RowArrayMap = Eigen::Map<Eigen::Array<Real, 1, Eigen::Dynamic>>;
  using ConstRowArrayMap = Eigen::Map<const Eigen::Array<Real, 1, Eigen::Dynamic>>;
};

}  // namespace emergent
