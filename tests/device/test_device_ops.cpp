// Each op of include/emergent/cuda/ against the Eigen reference (reference/), for an ensemble of
// two members whose parameters lie `param_stride` apart, on awkward sizes; gradients must
// accumulate into what the buffers held.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <emergent/cuda/cross_entropy.cuh>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/embedding.cuh>
#include <emergent/cuda/gelu.cuh>
#include <emergent/cuda/layernorm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/reference/cross_entropy.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/embedding.hpp>
#include <emergent/reference/gelu.hpp>
#include <emergent/reference/layernorm.hpp>
#include <emergent/reference/linear.hpp>
#include <vector>

#include "device_checks.hpp"

// Attention of a shape with d_head 4 and T = 9 (not a multiple of anything), with the bias. At
// namespace scope: see device_mixer_checks.hpp.
namespace device_ops_shapes {
inline constexpr emergent::Shape kAttentionShape{
    .vocab = 2, .d_model = 12, .heads = 3, .layers = 1, .d_ff = 8, .max_len = 16};
}

namespace {

using namespace device_checks;
using device_ops_shapes::kAttentionShape;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::raw;

constexpr int kMembers = 2;

TEST_CASE("device layernorm: forward and backward against the reference, per member") {
  const int rows = 7, dim = 13;
  const std::int64_t stride = 40, beta_at = 16;  // gamma at 0, beta at 16 of each member
  std::vector<float> params = random_floats(kMembers * stride, 1, 0.5);
  for (int e = 0; e < kMembers; ++e)
    for (int d = 0; d < dim; ++d) params[e * stride + d] += 1.0f;
  const std::vector<float> x = random_floats(kMembers * rows * dim, 2, 2.0),
                           dy = random_floats(x.size(), 3), dx0 = random_floats(x.size(), 4),
                           g0 = random_floats(params.size(), 5);
  DeviceVector<float> p = to_device(params), dx_in = to_device(x), y(x.size()),
                      mean(kMembers * rows), rstd(kMembers * rows), d_y = to_device(dy),
                      dx = to_device(dx0), g = to_device(g0);
  cuda::layernorm_forward(raw(y), raw(mean), raw(rstd), raw(dx_in), raw(p), raw(p) + beta_at,
                          stride, kMembers, rows, dim);
  cuda::layernorm_backward(raw(dx), raw(g), raw(g) + beta_at, raw(d_y), raw(dx_in), raw(mean),
                           raw(rstd), raw(p), stride, kMembers, rows, dim);
  const auto y_host = copy_to_host(y), dx_host = copy_to_host(dx), g_host = copy_to_host(g);
  for (int e = 0; e < kMembers; ++e) {
    CAPTURE(e);
    const ref::Matrix X = matrix(x, e * rows * dim, rows, dim);
    const ref::Vector gamma = vector(params, e * stride, dim),
                      beta = vector(params, e * stride + beta_at, dim);
    CHECK(relative_error(y_host, e * rows * dim, ref::layernorm_forward(X, gamma, beta)) <
          kTolerance);
    ref::Vector d_gamma = vector(g0, e * stride, dim),
                d_beta = vector(g0, e * stride + beta_at, dim);
    const ref::Matrix expected_dx =
        matrix(dx0, e * rows * dim, rows, dim) +
        ref::layernorm_backward(matrix(dy, e * rows * dim, rows, dim), X, gamma, d_gamma, d_beta);
    CHECK(relative_error(dx_host, e * rows * dim, expected_dx) < kTolerance);
    CHECK(relative_error(g_host, e * stride, d_gamma) < kTolerance);
    CHECK(relative_error(g_host, e * stride + beta_at, d_beta) < kTolerance);
  }
}

TEST_CASE("device linear: forward and backward against the reference, with and without bias") {
  const int rows = 5, in = 7, out = 19;
  const std::int64_t stride = out * in + out + 3, bias_at = out * in;
  const std::vector<float> params = random_floats(kMembers * stride, 6),
                           x = random_floats(kMembers * rows * in, 7),
                           dy = random_floats(kMembers * rows * out, 8),
                           g0 = random_floats(params.size(), 9);
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    DeviceVector<float> p = to_device(params), xd = to_device(x), y(kMembers * rows * out),
                        d_y = to_device(dy), dx(x.size()), g = to_device(g0);
    cuda::linear_forward(raw(y), raw(xd), raw(p), with_bias ? raw(p) + bias_at : nullptr, stride,
                         kMembers, rows, in, out);
    cuda::linear_backward(raw(dx), raw(g), with_bias ? raw(g) + bias_at : nullptr, raw(d_y),
                          raw(xd), raw(p), stride, kMembers, rows, in, out);
    const auto y_host = copy_to_host(y), dx_host = copy_to_host(dx), g_host = copy_to_host(g);
    for (int e = 0; e < kMembers; ++e) {
      CAPTURE(e);
      const ref::Matrix X = matrix(x, e * rows * in, rows, in),
                        W = matrix(params, e * stride, out, in),
                        dY = matrix(dy, e * rows * out, rows, out);
      const ref::Vector b = vector(params, e * stride + bias_at, out);
      CHECK(relative_error(y_host, e * rows * out,
                           with_bias ? ref::linear_forward(X, W, b) : ref::linear_forward(X, W)) <
            kTolerance);
      ref::Matrix dW = matrix(g0, e * stride, out, in);
      ref::Vector db = vector(g0, e * stride + bias_at, out);
      const ref::Matrix expected_dx =
          with_bias ? ref::linear_backward(dY, X, W, dW, db) : ref::linear_backward(dY, X, W, dW);
      CHECK(relative_error(dx_host, e * rows * in, expected_dx) < kTolerance);
      CHECK(relative_error(g_host, e * stride, dW) < kTolerance);
      CHECK(relative_error(g_host, e * stride + bias_at, db) < kTolerance);  // untouched without
    }
  }
}

