// One attention head's operands, copied out of the fused qkv projection [T, 3D] (row t holds
// q_t, k_t, v_t of every head side by side): q, k, v [T, d_head] contiguous, and optionally k, v
// also transposed [d_head, T] for the kernels that vectorise over keys (the short-sequence ones;
// the long-sequence kernels repack K and V themselves). And the way back for gradients:
// dq, dk, dv [T, d_head] into head h's columns of d_qkv [T, 3D]. Also what every form of causal
// attention (causal_attention_*.hpp, the selector in dot_attention.hpp) takes: HeadInputs, and the
// masked softmax row of the two generic forms.
//
// With AVX-512 and d_head = 16, a row of a head is one zmm register, and the transposes go
// through 16 x 16 blocks transposed in registers (the scalar scatter into K^T and V^T, a store to
// a new cache line per element, was 6% of a linear-map training step).
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <emergent/core/avx512.hpp>
#include <type_traits>

namespace emergent::attention_head {

// One head of one sequence, as a form of causal attention takes it: q, k, v [T, d_head] and k, v
// transposed [d_head, T] (filled only for the forms whose `transposed` is true), contiguous.
template <class Real>
struct HeadInputs {
  const Real *q, *k, *v, *kt, *vt;
};

// row[0..i] <- softmax(scale * row[0..i] + c bias[i, 0..i]) (no bias when bias is null; bias
// [T, T]); row[i+1..T) <- 0.
template <class Real>
void causal_softmax_row(Real* row, int i, int T, Real scale, const Real* bias, Real bias_strength) {
  using RowArrayMap = Eigen::Map<Eigen::Array<Real, 1, Eigen::Dynamic>>;
  using ConstRowArrayMap = Eigen::Map<const Eigen::Array<Real, 1, Eigen::Dynamic>>;
  RowArrayMap visible(row, i + 1);
  visible *= scale;
  if (bias)
    visible += bias_strength * ConstRowArrayMap(bias + static_cast<std::size_t>(i) * T, i + 1);
  visible = (visible - visible.maxCoeff()).exp();  // Eigen's vectorised exp
  visible *= Real(1) / visible.sum();
  std::fill(row + i + 1, row + T, Real(0));
}

#if defined(__AVX512F__)
namespace detail {

// dst [16, T] columns t0..t0+count <- src rows t0..t0+count (16 floats each, `stride` apart).
inline void transpose_block(const float* src, std::int64_t stride, float* dst, int T, int t0,
                            int count) {
  __m512 rows[16];
  for (int i = 0; i < 16; ++i)
    rows[i] = i < count ? _mm512_loadu_ps(src + (t0 + i) * stride) : _mm512_setzero_ps();
  avx512::transpose16(rows);
  const __mmask16 mask = avx512::lanes_below(count);
  for (int d = 0; d < 16; ++d)
    _mm512_mask_storeu_ps(dst + static_cast<std::int64_t>(d) * T + t0, mask, rows[d]);
}

}  // namespace detail
#endif

// Head h of qkv [T, 3D] -> q, k, v [T, Dh] and, unless they are null, kt, vt [Dh, T].
template <int D, int Dh, class Real>
void split(const Real* qkv, int h, int T, Real* q, Real* k, Real* v, Real* kt, Real* vt) {
#if defined(__AVX512F__)
  if constexpr (Dh == 16 && std::is_same_v<Real, float>) {
    const float* head = qkv + h * Dh;
    for (int t = 0; t < T; ++t) {
      const float* row = head + static_cast<std::int64_t>(t) * 3 * D;
      _mm512_storeu_ps(q + t * Dh, _mm512_loadu_ps(row));
      _mm512_storeu_ps(k + t * Dh, _mm512_loadu_ps(row + D));
      _mm512_storeu_ps(v + t * Dh, _mm512_loadu_ps(row + 2 * D));
    }
    if (kt)
      for (int t0 = 0; t0 < T; t0 += 16) {
        const int count = std::min(16, T - t0);
        detail::transpose_block(k, Dh, kt, T, t0, count);
        detail::transpose_block(v, Dh, vt, T, t0, count);
      }
    return;
  }
#endif
  for (int t = 0; t < T; ++t) {
    const Real* row = qkv + static_cast<std::int64_t>(t) * 3 * D + h * Dh;
    std::copy(row, row + Dh, q + t * Dh);
    std::copy(row + D, row + D + Dh, k + t * Dh);
    std::copy(row + 2 * D, row + 2 * D + Dh, v + t * Dh);
  }
  if (kt)
    for (int t = 0; t < T; ++t)
      for (int d = 0; d < Dh; ++d) kt[d * T + t] = k[t * Dh + d], vt[d * T + t] = v[t * Dh + d];
}

// The way back for gradients: head h's columns of d_qkv [T, 3D] <- dq, dk, dv [T, Dh].
template <int D, int Dh, class Real>
void merge_gradients(Real* d_qkv, int h, int T, const Real* dq, const Real* dk, const Real* dv) {
  for (int t = 0; t < T; ++t) {
    Real* row = d_qkv + static_cast<std::int64_t>(t) * 3 * D + h * Dh;
    std::copy(dq + t * Dh, dq + (t + 1) * Dh, row);
    std::copy(dk + t * Dh, dk + (t + 1) * Dh, row + D);
    std::copy(dv + t * Dh, dv + (t + 1) * Dh, row + 2 * D);
  }
}

}  // namespace emergent::attention_head
