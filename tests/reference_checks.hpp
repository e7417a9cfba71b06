// The one helper that compares fast code against the double-precision reference
// (include/emergent/reference/), for every test that does:
//
//   - relative_error, check_close: ||actual - expected|| / ||expected|| of two buffers, and the
//     CHECK of it with the name of what is compared;
//   - reference_batch, check_mixer_close: a mixer's reference (reference::<Mixer>Reference, one
//     sequence at a time) over a batch [B*T, D], in the fast mixer's layouts (to_named, to_flat,
//     sequence convert), and the CHECKs of a fast run's y, dx and every parameter tensor's
//     gradient against it (tests/mixer_suite.hpp and the mixers' own tests);
//   - check_attention_form: ONE form of causal attention (mixers/causal_attention_*.hpp,
//     short_/causal_attention_long.hpp), alone, on one head: the probabilities (exactly 0 above
//     the diagonal, every entry written), the output and dq, dk, dv against
//     reference::dot_attention_forward / _backward, and the same bits on a second run. The form
//     is called directly, whatever select_causal_attention would pick for that (Real, d_head, T).
//
// (The forms of the gated delta rule are checked inside the layer, GatedDeltaNetMixer<S, Real,
// Form>, against reference::GatedDeltaNetReference by mixer_suite::check_against_reference: the
// reference has no separate head-level recurrence.)
#pragma once

#include <doctest/doctest.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace reference_checks {

namespace ref = emergent::reference;

// ||actual - expected|| / ||expected|| (the plain norm of the difference when expected is 0).
template <class A, class E>
double relative_error(std::span<const A> actual, std::span<const E> expected) {
  REQUIRE(actual.size() == expected.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double d = double(actual[i]) - double(expected[i]);
    diff += d * d;
    norm += double(expected[i]) * double(expected[i]);
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// CHECK(relative_error(actual, expected) < tolerance), saying what was compared.
template <class A, class E>
void check_close(std::string_view what, std::span<const A> actual, std::span<const E> expected,
                 double tolerance) {
  CAPTURE(what);
  const double error = relative_error(actual, expected);
  CAPTURE(error);
  CHECK(error < tolerance);
}

template <class A>
void check_close(std::string_view what, std::span<const A> actual, const ref::Matrix& expected,
                 double tolerance) {
  check_close(what, actual, std::span<const double>(expected.data(), expected.size()), tolerance);
}

// Flat buffer <-> named reference tensors, through the mixer's layout.
template <class Mixer, class Real>
ref::MixerParameters to_named(std::span<const Real> flat) {
  ref::MixerParameters out;
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const emergent::TensorSpec& spec = Mixer::layout.specs[k];
    ref::Matrix m(spec.rows == 0 ? 1 : spec.rows, spec.cols);
    for (std::size_t i = 0; i < spec.size(); ++i)
      m.data()[i] = double(flat[Mixer::layout.offsets[k] + i]);
    out[std::string(spec.name)] = m;
  }
  return out;
}

template <class Mixer>
std::vector<double> to_flat(const ref::MixerParameters& named) {
  std::vector<double> flat(Mixer::layout.total, 0.0);
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const emergent::TensorSpec& spec = Mixer::layout.specs[k];
    const auto it = named.find(std::string(spec.name));
    REQUIRE_MESSAGE(it != named.end(), "reference has no tensor ", std::string(spec.name));
    REQUIRE(static_cast<std::size_t>(it->second.size()) == spec.size());
    for (std::size_t i = 0; i < spec.size(); ++i)
      flat[Mixer::layout.offsets[k] + i] = it->second.data()[i];
  }
  return flat;
}

// Rows b*T .. b*T+T-1 of a [B*T, D] buffer as a reference matrix.
template <class Real>
ref::Matrix sequence(std::span<const Real> v, int b, int T, int D) {
  ref::Matrix m(T, D);
  for (int i = 0; i < T * D; ++i) m.data()[i] = double(v[static_cast<std::size_t>(b) * T * D + i]);
  return m;
}

// What the reference gives for a batch: y and dx [B*T, D], and the parameter gradients summed
// over the sequences, in the mixer's flat layout.
struct Expected {
  std::vector<double> y, dx, grads;
};

