// The checks every token mixer passes (tests/test_mixer_*.cpp run them, one file per mixer):
//
//   - reference: the fast mixer in float and in double against its Eigen double reference
//     (reference/<mixer>.hpp): y, dL/dx and every parameter gradient, several (B, T);
//   - finite differences: central differences of the fast double mixer, for x and parameters;
//   - causality: changing x at position t changes no output before t (a bidirectional mixer,
//     `causal = false`: changes outputs before and after t);
//   - batch independence: a sequence's output does not depend on the rest of its batch;
//   - accumulation: backward adds into the gradients and overwrites dx;
//   - decoding (RecurrentMixer only): step() token by token equals the parallel forward;
//   - the whole Model<Mixer, Shape> in double: finite differences through the loss;
//   - init: deterministic in the seed, finite, and every Init::custom tensor actually filled;
//   - (check_catalog_line, for the mixers a run can name) the line of settings/mixer_catalog.hpp
//     says what the type is.
//
// Parameters start from Model::init (so that gates, decays and step sizes are in their usual
// ranges) plus noise, so that tensors initialised to zero or one still get tested gradients.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/core/layout.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/model/model.hpp>
#include <emergent/reference/mixer.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "reference_checks.hpp"

namespace mixer_suite {

using emergent::Shape;
namespace ref = emergent::reference;

using reference_checks::relative_error;

inline std::vector<double> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = normal(rng);
  return v;
}

template <class Real>
std::vector<Real> cast(const std::vector<double>& v) {
  return std::vector<Real>(v.begin(), v.end());
}

// One layer's mixer parameters as Model::init makes them, plus N(0, noise) on every element
// that belongs to a tensor (the alignment padding stays zero).
template <template <Shape, class> class MixerT, Shape S>
std::vector<double> mixer_parameters(std::uint64_t seed, double noise) {
  using Net = emergent::Model<MixerT, S, double>;
  using Mixer = typename Net::Mixer;
  std::vector<double> all(Net::parameter_count);
  Net::init(all, seed);
  std::vector<double> p(all.begin() + Net::mixer_offset(0),
                        all.begin() + Net::mixer_offset(0) + Mixer::layout.total);
  const std::vector<double> n = random_vector(p.size(), seed ^ 0x5eedu, noise);
  for (std::size_t k = 0; k < Mixer::layout.count; ++k)
    for (std::size_t i = 0; i < Mixer::layout.specs[k].size(); ++i) {
      const std::size_t at = Mixer::layout.offsets[k] + i;
      p[at] += n[at];
    }
  return p;
}

using reference_checks::sequence;
using reference_checks::to_flat;
using reference_checks::to_named;

// One forward and backward of the fast mixer.
template <class Mixer>
struct FastRun {
  using Real = typename Mixer::Scalar;
  std::vector<Real> y, dx, grads;
};

template <class Mixer>
FastRun<Mixer> run_fast(std::span<const typename Mixer::Scalar> params,
                        std::span<const typename Mixer::Scalar> x,
                        std::span<const typename Mixer::Scalar> dy, int batch, int length,
                        bool backward = true) {
  using Real = typename Mixer::Scalar;
  constexpr int D = Mixer::D;
  emergent::Arena<Real> arena;
  typename Mixer::Activations acts{};
  Mixer::carve(arena, acts, batch, length);
  arena.allocate_and_rewind();
  Mixer::carve(arena, acts, batch, length);
  const emergent::MixerContext<Real> ctx{batch, length, nullptr, Real(0)};
  const std::size_t n = static_cast<std::size_t>(batch) * length * D;
  FastRun<Mixer> run;
  run.y.assign(n, Real(0));
  Mixer::forward(params.data(), x.data(), run.y.data(), acts, ctx);
  if (backward) {
    run.dx.assign(n, Real(0));
    run.grads.assign(Mixer::layout.total, Real(0));
    Mixer::backward(params.data(), run.grads.data(), x.data(), dy.data(), run.dx.data(), acts, ctx);
  }
  return run;
}

// The fast mixer (float or double) against the reference on B sequences of length T.
template <template <Shape, class> class MixerT, Shape S, class Real, class Reference>
void check_against_reference(const Reference& reference, int batch, int length, double tolerance) {
  using Mixer = MixerT<S, Real>;
  constexpr int D = S.d_model;
  CAPTURE(batch);
  CAPTURE(length);
  // Round the inputs to Real first, so that both sides compute from the same values.
  const std::vector<Real> params = cast<Real>(mixer_parameters<MixerT, S>(11, 0.1));
  const std::size_t n = static_cast<std::size_t>(batch) * length * D;
  const std::vector<Real> x = cast<Real>(random_vector(n, 12));
  const std::vector<Real> dy = cast<Real>(random_vector(n, 13));
  const FastRun<Mixer> fast = run_fast<Mixer>(params, x, dy, batch, length);
  reference_checks::check_mixer_close<Mixer, Real>(
      fast.y, fast.dx, fast.grads,
      reference_checks::reference_batch<Mixer, Real>(reference, params, x, dy, batch, length),
      tolerance);
}

