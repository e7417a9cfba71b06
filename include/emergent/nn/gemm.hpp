// fp32 GEMM for the model's Linear layers on AVX-512 or AVX2 (core/simd.hpp):
//
//   C[M,N] = A[M,K] B[K,N]  (+ bias[n] on every row)     or     C[M,N] += A[M,K] B[K,N]
//
// A and B are strided views (element (i, j) at p[i * row_stride + j * col_stride]), so the three
// products of a Linear layer need no transposed copies: the forward X W^T (B = W read by
// columns), the input gradient dY W and the weight gradient dY^T X (A = dY read by columns). C is
// row-major.
//
// The shapes here are tall and thin: M = tokens (thousands), K and N = 128..512. Eigen's GEMM
// packs both operands on every call, which at K = 128 costs a quarter of the multiply. Here:
//   * B is read in place on AVX-512 when its rows are contiguous and N is a multiple of the
//     tile width (the input and weight gradients); otherwise (the forward's W^T, and every B on
//     AVX2: see kInPlace) it is packed once per call and block of K into slivers [N/NR][KC][NR],
//     zero-padded (on AVX-512 by 16 x 16 register transposes).
//   * A is not packed: the micro-kernel broadcasts its elements straight from the source rows.
//   * The micro-kernel keeps a 6 x NR tile of C in registers: 6 x 64 in 24 zmm on AVX-512, 6 x 16
//     in 12 ymm on AVX2 (of 16). Per k it loads NR / lanes vectors of the B sliver and broadcasts
//     6 elements of A, for 24 or 12 FMAs. A sliver of KC x NR floats (64 KiB or 16 KiB at
//     KC = 256) stays in L2 (L1 on AVX2) while the kernel walks down the rows of A.
//   * The bias is the accumulators' initial value, so the forward needs no second pass over C.
// Each element of C is summed in the same order whatever the thread count, so results are
// deterministic. Work is split across OpenMP threads over (row block, sliver) pairs when the
// caller is not already inside a parallel region.
//
// `kGemmKernel` is false where neither AVX-512 nor AVX2 with FMA is there; callers then use Eigen
// (nn/linear.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../core/avx512.hpp"
#include "../core/simd.hpp"
#if defined(_OPENMP)
#include <omp.h>
#endif

namespace emergent::nn {

// A read-only strided matrix view.
struct StridedMatrix {
  const float* data;
  std::int64_t row_stride, col_stride;
  const float* at(std::int64_t i, std::int64_t j) const {
    return data + i * row_stride + j * col_stride;
  }
};

#if EMERGENT_SIMD_LANES > 0
inline constexpr bool kGemmKernel = true;

namespace gemm_detail {

constexpr int L = simd::kLanes;
constexpr int NV = L == 16 ? 4 : 2;  // vectors per tile row: 4 zmm (AVX-512) or 2 ymm (AVX2)
constexpr int MR = 6;                // rows of a C tile: 6 x NV accumulators (24 zmm or 12 ymm)
constexpr int NR = NV * L;           // columns of a C tile: 64 (AVX-512) or 16 (AVX2)
constexpr int KC = 256;  // depth of a B block: 128 was ~5% slower on training steps, 512 no faster
constexpr int MC = 240;  // rows of A per block (a multiple of MR); MC x KC floats stay in L2
// B read in place where it can be (AVX-512). On AVX2 a 16-wide sliver read in place takes one
// 64-byte piece of each of KC rows, which alias in L1 when the row stride is a multiple of 4 KiB
// and cost a TLB entry each: packing it (a copy of the smaller operand) measured 5-20% faster on
// the input and weight gradients (AMD EPYC Zen 3, against Eigen in the same run).
constexpr bool kInPlace = L == 16;

// packed[s][k][0..NR) = B[k0 + k, NR s + (0..NR)], zero beyond N.
inline void pack_b(float* packed, const StridedMatrix& b, int k0, int kc, int N) {
  const int slivers = (N + NR - 1) / NR;
  for (int s = 0; s < slivers; ++s) {
    float* out = packed + static_cast<std::size_t>(s) * kc * NR;
    const int n0 = s * NR, width = std::min(NR, N - n0);
    if (b.col_stride == 1) {
      for (int k = 0; k < kc; ++k) {
        const float* row = b.at(k0 + k, n0);
        std::copy(row, row + width, out + k * NR);
        std::fill(out + k * NR + width, out + (k + 1) * NR, 0.0f);
      }
      continue;
    }
#if defined(__AVX512F__)
    if (b.row_stride == 1) {  // B = W^T (the forward): 16 x 16 blocks of W transposed in registers
      for (int kb = 0; kb < kc; kb += 16) {
        const int depth = std::min(16, kc - kb);
        const __mmask16 k_lanes = avx512::lanes_below(depth);
        for (int nb = 0; nb < NR; nb += 16) {
          __m512 rows[16];
          for (int i = 0; i < 16; ++i)
            rows[i] = nb + i < width ? _mm512_maskz_loadu_ps(k_lanes, b.at(k0 + kb, n0 + nb + i))
                                     : _mm512_setzero_ps();
          avx512::transpose16(rows);
          for (int j = 0; j < depth; ++j) _mm512_storeu_ps(out + (kb + j) * NR + nb, rows[j]);
        }
      }
      continue;
    }
#endif
    // Any other strides (and W^T on AVX2, where a sliver is only 16 wide), element by element.
    if (width < NR)
      for (int k = 0; k < kc; ++k) std::fill(out + k * NR + width, out + (k + 1) * NR, 0.0f);
    for (int n = 0; n < width; ++n) {
      const float* column = b.at(k0, n0 + n);
      for (int k = 0; k < kc; ++k) out[k * NR + n] = column[k * b.row_stride];
    }
  }
}

// C tile [rows <= MR, width <= NR] (op)= A rows [m0, m0+MR) x B sliver (kc rows of NR, ldb
// apart). The tile starts from C when from_c, otherwise from the bias (or zero).
inline void micro_kernel(const StridedMatrix& a, int m0, int rows, int k0, int kc,
                         const float* sliver, std::int64_t ldb, float* c, std::int64_t ldc,
                         int width, bool from_c, const float* bias) {
  simd::Vec acc[MR][NV];
  simd::Mask mask[NV];
#pragma GCC unroll 4
  for (int v = 0; v < NV; ++v) mask[v] = simd::lanes_below(width - L * v);
  const bool full = width == NR;  // plain loads and stores (AVX2's masked ones are slower)
  const auto load_c = [&](const float* p, int v) {
    return full ? simd::load(p) : simd::load_masked(mask[v], p);
  };
  if (from_c) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        acc[r][v] = r < rows ? load_c(c + r * ldc + L * v, v) : simd::zero();
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const simd::Vec init = bias ? load_c(bias + L * v, v) : simd::zero();
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) acc[r][v] = init;
    }
  }
  // Rows past the end of A repeat its last row; their results are never stored.
  const float* row[MR];
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) row[r] = a.at(m0 + std::min(r, rows - 1), k0);
  const std::int64_t step = a.col_stride;
  for (int k = 0; k < kc; ++k) {
    const float* bk = sliver + k * ldb;
    simd::Vec bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) bv[v] = simd::load(bk + L * v);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const simd::Vec x = simd::set1(row[r][k * step]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = simd::fmadd(x, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
    if (r < rows)
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) {
        float* out = c + r * ldc + L * v;
        if (full)
          simd::store(out, acc[r][v]);
        else
          simd::store_masked(out, mask[v], acc[r][v]);
      }
}

