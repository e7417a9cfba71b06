// BidirectionalAttention through the generic mixer suite (tests/mixer_suite.hpp) against
// reference::dot_attention with every key visible; then what the suite does not cover: padding
// (a sequence of n real tokens inside a batch padded to T computes as if alone, in y, dx and the
// parameter gradients), the per-head bias c_h P and dL/dc_h against the reference and against
// central differences. tests/test_encoder.cpp checks a whole encoder against PyTorch (fixtures of
// tests/golden/make_encoder_golden.py).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/mixers/bidirectional_attention.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <vector>

#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;
using ref::DotAttentionReference;

constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};

template <class Real>
using Mixer = emergent::BidirectionalAttention<kShape, Real>;

// One forward and backward with padding lengths and a per-head bias.
struct PaddedRun {
  std::vector<double> y, dx, grads, bias_grad;
};

PaddedRun run_padded(const std::vector<double>& params, const std::vector<double>& x,
                     const std::vector<double>& dy, int batch, int length,
                     const std::vector<int>& lengths, const std::vector<double>& pattern,
                     double strength, const std::vector<double>& head_strength) {
  using M = Mixer<double>;
  emergent::Arena<double> arena;
  typename M::Activations acts{};
  M::carve(arena, acts, batch, length);
  arena.allocate_and_rewind();
  M::carve(arena, acts, batch, length);
  PaddedRun r{std::vector<double>(x.size()), std::vector<double>(x.size()),
              std::vector<double>(M::layout.total, 0.0), std::vector<double>(kShape.heads, 0.0)};
  emergent::MixerContext<double> ctx{batch, length, pattern.empty() ? nullptr : pattern.data(),
                                     strength};
  ctx.lengths = lengths.data();
  ctx.head_bias_strength = head_strength.empty() ? nullptr : head_strength.data();
  ctx.bias_strength_grad = r.bias_grad.data();
  M::forward(params.data(), x.data(), r.y.data(), acts, ctx);
  M::backward(params.data(), r.grads.data(), x.data(), dy.data(), r.dx.data(), acts, ctx);
  return r;
}

}  // namespace

TEST_CASE("mixer suite: BidirectionalAttention") {
  mixer_suite::run_all<emergent::BidirectionalAttention, kShape>(
      DotAttentionReference{kShape.heads, ref::Matrix(), 0.0, {false, -1}}, {1, 5, 17, 70});
}

