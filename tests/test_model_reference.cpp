// The fast CPU model (model/model.hpp + mixers/dot_attention.hpp) against the Eigen reference
// (reference/transformer.hpp) on awkward shapes: d_head 1, a single head, three layers,
// heads == d_model, T below and at max_len, B in {1, 3}, with and without the attention bias,
// and loss weights with zeros. Also a finite-difference check of the fast double model itself,
// gradient accumulation, the zero padding of the flat buffer, and Model::init.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <emergent/core/parallel.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/model.hpp>
#include <emergent/reference/transformer.hpp>
#include <random>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "mixer_suite.hpp"

namespace {

namespace ref = emergent::reference;
using emergent::DotAttention;
using emergent::Model;
using emergent::Shape;

using mixer_suite::relative_error;

// Random reference parameters (LayerNorm weights 1 + noise, everything else noise); for a float
// model rounded to float first, so that both sides compute with the same values.
template <class Net>
ref::Parameters random_reference_parameters(std::uint64_t seed) {
  constexpr Shape s = Net::shape;
  std::mt19937_64 rng(seed);
  ref::Parameters p =
      ref::random_parameters(s.vocab, s.d_model, s.heads, s.layers, s.d_ff, s.max_len, rng, 0.5);
  if constexpr (std::is_same_v<typename Net::Scalar, float>)
    for (auto& [name, m] : p.tensors) m = m.template cast<float>().template cast<double>();
  return p;
}

// Copies named reference tensors into the flat buffer through Model::tensors(), checking that
// names, order and shapes are those of docs/model.md (= reference::parameter_names).
template <class Net>
std::vector<typename Net::Scalar> to_flat(const ref::Parameters& p) {
  using Real = typename Net::Scalar;
  std::vector<Real> flat(Net::parameter_count, Real(0));
  const auto tensors = Net::tensors();
  const std::vector<std::string> names = ref::parameter_names(Net::L);
  REQUIRE(tensors.size() == names.size());
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const auto& t = tensors[k];
    CAPTURE(t.name);
    REQUIRE(t.name == names[k]);
    const ref::Matrix& m = p[t.name];
    if (t.shape.size() == 2) {
      REQUIRE(m.rows() == t.shape[0]);
      REQUIRE(m.cols() == t.shape[1]);
    } else {
      REQUIRE(t.shape.size() == 1);
      REQUIRE(m.rows() == 1);
      REQUIRE(m.cols() == t.shape[0]);
    }
    REQUIRE(static_cast<std::size_t>(m.size()) == t.size);
    REQUIRE(t.offset % emergent::kTensorAlignment == 0);
    REQUIRE(t.offset + t.size <= Net::parameter_count);
    for (std::size_t i = 0; i < t.size; ++i) flat[t.offset + i] = Real(m.data()[i]);
  }
  return flat;
}

// true for every buffer index that belongs to no tensor.
template <class Net>
std::vector<bool> padding_mask() {
  std::vector<bool> padding(Net::parameter_count, true);
  for (const auto& t : Net::tensors())
    for (std::size_t i = 0; i < t.size; ++i) {
      REQUIRE(padding[t.offset + i]);  // tensors do not overlap
      padding[t.offset + i] = false;
    }
  return padding;
}

// One batch of random data: tokens, targets, loss weights (exact in float, with zeros) and a
// random 0/1 bias pattern.
struct TokenBatch {
  int B = 0, T = 0;
  std::vector<int> tokens, targets;
  std::vector<std::int32_t> tokens32, targets32;
  std::vector<double> weights;
  std::vector<float> weights_f;
  std::vector<float> pattern;  // [T,T]
};

TokenBatch random_token_batch(int vocab, int B, int T, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> token(0, vocab - 1);
  std::uniform_int_distribution<int> eighths(1, 16);
  std::bernoulli_distribution coin(0.5);
  TokenBatch b;
  b.B = B;
  b.T = T;
  for (int n = 0; n < B * T; ++n) {
    b.tokens.push_back(token(rng));
    b.targets.push_back(token(rng));
  }
  b.tokens32.assign(b.tokens.begin(), b.tokens.end());
  b.targets32.assign(b.targets.begin(), b.targets.end());
  for (int t = 0; t < T; ++t) {
    // zeros at t = 2, 5, 8, ...; the others k/8 for k in 1..16 (exactly representable)
    const double w = (t % 3 == 2) ? 0.0 : eighths(rng) / 8.0;
    b.weights.push_back(w);
    b.weights_f.push_back(float(w));
  }
  for (int n = 0; n < T * T; ++n) b.pattern.push_back(coin(rng) ? 1.0f : 0.0f);
  return b;
}