// Central differences of L = sum(w * y) on the fast double mixer, for x and for up to
// `max_checks` parameter entries per tensor.
template <template <Shape, class> class MixerT, Shape S>
void check_finite_differences(int batch, int length, int max_checks = 24) {
  using Mixer = MixerT<S, double>;
  constexpr int D = S.d_model;
  std::vector<double> params = mixer_parameters<MixerT, S>(21, 0.1);
  const std::size_t n = static_cast<std::size_t>(batch) * length * D;
  std::vector<double> x = random_vector(n, 22);
  const std::vector<double> w = random_vector(n, 23);
  const FastRun<Mixer> analytic = run_fast<Mixer>(params, x, w, batch, length);
  auto loss = [&] {
    const FastRun<Mixer> r = run_fast<Mixer>(params, x, w, batch, length, false);
    double s = 0;
    for (std::size_t i = 0; i < n; ++i) s += w[i] * r.y[i];
    return s;
  };
  auto numeric = [&](double& value) {
    const double h = 1e-5 * std::max(1.0, std::abs(value)), saved = value;
    value = saved + h;
    const double up = loss();
    value = saved - h;
    const double down = loss();
    value = saved;
    return (up - down) / (2 * h);
  };
  auto close = [](double a, double b) {
    return std::abs(a - b) <= 1e-6 + 1e-5 * std::max(std::abs(a), std::abs(b));
  };
  std::mt19937 rng(24);
  for (int c = 0; c < max_checks; ++c) {
    const std::size_t i = rng() % n;
    CAPTURE(i);
    CHECK(close(analytic.dx[i], numeric(x[i])));
  }
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const std::string name(Mixer::layout.specs[k].name);
    CAPTURE(name);
    const std::size_t size = Mixer::layout.specs[k].size();
    for (int c = 0; c < std::min<int>(max_checks, static_cast<int>(size)); ++c) {
      const std::size_t i =
          Mixer::layout.offsets[k] + (size <= std::size_t(max_checks) ? c : rng() % size);
      CAPTURE(i);
      CHECK(close(analytic.grads[i], numeric(params[i])));
    }
  }
}

// Outputs before position t do not move when x at t changes; outputs at t do.
template <template <Shape, class> class MixerT, Shape S>
void check_causality(int length) {
  using Mixer = MixerT<S, double>;
  constexpr int D = S.d_model;
  const std::vector<double> params = mixer_parameters<MixerT, S>(31, 0.1);
  std::vector<double> x = random_vector(static_cast<std::size_t>(length) * D, 32);
  const std::vector<double> base = run_fast<Mixer>(params, x, {}, 1, length, false).y;
  for (int t : {0, length / 2, length - 1}) {
    std::vector<double> changed = x;
    for (int d = 0; d < D; ++d) changed[static_cast<std::size_t>(t) * D + d] += 1.0;
    const std::vector<double> y = run_fast<Mixer>(params, changed, {}, 1, length, false).y;
    CAPTURE(t);
    CHECK(std::equal(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(t) * D, base.begin()));
    double moved = 0;
    for (int d = 0; d < D; ++d)
      moved += std::abs(y[static_cast<std::size_t>(t) * D + d] -
                        base[static_cast<std::size_t>(t) * D + d]);
    CHECK(moved > 0);
  }
}

// A bidirectional mixer: changing x at t moves the outputs before t and after it.
template <template <Shape, class> class MixerT, Shape S>
void check_sees_both_sides(int length) {
  using Mixer = MixerT<S, double>;
  constexpr int D = S.d_model;
  const std::vector<double> params = mixer_parameters<MixerT, S>(33, 0.1);
  std::vector<double> x = random_vector(static_cast<std::size_t>(length) * D, 34);
  const std::vector<double> base = run_fast<Mixer>(params, x, {}, 1, length, false).y;
  const int t = length / 2;
  for (int d = 0; d < D; ++d) x[static_cast<std::size_t>(t) * D + d] += 1.0;
  const std::vector<double> y = run_fast<Mixer>(params, x, {}, 1, length, false).y;
  for (int row : {0, length - 1}) {
    double moved = 0;
    for (int d = 0; d < D; ++d)
      moved += std::abs(y[static_cast<std::size_t>(row) * D + d] -
                        base[static_cast<std::size_t>(row) * D + d]);
    CAPTURE(row);
    CHECK(moved > 0);
  }
}

