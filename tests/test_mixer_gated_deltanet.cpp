// GatedDeltaNet through the generic mixer suite (tests/mixer_suite.hpp) against its plain
// recurrence reference (reference/gated_deltanet.hpp), plus checks of its own:
//   - each form of the recurrence (mixers/gated_deltanet_recurrent.hpp, _chunked.hpp) alone:
//     the layer built on it (GatedDeltaNetMixer<S, Real, Form>) against the reference, output
//     and every gradient, whatever form GatedDeltaNet picks;
//   - the chunked form equals the recurrent form for lengths that are not a multiple of the
//     chunk, chunk sizes 1..64, and extreme gates (alpha near 0 and 1, exactly 0; beta near 0
//     and 1), in double and in float, final state included;
//   - the sequential backward of the recurrence against central differences at those gates,
//     and independent of the chunk size it recomputes states from;
//   - the whole layer against the reference with decays forced to alpha ~ 0 and alpha ~ 1.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/mixers/gated_deltanet_chunked.hpp>
#include <emergent/mixers/gated_deltanet_recurrent.hpp>
#include <emergent/reference/gated_deltanet.hpp>
#include <random>
#include <vector>

#include "mixer_golden.hpp"
#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;

constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};

// Inputs of one head's recurrence, with keys l2-normalised as the layer makes them.
template <class Real>
struct HeadInputs {
  int T = 0, K = 0;
  std::vector<Real> q, k, v, g, beta;
};

enum class Gates {
  random,
  alpha_near_one,
  alpha_near_zero,
  alpha_zero,
  beta_near_zero,
  beta_near_one,
  mixed
};

template <class Real>
HeadInputs<Real> head_inputs(int T, int K, Gates gates, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.0, 1.0);
  HeadInputs<Real> in{T, K, {}, {}, {}, {}, {}};
  for (int t = 0; t < T; ++t) {
    std::vector<double> q(K), k(K);
    double qn = 0, kn = 0;
    for (int i = 0; i < K; ++i) {
      q[i] = normal(rng);
      k[i] = normal(rng);
      qn += q[i] * q[i];
      kn += k[i] * k[i];
    }
    for (int i = 0; i < K; ++i) {
      in.q.push_back(Real(q[i] / std::sqrt(qn) / std::sqrt(double(K))));
      in.k.push_back(Real(k[i] / std::sqrt(kn)));
      in.v.push_back(Real(normal(rng)));
    }
    double g = -0.5 * uniform(rng), beta = uniform(rng);
    switch (gates) {
      case Gates::random:
        break;
      case Gates::alpha_near_one:
        g = -1e-7 * uniform(rng);
        break;
      case Gates::alpha_near_zero:
        g = -30 - 10 * uniform(rng);
        break;
      case Gates::alpha_zero:
        g = -1000;
        break;  // the layer's clamp: exp(g) == 0
      case Gates::beta_near_zero:
        beta = 1e-7 * uniform(rng);
        break;
      case Gates::beta_near_one:
        beta = 1 - 1e-7 * uniform(rng);
        break;
      case Gates::mixed: {
        const double pick = uniform(rng);
        g = pick < 0.25 ? -1e-7 : pick < 0.5 ? -40.0 : pick < 0.6 ? -1000.0 : -3 * uniform(rng);
        beta = uniform(rng) < 0.5 ? 1 - 1e-7 : uniform(rng);
      } break;
    }
    in.g.push_back(Real(g));
    in.beta.push_back(Real(beta));
  }
  return in;
}

template <class Real, int K>
void check_chunked_equals_recurrent(Gates gates, double tolerance) {
  using Chunked = emergent::GatedDeltaChunked<Real, K>;
  for (int T : {1, 7, 33, 100}) {
    const HeadInputs<Real> in = head_inputs<Real>(T, K, gates, 100 + T);
    // The recurrence in double, from the same (rounded) inputs.
    auto wide = [](const std::vector<Real>& a) { return std::vector<double>(a.begin(), a.end()); };
    std::vector<double> o_rec(T * K), h_rec(K * K, 0.0);
    emergent::GatedDeltaRecurrent<double, K>::forward(
        wide(in.q).data(), wide(in.k).data(), wide(in.v).data(), wide(in.g).data(),
        wide(in.beta).data(), T, 1, o_rec.data(), h_rec.data(), nullptr);
    for (int chunk : {1, 3, 16, 32, 64}) {
      CAPTURE(T);
      CAPTURE(chunk);
      std::vector<Real> o(T * K), h(K * K, Real(0)), states(((T + chunk - 1) / chunk) * K * K);
      Chunked::forward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                       o.data(), h.data(), states.data());
      CHECK(mixer_suite::relative_error<Real, double>(o, o_rec) < tolerance);
      CHECK(mixer_suite::relative_error<Real, double>(h, h_rec) < tolerance);
      CHECK(std::all_of(states.begin(), states.begin() + K * K, [](Real s) { return s == 0; }));
    }
  }
}

