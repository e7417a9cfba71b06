// Mamba through the generic mixer suite (tests/mixer_suite.hpp) against reference/mamba.hpp,
// with the defaults and with other (d_state, expand, d_conv), plus Mamba's own checks: the init
// values, extreme step sizes, and thread-count independence.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/core/parallel.hpp>
#include <emergent/mixers/mamba.hpp>
#include <emergent/reference/mamba.hpp>
#include <vector>

#include "mixer_golden.hpp"
#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;
using emergent::Shape;

// d_inner 24 (channel blocks of 8), dt_rank 1.
constexpr Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};
// d_model 20: dt_rank 2; with expand 1, d_state 5, d_conv 1 (no conv window): d_inner 20, blocks
// of 4.
constexpr Shape kOddShape{
    .vocab = 3, .d_model = 20, .heads = 4, .layers = 1, .d_ff = 8, .max_len = 40};
// expand 3, d_state 3, d_conv 2: d_inner 30, blocks of 2.
constexpr Shape kNarrowShape{
    .vocab = 4, .d_model = 10, .heads = 2, .layers = 1, .d_ff = 8, .max_len = 40};

template <Shape S, class Real>
using MambaNoConv = emergent::MambaMixer<S, Real, 5, 1, 1>;
template <Shape S, class Real>
using MambaNarrow = emergent::MambaMixer<S, Real, 3, 3, 2>;

double softplus(double v) { return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v)); }

}  // namespace

TEST_CASE("mixer suite: Mamba") {
  // The scan keeps a state every 16 tokens: 16, 17, 33 and 70 cross those chunk boundaries.
  mixer_suite::run_all<emergent::Mamba, kShape>(ref::MambaReference{}, {1, 5, 16, 17, 33, 70});
}

TEST_CASE("mixer suite: Mamba with d_state 5, expand 1, d_conv 1") {
  mixer_suite::run_all<MambaNoConv, kOddShape>(ref::MambaReference{}, {1, 3, 19});
}

TEST_CASE("mixer suite: Mamba with d_state 3, expand 3, d_conv 2") {
  mixer_suite::run_all<MambaNarrow, kNarrowShape>(ref::MambaReference{}, {2, 18});
}