// Each sequence of a batch computes as if alone; backward accumulates into grads.
template <template <Shape, class> class MixerT, Shape S>
void check_batch_and_accumulation(int length) {
  using Mixer = MixerT<S, double>;
  constexpr int D = S.d_model, B = 3;
  const std::vector<double> params = mixer_parameters<MixerT, S>(41, 0.1);
  const std::size_t per = static_cast<std::size_t>(length) * D;
  const std::vector<double> x = random_vector(B * per, 42), dy = random_vector(B * per, 43);
  const FastRun<Mixer> all = run_fast<Mixer>(params, x, dy, B, length);
  std::vector<double> summed(Mixer::layout.total, 0.0);
  for (int b = 0; b < B; ++b) {
    const std::span<const double> xb = std::span(x).subspan(b * per, per),
                                  dyb = std::span(dy).subspan(b * per, per);
    const FastRun<Mixer> one = run_fast<Mixer>(params, xb, dyb, 1, length);
    CHECK(relative_error<double, double>(std::span(all.y).subspan(b * per, per), one.y) < 1e-12);
    CHECK(relative_error<double, double>(std::span(all.dx).subspan(b * per, per), one.dx) < 1e-12);
    for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += one.grads[i];
  }
  CHECK(relative_error<double, double>(all.grads, summed) < 1e-12);

  // A second backward into the same gradient buffer doubles it; dx is overwritten.
  emergent::Arena<double> arena;
  typename Mixer::Activations acts{};
  Mixer::carve(arena, acts, B, length);
  arena.allocate_and_rewind();
  Mixer::carve(arena, acts, B, length);
  const emergent::MixerContext<double> ctx{B, length, nullptr, 0.0};
  std::vector<double> y(B * per), dx(B * per, 7.0), grads(Mixer::layout.total, 0.0);
  Mixer::forward(params.data(), x.data(), y.data(), acts, ctx);
  Mixer::backward(params.data(), grads.data(), x.data(), dy.data(), dx.data(), acts, ctx);
  std::fill(dx.begin(), dx.end(), 7.0);
  Mixer::backward(params.data(), grads.data(), x.data(), dy.data(), dx.data(), acts, ctx);
  CHECK(relative_error<double, double>(dx, all.dx) < 1e-12);
  std::vector<double> twice = all.grads;
  for (double& g : twice) g *= 2;
  CHECK(relative_error<double, double>(grads, twice) < 1e-12);
}

// step() over the tokens of one sequence equals the parallel forward.
template <template <Shape, class> class MixerT, Shape S, class Real>
void check_decoding(int length, double tolerance) {
  using Mixer = MixerT<S, Real>;
  static_assert(emergent::RecurrentMixer<Mixer, Real>);
  constexpr int D = S.d_model;
  const std::vector<Real> params = cast<Real>(mixer_parameters<MixerT, S>(51, 0.1));
  const std::vector<Real> x = cast<Real>(random_vector(static_cast<std::size_t>(length) * D, 52));
  const std::vector<Real> parallel = run_fast<Mixer>(params, x, {}, 1, length, false).y;
  typename Mixer::State state = Mixer::initial_state();
  std::vector<Real> decoded(static_cast<std::size_t>(length) * D);
  for (int t = 0; t < length; ++t)
    Mixer::step(params.data(), x.data() + static_cast<std::size_t>(t) * D,
                decoded.data() + static_cast<std::size_t>(t) * D, state);
  CHECK(relative_error<Real, Real>(decoded, parallel) < tolerance);
}