// Worst relative error seen by check_against_reference (loss, attention, gradients), reported
// per shape: the headroom left under the tolerance.
double g_worst_error = 0;

template <class Net>
void check_against_reference(int B, int T, float bias, std::uint64_t seed) {
  using Real = typename Net::Scalar;
  constexpr Shape s = Net::shape;
  const double tolerance = std::is_same_v<Real, float> ? 1e-4 : 1e-10;
  CAPTURE(s.vocab);
  CAPTURE(s.d_model);
  CAPTURE(s.heads);
  CAPTURE(s.layers);
  CAPTURE(B);
  CAPTURE(T);
  CAPTURE(bias);
  CAPTURE(sizeof(Real));

  const ref::Parameters p = random_reference_parameters<Net>(seed);
  const std::vector<Real> params = to_flat<Net>(p);
  const TokenBatch batch = random_token_batch(s.vocab, B, T, seed + 1);

  // reference (bias strength as the float the fast model receives)
  ref::Matrix pattern;
  if (bias != 0) {
    pattern.resize(T, T);
    for (int n = 0; n < T * T; ++n) pattern.data()[n] = batch.pattern[static_cast<std::size_t>(n)];
  }
  ref::Parameters ref_grads;
  std::vector<ref::Matrix> ref_attention;
  const double ref_loss = ref::transformer_loss_and_gradients(
      p, s.heads, batch.tokens, batch.targets, B, T, batch.weights, pattern, double(bias),
      &ref_grads, &ref_attention);

  // fast model (the pattern is passed even with bias 0: strength 0 must mean no bias)
  typename Net::Workspace ws;
  const emergent::ForwardInput in{
      B, T, batch.tokens32, batch.targets32, batch.weights_f, batch.pattern, bias};
  const double loss = Net::forward(params, in, ws);
  CHECK(std::isfinite(loss));
  CHECK(std::abs(loss - ref_loss) <= tolerance * std::abs(ref_loss));
  g_worst_error = std::max(g_worst_error, std::abs(loss - ref_loss) / std::abs(ref_loss));

  // attention probabilities, layout [B,H,T,T] per layer; zero above the diagonal
  const int H = s.heads;
  REQUIRE(ref_attention.size() == static_cast<std::size_t>(s.layers * B * H));
  for (int l = 0; l < s.layers; ++l) {
    CAPTURE(l);
    const std::size_t count = static_cast<std::size_t>(B) * H * T * T;
    std::vector<double> expected(count);
    for (int b = 0; b < B; ++b)
      for (int h = 0; h < H; ++h) {
        const ref::Matrix& m = ref_attention[static_cast<std::size_t>((l * B + b) * H + h)];
        REQUIRE(m.rows() == T);
        REQUIRE(m.cols() == T);
        std::copy(m.data(), m.data() + T * T,
                  expected.begin() + static_cast<std::ptrdiff_t>((b * H + h) * T * T));
      }
    const std::span<const Real> att(ws.layers[l].mixer.att, count);
    const double att_err = relative_error<Real, double>(att, expected);
    CHECK(att_err < tolerance);
    g_worst_error = std::max(g_worst_error, att_err);
    bool causal = true;
    for (int bh = 0; bh < B * H; ++bh)
      for (int i = 0; i < T; ++i)
        for (int j = i + 1; j < T; ++j)
          causal = causal && att[static_cast<std::size_t>((bh * T + i) * T + j)] == Real(0);
    CHECK(causal);
  }

  // every parameter gradient; padding stays zero
  std::vector<Real> grads(Net::parameter_count, Real(0));
  Net::backward(params, grads, ws);
  for (const auto& t : Net::tensors()) {
    CAPTURE(t.name);
    const ref::Matrix& g = ref_grads[t.name];
    REQUIRE(static_cast<std::size_t>(g.size()) == t.size);
    const double err =
        relative_error<Real, double>(std::span<const Real>(grads).subspan(t.offset, t.size),
                                     std::span<const double>(g.data(), t.size));
    CAPTURE(err);
    CHECK(err < tolerance);
    g_worst_error = std::max(g_worst_error, err);
  }
  const std::vector<bool> padding = padding_mask<Net>();
  std::size_t nonzero_padding = 0;
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (padding[i] && grads[i] != Real(0)) ++nonzero_padding;
  CHECK(nonzero_padding == 0);
}