inline std::vector<float>& packing_buffer() {
  thread_local std::vector<float> buffer;
  return buffer;
}

}  // namespace gemm_detail

// C[M,N] (row-major, leading dimension ldc) = A B + bias, or += A B when `accumulate`.
// bias (length N) may be null; it is ignored when accumulating.
inline void gemm(int M, int N, int K, const StridedMatrix& a, const StridedMatrix& b, float* c,
                 std::int64_t ldc, bool accumulate, const float* bias = nullptr) {
  using namespace gemm_detail;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const int slivers = (N + NR - 1) / NR, row_blocks = (M + MC - 1) / MC;
  const bool in_place = b.col_stride == 1 && N % NR == 0 && kInPlace;
  std::vector<float>& packed = packing_buffer();
  for (int k0 = 0; k0 < K; k0 += KC) {
    const int kc = std::min(KC, K - k0);
    if (!in_place) {
      packed.resize(static_cast<std::size_t>(slivers) * kc * NR);
      pack_b(packed.data(), b, k0, kc, N);
    }
    const bool from_c = accumulate || k0 > 0;
    const std::int64_t blocks = static_cast<std::int64_t>(row_blocks) * slivers;
    auto block = [&](std::int64_t index) {
      const int s = static_cast<int>(index % slivers),
                m_begin = static_cast<int>(index / slivers) * MC;
      const int m_end = std::min(M, m_begin + MC), n0 = s * NR, width = std::min(NR, N - n0);
      const float* sliver =
          in_place ? b.at(k0, n0) : packed.data() + static_cast<std::size_t>(s) * kc * NR;
      const std::int64_t ldb = in_place ? b.row_stride : NR;
      for (int m0 = m_begin; m0 < m_end; m0 += MR)
        micro_kernel(a, m0, std::min(MR, m_end - m0), k0, kc, sliver, ldb, c + m0 * ldc + n0, ldc,
                     width, from_c, bias ? bias + n0 : nullptr);
    };
#if defined(_OPENMP)
    const bool threaded = !omp_in_parallel() && omp_get_max_threads() > 1 && blocks > 1 &&
                          static_cast<double>(M) * N * kc > 4e6;
#pragma omp parallel for schedule(static) if (threaded)
#endif
    for (std::int64_t index = 0; index < blocks; ++index) block(index);
  }
}

#else
inline constexpr bool kGemmKernel = false;
#endif

}  // namespace emergent::nn
