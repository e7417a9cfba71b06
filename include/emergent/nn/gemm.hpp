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
//   * B is read in place where its rows are contiguous and N is a multiple of the tile width
//     (the input and weight gradients) if the CPU's blocking says so (AMD with AVX-512: see
//     blocking_for); otherwise it is packed once per call and block of K into slivers
//     [N/NR][kc][NR], zero-padded (the forward's W^T on AVX-512 by 16 x 16 register transposes).
//   * A is not packed: the micro-kernel broadcasts its elements straight from the source rows.
//   * The micro-kernel keeps a 6 x NR tile of C in registers: 6 x 64 in 24 zmm on AVX-512, 6 x 16
//     in 12 ymm on AVX2 (of 16). Per k it loads NR / lanes vectors of the B sliver and broadcasts
//     6 elements of A, for 24 or 12 FMAs. A sliver of kc x NR floats stays in L1 or L2 (the
//     blocking, chosen per CPU) while the kernel walks down the rows of A.
//   * The bias is the accumulators' initial value, so the forward needs no second pass over C.
// Each element of C is summed in the same order whatever the thread count and blocking, so results
// are deterministic. Work is split across OpenMP threads over (row block, sliver) pairs when the
// caller is not already inside a parallel region.
//
// `kGemmKernel` is false where neither AVX-512 nor AVX2 with FMA is there; callers then use Eigen
// (nn/linear.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <emergent/core/avx512.hpp>
#include <emergent/core/cpu.hpp>
#include <emergent/core/simd.hpp>
#include <stdexcept>
#include <string>
#include <vector>
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
constexpr int MC = 240;  // rows of A per block (a multiple of MR); MC x KC floats stay in L2

// How B is blocked, chosen once per process from the CPU (core/cpu.hpp). Results do not depend
// on it: every element of C is summed in the same order for any kc.
struct Blocking {
  int kc;           // depth of a B block
  bool b_in_place;  // B read in place where its rows are contiguous and N is a multiple of NR
};

// Measured with the Linear products of a training slice (M = 3968 tokens; K, N = 128..512):
//   * AMD EPYC Zen 5 (AVX-512, L1d 48 KiB): B in place, kc = 256 (kc = 128 was ~5% slower on
//     training steps, 512 no faster).
//   * AMD EPYC Zen 3 (AVX2): packed, kc = 256. A 16-wide sliver read in place takes one 64-byte
//     piece of each of kc rows, which alias in L1 when the row stride is a multiple of 4 KiB and
//     cost a TLB entry each: packing measured 5-20% faster on the input and weight gradients.
//   * Intel Xeon (Emerald Rapids, AVX-512, L1d 48 KiB): packed, kc = 128, so that the 32 KiB
//     sliver stays in L1: 16% more GFLOP/s over the twelve products than in place at kc = 256
//     (137.0 against 117.8 on one core, interleaved runs; benchmarks/gemm_blocking.cpp).
// Elsewhere: packed, with the deepest kc (a multiple of 16 in [64, 256]) whose sliver fills at
// most 2/3 of L1d.
inline Blocking blocking_for(const cpu::Info& cpu) {
  if (L == 16 && cpu.vendor == cpu::Vendor::amd) return {256, true};
  const int fit = cpu.l1d_bytes * 2 / 3 / (NR * static_cast<int>(sizeof(float)));
  return {std::clamp(fit / 16 * 16, 64, 256), false};
}

// The blocking of this process: blocking_for(this CPU), or EMERGENT_GEMM_KC (16..4096) and
// EMERGENT_GEMM_B (packed, in-place) where set, to measure the alternatives without a rebuild.
inline Blocking read_blocking() {
  Blocking chosen = blocking_for(cpu::info());
  if (const char* kc = std::getenv("EMERGENT_GEMM_KC")) {
    char* end = nullptr;
    const long value = std::strtol(kc, &end, 10);
    if (end == kc || *end != '\0' || value < 16 || value > 4096)
      throw std::invalid_argument("EMERGENT_GEMM_KC='" + std::string(kc) +
                                  "': expected an integer from 16 to 4096");
    chosen.kc = static_cast<int>(value);
  }
  if (const char* b = std::getenv("EMERGENT_GEMM_B")) {
    const std::string value = b;
    if (value != "packed" && value != "in-place")
      throw std::invalid_argument("EMERGENT_GEMM_B='" + value + "': expected packed or in-place");
    chosen.b_in_place = value == "in-place";
  }
  return chosen;
}

}  // namespace gemm_detail

// Read on the first product, which may run inside a parallel region where an exception would
// end the process without a word: a bad environment variable is one line on stderr and exit 2.
inline const gemm_detail::Blocking& gemm_blocking() {
  static const gemm_detail::Blocking chosen = [] {
    try {
      return gemm_detail::read_blocking();
    } catch (const std::invalid_argument& e) {
      std::fprintf(stderr, "emergent: %s\n", e.what());
      std::exit(2);
    }
  }();
  return chosen;
}

namespace gemm_detail {

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
// bias (length N) may be null; it is ignored when accumulating. `blocking` is this CPU's unless
// given (benchmarks/gemm_blocking.cpp measures the alternatives).
inline void gemm(int M, int N, int K, const StridedMatrix& a, const StridedMatrix& b, float* c,
                 std::int64_t ldc, bool accumulate, const float* bias = nullptr,
                 const gemm_detail::Blocking& blocking = gemm_blocking()) {
  using namespace gemm_detail;
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!accumulate)
      for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) c[i * ldc + j] = bias ? bias[j] : 0.0f;
    return;
  }
  const int slivers = (N + NR - 1) / NR, row_blocks = (M + MC - 1) / MC;
  const int KC = blocking.kc;
  const bool in_place = b.col_stride == 1 && N % NR == 0 && blocking.b_in_place;
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

// "avx512, kc 128, B packed": the kernel and blocking of this build and CPU, for benchmarks.
inline std::string gemm_description() {
  const gemm_detail::Blocking& b = gemm_blocking();
  return std::string(simd::kName) + ", kc " + std::to_string(b.kc) +
         (b.b_in_place ? ", B in place" : ", B packed");
}

#else
inline constexpr bool kGemmKernel = false;
inline std::string gemm_description() { return "eigen"; }
#endif

}  // namespace emergent::nn
