// AVX-512 pieces shared by the kernels (nn/gemm.hpp, mixers/*_causal_attention.hpp,
// mixers/attention_head_split.hpp): the mask of a vector's first lanes, a vectorised exp, and a
// 16 x 16 transpose in registers.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

#include <algorithm>
#include <emergent/core/cephes_expf.hpp>

namespace emergent::avx512 {

// The first `count` lanes of a 16-float vector (none for count <= 0, all for count >= 16): the
// mask of the valid part of a vector at the end of a row.
inline __mmask16 lanes_below(int count) {
  return static_cast<__mmask16>(0xFFFFu >> (16 - std::clamp(count, 0, 16)));
}

// exp(x), Cephes' expf in AVX-512: x = n ln2 + r with n = round(x / ln2) and ln2 split in two,
// exp(r) = 1 + r + r^2 p(r) with p of degree 5, times 2^n by scalef. Within 1 ulp of the
// correctly rounded value for the softmax's x <= 0 (normal results). x is clamped below at -104
// (the result rounds to 0, so exp(-inf) = 0); NaN stays NaN.
inline __m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(cephes_expf::kLog2e)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cephes_expf::kLn2High), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(cephes_expf::kLn2Low), r);
  __m512 p = _mm512_set1_ps(cephes_expf::kP[0]);
#pragma GCC unroll 5
  for (int i = 1; i < 6; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(cephes_expf::kP[i]));
  const __m512 y = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(y, n);
}

// A 16 x 16 block of floats transposed in registers: rows[i] holds row i on entry and column i
// on return. Four rounds of shuffles (32-bit, 64-bit, then 128-bit lanes twice), 64 in all,
// against 256 scalar stores scattered over 16 cache lines.
inline void transpose16(__m512 rows[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
  }
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      const __m512d a = _mm512_castps_pd(t[4 * i + j]), b = _mm512_castps_pd(t[4 * i + j + 2]);
      rows[4 * i + 2 * j] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, b));
      rows[4 * i + 2 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, b));
    }
  // rows[4i + c] now holds column c of each 4x4 block of row group i, in 128-bit lanes.
  for (int c = 0; c < 4; ++c) {
    t[c] = _mm512_shuffle_f32x4(rows[c], rows[4 + c], 0x88);
    t[4 + c] = _mm512_shuffle_f32x4(rows[c], rows[4 + c], 0xDD);
    t[8 + c] = _mm512_shuffle_f32x4(rows[8 + c], rows[12 + c], 0x88);
    t[12 + c] = _mm512_shuffle_f32x4(rows[8 + c], rows[12 + c], 0xDD);
  }
  for (int c = 0; c < 4; ++c) {
    rows[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
    rows[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xDD);
    rows[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
    rows[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xDD);
  }
}

}  // namespace emergent::avx512

#endif
