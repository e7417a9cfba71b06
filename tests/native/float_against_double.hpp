// Whole models in fp32, built for this machine, against the same models in double: the loss, the
// attention probabilities (where the mixer keeps them) and every gradient. The float model runs
// the AVX-512 paths (GEMM, attention kernels); the double model runs the Eigen and generic paths,
// which emergent_tests checks against the Eigen reference and finite differences. Used by
// test_native_model.cpp (DotAttention) and test_native_other_mixers.cpp.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/model/model.hpp>
#include <random>
#include <span>
#include <vector>

namespace native_checks {

using emergent::Model;
using emergent::Shape;

// Largest |a - b| / (1 + max |b|) over a buffer pair.
template <class A, class B>
double relative_error(std::span<const A> a, std::span<const B> b) {
  double worst = 0, scale = 1;
  for (std::size_t i = 0; i < b.size(); ++i) scale = std::max(scale, std::abs(double(b[i])));
  for (std::size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst / scale;
}

template <Shape S, template <Shape, class> class MixerT,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
void check_float_against_double(int batch, int length, bool with_bias) {
  CAPTURE(S.d_head());
  CAPTURE(length);
  CAPTURE(with_bias);
  using Fast = Model<MixerT, S, float, ChannelT>;
  using Exact = Model<MixerT, S, double, ChannelT>;
  std::vector<double> exact_params(Exact::parameter_count);
  Exact::init(exact_params, 7);
  std::vector<float> fast_params(exact_params.begin(), exact_params.end());
  for (std::size_t i = 0; i < exact_params.size(); ++i)
    exact_params[i] = fast_params[i];  // same values

  std::mt19937 rng(length + 13);
  std::uniform_int_distribution<int> token(0, S.vocab - 1);
  const std::size_t N = static_cast<std::size_t>(batch) * length;
  std::vector<std::int32_t> inputs(N), targets(N);
  for (std::size_t n = 0; n < N; ++n) inputs[n] = token(rng), targets[n] = token(rng);
  std::vector<float> weights(length), pattern;
  for (int t = 0; t < length; ++t) weights[t] = float(t % 3);
  if (with_bias) {
    pattern.assign(static_cast<std::size_t>(length) * length, 0.0f);
    for (int i = 0; i < length; ++i) pattern[static_cast<std::size_t>(i) * length + i / 2] = 1.0f;
  }
  const emergent::ForwardInput in{
      batch, length, inputs, targets, weights, pattern, with_bias ? 2.5f : 0.0f};

  typename Fast::Workspace fast_ws;
  typename Exact::Workspace exact_ws;
  const double fast_loss = Fast::forward(fast_params, in, fast_ws);
  const double exact_loss = Exact::forward(exact_params, in, exact_ws);
  CHECK(fast_loss == doctest::Approx(exact_loss).epsilon(1e-5));

  if constexpr (emergent::KeepsAttention<typename Fast::Mixer>)
    for (int l = 0; l < S.layers; ++l) {
      const std::size_t count = static_cast<std::size_t>(batch) * S.heads * length * length;
      CHECK(relative_error(std::span<const float>(fast_ws.layers[l].mixer.att, count),
                           std::span<const double>(exact_ws.layers[l].mixer.att, count)) < 1e-5);
    }

  std::vector<float> fast_grads(Fast::parameter_count, 0.0f);
  std::vector<double> exact_grads(Exact::parameter_count, 0.0);
  Fast::backward(fast_params, fast_grads, fast_ws);
  Exact::backward(exact_params, exact_grads, exact_ws);
  for (const auto& t : Fast::tensors()) {
    CAPTURE(t.name);
    CHECK(relative_error(std::span<const float>(fast_grads.data() + t.offset, t.size),
                         std::span<const double>(exact_grads.data() + t.offset, t.size)) < 2e-4);
  }
}

}  // namespace native_checks
