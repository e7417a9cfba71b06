// Causal attention of one head over a short sequence (T <= 64) held in AVX-512 registers, for
// d_head a multiple of 16: the linear map's heads (T = 2S - 1, d_head = 16).
//
// Forward, per query row i (the math of mixers/dot_attention.hpp):
//   s_j  = scale q_i . k_j + c P_ij        for j <= i: the T keys sit in ceil(T / 16) zmm
//                                           registers, each score vector built from d_head
//                                           broadcast FMAs over the rows of K^T
//   p    = softmax(s) over j <= i, 0 above the diagonal, written as row i of att
//   o_i  = sum_j p_j v_j                   v_j is d_head / 16 zmm; p_j broadcast
// Backward, per row i:
//   dA_j = dO_i . v_j                       broadcast FMAs over the rows of V^T, as s above
//   ds_j = scale p_j (dA_j - sum_l p_l dA_l)
//   dq_i = sum_j ds_j k_j,   dk_j += ds_j q_i,   dv_j += p_j dO_i
// The exponential is core/avx512.hpp's, as in the long-sequence kernels.
#pragma once

#if defined(__AVX512F__)

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "../core/avx512.hpp"

namespace emergent::short_causal_attention {

inline constexpr int kMaxLength = 64;

// d_head values the kernels take; others use the generic path of dot_attention.hpp.
template <int Dh>
inline constexpr bool supports = Dh % 16 == 0 && Dh <= 64;

namespace detail {

// out[w] lanes j = x . column 16 w + j of the transposed keys [Dh, T], for the visible keys:
// d_head broadcast FMAs per vector of 16 keys.
template <int NV, int Dh>
inline void dot_with_keys(const float* x, const float* transposed, int T,
                          const __mmask16 visible[NV], __m512 out[NV]) {
#pragma GCC unroll 4
  for (int w = 0; w < NV; ++w) out[w] = _mm512_setzero_ps();
  for (int d = 0; d < Dh; ++d) {
    const __m512 xd = _mm512_set1_ps(x[d]);
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w)
      out[w] = _mm512_fmadd_ps(xd, _mm512_maskz_loadu_ps(visible[w], transposed + d * T + 16 * w),
                               out[w]);
  }
}

template <int NV, int Dh>
void forward(const float* q, const float* kt, const float* v, float* att, float* out,
             std::int64_t out_stride, int T, float scale, const float* bias, float bias_strength) {
  constexpr int DV = Dh / 16;
  for (int i = 0; i < T; ++i) {
    __m512 s[NV];
    __mmask16 visible[NV];
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w) visible[w] = avx512::lanes_below(i + 1 - 16 * w);
    dot_with_keys<NV, Dh>(q + i * Dh, kt, T, visible, s);
    const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    __m512 row_max = minus_inf;
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w) {
      s[w] = _mm512_mul_ps(s[w], _mm512_set1_ps(scale));
      if (bias)
        s[w] = _mm512_fmadd_ps(_mm512_set1_ps(bias_strength),
                               _mm512_maskz_loadu_ps(visible[w], bias + i * T + 16 * w), s[w]);
      s[w] = _mm512_mask_blend_ps(visible[w], minus_inf, s[w]);
      row_max = _mm512_max_ps(row_max, s[w]);
    }
    const __m512 max_all = _mm512_set1_ps(_mm512_reduce_max_ps(row_max));
    __m512 total = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w) {
      s[w] = _mm512_maskz_mov_ps(visible[w], avx512::exp_ps(_mm512_sub_ps(s[w], max_all)));
      total = _mm512_add_ps(total, s[w]);
    }
    const __m512 inverse = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(total));
    float* row = att + static_cast<std::size_t>(i) * T;
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w)
      _mm512_mask_storeu_ps(row + 16 * w, avx512::lanes_below(T - 16 * w),
                            _mm512_mul_ps(s[w], inverse));
    __m512 o[DV];
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) o[u] = _mm512_setzero_ps();
    for (int j = 0; j <= i; ++j) {
      const __m512 p = _mm512_set1_ps(row[j]);
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u)
        o[u] = _mm512_fmadd_ps(p, _mm512_loadu_ps(v + j * Dh + 16 * u), o[u]);
    }
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) _mm512_storeu_ps(out + i * out_stride + 16 * u, o[u]);
  }
}

