// fp32 GEMM for the model's Linear layers on AVX-512:
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
//   * B is read in place when its rows are contiguous and N is a multiple of 64 (the input and
//     weight gradients); otherwise (the forward's W^T) it is packed once per call into slivers
//     [N/64][KC][64], zero-padded, by 16 x 16 register transposes: the weight matrix, small next
//     to the activations.
//   * A is not packed: the micro-kernel broadcasts its elements straight from the source rows.
//   * The micro-kernel keeps a 6 x 64 tile of C in 24 zmm registers; per k it loads 4 vectors
//     of the B sliver and broadcasts 6 elements of A, for 24 FMAs. A sliver of KC x 64 floats
//     (64 KiB at KC = 256) stays in L2 while the kernel walks down the rows of A.
//   * The bias is the accumulators' initial value, so the forward needs no second pass over C.
// Each element of C is summed in the same order whatever the thread count, so results are
// deterministic. Work is split across OpenMP threads over (row block, sliver) pairs when the
// caller is not already inside a parallel region.
//
// `kGemmKernel` is false where AVX-512 is missing; callers then use Eigen (nn/linear.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "../core/avx512.hpp"
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

#if defined(__AVX512F__)
inline constexpr bool kGemmKernel = true;

namespace gemm_detail {

constexpr int MR = 6;    // rows of a C tile
constexpr int NR = 64;   // columns of a C tile: 4 zmm
constexpr int KC = 256;  // depth of a B block: 128 was ~5% slower on training steps, 512 no faster
constexpr int MC = 240;  // rows of A per block (a multiple of MR); MC x KC floats stay in L2

// packed[s][k][0..64) = B[k0 + k, 64 s + (0..64)], zero beyond N.
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
    } else if (b.row_stride ==
               1) {  // B = W^T (the forward): 16 x 16 blocks of W transposed in registers
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
    } else {  // any other strides, element by element
      if (width < NR)
        for (int k = 0; k < kc; ++k) std::fill(out + k * NR + width, out + (k + 1) * NR, 0.0f);
      for (int n = 0; n < width; ++n) {
        const float* column = b.at(k0, n0 + n);
        for (int k = 0; k < kc; ++k) out[k * NR + n] = column[k * b.row_stride];
      }
    }
  }
}

// C tile [rows <= 6, width <= 64] (op)= A rows [m0, m0+6) x B sliver (kc rows of 64, ldb apart).
// The tile starts from C when from_c, otherwise from the bias (or zero).
inline void micro_kernel(const StridedMatrix& a, int m0, int rows, int k0, int kc,
                         const float* sliver, std::int64_t ldb, float* c, std::int64_t ldc,
                         int width, bool from_c, const float* bias) {
  __m512 acc[MR][4];
  const __mmask16 mask[4] = {avx512::lanes_below(width), avx512::lanes_below(width - 16),
                             avx512::lanes_below(width - 32), avx512::lanes_below(width - 48)};
  if (from_c) {
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v)
        acc[r][v] =
            r < rows ? _mm512_maskz_loadu_ps(mask[v], c + r * ldc + 16 * v) : _mm512_setzero_ps();
  } else {
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m512 init =
          bias ? _mm512_maskz_loadu_ps(mask[v], bias + 16 * v) : _mm512_setzero_ps();
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
    const __m512 b0 = _mm512_loadu_ps(bk), b1 = _mm512_loadu_ps(bk + 16),
                 b2 = _mm512_loadu_ps(bk + 32), b3 = _mm512_loadu_ps(bk + 48);
#pragma GCC unroll 6
    for (int r = 0; r < MR; ++r) {
      const __m512 x = _mm512_set1_ps(row[r][k * step]);
      acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
      acc[r][2] = _mm512_fmadd_ps(x, b2, acc[r][2]);
      acc[r][3] = _mm512_fmadd_ps(x, b3, acc[r][3]);
    }
  }
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r)
    if (r < rows)
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, mask[v], acc[r][v]);
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
  const bool in_place = b.col_stride == 1 && N % NR == 0;
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
