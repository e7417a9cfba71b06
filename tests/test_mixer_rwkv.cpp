// RWKV-4 time mixing (Rwkv) and channel mixing (RwkvChannelMix) through the generic mixer suite
// (tests/mixer_suite.hpp), each against its Eigen reference (reference/rwkv.hpp, where WKV is
// differentiated as a per-channel causal softmax, independently of the fast running-max
// recurrence), plus: several channel blocks, WKV at keys whose exp overflows float, and
// RWKV-LM's init.
//
// Until Model takes the channel mixer as a template argument, RwkvChannelMix is tested in the
// token-mixer slot ("model gradients" then runs it followed by the GELU MLP).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>
#include <emergent/model/model.hpp>
#include <emergent/reference/rwkv.hpp>
#include <random>
#include <span>
#include <vector>

#include "mixer_golden.hpp"
#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;
using emergent::Rwkv;
using emergent::RwkvChannelMix;

// heads is ignored by both mixers; d_ff = 20 is not a multiple of D.
constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 20, .max_len = 80};
// D = 40: one full block of 32 channels and a partial one of 8 in the WKV loops.
constexpr emergent::Shape kWide{
    .vocab = 5, .d_model = 40, .heads = 1, .layers = 1, .d_ff = 24, .max_len = 32};

// One forward (and optionally backward) of a mixer, keeping its activations.
template <class Mixer>
struct Run {
  using Real = typename Mixer::Scalar;
  emergent::Arena<Real> arena;
  typename Mixer::Activations acts{};
  std::vector<Real> y, dx, grads;

  Run(const std::vector<Real>& params, const std::vector<Real>& x, int batch, int length) {
    Mixer::carve(arena, acts, batch, length);
    arena.allocate_and_rewind();
    Mixer::carve(arena, acts, batch, length);
    const emergent::MixerContext<Real> ctx{batch, length, nullptr, Real(0)};
    y.assign(x.size(), Real(0));
    Mixer::forward(params.data(), x.data(), y.data(), acts, ctx);
    std::vector<Real> dy(x.size());
    std::mt19937 rng(5);
    std::normal_distribution<double> normal;
    for (Real& v : dy) v = Real(normal(rng));
    dx.assign(x.size(), Real(0));
    grads.assign(Mixer::layout.total, Real(0));
    Mixer::backward(params.data(), grads.data(), x.data(), dy.data(), dx.data(), acts, ctx);
  }
};

template <class Real>
bool all_finite(const std::vector<Real>& v) {
  return std::all_of(v.begin(), v.end(), [](Real a) { return std::isfinite(a); });
}

// WKV straight from its definition (research notes A3.3), no max trick, in double.
double direct_wkv(const std::vector<double>& k, const std::vector<double>& v, int t, double w,
                  double u) {
  double numerator = std::exp(u + k[t]) * v[t], denominator = std::exp(u + k[t]);
  for (int i = 0; i < t; ++i) {
    const double weight = std::exp(-double(t - 1 - i) * w + k[i]);
    numerator += weight * v[i];
    denominator += weight;
  }
  return numerator / denominator;
}

// Time-mixing parameters that make k = scale * x and v = x exactly per channel: mix_k = mix_v = 1,
// key = scale * I, value = I, output = I; decays and bonuses from RWKV-LM's init.
template <class Real>
std::vector<Real> identity_parameters(double key_scale) {
  using Mixer = Rwkv<kShape, Real>;
  constexpr int D = kShape.d_model;
  std::vector<double> p = mixer_suite::mixer_parameters<Rwkv, kShape>(81, 0.0);
  for (int c = 0; c < D; ++c) {
    p[Mixer::time_mix_k + c] = 1.0;
    p[Mixer::time_mix_v + c] = 1.0;
    for (int j = 0; j < D; ++j) {
      p[Mixer::key_weight + c * D + j] = c == j ? key_scale : 0.0;
      p[Mixer::value_weight + c * D + j] = c == j ? 1.0 : 0.0;
      p[Mixer::output_weight + c * D + j] = c == j ? 1.0 : 0.0;
      p[Mixer::receptance_weight + c * D + j] = 0.1 * std::sin(double(c * D + j));
    }
  }
  return std::vector<Real>(p.begin(), p.end());
}

}  // namespace

TEST_CASE("mixer suite: Rwkv (time mixing)") {
  static_assert(emergent::TokenMixer<Rwkv<kShape, float>> &&
                emergent::RecurrentMixer<Rwkv<kShape, float>>);
  mixer_suite::run_all<Rwkv, kShape>(ref::RwkvReference{}, {1, 2, 5, 17, 70});
}