// L = sum(w * o) through the shared backward against central differences in double.
template <int K>
void check_rule_gradients(Gates gates, int T, int chunk) {
  using Rule = emergent::GatedDeltaChunked<double, K>;
  HeadInputs<double> in = head_inputs<double>(T, K, gates, 7 + T);
  const std::vector<double> w = mixer_suite::random_vector(static_cast<std::size_t>(T) * K, 8);
  auto loss = [&] {
    std::vector<double> o(T * K), h(K * K, 0.0);
    Rule::forward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                  o.data(), h.data(), nullptr);
    double s = 0;
    for (int i = 0; i < T * K; ++i) s += w[i] * o[i];
    return s;
  };
  std::vector<double> o(T * K), h(K * K, 0.0), states(((T + chunk - 1) / chunk) * K * K);
  Rule::forward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                o.data(), h.data(), states.data());
  std::vector<double> dq(T * K), dk(T * K), dv(T * K), dg(T), dbeta(T);
  Rule::backward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                 states.data(), w.data(), dq.data(), dk.data(), dv.data(), dg.data(), dbeta.data());
  auto check = [&](std::vector<double>& values, const std::vector<double>& analytic,
                   const char* what) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      const double saved = values[i], step = 1e-6;
      values[i] = saved + step;
      const double up = loss();
      values[i] = saved - step;
      const double down = loss();
      values[i] = saved;
      const double numeric = (up - down) / (2 * step);
      CAPTURE(what);
      CAPTURE(i);
      CHECK(std::abs(analytic[i] - numeric) <= 1e-7 + 1e-6 * std::abs(numeric));
    }
  };
  check(in.q, dq, "q");
  check(in.k, dk, "k");
  check(in.v, dv, "v");
  check(in.beta, dbeta, "beta");
  check(in.g, dg, "g");
}

// The layer against the reference with every decay forced to one extreme.
void check_layer_at_extreme_decay(double a_log_value, double dt_bias_value, double tolerance) {
  using Mixer = emergent::GatedDeltaNet<kShape, double>;
  constexpr int D = kShape.d_model, B = 2, T = 37;
  std::vector<double> params =
      mixer_suite::mixer_parameters<emergent::GatedDeltaNet, kShape>(81, 0.1);
  for (int h = 0; h < kShape.heads; ++h) {
    params[Mixer::a_log + h] = a_log_value;
    params[Mixer::dt_bias + h] = dt_bias_value;
  }
  const std::vector<double> x = mixer_suite::random_vector(B * T * D, 82),
                            dy = mixer_suite::random_vector(B * T * D, 83);
  const auto fast = mixer_suite::run_fast<Mixer>(params, x, dy, B, T);
  const reference_checks::Expected e = reference_checks::reference_batch<Mixer, double>(
      ref::GatedDeltaNetReference{kShape.heads}, params, x, dy, B, T);
  reference_checks::check_close<double, double>("y", fast.y, e.y, tolerance);
  reference_checks::check_close<double, double>("dx", fast.dx, e.dx, tolerance);
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const std::string name(Mixer::layout.specs[k].name);
    CAPTURE(name);
    const std::size_t offset = Mixer::layout.offsets[k], size = Mixer::layout.specs[k].size();
    const std::span<const double> expected = std::span<const double>(e.grads).subspan(offset, size);
    const std::span<const double> actual =
        std::span<const double>(fast.grads).subspan(offset, size);
    // At alpha == 0 exactly, the decay's gradients vanish on both sides.
    double norm = 0;
    for (double v : expected) norm += v * v;
    if (norm == 0)
      CHECK(
          std::all_of(actual.begin(), actual.end(), [](double a) { return std::abs(a) < 1e-300; }));
    else
      CHECK(mixer_suite::relative_error<double, double>(actual, expected) < tolerance);
  }
}

