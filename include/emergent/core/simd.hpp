// The float vector of the widest instruction set the build targets, for kernels written once for
// AVX-512 and AVX2 (nn/gemm.hpp): 16 lanes in a zmm register with AVX-512F, 8 in a ymm register
// with AVX2 and FMA, none otherwise (EMERGENT_SIMD_LANES is then 0 and callers use Eigen).
//
//   simd::Vec                        the register type
//   simd::kLanes                     floats per register
//   simd::kName                      "avx512", "avx2": printed by the benchmarks
//   load, store, set1, zero, fmadd   unaligned loads and stores, broadcast, a * b + c
//   stream                           a store past the caches (p aligned to the vector)
//   add, sub, mul, max               lane-wise
//   reduce_add, reduce_max           over the lanes
//   exp                              Cephes' expf, within 1-2 ulp for the softmax's x <= 0
//   Mask, lanes_below(n), load_masked, store_masked, store_first(p, n, v), blend, zero_unless
//                                    the first n lanes (n <= 0: none, n >= kLanes: all); masked
//                                    lanes are neither read nor written, so a row's end may sit at
//                                    the end of a mapping; blend(m, a, b) takes b where m is set,
//                                    zero_unless(m, v) zeroes the lanes where it is not
#pragma once

#if defined(__AVX512F__)
#define EMERGENT_SIMD_LANES 16
#elif defined(__AVX2__) && defined(__FMA__)
#define EMERGENT_SIMD_LANES 8
#else
#define EMERGENT_SIMD_LANES 0
#endif

#if EMERGENT_SIMD_LANES > 0
#include <immintrin.h>

#include <algorithm>
#include <emergent/core/avx512.hpp>
#include <emergent/core/cephes_expf.hpp>

namespace emergent::simd {

inline constexpr int kLanes = EMERGENT_SIMD_LANES;

#if EMERGENT_SIMD_LANES == 16
inline constexpr const char* kName = "avx512";
using Vec = __m512;
using Mask = __mmask16;
inline Vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm512_storeu_ps(p, v); }
inline Vec set1(float x) { return _mm512_set1_ps(x); }
inline Vec zero() { return _mm512_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm512_fmadd_ps(a, b, c); }
inline Mask lanes_below(int count) {
  return static_cast<Mask>(0xFFFFu >> (16 - std::clamp(count, 0, 16)));
}
inline Vec load_masked(Mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
inline void store_masked(float* p, Mask m, Vec v) { _mm512_mask_storeu_ps(p, m, v); }
inline void stream(float* p, Vec v) { _mm512_stream_ps(p, v); }  // p 64-byte aligned
inline Vec add(Vec a, Vec b) { return _mm512_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm512_sub_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm512_mul_ps(a, b); }
inline Vec max(Vec a, Vec b) { return _mm512_max_ps(a, b); }
inline Vec blend(Mask m, Vec a, Vec b) { return _mm512_mask_blend_ps(m, a, b); }
inline Vec zero_unless(Mask m, Vec v) { return _mm512_maskz_mov_ps(m, v); }
inline float reduce_add(Vec v) { return _mm512_reduce_add_ps(v); }
inline float reduce_max(Vec v) { return _mm512_reduce_max_ps(v); }
inline Vec exp(Vec x) { return avx512::exp_ps(x); }
#else
inline constexpr const char* kName = "avx2";
using Vec = __m256;
using Mask = __m256i;
inline Vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, Vec v) { _mm256_storeu_ps(p, v); }
inline Vec set1(float x) { return _mm256_set1_ps(x); }
inline Vec zero() { return _mm256_setzero_ps(); }
inline Vec fmadd(Vec a, Vec b, Vec c) { return _mm256_fmadd_ps(a, b, c); }
inline Mask lanes_below(int count) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(std::clamp(count, 0, 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline Vec load_masked(Mask m, const float* p) { return _mm256_maskload_ps(p, m); }
inline void store_masked(float* p, Mask m, Vec v) { _mm256_maskstore_ps(p, m, v); }
inline void stream(float* p, Vec v) { _mm256_stream_ps(p, v); }  // p 32-byte aligned
inline Vec add(Vec a, Vec b) { return _mm256_add_ps(a, b); }
inline Vec sub(Vec a, Vec b) { return _mm256_sub_ps(a, b); }
inline Vec mul(Vec a, Vec b) { return _mm256_mul_ps(a, b); }
inline Vec max(Vec a, Vec b) { return _mm256_max_ps(a, b); }
inline Vec blend(Mask m, Vec a, Vec b) { return _mm256_blendv_ps(a, b, _mm256_castsi256_ps(m)); }
inline Vec zero_unless(Mask m, Vec v) { return _mm256_and_ps(_mm256_castsi256_ps(m), v); }
inline float reduce_add(Vec v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
inline float reduce_max(Vec v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}
// exp(x) as avx512::exp_ps, with 2^n made from the exponent bits (AVX2 has no scalef): x is
// clamped to [-87.3, 88], where 2^n is a normal float, so exp(-inf) is 1.2e-38, not 0 (the
// softmax zeroes its masked lanes itself). NaN stays NaN (max and min return their second operand
// for a NaN).
inline Vec exp(Vec x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.3365f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(cephes_expf::kLog2e)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cephes_expf::kLn2High), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(cephes_expf::kLn2Low), r);
  __m256 p = _mm256_set1_ps(cephes_expf::kP[0]);
#pragma GCC unroll 5
  for (int i = 1; i < 6; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(cephes_expf::kP[i]));
  const __m256 y = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(bits));
}
#endif

// The first `count` lanes of v to p: a plain store when they are all of them.
inline void store_first(float* p, int count, Vec v) {
  if (count >= kLanes)
    store(p, v);
  else
    store_masked(p, lanes_below(count), v);
}

}  // namespace emergent::simd

#endif