TEST_CASE("mixer suite: RwkvChannelMix") {
  static_assert(emergent::TokenMixer<RwkvChannelMix<kShape, float>> &&
                emergent::RecurrentMixer<RwkvChannelMix<kShape, float>>);
  mixer_suite::run_all<RwkvChannelMix, kShape>(ref::RwkvChannelMixReference{}, {1, 2, 5, 17, 70});
}

TEST_CASE("Rwkv: several channel blocks, one partial") {
  mixer_suite::check_against_reference<Rwkv, kWide, double>(ref::RwkvReference{}, 3, 11, 1e-10);
  mixer_suite::check_against_reference<Rwkv, kWide, float>(ref::RwkvReference{}, 3, 11, 2e-4);
  mixer_suite::check_against_reference<RwkvChannelMix, kWide, double>(
      ref::RwkvChannelMixReference{}, 3, 11, 1e-10);
  mixer_suite::check_decoding<Rwkv, kWide, double>(11, 1e-10);
}

TEST_CASE("Rwkv: WKV stays finite for keys whose exp overflows float") {
  constexpr int D = kShape.d_model, B = 2, T = 40;
  // Keys of magnitude 75..225 with random signs, so that logits jump by up to 450 between
  // tokens: exp(+-225) is inf / 0 in float, and the naive ratio inf/inf or 0/0.
  REQUIRE(std::isinf(std::exp(200.0f)));
  REQUIRE(std::exp(-200.0f) == 0.0f);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> magnitude(0.5, 1.5);
  std::vector<double> x(static_cast<std::size_t>(B) * T * D);
  for (double& v : x) v = (rng() % 2 ? 1.0 : -1.0) * magnitude(rng);
  const double key_scale = 150.0;

  const std::vector<float> params = identity_parameters<float>(key_scale);
  const std::vector<float> xf(x.begin(), x.end());
  Run<Rwkv<kShape, float>> fast(params, xf, B, T);
  CHECK(all_finite(fast.y));
  CHECK(all_finite(fast.dx));
  CHECK(all_finite(fast.grads));

  // The float WKV equals the direct formula, evaluated in double on the same k and v.
  double diff = 0, norm = 0;
  for (int b = 0; b < B; ++b)
    for (int c = 0; c < D; ++c) {
      std::vector<double> k(T), v(T);
      for (int t = 0; t < T; ++t) {
        const std::size_t at = (static_cast<std::size_t>(b) * T + t) * D + c;
        k[t] = fast.acts.k[at];
        v[t] = fast.acts.v[at];
      }
      const double w = std::exp(double(params[Rwkv<kShape, float>::time_decay + c]));
      const double u = params[Rwkv<kShape, float>::time_first + c];
      for (int t = 0; t < T; ++t) {
        const double expected = direct_wkv(k, v, t, w, u);
        REQUIRE(std::isfinite(expected));
        const double d = fast.acts.wkv[(static_cast<std::size_t>(b) * T + t) * D + c] - expected;
        diff += d * d;
        norm += expected * expected;
      }
    }
  CHECK(std::sqrt(diff / norm) < 1e-5);

  // Forward and backward against the reference (which subtracts the largest logit), in float
  // and in double.
  {
    const std::vector<double> pd = identity_parameters<double>(key_scale);
    Run<Rwkv<kShape, double>> d(pd, x, B, T);
    CHECK(all_finite(d.y));
    std::vector<double> dy(x.size());
    std::mt19937 dy_rng(5);  // the same dy as Run
    std::normal_distribution<double> normal;
    for (double& v : dy) v = normal(dy_rng);
    const auto [y, dx, grads] = reference_checks::reference_batch<Rwkv<kShape, double>, double>(
        ref::RwkvReference{}, pd, x, dy, B, T);
    using mixer_suite::relative_error;
    CHECK(relative_error<double, double>(d.y, y) < 1e-10);
    CHECK(relative_error<double, double>(d.dx, dx) < 1e-10);
    CHECK(relative_error<double, double>(d.grads, grads) < 1e-10);
    CHECK(relative_error<float, double>(fast.y, y) < 1e-4);
    CHECK(relative_error<float, double>(fast.dx, dx) < 1e-3);
    CHECK(relative_error<float, double>(fast.grads, grads) < 1e-3);
  }

  // Token-by-token decoding stays finite and equal too.
  typename Rwkv<kShape, float>::State state = Rwkv<kShape, float>::initial_state();
  std::vector<float> decoded(static_cast<std::size_t>(T) * D);
  for (int t = 0; t < T; ++t)
    Rwkv<kShape, float>::step(params.data(), xf.data() + t * D, decoded.data() + t * D, state);
  CHECK(all_finite(decoded));
  CHECK(mixer_suite::relative_error<float, float>(
            decoded, std::span<const float>(fast.y).subspan(0, T * D)) < 1e-5);
}