TEST_CASE("device gelu: forward and backward against the reference") {
  const int n = 999;
  const std::vector<float> z = random_floats(n, 10, 4.0), dy = random_floats(n, 11);
  DeviceVector<float> zd = to_device(z), y(n), dz = to_device(dy);
  cuda::gelu_forward(raw(y), raw(zd), n);
  cuda::gelu_backward(raw(dz), raw(dz), raw(zd), n);  // in place, as the model runs it
  const ref::Matrix Z = matrix(z, 0, 1, n);
  CHECK(relative_error(copy_to_host(y), 0, ref::gelu_forward(Z)) < kTolerance);
  CHECK(relative_error(copy_to_host(dz), 0, ref::gelu_backward(matrix(dy, 0, 1, n), Z)) <
        kTolerance);
}

TEST_CASE("device cross-entropy: member losses and logit gradients against the reference") {
  const int B = 3, T = 5, V = 6, rows = kMembers * B * T;
  const std::vector<float> logits = random_floats(rows * V, 12, 3.0);
  // each member its own position weights [E, T]
  std::vector<float> weights = {1, 0, 0.5f, 2, 1};
  while (weights.size() < std::size_t(kMembers) * T) weights.push_back(float(weights.size() % 3));
  std::vector<std::int32_t> targets(rows);
  for (int n = 0; n < rows; ++n) targets[n] = (n * 7 + 3) % V;
  DeviceVector<float> l = to_device(logits), probs(rows * V), ce(rows), correct(rows),
                      w = to_device(weights), dl(rows * V);
  DeviceVector<std::int32_t> t;
  cuda::copy_to_device<std::int32_t>(targets, t);
  DeviceVector<double> losses(kMembers);
  DeviceVector<float> scales(kMembers);
  cuda::cross_entropy_forward(raw(probs), raw(ce), raw(correct), raw(l), raw(t), rows, V);
  cuda::weighted_member_means(raw(losses), raw(ce), raw(w), kMembers, B, T);
  cuda::loss_scale(raw(scales), raw(w), kMembers, B, T);
  cuda::cross_entropy_backward(raw(dl), raw(probs), raw(t), raw(w), rows, B, T, V, raw(scales));
  const auto loss_host = copy_to_host(losses);
  const auto dl_host = copy_to_host(dl);
  for (int e = 0; e < kMembers; ++e) {
    CAPTURE(e);
    const std::vector<double> w_double(weights.begin() + e * T, weights.begin() + (e + 1) * T);
    const ref::Matrix L = matrix(logits, e * B * T * V, B * T, V);
    const std::vector<int> te(targets.begin() + e * B * T, targets.begin() + (e + 1) * B * T);
    CHECK(loss_host[e] ==
          doctest::Approx(ref::cross_entropy_forward(L, te, B, T, w_double)).epsilon(kTolerance));
    CHECK(relative_error(dl_host, e * B * T * V,
                         ref::cross_entropy_backward(L, te, B, T, w_double)) < kTolerance);
  }
}