// A whole model in double (Net = Model<SomeMixer, S, double, ...>): central differences through
// the loss for a few entries of every tensor.
template <class Net>
void check_model_gradients(int batch, int length) {
  constexpr Shape S = Net::shape;
  std::vector<double> params(Net::parameter_count);
  Net::init(params, 61);
  const std::vector<double> noise = random_vector(params.size(), 62, 0.05);
  for (const auto& t : Net::tensors())
    for (std::size_t i = 0; i < t.size; ++i) params[t.offset + i] += noise[t.offset + i];
  const std::size_t n = static_cast<std::size_t>(batch) * length;
  std::vector<std::int32_t> inputs(n), targets(n);
  std::mt19937 rng(63);
  for (std::size_t i = 0; i < n; ++i) {
    inputs[i] = static_cast<std::int32_t>(rng() % S.vocab);
    targets[i] = static_cast<std::int32_t>(rng() % S.vocab);
  }
  std::vector<float> weights(length, 1.0f);
  weights[0] = 0.0f;
  emergent::ForwardInput in{batch, length, inputs, targets, weights, {}, 0.0f};
  typename Net::Workspace ws;
  Net::forward(params, in, ws);
  std::vector<double> grads(Net::parameter_count, 0.0);
  Net::backward(params, grads, ws);
  auto numeric = [&](std::size_t i) {
    const double saved = params[i], h = 1e-5;
    params[i] = saved + h;
    const double up = Net::forward(params, in, ws);
    params[i] = saved - h;
    const double down = Net::forward(params, in, ws);
    params[i] = saved;
    return (up - down) / (2 * h);
  };
  for (const auto& t : Net::tensors()) {
    CAPTURE(t.name);
    for (int c = 0; c < 3; ++c) {
      const std::size_t i = t.offset + rng() % t.size;
      const double num = numeric(i);
      CHECK(std::abs(grads[i] - num) <= 1e-7 + 1e-5 * std::max(std::abs(num), std::abs(grads[i])));
    }
  }
}

// Model::init: the same seed gives the same bits, every value is finite, and no Init::custom
// tensor is left all zero.
template <template <Shape, class> class MixerT, Shape S>
void check_init() {
  using Net = emergent::Model<MixerT, S, float>;
  using Mixer = typename Net::Mixer;
  std::vector<float> a(Net::parameter_count), b(Net::parameter_count), c(Net::parameter_count);
  Net::init(a, 71);
  Net::init(b, 71);
  Net::init(c, 72);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::all_of(a.begin(), a.end(), [](float v) { return std::isfinite(v); }));
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    if (Mixer::layout.specs[k].init != emergent::Init::custom) continue;
    CAPTURE(std::string(Mixer::layout.specs[k].name));
    const float* t = a.data() + Net::mixer_offset(0) + Mixer::layout.offsets[k];
    CHECK(std::any_of(t, t + Mixer::layout.specs[k].size(), [](float v) { return v != 0.0f; }));
  }
}

// Everything above, for one mixer and its reference. `lengths`: sequence lengths to try
// (include ones that are not a multiple of any chunk size the mixer uses).
template <template <Shape, class> class MixerT, Shape S, class Reference>
void run_all(const Reference& reference, std::initializer_list<int> lengths) {
  for (int T : lengths) {
    SUBCASE(("reference T=" + std::to_string(T)).c_str()) {
      check_against_reference<MixerT, S, double>(reference, 2, T, 1e-10);
      check_against_reference<MixerT, S, float>(reference, 2, T, 2e-4);
    }
  }
  const int T = *std::max_element(lengths.begin(), lengths.end());
  SUBCASE("finite differences") { check_finite_differences<MixerT, S>(2, std::min(T, 9)); }
  if constexpr (emergent::is_causal<MixerT<S, double>>()) {
    SUBCASE("causality") { check_causality<MixerT, S>(T); }
  } else {
    SUBCASE("sees both sides") { check_sees_both_sides<MixerT, S>(T); }
  }
  SUBCASE("batch independence and accumulation") { check_batch_and_accumulation<MixerT, S>(T); }
  if constexpr (emergent::RecurrentMixer<MixerT<S, double>, double>) {
    SUBCASE("decoding equals the parallel forward") {
      check_decoding<MixerT, S, double>(T, 1e-10);
      check_decoding<MixerT, S, float>(T, 1e-4);
    }
  }
  SUBCASE("model gradients") {
    check_model_gradients<emergent::Model<MixerT, S, double>>(2, std::min(T, 7));
  }
  SUBCASE("init") { check_init<MixerT, S>(); }
}

// The catalog's line for `name` (settings/mixer_catalog.hpp) against the type: its name, whether
// it takes the attention bias, and uses_heads. Attention splits its width into the heads, so its
// parameter count is the same at any count; another mixer reads heads exactly when its parameter
// count changes with them.
template <template <Shape, class> class MixerT>
void check_catalog_line(const std::string& name) {
  constexpr Shape two{.vocab = 2, .d_model = 16, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 8};
  constexpr Shape four{
      .vocab = 2, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 16, .max_len = 8};
  using Mixer = MixerT<two, float>;
  const emergent::MixerInfo& info = emergent::find_mixer(name, "test");
  CHECK(std::string(Mixer::name) == name);
  CHECK(info.takes_attention_bias == emergent::KeepsAttention<Mixer>);
  if (!emergent::KeepsAttention<Mixer>)
    CHECK(info.uses_heads == (Mixer::layout.total != MixerT<four, float>::layout.total));
}

}  // namespace mixer_suite