// The layer on one form of the recurrence, whatever GatedDeltaNet picks.
template <template <class, int> class Form>
struct LayerOn {
  template <emergent::Shape S, class Real>
  using Mixer = emergent::GatedDeltaNetMixer<S, Real, Form>;
};

// d_head 16, the training shapes' head width.
constexpr emergent::Shape kHead16{
    .vocab = 5, .d_model = 32, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 40};

// The layer on Form against the reference, in double and float, d_head 4 and 16, at lengths
// inside one chunk of 16 and across chunks: output, dL/dx and every parameter gradient.
template <template <class, int> class Form>
void check_form_in_layer() {
  for (int T : {1, 5, 17, 37}) {
    mixer_suite::check_against_reference<LayerOn<Form>::template Mixer, kShape, double>(
        ref::GatedDeltaNetReference{kShape.heads}, 2, T, 1e-10);
    mixer_suite::check_against_reference<LayerOn<Form>::template Mixer, kShape, float>(
        ref::GatedDeltaNetReference{kShape.heads}, 2, T, 2e-4);
    mixer_suite::check_against_reference<LayerOn<Form>::template Mixer, kHead16, double>(
        ref::GatedDeltaNetReference{kHead16.heads}, 2, T, 1e-10);
    mixer_suite::check_against_reference<LayerOn<Form>::template Mixer, kHead16, float>(
        ref::GatedDeltaNetReference{kHead16.heads}, 2, T, 2e-4);
  }
}

}  // namespace

TEST_CASE("mixer suite: GatedDeltaNet") {
  // Lengths around the chunk of 16 (GatedDeltaNet::kChunk): one token, a partial chunk, one
  // past one and two chunks, four chunks and a remainder.
  mixer_suite::run_all<emergent::GatedDeltaNet, kShape>(ref::GatedDeltaNetReference{kShape.heads},
                                                        {1, 5, 17, 33, 70});
}

TEST_CASE("GatedDeltaNet: other head widths against the reference") {
  // Dh = 16 (the training shapes' head width: other SIMD paths) and Dh = 3 (no full packet).
  constexpr emergent::Shape wide{
      .vocab = 5, .d_model = 32, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 40};
  constexpr emergent::Shape odd{
      .vocab = 5, .d_model = 9, .heads = 3, .layers = 1, .d_ff = 16, .max_len = 40};
  for (int T : {3, 37}) {
    mixer_suite::check_against_reference<emergent::GatedDeltaNet, wide, double>(
        ref::GatedDeltaNetReference{2}, 2, T, 1e-10);
    mixer_suite::check_against_reference<emergent::GatedDeltaNet, wide, float>(
        ref::GatedDeltaNetReference{2}, 2, T, 2e-4);
    mixer_suite::check_against_reference<emergent::GatedDeltaNet, odd, double>(
        ref::GatedDeltaNetReference{3}, 2, T, 1e-10);
    mixer_suite::check_against_reference<emergent::GatedDeltaNet, odd, float>(
        ref::GatedDeltaNetReference{3}, 2, T, 2e-4);
  }
  mixer_suite::check_decoding<emergent::GatedDeltaNet, wide, double>(37, 1e-10);
  mixer_suite::check_decoding<emergent::GatedDeltaNet, odd, double>(37, 1e-10);
}

TEST_CASE("gated delta rule form: recurrent, alone in the layer against the reference") {
  // GatedDeltaNet never runs it over a whole sequence (only step() by step()): every shape here
  // is one where the selector would not choose it.
  check_form_in_layer<emergent::GatedDeltaRecurrent>();
}

TEST_CASE("gated delta rule form: chunked, alone in the layer against the reference") {
  check_form_in_layer<emergent::GatedDeltaChunked>();
}

TEST_CASE("gated delta rule: the chunked form equals the recurrent form") {
  for (Gates gates :
       {Gates::random, Gates::alpha_near_one, Gates::alpha_near_zero, Gates::alpha_zero,
        Gates::beta_near_zero, Gates::beta_near_one, Gates::mixed}) {
    CAPTURE(static_cast<int>(gates));
    check_chunked_equals_recurrent<double, 4>(gates, 1e-12);
    check_chunked_equals_recurrent<double, 16>(gates, 1e-12);
    check_chunked_equals_recurrent<float, 16>(gates, 2e-6);  // float rounding, nothing more
  }
}

