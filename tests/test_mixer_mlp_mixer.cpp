// MlpMixer (causal token-mixing matrix) through the generic mixer suite, plus its own checks:
// the packed layout of the lower triangle, prefix consistency (a short sequence computes what its
// prefix computes in a longer one), the per-row init, and thread-count independence.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/core/parallel.hpp>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/model/model.hpp>
#include <emergent/reference/mlp_mixer.hpp>
#include <vector>

#include "mixer_golden.hpp"
#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;
using emergent::MlpMixer;

// D = 12: one column panel. max_len 150: lengths up to 130 cross two row-block boundaries (64).
constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 150};
// D = 300: forward and dX split into column panels (32, ..., 32, 12) from T = 128, and the weight
// gradient GEMM into batch chunks of 2048 / 300 = 6 sequences.
constexpr emergent::Shape kWide{
    .vocab = 3, .d_model = 300, .heads = 1, .layers = 1, .d_ff = 8, .max_len = 140};

template <class Real>
std::vector<Real> parameters_of(std::uint64_t seed) {
  return mixer_suite::cast<Real>(mixer_suite::mixer_parameters<MlpMixer, kShape>(seed, 0.1));
}

}  // namespace

TEST_CASE("mixer suite: MlpMixer") {
  mixer_suite::run_all<MlpMixer, kShape>(ref::MlpMixerReference{}, {1, 5, 17, 70, 130});
}

TEST_CASE("MlpMixer: column panels and batch chunks against the reference") {
  // (B, T): one chunk and 10 panels; 3 chunks (6 + 6 + 1) at a short length; both at once.
  for (auto [batch, length] : {std::pair{2, 130}, std::pair{13, 9}, std::pair{7, 131}}) {
    mixer_suite::check_against_reference<MlpMixer, kWide, double>(ref::MlpMixerReference{}, batch,
                                                                  length, 1e-10);
    mixer_suite::check_against_reference<MlpMixer, kWide, float>(ref::MlpMixerReference{}, batch,
                                                                 length, 2e-4);
  }
}

TEST_CASE("MlpMixer: the packed weight holds W[i, j] at i (i + 1) / 2 + j") {
  using Mixer = MlpMixer<kShape, double>;
  constexpr int D = kShape.d_model, T = 20;
  CHECK(Mixer::packed_size == 150 * 151 / 2);
  CHECK(Mixer::layout.specs[0].size() == std::size_t(Mixer::packed_size));
  CHECK(Mixer::layout.specs[1].size() == std::size_t(kShape.max_len));
  CHECK(Mixer::packed_index(0, 0) == 0);
  CHECK(Mixer::packed_index(1, 0) == 1);
  CHECK(Mixer::packed_index(1, 1) == 2);
  CHECK(Mixer::packed_index(2, 0) == 3);
  CHECK(Mixer::packed_index(3, 2) == 8);
  CHECK(Mixer::packed_index(149, 149) == std::size_t(Mixer::packed_size - 1));

  // Forward: with bias 0, W[k] = k + 1 and x = 1 at position j0 (every channel), 0 elsewhere,
  // y[i, :] = W[i, j0] for i >= j0 and 0 before.
  std::vector<double> params(Mixer::layout.total, 0.0);
  for (int k = 0; k < Mixer::packed_size; ++k) params[Mixer::weight + k] = k + 1;
  for (int j0 : {0, 3, T - 1}) {
    CAPTURE(j0);
    std::vector<double> x(T * D, 0.0);
    for (int d = 0; d < D; ++d) x[j0 * D + d] = 1.0;
    const auto run = mixer_suite::run_fast<Mixer>(params, x, {}, 1, T, false);
    for (int i = 0; i < T; ++i)
      for (int d = 0; d < D; ++d)
        CHECK(run.y[i * D + d] == (i >= j0 ? double(Mixer::packed_index(i, j0) + 1) : 0.0));
  }

  // Backward: dy = 1 at (i0, every channel) gives dW[i0, j] = sum_d x[j, d] at packed_index(i0, j),
  // db[i0] = D, and nothing anywhere else.
  const std::vector<double> x = mixer_suite::random_vector(T * D, 3);
  for (int i0 : {0, 7, T - 1}) {
    CAPTURE(i0);
    std::vector<double> dy(T * D, 0.0);
    for (int d = 0; d < D; ++d) dy[i0 * D + d] = 1.0;
    const auto run = mixer_suite::run_fast<Mixer>(params, x, dy, 1, T);
    std::vector<double> expected(Mixer::layout.total, 0.0);
    for (int j = 0; j <= i0; ++j)
      for (int d = 0; d < D; ++d)
        expected[Mixer::weight + Mixer::packed_index(i0, j)] += x[j * D + d];
    expected[Mixer::bias + i0] = D;
    CHECK(mixer_suite::relative_error<double, double>(run.grads, expected) < 1e-14);
  }
}