// `reference` (forward(named, x), backward(named, x, dy) of one sequence) on each sequence of x
// and dy [B*T, D], with the mixer's parameters `params` (its flat layout).
template <class Mixer, class Real, class Reference>
Expected reference_batch(const Reference& reference, std::span<const Real> params,
                         std::span<const Real> x, std::span<const Real> dy, int batch, int length) {
  constexpr int D = Mixer::D;
  const ref::MixerParameters named = to_named<Mixer, Real>(params);
  Expected e{{}, {}, std::vector<double>(Mixer::layout.total, 0.0)};
  for (int b = 0; b < batch; ++b) {
    const ref::Matrix xb = sequence<Real>(x, b, length, D);
    const ref::Matrix yb = reference.forward(named, xb);
    const ref::MixerGradients g = reference.backward(named, xb, sequence<Real>(dy, b, length, D));
    REQUIRE(yb.rows() == length);
    REQUIRE(yb.cols() == D);
    e.y.insert(e.y.end(), yb.data(), yb.data() + length * D);
    e.dx.insert(e.dx.end(), g.dx.data(), g.dx.data() + length * D);
    const std::vector<double> gb = to_flat<Mixer>(g.dparams);
    for (std::size_t i = 0; i < gb.size(); ++i) e.grads[i] += gb[i];
  }
  return e;
}

// A fast run's y, dx and the gradient of each parameter tensor against the reference's.
template <class Mixer, class Real>
void check_mixer_close(std::span<const Real> y, std::span<const Real> dx,
                       std::span<const Real> grads, const Expected& expected, double tolerance) {
  check_close<Real, double>("y", y, expected.y, tolerance);
  check_close<Real, double>("dx", dx, expected.dx, tolerance);
  for (std::size_t k = 0; k < Mixer::layout.count; ++k) {
    const std::size_t offset = Mixer::layout.offsets[k], size = Mixer::layout.specs[k].size();
    check_close<Real, double>(Mixer::layout.specs[k].name, grads.subspan(offset, size),
                              std::span<const double>(expected.grads).subspan(offset, size),
                              tolerance);
  }
}

// One head of causal attention: its inputs, and where the form writes.
struct AttentionCase {
  int length = 1;
  bool with_bias = false;
  double bias_strength = 0.7;
  double spread = 1.0;  // q, k, v ~ N(0, spread^2); d_out and the bias pattern ~ N(0, 1)
  int att_offset = 0;   // floats into a 64-byte aligned buffer (0: rows may take streaming stores)
  unsigned seed = 1;
};