template <class Net>
void check_shape_against_reference(std::uint64_t seed) {
  constexpr int max_len = Net::shape.max_len;
  g_worst_error = 0;
  for (int B : {1, 3})
    for (int T : {max_len - 3, max_len})
      for (float bias : {0.0f, 0.8f}) check_against_reference<Net>(B, T, bias, seed++ * 7919);
  MESSAGE("reference check " << std::string(std::is_same_v<typename Net::Scalar, float> ? "float"
                                                                                        : "double")
                             << " D=" << Net::D << " H=" << Net::shape.heads << " L=" << Net::L
                             << ": worst relative error " << g_worst_error);
}

// dL/dp of the fast double model against central differences of its own forward.
template <class Net>
void check_finite_differences(int B, int T, float bias, std::uint64_t seed) {
  static_assert(std::is_same_v<typename Net::Scalar, double>);
  CAPTURE(Net::shape.d_model);
  CAPTURE(Net::shape.heads);
  CAPTURE(Net::shape.layers);
  std::vector<double> params = to_flat<Net>(random_reference_parameters<Net>(seed));
  const TokenBatch batch = random_token_batch(Net::V, B, T, seed + 1);
  const emergent::ForwardInput in{
      B, T, batch.tokens32, batch.targets32, batch.weights_f, batch.pattern, bias};
  typename Net::Workspace ws;
  Net::forward(params, in, ws);
  std::vector<double> grads(Net::parameter_count, 0.0);
  Net::backward(params, grads, ws);

  const double eps = 1e-6;
  std::mt19937_64 rng(seed + 2);
  std::size_t checked = 0;
  double worst = 0;
  for (const auto& t : Net::tensors()) {
    CAPTURE(t.name);
    std::vector<std::size_t> indices(t.size);
    for (std::size_t i = 0; i < t.size; ++i) indices[i] = i;
    if (indices.size() > 20) {
      std::shuffle(indices.begin(), indices.end(), rng);
      indices.resize(20);
    }
    for (std::size_t i : indices) {
      double& value = params[t.offset + i];
      const double saved = value;
      value = saved + eps;
      const double plus = Net::forward(params, in, ws);
      value = saved - eps;
      const double minus = Net::forward(params, in, ws);
      value = saved;
      const double numeric = (plus - minus) / (2 * eps);
      const double analytic = grads[t.offset + i];
      CAPTURE(i);
      CAPTURE(numeric);
      CAPTURE(analytic);
      CHECK(std::abs(numeric - analytic) <= 1e-6 * std::abs(analytic) + 1e-9);
      worst = std::max(worst, std::abs(numeric - analytic) / (1e-6 * std::abs(analytic) + 1e-9));
      ++checked;
    }
  }
  CHECK(checked > 0);
  MESSAGE("finite differences: " << checked << " entries, worst error / tolerance = " << worst);
}

constexpr Shape kTinyHeads{
    .vocab = 3, .d_model = 6, .heads = 6, .layers = 2, .d_ff = 7, .max_len = 9};
constexpr Shape kOneHead{
    .vocab = 5, .d_model = 12, .heads = 1, .layers = 1, .d_ff = 5, .max_len = 7};
constexpr Shape kThreeLayers{
    .vocab = 2, .d_model = 8, .heads = 4, .layers = 3, .d_ff = 16, .max_len = 12};
constexpr Shape kHeadsEqualWidth{
    .vocab = 4, .d_model = 16, .heads = 16, .layers = 1, .d_ff = 8, .max_len = 10};
// Attention has a direct path up to T = 64 and a blocked GEMM path (128-query blocks) beyond:
// T = 64 and 67 sit on either side of the switch, T = 297 and 300 span three query blocks.
constexpr Shape kPathSwitch{
    .vocab = 3, .d_model = 8, .heads = 2, .layers = 1, .d_ff = 8, .max_len = 67};
constexpr Shape kLongSequence{
    .vocab = 3, .d_model = 8, .heads = 2, .layers = 2, .d_ff = 8, .max_len = 300};
// The cellular automaton's depth: 4 layers, vocab 4 (colours), a sequence of several states.
constexpr Shape kFourLayers{
    .vocab = 4, .d_model = 8, .heads = 2, .layers = 4, .d_ff = 12, .max_len = 24};

}  // namespace

TEST_CASE_TEMPLATE("fast model matches the Eigen reference: loss, attention, every gradient", Real,
                   float, double) {
  check_shape_against_reference<Model<DotAttention, kTinyHeads, Real>>(11);
  check_shape_against_reference<Model<DotAttention, kOneHead, Real>>(23);
  check_shape_against_reference<Model<DotAttention, kThreeLayers, Real>>(37);
}

