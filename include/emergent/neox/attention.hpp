// Causal multi-head attention of one GPT-NeoX layer, forward only, reading the fused qkv
// projection in its per-head interleaved layout:
//
//   qkv [T, 3 H Dh], row t = [head 0: q | k | v][head 1: q | k | v] ...   (rotary applied)
//   S_h = q_h k_h^T / sqrt(Dh)           [T, T], entries j > i masked
//   P_h = softmax_j(S_h)                 or the override of head h, if one is given
//   z[:, h Dh : (h+1) Dh] = P_h v_h      z [T, H Dh], heads merged head-major (HF's layout)
//
// One call computes one head, single-threaded (the caller spreads heads over its threads). The
// head's q, k, v are copied into contiguous [T, Dh] blocks, then it goes through query blocks
// of kQueryBlock rows: the block's scores against the keys it may see are one small Eigen GEMM,
// the softmax runs on them in place, and a second GEMM weights the values. The [T, T] scores
// and probabilities are only written out when a hook asks for them. An override's row is used
// in full (all T keys), as patching code in PyTorch does.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace emergent::neox {

template <int Dh>
struct CausalAttention {
  static_assert(Dh >= 2, "CausalAttention: d_head must be at least 2");
  static constexpr int kQueryBlock = 64;

  using HeadMatrix = Eigen::Matrix<float, Eigen::Dynamic, Dh, Eigen::RowMajor>;
  using HeadMap = Eigen::Map<HeadMatrix>;
  using ConstHeadMap = Eigen::Map<const HeadMatrix>;
  using StridedHeadMap = Eigen::Map<HeadMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using MatrixMap = Eigen::Map<RowMatrix>;
  using ConstMatrixMap = Eigen::Map<const RowMatrix>;
  using RowArrayMap = Eigen::Map<Eigen::Array<float, 1, Eigen::Dynamic>>;

  // One head h: z[:, h Dh : (h+1) Dh] <- qkv [T, 3 H Dh]; z has rows of H Dh.
  //   scores_out   [T, T] or null: this head's scaled scores, -inf above the diagonal
  //   pattern_out  [T, T] or null: the probabilities used (the override, if any)
  //   override_pattern  [T, T] or null: replaces the softmax output
  static void head_forward(const float* qkv, float* z, int T, int H, int h, float scale,
                           float* scores_out, float* pattern_out, const float* override_pattern) {
    std::vector<float> q(static_cast<std::size_t>(T) * Dh), k(q.size()), v(q.size());
    std::vector<float> block(static_cast<std::size_t>(std::min(T, kQueryBlock)) * T);
    split_head(qkv, h, T, H, q.data(), k.data(), v.data());
    const ConstHeadMap Q(q.data(), T, Dh), K(k.data(), T, Dh), V(v.data(), T, Dh);
    StridedHeadMap Z(z + static_cast<std::size_t>(h) * Dh, T, Dh, Eigen::OuterStride<>(H * Dh));

    for (int i0 = 0; i0 < T; i0 += kQueryBlock) {
      const int rows = std::min(kQueryBlock, T - i0), keys = i0 + rows;
      MatrixMap S(block.data(), rows, keys);
      S.noalias() = Q.middleRows(i0, rows) * K.topRows(keys).transpose();
      for (int r = 0; r < rows; ++r) {
        const int i = i0 + r;
        RowArrayMap visible(block.data() + static_cast<std::size_t>(r) * keys, i + 1);
        visible *= scale;
        if (scores_out) {
          float* out = scores_out + static_cast<std::size_t>(i) * T;
          std::copy(visible.data(), visible.data() + i + 1, out);
          std::fill(out + i + 1, out + T, -std::numeric_limits<float>::infinity());
        }
        visible = (visible - visible.maxCoeff()).exp();
        visible *= 1.0f / visible.sum();
        std::fill(visible.data() + i + 1, visible.data() + keys, 0.0f);
        if (pattern_out && !override_pattern) {
          float* out = pattern_out + static_cast<std::size_t>(i) * T;
          std::copy(visible.data(), visible.data() + i + 1, out);
          std::fill(out + i + 1, out + T, 0.0f);
        }
      }
      if (override_pattern) {
        const ConstMatrixMap P(override_pattern + static_cast<std::size_t>(i0) * T, rows, T);
        Z.middleRows(i0, rows).noalias() = P * V;
        if (pattern_out) {
          std::copy(P.data(), P.data() + static_cast<std::size_t>(rows) * T,
                    pattern_out + static_cast<std::size_t>(i0) * T);
        }
      } else {
        Z.middleRows(i0, rows).noalias() = S * V.topRows(keys);
      }
    }
  }

 private:
  // Head h's q, k, v out of the interleaved qkv rows into contiguous [T, Dh] blocks.
  static void split_head(const float* qkv, int h, int T, int H, float* q, float* k, float* v) {
    for (int t = 0; t < T; ++t) {
      const float* row =
          qkv + static_cast<std::size_t>(t) * 3 * H * Dh + static_cast<std::size_t>(h) * 3 * Dh;
      std::copy(row, row + Dh, q + static_cast<std::size_t>(t) * Dh);
      std::copy(row + Dh, row + 2 * Dh, k + static_cast<std::size_t>(t) * Dh);
      std::copy(row + 2 * Dh, row + 3 * Dh, v + static_cast<std::size_t>(t) * Dh);
    }
  }
};

}  // namespace emergent::neox