TEST_CASE("MlpMixer: a prefix computes what it computes inside a longer sequence") {
  auto check = [](auto zero, double tolerance) {
    using Real = decltype(zero);
    using Mixer = MlpMixer<kShape, Real>;
    constexpr int D = kShape.d_model, B = 2, Short = 10, Long = 40;
    const std::vector<Real> params = parameters_of<Real>(81);
    const std::vector<Real> x_long =
        mixer_suite::cast<Real>(mixer_suite::random_vector(B * Long * D, 82));
    std::vector<Real> dy_long =
        mixer_suite::cast<Real>(mixer_suite::random_vector(B * Long * D, 83));
    std::vector<Real> x_short(B * Short * D), dy_short(B * Short * D);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < Short * D; ++k) {
        x_short[b * Short * D + k] = x_long[b * Long * D + k];
        dy_short[b * Short * D + k] = dy_long[b * Long * D + k];
      }
    // With dy zero after the prefix, the long run's gradients are the short run's.
    for (int b = 0; b < B; ++b)
      std::fill(dy_long.begin() + b * Long * D + Short * D, dy_long.begin() + (b + 1) * Long * D,
                Real(0));
    const auto short_run = mixer_suite::run_fast<Mixer>(params, x_short, dy_short, B, Short);
    const auto long_run = mixer_suite::run_fast<Mixer>(params, x_long, dy_long, B, Long);
    std::vector<Real> y_prefix(B * Short * D), dx_prefix(B * Short * D);
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < Short * D; ++k) {
        y_prefix[b * Short * D + k] = long_run.y[b * Long * D + k];
        dx_prefix[b * Short * D + k] = long_run.dx[b * Long * D + k];
      }
    CHECK(mixer_suite::relative_error<Real, Real>(short_run.y, y_prefix) < tolerance);
    CHECK(mixer_suite::relative_error<Real, Real>(short_run.dx, dx_prefix) < tolerance);
    CHECK(mixer_suite::relative_error<Real, Real>(short_run.grads, long_run.grads) < tolerance);
    // Rows the short sequence never reached get no gradient at all.
    for (std::size_t k = Mixer::packed_index(Short, 0); k < std::size_t(Mixer::packed_size); ++k)
      REQUIRE(short_run.grads[Mixer::weight + k] == Real(0));
    for (int i = Short; i < kShape.max_len; ++i)
      REQUIRE(short_run.grads[Mixer::bias + i] == Real(0));
  };
  check(double(0), 1e-14);
  check(float(0), 1e-6);
}

TEST_CASE(
    "MlpMixer: init is PyTorch's Linear(i + 1, 1) default per row, weight decayed, bias not") {
  using Net = emergent::Model<MlpMixer, kShape, float>;
  using Mixer = Net::Mixer;
  CHECK(Mixer::layout.specs[0].weight_decay);
  CHECK(!Mixer::layout.specs[1].weight_decay);
  std::vector<float> all(Net::parameter_count);
  Net::init(all, 91);
  for (int layer = 0; layer < kShape.layers; ++layer) {
    const float* p = all.data() + Net::mixer_offset(layer);
    for (int i = 0; i < kShape.max_len; ++i) {
      CAPTURE(i);
      const float bound = 1.0f / std::sqrt(float(i + 1));
      float largest = std::abs(p[Mixer::bias + i]);
      REQUIRE(largest <= bound);
      for (int j = 0; j <= i; ++j) {
        const float w = p[Mixer::weight + Mixer::packed_index(i, j)];
        REQUIRE(std::abs(w) <= bound);
        largest = std::max(largest, std::abs(w));
      }
      // i + 2 uniform draws on [-bound, bound]: the largest is below bound/2 with chance 2^-(i+2).
      if (i >= 20) CHECK(largest > 0.5f * bound);
    }
  }
  // The padding after each tensor stays zero.
  const float* p = all.data() + Net::mixer_offset(0);
  for (std::size_t k = Mixer::packed_size; k < Mixer::bias; ++k) CHECK(p[k] == 0.0f);

  // Size at the paper's D = 128: independent of D, (T_max + 1)(T_max + 2)/2 - 1 plus padding.
  constexpr emergent::Shape linmap{
      .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
  constexpr emergent::Shape automaton{
      .vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 1024};
  CHECK(MlpMixer<linmap>::layout.total == 2144);
  CHECK(MlpMixer<automaton>::layout.total == 525824);
}

TEST_CASE("MlpMixer: results do not depend on the thread count") {
  using Mixer = MlpMixer<kWide, double>;
  constexpr int D = kWide.d_model, B = 13, T = 131;
  const std::vector<double> params = mixer_suite::mixer_parameters<MlpMixer, kWide>(101, 0.1);
  const std::vector<double> x = mixer_suite::random_vector(B * T * D, 102),
                            dy = mixer_suite::random_vector(B * T * D, 103);
  const int threads = emergent::thread_count();
  emergent::set_thread_count(1);
  const auto one = mixer_suite::run_fast<Mixer>(params, x, dy, B, T);
  emergent::set_thread_count(3);
  const auto three = mixer_suite::run_fast<Mixer>(params, x, dy, B, T);
  emergent::set_thread_count(threads);
  CHECK(one.y == three.y);
  CHECK(one.dx == three.dx);
  CHECK(one.grads == three.grads);
}

TEST_CASE("MLP-Mixer against PyTorch's masked matrix product") {
  mixer_golden::check_both<emergent::MlpMixer>("mlp_mixer.safetensors");
}

TEST_CASE("the mixer catalog's mlp_mixer line matches the type") {
  mixer_suite::check_catalog_line<emergent::MlpMixer>("mlp_mixer");
}