TEST_CASE("Mamba sizes and parameter count") {
  constexpr Shape linmap{
      .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
  using M = emergent::Mamba<linmap, float>;
  static_assert(M::E == 256 && M::N == 16 && M::K == 4 && M::R == 8 && M::P == 40);
  // in 65536 + conv 1024 + 256 + x_proj 10240 + dt_proj 2048 + 256 + A_log 4096 + D 256 + out 32768
  static_assert(M::layout.total == 116480);
  static_assert(emergent::TokenMixer<M> && emergent::RecurrentMixer<M> &&
                emergent::MixerWithInit<M>);
  static_assert(emergent::Mamba<kShape, double>::R == 1 &&
                emergent::Mamba<kShape, double>::E == 24);
  for (const emergent::TensorSpec& spec : M::layout.specs) {
    const std::string_view n = spec.name;
    CAPTURE(std::string(n));
    const bool decayed = n == "in_proj.weight" || n == "conv1d.weight" || n == "x_proj.weight" ||
                         n == "dt_proj.weight" || n == "out_proj.weight";
    CHECK(spec.weight_decay == decayed);
  }
}

TEST_CASE("Mamba init: A_log rows are log(1..N), softplus(dt_bias) in [dt_min, dt_max], D = 1") {
  using Net = emergent::Model<emergent::Mamba, kShape, double>;
  using M = Net::Mixer;
  std::vector<double> params(Net::parameter_count);
  Net::init(params, 2024);
  for (int layer = 0; layer < kShape.layers; ++layer) {
    const double* p = params.data() + Net::mixer_offset(layer);
    for (int e = 0; e < M::E; ++e) {
      for (int n = 0; n < M::N; ++n)
        CHECK(p[M::a_log + e * M::N + n] == doctest::Approx(std::log(n + 1.0)).epsilon(1e-15));
      const double dt = softplus(p[M::dt_bias + e]);
      CHECK(dt >= M::dt_min * (1 - 1e-12));
      CHECK(dt <= M::dt_max * (1 + 1e-12));
      CHECK(p[M::d_skip + e] == 1.0);
      for (int r = 0; r < M::R; ++r)
        CHECK(std::abs(p[M::dt_weight + e * M::R + r]) <= 1.0 / std::sqrt(double(M::R)));
    }
    // dt is log-uniform: across channels it spreads over most of the decade range.
    double lo = 1, hi = 0;
    for (int e = 0; e < M::E; ++e) {
      lo = std::min(lo, softplus(p[M::dt_bias + e]));
      hi = std::max(hi, softplus(p[M::dt_bias + e]));
    }
    CHECK(lo < 0.005);
    CHECK(hi > 0.02);
  }
  // The two layers draw different step sizes.
  CHECK(params[Net::mixer_offset(0) + M::dt_bias] != params[Net::mixer_offset(1) + M::dt_bias]);
}

TEST_CASE("Mamba: extreme step sizes stay finite and match the reference") {
  using M = emergent::Mamba<kShape, float>;
  constexpr int B = 2, T = 37, D = kShape.d_model;
  // dt_bias +-40: delta ~ 40 (every decay exp(-40 n) underflows to 0) or ~ 4e-18 (h barely
  // moves); A_log up to 6 makes A as large as -400.
  for (double bias : {40.0, -40.0}) {
    CAPTURE(bias);
    std::vector<double> pd = mixer_suite::mixer_parameters<emergent::Mamba, kShape>(81, 0.1);
    for (int e = 0; e < M::E; ++e) {
      pd[M::dt_bias + e] = bias;
      pd[M::a_log + e * M::N + M::N - 1] = 6.0;
    }
    const std::vector<float> params = mixer_suite::cast<float>(pd);
    const std::vector<float> x =
        mixer_suite::cast<float>(mixer_suite::random_vector(B * T * D, 82, 3.0));
    const std::vector<float> dy =
        mixer_suite::cast<float>(mixer_suite::random_vector(B * T * D, 83));
    const auto fast = mixer_suite::run_fast<M>(params, x, dy, B, T);
    auto finite = [](const std::vector<float>& v) {
      return std::all_of(v.begin(), v.end(), [](float f) { return std::isfinite(f); });
    };
    CHECK(finite(fast.y));
    CHECK(finite(fast.dx));
    CHECK(finite(fast.grads));
    const reference_checks::Expected e =
        reference_checks::reference_batch<M, float>(ref::MambaReference{}, params, x, dy, B, T);
    reference_checks::check_close<float, double>("y", fast.y, e.y, 1e-4);
    reference_checks::check_close<float, double>("dx", fast.dx, e.dx, 1e-3);
  }
}

TEST_CASE("Mamba: results do not depend on the thread count") {
  using M = emergent::Mamba<kShape, float>;
  constexpr int B = 3, T = 41, D = kShape.d_model;
  const std::vector<float> params =
      mixer_suite::cast<float>(mixer_suite::mixer_parameters<emergent::Mamba, kShape>(91, 0.1));
  const std::vector<float> x = mixer_suite::cast<float>(mixer_suite::random_vector(B * T * D, 92));
  const std::vector<float> dy = mixer_suite::cast<float>(mixer_suite::random_vector(B * T * D, 93));
  const int threads = emergent::thread_count();
  emergent::set_thread_count(1);
  const auto one = mixer_suite::run_fast<M>(params, x, dy, B, T);
  emergent::set_thread_count(std::max(2, threads));
  const auto many = mixer_suite::run_fast<M>(params, x, dy, B, T);
  emergent::set_thread_count(threads);
  CHECK(one.y == many.y);
  CHECK(one.dx == many.dx);
  CHECK(one.grads == many.grads);
}

TEST_CASE("Mamba against transformers' MambaMixer (slow_forward)") {
  mixer_golden::check_both<emergent::Mamba>("mamba.safetensors");
}

TEST_CASE("the mixer catalog's mamba line matches the type") {
  mixer_suite::check_catalog_line<emergent::Mamba>("mamba");
}