TEST_CASE_TEMPLATE("heads == d_model (d_head 1, 16 heads) matches the reference", Real, float,
                   double) {
  check_shape_against_reference<Model<DotAttention, kHeadsEqualWidth, Real>>(41);
}

TEST_CASE_TEMPLATE("long sequences (blocked attention path) match the reference", Real, float,
                   double) {
  check_shape_against_reference<Model<DotAttention, kPathSwitch, Real>>(43);
  check_shape_against_reference<Model<DotAttention, kLongSequence, Real>>(47);
}

TEST_CASE_TEMPLATE("4-layer model (the cellular automaton's depth) matches the reference", Real,
                   float, double) {
  check_shape_against_reference<Model<DotAttention, kFourLayers, Real>>(53);
}

TEST_CASE("fast double model: gradients match central finite differences for every tensor") {
  // ~3000 tiny forward passes: one thread, so that the test stays fast on a loaded machine
  // (threads that wait at OpenMP barriers for a descheduled sibling cost milliseconds each)
  const int saved_threads = emergent::thread_count();
  emergent::set_thread_count(1);
  check_finite_differences<Model<DotAttention, kTinyHeads, double>>(2, 8, 0.8f, 101);
  check_finite_differences<Model<DotAttention, kOneHead, double>>(3, 7, 0.0f, 103);
  check_finite_differences<Model<DotAttention, kThreeLayers, double>>(2, 12, 0.8f, 107);
  check_finite_differences<Model<DotAttention, kHeadsEqualWidth, double>>(1, 10, 0.8f, 109);
  check_finite_differences<Model<DotAttention, kFourLayers, double>>(2, 23, 0.8f, 113);
  emergent::set_thread_count(saved_threads);
}

TEST_CASE_TEMPLATE("backward accumulates: two backward passes give twice the gradient", Real, float,
                   double) {
  using Net = Model<DotAttention, kThreeLayers, Real>;
  const std::vector<Real> params = to_flat<Net>(random_reference_parameters<Net>(5));
  const TokenBatch batch = random_token_batch(Net::V, 3, 10, 6);
  const emergent::ForwardInput in{
      3, 10, batch.tokens32, batch.targets32, batch.weights_f, batch.pattern, 0.8f};
  typename Net::Workspace ws;
  Net::forward(params, in, ws);
  std::vector<Real> once(Net::parameter_count, Real(0)), acc(Net::parameter_count, Real(0));
  Net::backward(params, once, ws);
  const double tolerance = std::is_same_v<Real, float> ? 1e-6 : 1e-14;
  const std::vector<bool> padding = padding_mask<Net>();
  auto check_multiple = [&](double factor) {
    CAPTURE(factor);
    for (const auto& t : Net::tensors()) {
      CAPTURE(t.name);
      std::vector<double> expected(t.size);
      for (std::size_t i = 0; i < t.size; ++i) expected[i] = factor * double(once[t.offset + i]);
      CHECK(relative_error<Real, double>(std::span<const Real>(acc).subspan(t.offset, t.size),
                                         expected) < tolerance);
    }
    for (std::size_t i = 0; i < acc.size(); ++i)
      if (padding[i]) REQUIRE(acc[i] == Real(0));
  };
  // twice on the same forward: backward must neither overwrite the gradients nor consume the
  // forward's activations
  Net::backward(params, acc, ws);
  Net::backward(params, acc, ws);
  check_multiple(2.0);
  // a third time after a fresh forward of the same batch
  Net::forward(params, in, ws);
  Net::backward(params, acc, ws);
  check_multiple(3.0);
}

TEST_CASE("flat buffer layout: tensors aligned, padding exists and stays zero in gradients") {
  using Net = Model<DotAttention, kTinyHeads, float>;
  const std::vector<bool> padding = padding_mask<Net>();
  const auto pad_count = static_cast<std::size_t>(std::count(padding.begin(), padding.end(), true));
  CHECK(pad_count > 0);  // d_model 6 etc. are not multiples of 16: there is padding to check
  std::size_t used = 0;
  for (const auto& t : Net::tensors()) used += t.size;
  CHECK(used + pad_count == Net::parameter_count);
  CHECK(Net::parameter_count % emergent::kTensorAlignment == 0);
  // gradient padding after a biased forward/backward (checked inside check_against_reference
  // too, here with an initialised model)
  std::vector<float> params(Net::parameter_count), grads(Net::parameter_count, 0.0f);
  Net::init(params, 3);
  const TokenBatch batch = random_token_batch(Net::V, 2, 9, 4);
  typename Net::Workspace ws;
  Net::forward(params,
               {2, 9, batch.tokens32, batch.targets32, batch.weights_f, batch.pattern, 0.8f}, ws);
  Net::backward(params, grads, ws);
  for (std::size_t i = 0; i < grads.size(); ++i)
    if (padding[i]) REQUIRE(grads[i] == 0.0f);
}