TEST_CASE("gated delta rule: backward against finite differences, at extreme gates") {
  for (Gates gates :
       {Gates::random, Gates::alpha_near_one, Gates::alpha_near_zero, Gates::alpha_zero,
        Gates::beta_near_zero, Gates::beta_near_one, Gates::mixed}) {
    CAPTURE(static_cast<int>(gates));
    check_rule_gradients<4>(gates, 11, 4);
    check_rule_gradients<3>(gates, 9, 16);
  }
}

TEST_CASE("gated delta rule: the backward does not depend on the chunk it recomputes from") {
  constexpr int K = 8, T = 45;
  using Rule = emergent::GatedDeltaChunked<double, K>;
  const HeadInputs<double> in = head_inputs<double>(T, K, Gates::mixed, 91);
  const std::vector<double> d_o = mixer_suite::random_vector(T * K, 92);
  std::vector<double> first;
  for (int chunk : {1, 5, 32, 64}) {
    CAPTURE(chunk);
    std::vector<double> o(T * K), h(K * K, 0.0), states(((T + chunk - 1) / chunk) * K * K);
    Rule::forward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                  o.data(), h.data(), states.data());
    std::vector<double> all(3 * T * K + 2 * T);
    double* p = all.data();
    Rule::backward(in.q.data(), in.k.data(), in.v.data(), in.g.data(), in.beta.data(), T, chunk,
                   states.data(), d_o.data(), p, p + T * K, p + 2 * T * K, p + 3 * T * K,
                   p + 3 * T * K + T);
    if (first.empty())
      first = all;
    else
      CHECK(mixer_suite::relative_error<double, double>(all, first) < 1e-12);
  }
}

TEST_CASE("GatedDeltaNet: the layer matches the reference with decays near 0 and near 1") {
  check_layer_at_extreme_decay(8.0, 3.0, 1e-10);     // g ~ -9000, on the clamp: alpha == 0 exactly
  check_layer_at_extreme_decay(5.0, 3.0, 1e-10);     // g ~ -450: alpha ~ 1e-196 (0 in float)
  check_layer_at_extreme_decay(2.0, -2.0, 1e-10);    // g ~ -0.9
  check_layer_at_extreme_decay(-12.0, -8.0, 1e-10);  // g ~ -2e-9: alpha ~ 1
}

TEST_CASE("GatedDeltaNet: init follows FLA's layer") {
  using Net = emergent::Model<emergent::GatedDeltaNet, kShape, double>;
  using Mixer = Net::Mixer;
  std::vector<double> params(Net::parameter_count);
  Net::init(params, 5);
  for (int l = 0; l < kShape.layers; ++l) {
    const double* p = params.data() + Net::mixer_offset(l);
    for (int h = 0; h < kShape.heads; ++h) {
      const double A = std::exp(p[Mixer::a_log + h]);
      CHECK(A > 0);
      CHECK(A < 16);
      const double dt = emergent::nn::softplus(p[Mixer::dt_bias + h]);
      CHECK(dt >= 1e-3 * (1 - 1e-9));
      CHECK(dt <= 1e-1 * (1 + 1e-9));
    }
    for (int c = 0; c < kShape.d_head(); ++c) CHECK(p[Mixer::norm_weight + c] == 1.0);
    for (int i = 0; i < kShape.d_model * Mixer::kConv; ++i)
      CHECK(std::abs(p[Mixer::q_conv + i]) <= 0.5);
  }
  // Per-layer draws differ (they are indexed by position in the whole buffer).
  CHECK(params[Net::mixer_offset(0) + Mixer::a_log] != params[Net::mixer_offset(1) + Mixer::a_log]);
}

TEST_CASE(
    "Gated DeltaNet against transformers' gated delta rule and gated RMSNorm in FLA's layer") {
  mixer_golden::check_both<emergent::GatedDeltaNet>("gated_deltanet.safetensors", 10);
}

TEST_CASE("the mixer catalog's gated_deltanet line matches the type") {
  mixer_suite::check_catalog_line<emergent::GatedDeltaNet>("gated_deltanet");
}
