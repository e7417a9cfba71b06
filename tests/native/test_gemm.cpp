// nn::gemm (the AVX-512 or AVX2 fp32 kernel behind nn/linear.hpp) against a double product, for
// every way a Linear layer calls it (A and B read by rows or by columns, and B with neither stride
// 1), shapes that leave partial tiles in every dimension, K longer than one packed block,
// accumulation into C and the bias.
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <emergent/core/cpu.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/nn/gemm.hpp>
#include <random>
#include <vector>

#if EMERGENT_SIMD_LANES > 0

namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

// One product: A [M,K] stored row-major or transposed, B [K,N] likewise; C with a leading
// dimension wider than N, to check the kernel stays inside its columns.
enum class Layout {
  rows,
  columns,
  spread
};  // B read by rows, by columns, or with both strides > 1

using Blocking = emergent::nn::gemm_detail::Blocking;

// Every blocking a CPU may choose (nn::gemm_detail::blocking_for), and a shallow one that splits
// K into many blocks.
constexpr std::array kBlockings = {Blocking{256, true},  Blocking{256, false}, Blocking{128, true},
                                   Blocking{128, false}, Blocking{64, false},  Blocking{16, true}};

void check_product(int M, int N, int K, bool a_transposed, Layout b_layout, bool accumulate,
                   bool with_bias, const Blocking& blocking = emergent::nn::gemm_blocking()) {
  CAPTURE(blocking.kc);
  CAPTURE(blocking.b_in_place);
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  CAPTURE(a_transposed);
  CAPTURE(int(b_layout));
  CAPTURE(accumulate);
  CAPTURE(with_bias);
  // b holds B twice as spread out as it needs to be, so that a third layout (neither stride 1)
  // can read it: row-major and transposed views use its first K * N values.
  const std::vector<float> a = random_values(std::size_t(M) * K, 1),
                           b = random_values(std::size_t(K) * N * 2, 2);
  const std::vector<float> bias = random_values(N, 3);
  const std::int64_t ldc = N + 3;
  std::vector<float> c = random_values(std::size_t(M) * ldc, 4);
  const std::vector<float> c_before = c;
  const emergent::nn::StridedMatrix A = a_transposed ? emergent::nn::StridedMatrix{a.data(), 1, M}
                                                     : emergent::nn::StridedMatrix{a.data(), K, 1};
  const emergent::nn::StridedMatrix B =
      b_layout == Layout::rows      ? emergent::nn::StridedMatrix{b.data(), N, 1}
      : b_layout == Layout::columns ? emergent::nn::StridedMatrix{b.data(), 1, K}
                                    : emergent::nn::StridedMatrix{b.data(), 2, 2 * K};
  emergent::nn::gemm(M, N, K, A, B, c.data(), ldc, accumulate, with_bias ? bias.data() : nullptr,
                     blocking);
  double worst = 0;
  for (int i = 0; i < M; ++i) {
    for (int j = 0; j < N; ++j) {
      double expected = accumulate ? c_before[i * ldc + j] : (with_bias ? bias[j] : 0.0);
      for (int k = 0; k < K; ++k) expected += double(*A.at(i, k)) * double(*B.at(k, j));
      worst = std::max(worst, std::abs(expected - c[i * ldc + j]) / (1.0 + std::sqrt(double(K))));
    }
    for (std::int64_t j = N; j < ldc; ++j)
      REQUIRE(c[i * ldc + j] == c_before[i * ldc + j]);  // padding untouched
  }
  CHECK(worst < 1e-5);
}

}  // namespace

TEST_CASE("gemm: every operand layout against a double product, with partial tiles") {
  for (bool at : {false, true})
    for (Layout bt : {Layout::rows, Layout::columns, Layout::spread})
      for (auto [M, N, K] :
           {std::array{1, 1, 1}, std::array{5, 17, 3}, std::array{6, 64, 128},
            std::array{13, 130, 129}, std::array{247, 384, 128}, std::array{250, 64, 300}})
        for (const Blocking& blocking : kBlockings)
          check_product(M, N, K, at, bt, false, false, blocking);
}

TEST_CASE("gemm: bias, accumulation, and K over several packed blocks") {
  check_product(31, 512, 128, false, Layout::columns, false, true);  // a Linear forward with bias
  check_product(253, 128, 512, false, Layout::rows, false, false);   // an input gradient
  check_product(128, 96, 700, true, Layout::rows, true, false);  // a weight gradient, accumulated
  check_product(7, 20, 0, false, Layout::rows, false, true);     // K = 0: C is the bias
  check_product(7, 20, 0, false, Layout::rows, true, false);     // K = 0 accumulating: C unchanged
}

