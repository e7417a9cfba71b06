// A 16 x 16 block of floats transposed in AVX-512 registers: rows[i] holds row i on entry and
// column i on return. Four rounds of shuffles (32-bit, 64-bit, then 128-bit lanes twice), 64 in
// all, against 256 scalar stores scattered over 16 cache lines.
#pragma once

#if defined(__AVX512F__)
#include <immintrin.h>

namespace emergent::avx512 {

// rows[0..16) <- its transpose (each rows[i] a zmm of 16 floats).
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