template <int NV, int Dh>
void backward(const float* q, const float* k, const float* vt, const float* att, const float* d_out,
              std::int64_t d_out_stride, float* dq, float* dk, float* dv, int T, float scale) {
  constexpr int DV = Dh / 16;
  std::fill(dk, dk + T * Dh, 0.0f);
  std::fill(dv, dv + T * Dh, 0.0f);
  alignas(64) float ds_row[kMaxLength];
  for (int i = 0; i < T; ++i) {
    __m512 da[NV];
    __mmask16 visible[NV];
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w) visible[w] = avx512::lanes_below(i + 1 - 16 * w);
    const float* doi = d_out + i * d_out_stride;
    dot_with_keys<NV, Dh>(doi, vt, T, visible, da);
    const float* row = att + static_cast<std::size_t>(i) * T;
    __m512 p[NV], dot = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w) {
      p[w] = _mm512_maskz_loadu_ps(visible[w], row + 16 * w);
      dot = _mm512_fmadd_ps(p[w], da[w], dot);
    }
    const __m512 row_dot = _mm512_set1_ps(_mm512_reduce_add_ps(dot));
#pragma GCC unroll 4
    for (int w = 0; w < NV; ++w)
      _mm512_store_ps(
          ds_row + 16 * w,
          _mm512_mul_ps(_mm512_mul_ps(p[w], _mm512_sub_ps(da[w], row_dot)), _mm512_set1_ps(scale)));
    __m512 qi[DV], oi[DV], dqi[DV];
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) {
      qi[u] = _mm512_loadu_ps(q + i * Dh + 16 * u);
      oi[u] = _mm512_loadu_ps(doi + 16 * u);
      dqi[u] = _mm512_setzero_ps();
    }
    for (int j = 0; j <= i; ++j) {
      const __m512 ds = _mm512_set1_ps(ds_row[j]), pj = _mm512_set1_ps(row[j]);
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u) {
        const int at = j * Dh + 16 * u;
        dqi[u] = _mm512_fmadd_ps(ds, _mm512_loadu_ps(k + at), dqi[u]);
        _mm512_storeu_ps(dk + at, _mm512_fmadd_ps(ds, qi[u], _mm512_loadu_ps(dk + at)));
        _mm512_storeu_ps(dv + at, _mm512_fmadd_ps(pj, oi[u], _mm512_loadu_ps(dv + at)));
      }
    }
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) _mm512_storeu_ps(dq + i * Dh + 16 * u, dqi[u]);
  }
}

}  // namespace detail

// One head: q, v [T, Dh], kt [Dh, T] contiguous; att [T, T] (row i: softmax over j <= i, zeros
// after); out rows of stride out_stride. bias: [T, T] pattern or null.
template <int Dh>
void forward(const float* q, const float* kt, const float* v, float* att, float* out,
             std::int64_t out_stride, int T, float scale, const float* bias, float bias_strength) {
  static_assert(supports<Dh>);
  switch ((T + 15) / 16) {
    case 1:
      return detail::forward<1, Dh>(q, kt, v, att, out, out_stride, T, scale, bias, bias_strength);
    case 2:
      return detail::forward<2, Dh>(q, kt, v, att, out, out_stride, T, scale, bias, bias_strength);
    case 3:
      return detail::forward<3, Dh>(q, kt, v, att, out, out_stride, T, scale, bias, bias_strength);
    default:
      return detail::forward<4, Dh>(q, kt, v, att, out, out_stride, T, scale, bias, bias_strength);
  }
}

// dq, dk, dv [T, Dh] (overwritten) of one head from d_out (rows of stride d_out_stride).
template <int Dh>
void backward(const float* q, const float* k, const float* vt, const float* att, const float* d_out,
              std::int64_t d_out_stride, float* dq, float* dk, float* dv, int T, float scale) {
  static_assert(supports<Dh>);
  switch ((T + 15) / 16) {
    case 1:
      return detail::backward<1, Dh>(q, k, vt, att, d_out, d_out_stride, dq, dk, dv, T, scale);
    case 2:
      return detail::backward<2, Dh>(q, k, vt, att, d_out, d_out_stride, dq, dk, dv, T, scale);
    case 3:
      return detail::backward<3, Dh>(q, k, vt, att, d_out, d_out_stride, dq, dk, dv, T, scale);
    default:
      return detail::backward<4, Dh>(q, k, vt, att, d_out, d_out_stride, dq, dk, dv, T, scale);
  }
}

}  // namespace emergent::short_causal_attention

#endif
