// The encoder of the self-pretraining study (model/encoder.hpp): against PyTorch's own
// nn.TransformerEncoderLayer (tests/golden/make_encoder_golden.py: both losses and every
// gradient, padding, the per-head bias, learned and sinusoidal positions), by central
// differences in double, and a padded sequence against the same sequence alone.
//
// Measured worst relative errors against the fixtures (EMERGENT_REPORT_ERRORS=1 prints them):
// double 4.5e-8 and 4.8e-8 (the fixtures are float32), float 4.2e-7 and 3.0e-6. Tolerances 1e-6
// and 2e-5; a wrong term gives errors of order 1e-2 to 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <emergent/io/safetensors.hpp>
#include <emergent/mixers/bidirectional_attention.hpp>
#include <emergent/model/encoder.hpp>
#include <random>
#include <string>
#include <vector>

#include "fixture_error.hpp"

#ifndef EMERGENT_SOURCE_DIR
#error "EMERGENT_SOURCE_DIR must be defined (CMakeLists.txt)"
#endif

namespace {

constexpr emergent::Shape kEncoderShape{
    .vocab = 17, .d_model = 16, .heads = 2, .layers = 2, .d_ff = 24, .max_len = 24};
constexpr int kClasses = 10;
template <class Real>
using FixtureEncoder =
    emergent::Encoder<emergent::BidirectionalAttention, kEncoderShape, kClasses, Real>;

// The fixture's batch as the encoder takes it.
struct FixtureBatch {
  int batch = 0, length = 0;
  std::vector<std::int32_t> tokens, labels, originals;
  std::vector<int> lengths;
  std::vector<float> pattern;
  emergent::EncoderBatch view(double label_weight, double reconstruction_weight,
                              float strength) const {
    return {batch,   length,    tokens,       lengths,
            labels,  originals, label_weight, reconstruction_weight,
            pattern, strength};
  }
};

template <class T>
std::vector<T> as(const std::vector<float>& v) {
  return std::vector<T>(v.begin(), v.end());
}

using fixture_error::relative_error;

template <class Real>
void check_fixture(const std::string& name, bool train_positions, double tolerance) {
  using M = FixtureEncoder<Real>;
  const emergent::SafetensorsFile f(std::string(EMERGENT_SOURCE_DIR) + "/tests/golden/encoder/" +
                                    name + ".safetensors");
  std::vector<Real> params(M::parameter_count, Real(0));
  for (const auto& t : M::tensors()) {
    const std::vector<float> v = f.read_f32("param." + t.name);
    REQUIRE_MESSAGE(v.size() == t.size, t.name);
    std::copy(v.begin(), v.end(), params.begin() + static_cast<std::ptrdiff_t>(t.offset));
  }
  FixtureBatch in;
  in.batch = 3;
  in.length = 13;
  in.tokens = as<std::int32_t>(f.read_f32("tokens"));
  in.labels = as<std::int32_t>(f.read_f32("labels"));
  in.originals = as<std::int32_t>(f.read_f32("originals"));
  in.lengths = as<int>(f.read_f32("lengths"));
  in.pattern = f.read_f32("pattern");
  const float strength = std::stof(f.metadata().at("strength"));
  typename M::Workspace ws;
  const emergent::EncoderLosses losses =
      M::forward(params,
                 in.view(std::stod(f.metadata().at("label_weight")),
                         std::stod(f.metadata().at("reconstruction_weight")), strength),
                 ws);
  std::vector<Real> grads(M::parameter_count, Real(0));
  M::backward(params, grads, ws, train_positions);

  const std::vector<float> expected = f.read_f32("losses");
  CAPTURE(name);
  CHECK(losses.label_loss == doctest::Approx(expected[0]).epsilon(tolerance));
  CHECK(losses.reconstruction_loss == doctest::Approx(expected[1]).epsilon(tolerance));
  CHECK(losses.total == doctest::Approx(expected[2]).epsilon(tolerance));
  double worst = 0;
  for (const auto& t : M::tensors()) {
    const auto begin = grads.begin() + static_cast<std::ptrdiff_t>(t.offset);
    const std::vector<double> ours(begin, begin + static_cast<std::ptrdiff_t>(t.size));
    const std::vector<float> theirs = f.read_f32("grad." + t.name);
    const bool all_zero = std::all_of(theirs.begin(), theirs.end(), [](float v) { return v == 0; });
    CAPTURE(t.name);
    if (all_zero) {
      CHECK(std::all_of(ours.begin(), ours.end(), [](double v) { return v == 0; }));
      continue;
    }
    const double error = relative_error(ours, theirs);
    CAPTURE(error);
    CHECK(error < tolerance);
    worst = std::max(worst, error);
  }
  if (std::getenv("EMERGENT_REPORT_ERRORS"))
    MESSAGE(name << " (" << sizeof(Real) * 8 << "-bit): worst relative error " << worst);
}

// A random batch with padding, masked positions and a proximity pattern.
FixtureBatch random_fixture_batch(int batch, int length, std::uint64_t seed) {
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  FixtureBatch in;
  in.batch = batch;
  in.length = length;
  in.tokens.assign(static_cast<std::size_t>(batch) * length, 0);
  in.originals.assign(in.tokens.size(), -1);
  for (int b = 0; b < batch; ++b) {
    const int n = b == 0 ? length : 1 + static_cast<int>(rng() % length);
    in.lengths.push_back(n);
    in.labels.push_back(static_cast<std::int32_t>(rng() % kClasses));
    for (int t = 0; t < n; ++t) {
      const std::size_t i = static_cast<std::size_t>(b) * length + t;
      in.tokens[i] = 2 + static_cast<std::int32_t>(rng() % (kEncoderShape.vocab - 2));
      if (rng() % 4 == 0) in.originals[i] = in.tokens[i], in.tokens[i] = 1;
    }
  }
  for (int i = 0; i < length; ++i)
    for (int j = 0; j < length; ++j) in.pattern.push_back(-float(std::abs(i - j)));
  return in;
}

}  // namespace

