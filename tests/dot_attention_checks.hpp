// Checks of DotAttention shared by tests/test_mixer_dot_attention.cpp (portable build: the direct
// and Eigen paths) and tests/native/test_causal_attention_long.cpp (this machine's build: the
// AVX-512 kernels): the d_head 16 shape and a check of the float mixer with the bias pattern.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/linear.hpp>
#include <random>
#include <vector>

#include "mixer_suite.hpp"

namespace dot_attention_checks {

namespace ref = emergent::reference;

// d_head 16, the training shapes' head width, up to T = 260 (the portable and the native suites
// both run DotAttention on it).
inline constexpr emergent::Shape kHead16{
    .vocab = 5, .d_model = 32, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 260};

// The mixer reference (reference/dot_attention.hpp), by its old name here.
using emergent::reference::DotAttentionReference;

// The float mixer on B sequences of length T with the bias c P (P random 0/1) against the
// reference: y, dx, every parameter gradient and every probability; att exactly 0 above the
// diagonal, rows summing to 1; a second run gives the same bits.
template <emergent::Shape S>
void check_mixer_with_bias(int batch, int length, double strength) {
  using Mixer = emergent::DotAttention<S, float>;
  constexpr int D = S.d_model, H = S.heads;
  CAPTURE(length);
  CAPTURE(strength);
  const std::vector<float> params =
      mixer_suite::cast<float>(mixer_suite::mixer_parameters<emergent::DotAttention, S>(81, 0.1));
  const std::size_t n = static_cast<std::size_t>(batch) * length * D;
  const std::vector<float> x = mixer_suite::cast<float>(mixer_suite::random_vector(n, 82));
  const std::vector<float> dy = mixer_suite::cast<float>(mixer_suite::random_vector(n, 83));
  std::mt19937 rng(84);
  std::vector<float> pattern(static_cast<std::size_t>(length) * length);
  for (float& p : pattern) p = static_cast<float>(rng() % 2);

  struct Run {
    std::vector<float> y, dx, grads, att;
  };
  auto run = [&] {
    emergent::Arena<float> arena;
    typename Mixer::Activations acts{};
    Mixer::carve(arena, acts, batch, length);
    arena.allocate_and_rewind();
    Mixer::carve(arena, acts, batch, length);
    const emergent::MixerContext<float> ctx{batch, length, pattern.data(),
                                            static_cast<float>(strength)};
    const std::size_t att_size = static_cast<std::size_t>(batch) * H * length * length;
    std::fill(acts.att, acts.att + att_size, -1.0f);  // every entry must be written
    Run r{std::vector<float>(n),
          std::vector<float>(n),
          std::vector<float>(Mixer::layout.total, 0.0f),
          {}};
    Mixer::forward(params.data(), x.data(), r.y.data(), acts, ctx);
    Mixer::backward(params.data(), r.grads.data(), x.data(), dy.data(), r.dx.data(), acts, ctx);
    r.att.assign(acts.att, acts.att + att_size);
    return r;
  };
  const Run fast = run();

  ref::Matrix pattern_ref(length, length);
  for (int i = 0; i < length * length; ++i) pattern_ref.data()[i] = pattern[i];
  const DotAttentionReference reference{H, pattern_ref,
                                        static_cast<double>(static_cast<float>(strength))};
  const ref::MixerParameters named = mixer_suite::to_named<Mixer, float>(params);
  reference_checks::check_mixer_close<Mixer, float>(
      fast.y, fast.dx, fast.grads,
      reference_checks::reference_batch<Mixer, float>(reference, params, x, dy, batch, length),
      2e-4);
  std::vector<double> att(fast.att.size());
  for (int b = 0; b < batch; ++b) {
    const ref::Matrix xb = mixer_suite::sequence<float>(x, b, length, D);
    const ref::Matrix qkv =
        ref::linear_forward(xb, named.at("qkv.weight"), named.at("qkv.bias").row(0).transpose());
    const ref::DotAttentionOutput out =
        ref::dot_attention_forward(qkv, H, pattern_ref, reference.strength);
    for (int h = 0; h < H; ++h)
      for (int i = 0; i < length; ++i)
        for (int j = 0; j < length; ++j)
          att[((static_cast<std::size_t>(b) * H + h) * length + i) * length + j] =
              out.probabilities[h](i, j);
  }
  reference_checks::check_close<float, double>("att", fast.att, att, 2e-4);

  std::size_t nonzero_above = 0;
  double worst_row_sum = 0;
  for (int bh = 0; bh < batch * H; ++bh)
    for (int i = 0; i < length; ++i) {
      const float* row = fast.att.data() + (static_cast<std::size_t>(bh) * length + i) * length;
      double sum = 0;
      for (int j = 0; j < length; ++j) {
        sum += row[j];
        if (j > i && row[j] != 0.0f) ++nonzero_above;
      }
      worst_row_sum = std::max(worst_row_sum, std::abs(sum - 1.0));
    }
  CHECK(nonzero_above == 0);
  CHECK(worst_row_sum < 1e-5);

  const Run again = run();
  CHECK(again.y == fast.y);
  CHECK(again.dx == fast.dx);
  CHECK(again.grads == fast.grads);
  CHECK(again.att == fast.att);
}

}  // namespace dot_attention_checks