TEST_CASE("Rwkv, RwkvChannelMix: RWKV-LM v4neo init") {
  constexpr int D = kShape.d_model, L = kShape.layers;
  using TimeNet = emergent::Model<Rwkv, kShape, double>;
  using Time = TimeNet::Mixer;
  std::vector<double> p(TimeNet::parameter_count);
  TimeNet::init(p, 3);
  for (int l = 0; l < L; ++l) {
    CAPTURE(l);
    const double* m = p.data() + TimeNet::mixer_offset(l);
    const double ratio_0_to_1 = double(l) / (L - 1), ratio_1_to_almost0 = 1.0 - double(l) / L;
    for (int i = 0; i < D; ++i) {
      CAPTURE(i);
      const double x = double(i) / D;
      CHECK(m[Time::time_decay + i] ==
            doctest::Approx(-5 + 8 * std::pow(i / (D - 1.0), 0.7 + 1.3 * ratio_0_to_1)));
      CHECK(m[Time::time_first + i] == doctest::Approx(std::log(0.3) + 0.5 * ((i + 1) % 3 - 1)));
      CHECK(m[Time::time_mix_k + i] == doctest::Approx(std::pow(x, ratio_1_to_almost0)));
      CHECK(m[Time::time_mix_v + i] ==
            doctest::Approx(std::pow(x, ratio_1_to_almost0) + 0.3 * ratio_0_to_1));
      CHECK(m[Time::time_mix_r + i] == doctest::Approx(std::pow(x, 0.5 * ratio_1_to_almost0)));
    }
    // The decay rates run from e^-5 (channel 0) to e^3 (last channel).
    CHECK(m[Time::time_decay] == doctest::Approx(-5.0));
    CHECK(m[Time::time_decay + D - 1] == doctest::Approx(3.0));
    for (const char* zero : {"key.weight", "receptance.weight", "output.weight"}) {
      const double* t = m + emergent::offset_of(Time::layout, zero);
      CHECK(std::all_of(t, t + D * D, [](double v) { return v == 0.0; }));
    }
    const double* value = m + Time::value_weight;
    CHECK(std::any_of(value, value + D * D, [](double v) { return v != 0.0; }));
    CHECK(std::all_of(value, value + D * D,
                      [](double v) { return std::abs(v) <= 1 / std::sqrt(double(D)); }));
  }

  using ChannelNet = emergent::Model<RwkvChannelMix, kShape, double>;
  using Channel = ChannelNet::Mixer;
  std::vector<double> q(ChannelNet::parameter_count);
  ChannelNet::init(q, 3);
  for (int l = 0; l < L; ++l) {
    const double* m = q.data() + ChannelNet::mixer_offset(l);
    for (int i = 0; i < D; ++i) {
      const double expected = std::pow(double(i) / D, 1.0 - double(l) / L);
      CHECK(m[Channel::time_mix_k + i] == doctest::Approx(expected));
      CHECK(m[Channel::time_mix_r + i] == doctest::Approx(expected));
    }
    CHECK(std::all_of(m + Channel::receptance_weight, m + Channel::receptance_weight + D * D,
                      [](double v) { return v == 0.0; }));
    CHECK(std::all_of(m + Channel::value_weight, m + Channel::value_weight + D * kShape.d_ff,
                      [](double v) { return v == 0.0; }));
  }

  // One layer (RWKV-LM divides by L - 1 = 0 there): ratio_0_to_1 is taken as 0.
  using OneLayer = emergent::Model<Rwkv, kWide, float>;
  std::vector<float> one(OneLayer::parameter_count);
  OneLayer::init(one, 3);
  CHECK(all_finite(one));
  const float* m = one.data() + OneLayer::mixer_offset(0);
  CHECK(m[OneLayer::Mixer::time_decay + 1] == doctest::Approx(-5 + 8 * std::pow(1.0 / 39, 0.7)));
  CHECK(m[OneLayer::Mixer::time_mix_v + 20] == doctest::Approx(0.5));
}

TEST_CASE("RWKV-4 block: Model<Rwkv, S, double, RwkvChannelMix> gradients by finite differences") {
  // The whole RWKV model: time mixing in the mixer slot and channel mixing in place of the MLP,
  // both initialised by their own init (through Model::init) plus the suite's noise.
  mixer_suite::check_model_gradients<
      emergent::Model<Rwkv, kShape, double, emergent::RwkvChannelMix>>(2, 7);
}

TEST_CASE("RWKV-4 time mixing against transformers' RwkvSelfAttention") {
  mixer_golden::check_both<emergent::Rwkv>("rwkv.safetensors");
}

TEST_CASE("RWKV-4 channel mixing against transformers' RwkvFeedForward") {
  mixer_golden::check_both<emergent::RwkvChannelMix>("rwkv_channel.safetensors");
}

TEST_CASE("the mixer catalog's rwkv line matches the type") {
  mixer_suite::check_catalog_line<emergent::Rwkv>("rwkv");
}