TEST_CASE(
    "Model::init: deterministic per seed, seed-dependent, PyTorch default statistics, zero "
    "padding") {
  // docs/model.md: Linear weights and biases ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (a bias takes
  // the fan-in of its weight), head likewise, embeddings ~ N(0, 1), LayerNorm weight 1, bias 0.
  // d_ff != d_model so that mlp.proj.bias (fan-in F) and the other biases (fan-in D) differ.
  constexpr Shape s{
      .vocab = 64, .d_model = 512, .heads = 8, .layers = 1, .d_ff = 1024, .max_len = 64};
  using Net = Model<DotAttention, s, float>;
  std::vector<float> a(Net::parameter_count, 5.0f), b(Net::parameter_count, -5.0f),
      c(Net::parameter_count);
  Net::init(a, 1234);
  Net::init(b, 1234);
  Net::init(c, 1235);
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);

  const std::vector<bool> padding = padding_mask<Net>();
  for (std::size_t i = 0; i < a.size(); ++i)
    if (padding[i]) REQUIRE(a[i] == 0.0f);

  std::size_t random_entries = 0, differing = 0;
  std::set<std::string> kinds;
  for (const auto& t : Net::tensors()) {
    CAPTURE(t.name);
    const std::span<const float> x(a.data() + t.offset, t.size);
    const bool is_norm = t.name.find("ln") != std::string::npos;
    if (is_norm) {
      const float expected = t.name.ends_with(".weight") ? 1.0f : 0.0f;
      CHECK(std::all_of(x.begin(), x.end(), [&](float v) { return v == expected; }));
      CHECK(std::equal(x.begin(), x.end(), c.begin() + static_cast<std::ptrdiff_t>(t.offset)));
      kinds.insert("layernorm");
      continue;
    }
    double expected_std = 0, bound = 0;
    if (t.name.starts_with("embed.")) {
      expected_std = 1.0;
      kinds.insert("embedding");
    } else {
      const int fan_in = t.name.ends_with("mlp.proj.weight") || t.name.ends_with("mlp.proj.bias")
                             ? s.d_ff
                             : s.d_model;
      bound = 1.0 / std::sqrt(double(fan_in));
      expected_std = bound / std::sqrt(3.0);
      kinds.insert(t.shape.size() == 2 ? "linear weight" : "linear bias");
    }
    double sum = 0, sum2 = 0, largest = 0;
    for (float v : x) {
      sum += v;
      sum2 += double(v) * v;
      largest = std::max(largest, double(std::abs(v)));
    }
    const double n = double(t.size), mean = sum / n, std = std::sqrt(sum2 / n - mean * mean);
    CAPTURE(std);
    CAPTURE(expected_std);
    CAPTURE(mean);
    REQUIRE(t.size >= 512);  // enough entries for a 10% test of the standard deviation
    CHECK(std::abs(std - expected_std) < 0.1 * expected_std);
    CHECK(std::abs(mean) < 6 * expected_std / std::sqrt(n));
    if (bound > 0) {
      CHECK(largest <= bound);
      CHECK(largest > 0.9 * bound);  // uniform, not a narrower distribution
    } else {
      CHECK(largest > 2.5);  // a normal's tails, not a uniform's
    }
    for (std::size_t i = 0; i < t.size; ++i) differing += a[t.offset + i] != c[t.offset + i];
    random_entries += t.size;
  }
  CHECK(kinds.size() == 4);
  // another seed: (almost) every random entry differs
  CHECK(differing > random_entries * 99 / 100);

  // the double model draws the same values
  using NetD = Model<DotAttention, s, double>;
  std::vector<double> d(NetD::parameter_count);
  NetD::init(d, 1234);
  double worst = 0;
  for (std::size_t i = 0; i < d.size(); ++i)
    worst = std::max(worst, std::abs(d[i] - double(a[i])) / std::max(1.0, std::abs(d[i])));
  CHECK(worst < 1e-7);
}