TEST_CASE("Encoder against PyTorch's TransformerEncoderLayer, learned positions") {
  SUBCASE("double") { check_fixture<double>("learned_positions", true, 1e-6); }
  SUBCASE("float") { check_fixture<float>("learned_positions", true, 2e-5); }
}

TEST_CASE("Encoder against PyTorch's TransformerEncoderLayer, fixed sinusoidal positions") {
  SUBCASE("double") { check_fixture<double>("sinusoidal_positions", false, 1e-6); }
  SUBCASE("float") { check_fixture<float>("sinusoidal_positions", false, 2e-5); }
  SUBCASE("the sinusoid table is the fixture's") {
    const emergent::SafetensorsFile f(std::string(EMERGENT_SOURCE_DIR) +
                                      "/tests/golden/encoder/sinusoidal_positions.safetensors");
    std::vector<double> table(static_cast<std::size_t>(kEncoderShape.max_len) *
                              kEncoderShape.d_model);
    FixtureEncoder<double>::write_sinusoids(table.data());
    CHECK(relative_error(table, f.read_f32("param.embed.position.weight")) < 1e-7);
  }
}

TEST_CASE("Encoder gradients by central differences (both losses, padding, bias, slopes)") {
  using M = FixtureEncoder<double>;
  std::vector<double> params(M::parameter_count);
  M::init(params, 5, emergent::PositionEncoding::learned);
  std::mt19937 rng(6);
  std::normal_distribution<double> noise(0.0, 0.05);
  for (const auto& t : M::tensors())
    for (std::size_t i = 0; i < t.size; ++i) params[t.offset + i] += noise(rng);
  const FixtureBatch in = random_fixture_batch(3, 9, 7);
  const emergent::EncoderBatch batch = in.view(0.6, 1.1, 0.2f);
  typename M::Workspace ws;
  M::forward(params, batch, ws);
  std::vector<double> grads(M::parameter_count, 0.0);
  M::backward(params, grads, ws, true);
  for (const auto& t : M::tensors()) {
    CAPTURE(t.name);
    for (int c = 0; c < 3; ++c) {
      const std::size_t i = t.offset + rng() % t.size;
      const double saved = params[i], h = 1e-5;
      params[i] = saved + h;
      const double up = M::forward(params, batch, ws).total;
      params[i] = saved - h;
      const double down = M::forward(params, batch, ws).total;
      params[i] = saved;
      const double numeric = (up - down) / (2 * h);
      CHECK(std::abs(grads[i] - numeric) <=
            1e-7 + 1e-5 * std::max(std::abs(numeric), std::abs(grads[i])));
    }
  }
}

TEST_CASE("Encoder: a padded sequence classifies and reconstructs as if alone") {
  using M = FixtureEncoder<double>;
  std::vector<double> params(M::parameter_count);
  M::init(params, 8, emergent::PositionEncoding::sinusoidal);
  const FixtureBatch in = random_fixture_batch(3, 11, 9);
  typename M::Workspace ws;
  M::forward(params, in.view(1.0, 1.0, 0.3f), ws);
  std::vector<double> batch_logits(ws.class_logits, ws.class_logits + 3 * kClasses);
  for (int b = 0; b < 3; ++b) {
    const int n = in.lengths[b];
    FixtureBatch one;
    one.batch = 1;
    one.length = n;
    one.tokens.assign(in.tokens.begin() + b * 11, in.tokens.begin() + b * 11 + n);
    one.originals.assign(in.originals.begin() + b * 11, in.originals.begin() + b * 11 + n);
    one.lengths = {n};
    one.labels = {in.labels[b]};
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < n; ++j) one.pattern.push_back(in.pattern[i * 11 + j]);
    typename M::Workspace alone;
    M::forward(params, one.view(1.0, 1.0, 0.3f), alone);
    CAPTURE(b);
    for (int c = 0; c < kClasses; ++c)
      CHECK(alone.class_logits[c] ==
            doctest::Approx(batch_logits[b * kClasses + c]).epsilon(1e-12));
  }
}

TEST_CASE("Encoder refuses bad batches in one line") {
  using M = FixtureEncoder<float>;
  std::vector<float> params(M::parameter_count);
  M::init(params, 1, emergent::PositionEncoding::learned);
  FixtureBatch in = random_fixture_batch(2, 5, 3);
  typename M::Workspace ws;
  in.labels[1] = kClasses;
  CHECK_THROWS_WITH(M::forward(params, in.view(1, 0, 0), ws), doctest::Contains("label 1"));
  in.labels[1] = 0;
  in.lengths[0] = 6;
  CHECK_THROWS_WITH(M::forward(params, in.view(1, 0, 0), ws), doctest::Contains("sequence 0"));
}