// Form<Real, Dh> (CausalAttentionDirect, CausalAttentionBlocked, CausalAttentionShort,
// CausalAttentionLong) alone against the reference; tolerance on the relative error of each of
// att, out, dq, dk, dv.
template <template <class, int> class FormT, class Real, int Dh>
void check_attention_form(const AttentionCase& c, double tolerance) {
  using Form = FormT<Real, Dh>;
  static_assert(Form::available);
  const int T = c.length;
  const std::int64_t stride = Dh + 5;  // rows of out and d_out: wider than the head, as in a mixer
  const std::string_view form = Form::name;
  CAPTURE(form);
  CAPTURE(T);
  CAPTURE(Dh);
  CAPTURE(c.with_bias);
  CAPTURE(c.att_offset);
  std::mt19937_64 rng(c.seed * 1000003u + 17u * T + Dh);
  std::normal_distribution<double> normal(0.0, 1.0);
  auto draw = [&](std::size_t n, double spread) {
    std::vector<Real> v(n);
    for (Real& x : v) x = Real(spread * normal(rng));
    return v;
  };
  const std::size_t head = static_cast<std::size_t>(T) * Dh;
  const std::vector<Real> q = draw(head, c.spread), k = draw(head, c.spread),
                          v = draw(head, c.spread);
  const std::vector<Real> d_out = draw(static_cast<std::size_t>(T) * stride, 1.0);
  const std::vector<Real> bias = draw(static_cast<std::size_t>(T) * T, 1.0);
  std::vector<Real> kt(head), vt(head);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < Dh; ++d) kt[d * T + t] = k[t * Dh + d], vt[d * T + t] = v[t * Dh + d];
  const Real strength = c.with_bias ? Real(c.bias_strength) : Real(0);

  struct Run {
    std::vector<Real, Eigen::aligned_allocator<Real>> att;
    std::vector<Real> out, dq, dk, dv;
  };
  auto run = [&] {
    Run r{decltype(Run::att)(static_cast<std::size_t>(T) * T + c.att_offset, Real(-1)),
          std::vector<Real>(static_cast<std::size_t>(T) * stride, Real(0)),
          std::vector<Real>(head, Real(-1)), std::vector<Real>(head, Real(-1)),
          std::vector<Real>(head, Real(-1))};
    const emergent::attention_head::HeadInputs<Real> in{q.data(), k.data(), v.data(),
                                                        Form::transposed ? kt.data() : nullptr,
                                                        Form::transposed ? vt.data() : nullptr};
    Real* att = r.att.data() + c.att_offset;
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    Form::forward(in, att, r.out.data(), stride, T, scale, c.with_bias ? bias.data() : nullptr,
                  strength);
    Form::backward(in, att, d_out.data(), stride, r.dq.data(), r.dk.data(), r.dv.data(), T, scale);
    return r;
  };
  const Run fast = run();

  // The reference on qkv [T, 3 d_head] of one head.
  ref::Matrix qkv(T, 3 * Dh), d_o(T, Dh), pattern;
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < Dh; ++d) {
      qkv(t, d) = q[t * Dh + d];
      qkv(t, Dh + d) = k[t * Dh + d];
      qkv(t, 2 * Dh + d) = v[t * Dh + d];
      d_o(t, d) = d_out[t * stride + d];
    }
  if (c.with_bias) {
    pattern.resize(T, T);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j < T; ++j) pattern(i, j) = bias[static_cast<std::size_t>(i) * T + j];
  }
  const ref::DotAttentionOutput expected =
      ref::dot_attention_forward(qkv, 1, pattern, double(strength));
  const ref::Matrix d_qkv = ref::dot_attention_backward(d_o, qkv, 1, expected.probabilities);

  // Row-major copies of the reference's column-major matrices, in the form's layouts.
  std::vector<double> att(static_cast<std::size_t>(T) * T), out(head), dq(head), dk(head), dv(head);
  std::vector<Real> fast_out(head);
  for (int i = 0; i < T; ++i) {
    for (int j = 0; j < T; ++j)
      att[static_cast<std::size_t>(i) * T + j] = expected.probabilities[0](i, j);
    for (int d = 0; d < Dh; ++d) {
      out[i * Dh + d] = expected.out(i, d);
      dq[i * Dh + d] = d_qkv(i, d);
      dk[i * Dh + d] = d_qkv(i, Dh + d);
      dv[i * Dh + d] = d_qkv(i, 2 * Dh + d);
      fast_out[i * Dh + d] = fast.out[i * stride + d];
    }
  }
  const std::span<const Real> fast_att(fast.att.data() + c.att_offset, att.size());
  check_close<Real, double>("att", fast_att, att, tolerance);
  check_close<Real, double>("out", fast_out, out, tolerance);
  check_close<Real, double>("dq", fast.dq, dq, tolerance);
  check_close<Real, double>("dk", fast.dk, dk, tolerance);
  check_close<Real, double>("dv", fast.dv, dv, tolerance);

  // Every entry above the diagonal written as exactly 0 (the buffer started at -1), nothing
  // before the rows, and nothing in out's rows past the head.
  std::size_t nonzero_above = 0, outside = 0;
  for (int i = 0; i < T; ++i)
    for (int j = i + 1; j < T; ++j)
      nonzero_above += fast_att[static_cast<std::size_t>(i) * T + j] != 0;
  for (int i = 0; i < c.att_offset; ++i) outside += fast.att[i] != Real(-1);
  for (int i = 0; i < T; ++i)
    for (std::int64_t d = Dh; d < stride; ++d) outside += fast.out[i * stride + d] != 0;
  CHECK(nonzero_above == 0);
  CHECK(outside == 0);

  const Run again = run();
  CHECK(std::equal(again.att.begin(), again.att.end(), fast.att.begin()));
  CHECK(again.out == fast.out);
  CHECK(again.dq == fast.dq);
  CHECK(again.dk == fast.dk);
  CHECK(again.dv == fast.dv);
}

}  // namespace reference_checks