TEST_CASE("BidirectionalAttention: a padded sequence computes as if alone, with the bias") {
  constexpr int D = kShape.d_model, H = kShape.heads, B = 3, T = 19;
  const std::vector<int> lengths = {19, 7, 12};
  const std::vector<double> params =
      mixer_suite::mixer_parameters<emergent::BidirectionalAttention, kShape>(91, 0.1);
  const std::vector<double> x = mixer_suite::random_vector(B * T * D, 92);
  std::vector<double> dy = mixer_suite::random_vector(B * T * D, 93);
  for (int b = 0; b < B; ++b)  // nothing reads padding positions
    std::fill(dy.begin() + (b * T + lengths[b]) * D, dy.begin() + (b + 1) * T * D, 0.0);
  std::vector<double> pattern(T * T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) pattern[i * T + j] = -std::abs(i - j);  // a proximity profile
  const double strength = 0.3;
  const std::vector<double> head_strength = {0.0, 0.5, -0.2};
  const PaddedRun fast = run_padded(params, x, dy, B, T, lengths, pattern, strength, head_strength);

  const ref::MixerParameters named = mixer_suite::to_named<Mixer<double>, double>(params);
  std::vector<double> grads(Mixer<double>::layout.total, 0.0), bias_grad(H, 0.0);
  for (int b = 0; b < B; ++b) {
    const int n = lengths[b];
    CAPTURE(n);
    ref::Matrix xb(n, D), dyb(n, D), pb(n, n);
    for (int i = 0; i < n * D; ++i)
      xb.data()[i] = x[b * T * D + i], dyb.data()[i] = dy[b * T * D + i];
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) pb(i, j) = pattern[i * T + j];
    // Per head h, the reference of strength + head_strength[h] alone.
    ref::Matrix y_sum = ref::Matrix::Zero(n, D), dx_sum = ref::Matrix::Zero(n, D);
    for (int h = 0; h < H; ++h) {
      const DotAttentionReference reference{H, pb, strength + head_strength[h], {false, -1}};
      const ref::Matrix qkv =
          ref::linear_forward(xb, named.at("qkv.weight"), named.at("qkv.bias").row(0).transpose());
      const ref::DotAttentionOutput att =
          ref::dot_attention_forward(qkv, H, pb, reference.strength, reference.visible);
      // Head h of the fast run used c_h: its output columns and its bias gradient.
      for (int i = 0; i < n; ++i)
        for (int d = h * (D / H); d < (h + 1) * (D / H); ++d) y_sum(i, d) = att.out(i, d);
      ref::Vector unused = ref::Vector::Zero(D);
      ref::MixerParameters tmp = ref::zeros_like(named);
      const ref::Matrix d_o =
          ref::linear_backward(dyb, att.out, named.at("out.weight"), tmp["out.weight"], unused);
      bias_grad[h] += ref::dot_attention_bias_gradient(d_o, qkv, H, att.probabilities, pb)[h];
    }
    // y of the whole mixer: the out projection of the per-head outputs.
    const ref::Matrix yb =
        ref::linear_forward(y_sum, named.at("out.weight"), named.at("out.bias").row(0).transpose());
    double worst = 0, scale = 0;
    for (int i = 0; i < n; ++i)
      for (int d = 0; d < D; ++d) {
        worst = std::max(worst, std::abs(fast.y[(b * T + i) * D + d] - yb(i, d)));
        scale = std::max(scale, std::abs(yb(i, d)));
      }
    CHECK(worst < 1e-12 * std::max(1.0, scale));
  }
  for (int h = 0; h < H; ++h)
    CHECK(fast.bias_grad[h] == doctest::Approx(bias_grad[h]).epsilon(1e-9));

  // dx and the parameter gradients of each padded sequence equal those of the sequence alone.
  std::vector<double> summed(Mixer<double>::layout.total, 0.0);
  for (int b = 0; b < B; ++b) {
    const int n = lengths[b];
    std::vector<double> xb(x.begin() + b * T * D, x.begin() + (b * T + n) * D),
        dyb(dy.begin() + b * T * D, dy.begin() + (b * T + n) * D), pb(n * n);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) pb[i * n + j] = pattern[i * T + j];
    const PaddedRun alone = run_padded(params, xb, dyb, 1, n, {n}, pb, strength, head_strength);
    for (int i = 0; i < n * D; ++i) {
      CHECK(fast.dx[b * T * D + i] == doctest::Approx(alone.dx[i]).epsilon(1e-10));
      CHECK(fast.y[b * T * D + i] == doctest::Approx(alone.y[i]).epsilon(1e-10));
    }
    for (std::size_t i = 0; i < summed.size(); ++i) summed[i] += alone.grads[i];
  }
  CHECK(mixer_suite::relative_error<double, double>(fast.grads, summed) < 1e-12);
}

TEST_CASE("BidirectionalAttention: dL/dc per head is the derivative along the bias pattern") {
  constexpr int D = kShape.d_model, H = kShape.heads, B = 2, T = 9;
  const std::vector<int> lengths = {9, 6};
  const std::vector<double> params =
      mixer_suite::mixer_parameters<emergent::BidirectionalAttention, kShape>(95, 0.1);
  const std::vector<double> x = mixer_suite::random_vector(B * T * D, 96);
  std::vector<double> w = mixer_suite::random_vector(B * T * D, 97);
  for (int b = 0; b < B; ++b)  // the loss reads real rows only
    std::fill(w.begin() + (b * T + lengths[b]) * D, w.begin() + (b + 1) * T * D, 0.0);
  std::vector<double> pattern(T * T);
  for (int i = 0; i < T; ++i)
    for (int j = 0; j < T; ++j) pattern[i * T + j] = std::exp(-std::abs(i - j) / 2.0);
  // At c = 0 (the blindness measurement) and away from it.
  for (double strength : {0.0, 0.8}) {
    CAPTURE(strength);
    const PaddedRun analytic = run_padded(params, x, w, B, T, lengths, pattern, strength, {});
    for (int h = 0; h < H; ++h) {
      auto loss = [&](double delta) {
        std::vector<double> per_head(H, 0.0);
        per_head[h] = delta;
        const PaddedRun r = run_padded(params, x, w, B, T, lengths, pattern, strength, per_head);
        double s = 0;
        for (int b = 0; b < B; ++b)
          for (int i = 0; i < lengths[b] * D; ++i) s += w[b * T * D + i] * r.y[b * T * D + i];
        return s;
      };
      const double h_step = 1e-5, numeric = (loss(h_step) - loss(-h_step)) / (2 * h_step);
      CAPTURE(h);
      CHECK(analytic.bias_grad[h] == doctest::Approx(numeric).epsilon(1e-6));
    }
  }
}