TEST_CASE("gemm: the same bits with one thread and with several") {
  const int M = 700, N = 384, K = 256;
  const std::vector<float> a = random_values(std::size_t(M) * K, 5),
                           b = random_values(std::size_t(K) * N, 6);
  std::vector<float> c1(std::size_t(M) * N), c2(std::size_t(M) * N);
  const int threads = emergent::thread_count();
  emergent::set_thread_count(1);
  emergent::nn::gemm(M, N, K, {a.data(), K, 1}, {b.data(), 1, K}, c1.data(), N, false);
  emergent::set_thread_count(std::max(2, threads));
  emergent::nn::gemm(M, N, K, {a.data(), K, 1}, {b.data(), 1, K}, c2.data(), N, false);
  emergent::set_thread_count(threads);
  CHECK(c1 == c2);
}

TEST_CASE("gemm: the same bits with every blocking") {
  const int M = 301, N = 256, K = 700;  // a weight gradient: A read by columns, accumulated
  const std::vector<float> a = random_values(std::size_t(K) * M, 7),
                           b = random_values(std::size_t(K) * N, 8),
                           start = random_values(std::size_t(M) * N, 9);
  std::vector<float> first;
  for (const Blocking& blocking : kBlockings) {
    CAPTURE(blocking.kc);
    CAPTURE(blocking.b_in_place);
    std::vector<float> c = start;
    emergent::nn::gemm(M, N, K, {a.data(), 1, M}, {b.data(), N, 1}, c.data(), N, true, nullptr,
                       blocking);
    if (first.empty()) first = c;
    CHECK(c == first);
  }
}

TEST_CASE("gemm: the blocking each kind of CPU gets") {
  using emergent::cpu::Vendor;
  using emergent::nn::gemm_detail::blocking_for;
  const auto of = [](Vendor vendor, int l1d_kib) {
    emergent::cpu::Info info;
    info.vendor = vendor;
    info.l1d_bytes = l1d_kib * 1024;
    return blocking_for(info);
  };
  if (emergent::simd::kLanes == 16) {
    CHECK(of(Vendor::amd, 48).b_in_place);  // Zen 4, Zen 5
    CHECK(of(Vendor::amd, 48).kc == 256);
    CHECK_FALSE(of(Vendor::intel, 48).b_in_place);  // Sapphire / Emerald Rapids
    CHECK(of(Vendor::intel, 48).kc == 128);
    CHECK(of(Vendor::intel, 32).kc == 80);  // Skylake-SP, Ice Lake: the sliver in 2/3 of L1
    CHECK(of(Vendor::other, 8).kc == 64);   // never shallower than 64
  } else {
    CHECK_FALSE(of(Vendor::amd, 32).b_in_place);  // AVX2: always packed
    CHECK(of(Vendor::amd, 32).kc == 256);         // Zen 3: 16-wide slivers of 16 KiB
    CHECK(of(Vendor::intel, 48).kc == 256);
  }
}

TEST_CASE("gemm: EMERGENT_GEMM_KC and EMERGENT_GEMM_B override the blocking, or name the error") {
  using emergent::nn::gemm_detail::read_blocking;
  setenv("EMERGENT_GEMM_KC", "96", 1);
  setenv("EMERGENT_GEMM_B", "in-place", 1);
  CHECK(read_blocking().kc == 96);
  CHECK(read_blocking().b_in_place);
  setenv("EMERGENT_GEMM_KC", "9", 1);
  CHECK_THROWS_WITH(read_blocking(), "EMERGENT_GEMM_KC='9': expected an integer from 16 to 4096");
  setenv("EMERGENT_GEMM_KC", "128", 1);
  setenv("EMERGENT_GEMM_B", "transposed", 1);
  CHECK_THROWS_WITH(read_blocking(), "EMERGENT_GEMM_B='transposed': expected packed or in-place");
  unsetenv("EMERGENT_GEMM_KC");
  unsetenv("EMERGENT_GEMM_B");
}

#else
TEST_CASE("gemm: built without AVX-512 or AVX2, Linear layers use Eigen") {
  CHECK_FALSE(emergent::nn::kGemmKernel);
}
#endif