TEST_CASE("device cross-entropy with weights per token: each sequence's weighted mean") {
  const int B = 3, T = 5, V = 6, rows = kMembers * B * T;
  const std::vector<float> logits = random_floats(rows * V, 16, 3.0);
  // [E, B, T] weights, 0 or 1 as Dyck's; sequence 1 of member 0 has none (it counts 0)
  std::vector<float> weights(rows);
  for (int n = 0; n < rows; ++n) weights[n] = (n * 5 + n / 7) % 3 == 0 ? 0.0f : 1.0f;
  for (int t = 0; t < T; ++t) weights[T + t] = 0;
  std::vector<std::int32_t> targets(rows);
  for (int n = 0; n < rows; ++n) targets[n] = (n * 7 + 3) % V;
  DeviceVector<float> l = to_device(logits), probs(rows * V), ce(rows), correct(rows),
                      w = to_device(weights), dl(rows * V), scales(kMembers * B);
  DeviceVector<std::int32_t> t;
  cuda::copy_to_device<std::int32_t>(targets, t);
  DeviceVector<double> losses(kMembers);
  cuda::cross_entropy_forward(raw(probs), raw(ce), raw(correct), raw(l), raw(t), rows, V);
  DeviceVector<double> sequence_means(kMembers * B);
  cuda::weighted_member_means(raw(losses), raw(ce), raw(w), kMembers, B, T, true, nullptr,
                              raw(sequence_means));
  cuda::loss_scale(raw(scales), raw(w), kMembers, B, T, true);
  cuda::cross_entropy_backward(raw(dl), raw(probs), raw(t), raw(w), rows, B, T, V, raw(scales),
                               true);
  const auto loss_host = copy_to_host(losses);
  const auto dl_host = copy_to_host(dl);
  for (int e = 0; e < kMembers; ++e) {
    CAPTURE(e);
    double loss = 0;
    for (int b = 0; b < B; ++b) {
      CAPTURE(b);
      const int at = (e * B + b) * T;  // the sequence's first row
      const std::vector<double> w_double(weights.begin() + at, weights.begin() + at + T);
      const ref::Matrix L = matrix(logits, std::size_t(at) * V, T, V);
      const std::vector<int> te(targets.begin() + at, targets.begin() + at + T);
      if (std::all_of(w_double.begin(), w_double.end(), [](double v) { return v == 0; })) {
        for (int i = 0; i < T * V; ++i) CHECK(dl_host[std::size_t(at) * V + i] == 0.0f);
        continue;
      }
      loss += ref::cross_entropy_forward(L, te, 1, T, w_double) / B;
      CHECK(relative_error(dl_host, std::size_t(at) * V,
                           ref::Matrix(ref::cross_entropy_backward(L, te, 1, T, w_double) / B)) <
            kTolerance);
    }
    CHECK(loss_host[e] == doctest::Approx(loss).epsilon(kTolerance));
  }
}

TEST_CASE("device embedding: forward and the ordered scatter of the backward") {
  const int B = 3, T = 4, V = 5, D = 6, max_len = 7;
  const std::int64_t stride = 80, pos_at = 32;
  const std::vector<float> params = random_floats(kMembers * stride, 13),
                           dx = random_floats(kMembers * B * T * D, 14),
                           g0 = random_floats(params.size(), 15);
  std::vector<std::int32_t> tokens(kMembers * B * T);
  for (std::size_t n = 0; n < tokens.size(); ++n) tokens[n] = std::int32_t((n * 3 + n / 5) % V);
  DeviceVector<float> p = to_device(params), x(dx.size()), d = to_device(dx), g = to_device(g0);
  DeviceVector<std::int32_t> tk;
  cuda::copy_to_device<std::int32_t>(tokens, tk);
  cuda::embedding_forward(raw(x), raw(tk), raw(p), raw(p) + pos_at, stride, kMembers, B, T, D);
  cuda::embedding_backward(raw(g), raw(g) + pos_at, raw(d), raw(tk), stride, kMembers, V, B, T, D);
  const auto x_host = copy_to_host(x), g_host = copy_to_host(g);
  for (int e = 0; e < kMembers; ++e) {
    CAPTURE(e);
    const std::vector<int> te(tokens.begin() + e * B * T, tokens.begin() + (e + 1) * B * T);
    const ref::Matrix token_table = matrix(params, e * stride, V, D),
                      position_table = matrix(params, e * stride + pos_at, max_len, D);
    CHECK(relative_error(x_host, e * B * T * D,
                         ref::embedding_forward(te, T, token_table, position_table)) < kTolerance);
    ref::Matrix d_token = matrix(g0, e * stride, V, D),
                d_position = matrix(g0, e * stride + pos_at, max_len, D);
    ref::embedding_backward(matrix(dx, e * B * T * D, B * T, D), te, T, d_token, d_position);
    CHECK(relative_error(g_host, e * stride, d_token) < kTolerance);
    CHECK(relative_error(g_host, e * stride + pos_at, d_position) < kTolerance);
  }
}

