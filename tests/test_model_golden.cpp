// The fast CPU model against fixtures computed by PyTorch (tests/golden/make_golden.py, float64
// autograd on the same F32 weights): loss, logits, attention and every parameter gradient.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/io/safetensors.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/model.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <vector>

namespace {

const std::filesystem::path kGolden =
    std::filesystem::path(EMERGENT_SOURCE_DIR) / "tests" / "golden";

nlohmann::json read_case(const std::string& name) {
  std::ifstream in(kGolden / name / "case.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

// ||actual - expected|| / ||expected|| over one tensor (0 when both are zero).
template <class Real>
double relative_error(std::span<const Real> actual, std::span<const float> expected) {
  REQUIRE(actual.size() == expected.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    diff += (double(actual[i]) - expected[i]) * (double(actual[i]) - expected[i]);
    norm += double(expected[i]) * expected[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}

// Float runs must agree to 1e-4 (the fixtures are float64 computations rounded to F32); double
// runs of the same code to 1e-6, which is the F32 rounding of the stored gradients.
template <class Net>
void check_against_golden(const std::string& case_name) {
  using Real = typename Net::Scalar;
  const double tolerance = std::is_same_v<Real, float> ? 1e-4 : 1e-6;
  CAPTURE(case_name);
  const nlohmann::json c = read_case(case_name);
  REQUIRE(c["shape"]["d_model"].get<int>() == Net::D);
  REQUIRE(c["shape"]["heads"].get<int>() == Net::shape.heads);
  const emergent::SafetensorsFile weights(kGolden / case_name / "weights.safetensors");
  const emergent::SafetensorsFile expected_grads(kGolden / case_name / "grads.safetensors");

  std::vector<Real> params(Net::parameter_count, 0), grads(Net::parameter_count, 0);
  for (const auto& t : Net::tensors()) {
    const std::vector<float> values = weights.read_f32(t.name);
    REQUIRE(values.size() == t.size);
    std::copy(values.begin(), values.end(), params.begin() + t.offset);
  }

  const auto tokens = c["tokens"].get<std::vector<std::int32_t>>();
  const auto targets = c["targets"].get<std::vector<std::int32_t>>();
  const auto loss_weights = c["loss_weights"].get<std::vector<float>>();
  const auto pattern = c["bias_pattern"].get<std::vector<float>>();
  emergent::ForwardInput in{c["batch"],
                            c["length"],
                            tokens,
                            targets,
                            loss_weights,
                            pattern,
                            c["bias_strength"].get<float>()};
  typename Net::Workspace ws;
  const double loss = Net::forward(params, in, ws);
  CHECK(loss == doctest::Approx(c["loss"].get<double>()).epsilon(tolerance / 10));

  const int T = in.length, V = Net::V, H = Net::shape.heads;
  const auto logits = c["logits_sample0"].get<std::vector<float>>();
  CHECK(relative_error<Real>({ws.logits, std::size_t(T * V)}, logits) < tolerance);
  const auto attention = c["attention_layer0_sample0"].get<std::vector<float>>();
  CHECK(relative_error<Real>({ws.layers[0].mixer.att, std::size_t(H * T * T)}, attention) <
        tolerance);

  Net::backward(params, grads, ws);
  for (const auto& t : Net::tensors()) {
    CAPTURE(t.name);
    const std::vector<float> expected = expected_grads.read_f32(t.name);
    CHECK(relative_error<Real>(std::span<const Real>(grads).subspan(t.offset, t.size), expected) <
          tolerance);
  }
}

}  // namespace

TEST_CASE_TEMPLATE(
    "fast CPU model matches PyTorch golden fixtures: loss, logits, attention, gradients", Real,
    float, double) {
  using emergent::DotAttention;
  using emergent::Model;
  using emergent::Shape;
  check_against_golden<Model<
      DotAttention,
      Shape{.vocab = 3, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 20, .max_len = 9}, Real>>(
      "tiny");
  check_against_golden<Model<
      DotAttention,
      Shape{.vocab = 5, .d_model = 6, .heads = 6, .layers = 1, .d_ff = 10, .max_len = 8}, Real>>(
      "one_dim_heads");
  check_against_golden<Model<
      DotAttention,
      Shape{.vocab = 2, .d_model = 8, .heads = 1, .layers = 1, .d_ff = 16, .max_len = 16}, Real>>(
      "single_head_no_bias");
  check_against_golden<Model<
      DotAttention,
      Shape{.vocab = 2, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 31}, Real>>(
      "linear_map_like");
}