void check_attention(float bias_strength) {
  using Mixer = emergent::DotAttention<kAttentionShape, float>;
  const int B = 2, T = 9, D = 12, H = 3, N = kMembers * B * T;
  const std::int64_t stride = Mixer::layout.total + 16;
  const std::vector<float> params = random_floats(kMembers * stride, 16, 0.6),
                           x = random_floats(N * D, 17), dy = random_floats(N * D, 18),
                           g0 = random_floats(params.size(), 19),
                           pattern = random_floats(kMembers * T * T, 20);
  // each member its own pattern and strength (member e's: bias_strength (1 + e))
  std::vector<float> strengths;
  for (int e = 0; e < kMembers; ++e) strengths.push_back(bias_strength * float(1 + e));
  DeviceVector<float> p = to_device(params), xd = to_device(x), y(N * D), d_y = to_device(dy),
                      dx(N * D), g = to_device(g0), bias = to_device(pattern),
                      strength = to_device(strengths);
  using Twin = cuda::DotAttention<kAttentionShape>;
  const cuda::MixerGeometry geometry{kMembers, B, T, stride};
  Twin::Activations acts(geometry);
  Twin::Scratch scratch(geometry);
  const cuda::AttentionBias biased{raw(bias), raw(strength)};
  Twin::forward(raw(p), raw(xd), raw(y), nullptr, acts, scratch, geometry,
                bias_strength != 0 ? biased : cuda::AttentionBias{});
  Twin::backward(raw(p), raw(g), raw(xd), raw(d_y), raw(dx), acts, scratch, geometry);
  const DeviceVector<float>& att = acts.att;
  const auto y_host = copy_to_host(y), dx_host = copy_to_host(dx), g_host = copy_to_host(g),
             att_host = copy_to_host(att);
  for (int e = 0; e < kMembers; ++e) {
    const ref::Matrix P = matrix(pattern, std::size_t(e) * T * T, T, T);
    const std::size_t base = e * stride;
    const ref::Matrix Wqkv = matrix(params, base + Mixer::qkv_weight, 3 * D, D),
                      Wout = matrix(params, base + Mixer::out_weight, D, D);
    const ref::Vector bqkv = vector(params, base + Mixer::qkv_bias, 3 * D),
                      bout = vector(params, base + Mixer::out_bias, D);
    ref::Matrix dWqkv = matrix(g0, base + Mixer::qkv_weight, 3 * D, D),
                dWout = matrix(g0, base + Mixer::out_weight, D, D);
    ref::Vector dbqkv = vector(g0, base + Mixer::qkv_bias, 3 * D),
                dbout = vector(g0, base + Mixer::out_bias, D);
    for (int b = 0; b < B; ++b) {
      CAPTURE(e);
      CAPTURE(b);
      const std::size_t rows_at = std::size_t(e * B + b) * T * D;
      const ref::Matrix X = matrix(x, rows_at, T, D);
      const ref::Matrix QKV = ref::linear_forward(X, Wqkv, bqkv);
      const ref::DotAttentionOutput o = ref::dot_attention_forward(QKV, H, P, strengths[e]);
      CHECK(relative_error(y_host, rows_at, ref::linear_forward(o.out, Wout, bout)) < kTolerance);
      for (int h = 0; h < H; ++h)
        CHECK(relative_error(att_host, (std::size_t(e * B + b) * H + h) * T * T,
                             o.probabilities[h]) < kTolerance);
      const ref::Matrix d_o =
          ref::linear_backward(matrix(dy, rows_at, T, D), o.out, Wout, dWout, dbout);
      const ref::Matrix d_QKV = ref::dot_attention_backward(d_o, QKV, H, o.probabilities);
      CHECK(relative_error(dx_host, rows_at, ref::linear_backward(d_QKV, X, Wqkv, dWqkv, dbqkv)) <
            kTolerance);
    }
    CHECK(relative_error(g_host, base + Mixer::qkv_weight, dWqkv) < kTolerance);
    CHECK(relative_error(g_host, base + Mixer::qkv_bias, dbqkv) < kTolerance);
    CHECK(relative_error(g_host, base + Mixer::out_weight, dWout) < kTolerance);
    CHECK(relative_error(g_host, base + Mixer::out_bias, dbout) < kTolerance);
  }
}

TEST_CASE("device dot attention: forward, probabilities and backward against the reference") {
  SUBCASE("no bias") { check_attention(0.0f); }
  SUBCASE("bias c = 2.5") { check_attention(2.5f); }
}

}  // namespace
