// The Eigen double-precision reference (include/emergent/reference/): every op's backward
// checked against central finite differences of its forward on awkward sizes, the whole
// transformer checked entry by entry, and sanity checks of the attention probabilities.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/reference/cross_entropy.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/embedding.hpp>
#include <emergent/reference/gelu.hpp>
#include <emergent/reference/layernorm.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/transformer.hpp>
#include <random>
#include <string>
#include <vector>

namespace {

using namespace emergent::reference;

Matrix random_matrix(Index rows, Index cols, std::mt19937_64& rng, double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  Matrix m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

Vector random_vector(Index n, std::mt19937_64& rng, double mean = 0.0) {
  std::normal_distribution<double> normal(mean, 1.0);
  Vector v(n);
  for (Index i = 0; i < n; ++i) v(i) = normal(rng);
  return v;
}

// Random 0/1 pattern [T,T].
Matrix random_pattern(Index T, std::mt19937_64& rng) {
  std::bernoulli_distribution coin(0.5);
  Matrix p(T, T);
  for (Index i = 0; i < p.size(); ++i) p.data()[i] = coin(rng) ? 1.0 : 0.0;
  return p;
}

// sum(a .* b): turns an op's output into a scalar whose gradient w.r.t. the output is b.
double dot(const Matrix& a, const Matrix& b) { return (a.array() * b.array()).sum(); }

// Compares `analytic`, the claimed gradient of loss() w.r.t. `x`, with central differences,
// entry by entry: |analytic - numeric| <= 1e-6 * max(|analytic|, |numeric|) + 1e-9.
template <class Tensor, class Loss>
void check_gradient(Tensor& x, const Tensor& analytic, Loss&& loss, const std::string& what) {
  REQUIRE(x.size() == analytic.size());
  const double eps = 1e-6;
  double worst = 0;
  for (Index i = 0; i < x.size(); ++i) {
    const double saved = x.data()[i];
    x.data()[i] = saved + eps;
    const double plus = loss();
    x.data()[i] = saved - eps;
    const double minus = loss();
    x.data()[i] = saved;
    const double numeric = (plus - minus) / (2 * eps);
    const double a = analytic.data()[i];
    const double excess =
        std::abs(a - numeric) - (1e-6 * std::max(std::abs(a), std::abs(numeric)) + 1e-9);
    worst = std::max(worst, excess);
    if (excess > 0) {
      INFO(what << " entry " << i << ": analytic " << a << ", numeric " << numeric);
      CHECK(excess <= 0);
    }
  }
  CHECK(worst <= 0);
}

}  // namespace

TEST_CASE("reference embedding: forward gathers and sums, backward scatter-adds") {
  std::mt19937_64 rng(1);
  const int V = 3, D = 6, T = 5, B = 2, max_len = 7;
  Matrix token = random_matrix(V, D, rng), position = random_matrix(max_len, D, rng);
  const std::vector<int> tokens{2, 0, 0, 1, 2, 1, 1, 2, 0, 0};
  const Matrix x = embedding_forward(tokens, T, token, position);
  CHECK((x.row(7) - token.row(2) - position.row(2)).norm() < 1e-15);

  const Matrix R = random_matrix(B * T, D, rng);
  Matrix d_token = Matrix::Zero(V, D), d_position = Matrix::Zero(max_len, D);
  embedding_backward(R, tokens, T, d_token, d_position);
  CHECK(d_position.row(5).norm() == 0.0);  // rows past T get no gradient
  auto loss = [&] { return dot(embedding_forward(tokens, T, token, position), R); };
  check_gradient(token, d_token, loss, "d_token_table");
  check_gradient(position, d_position, loss, "d_position_table");
}

TEST_CASE("reference layernorm: normalises and matches finite differences") {
  std::mt19937_64 rng(2);
  const Index N = 10, D = 6;
  Matrix x = random_matrix(N, D, rng, 2.0);
  x.rowwise() += random_vector(D, rng).transpose();  // nonzero means
  Vector weight = random_vector(D, rng, 1.0), bias = random_vector(D, rng);

  const Matrix y0 = layernorm_forward(x, Vector::Ones(D), Vector::Zero(D));
  for (Index n = 0; n < N; ++n) {
    CHECK(std::abs(y0.row(n).mean()) < 1e-12);
    const double var = y0.row(n).squaredNorm() / static_cast<double>(D);
    CHECK(var == doctest::Approx(1.0).epsilon(1e-4));  // eps = 1e-5 makes it slightly < 1
  }

  const Matrix R = random_matrix(N, D, rng);
  Vector d_weight = Vector::Zero(D), d_bias = Vector::Zero(D);
  Matrix d_x = layernorm_backward(R, x, weight, d_weight, d_bias);
  auto loss = [&] { return dot(layernorm_forward(x, weight, bias), R); };
  check_gradient(x, d_x, loss, "d_x");
  check_gradient(weight, d_weight, loss, "d_weight");
  check_gradient(bias, d_bias, loss, "d_bias");
}

TEST_CASE("reference linear: with and without bias") {
  std::mt19937_64 rng(3);
  const Index N = 10, in = 6, out = 7;
  Matrix x = random_matrix(N, in, rng), W = random_matrix(out, in, rng);
  Vector b = random_vector(out, rng);
  const Matrix R = random_matrix(N, out, rng);

  Matrix d_W = Matrix::Zero(out, in);
  Vector d_b = Vector::Zero(out);
  Matrix d_x = linear_backward(R, x, W, d_W, d_b);
  auto loss = [&] { return dot(linear_forward(x, W, b), R); };
  check_gradient(x, d_x, loss, "d_x");
  check_gradient(W, d_W, loss, "d_W");
  check_gradient(b, d_b, loss, "d_b");

  Matrix d_W_head = Matrix::Zero(out, in);
  Matrix d_x_head = linear_backward(R, x, W, d_W_head);
  auto head_loss = [&] { return dot(linear_forward(x, W), R); };
  check_gradient(x, d_x_head, head_loss, "head d_x");
  check_gradient(W, d_W_head, head_loss, "head d_W");
}

TEST_CASE("reference gelu: exact erf form") {
  Matrix z(1, 3);
  z << -1.0, 0.0, 1.0;
  const Matrix y = gelu_forward(z);
  CHECK(y(0, 0) == doctest::Approx(-0.15865525393145707).epsilon(1e-14));
  CHECK(y(0, 1) == 0.0);
  CHECK(y(0, 2) == doctest::Approx(0.8413447460685429).epsilon(1e-14));

  std::mt19937_64 rng(4);
  Matrix x = random_matrix(5, 7, rng, 2.0);
  const Matrix R = random_matrix(5, 7, rng);
  auto loss = [&] { return dot(gelu_forward(x), R); };
  check_gradient(x, Matrix(gelu_backward(R, x)), loss, "d_z");
}

TEST_CASE("reference dot attention: finite differences on awkward head counts") {
  std::mt19937_64 rng(5);
  const Index T = 5, D = 6;
  const Matrix pattern = random_pattern(T, rng);
  for (int heads : {1, 3, 6}) {
    for (double c : {0.0, 0.7}) {
      CAPTURE(heads);
      CAPTURE(c);
      Matrix qkv = random_matrix(T, 3 * D, rng);
      const Matrix R = random_matrix(T, D, rng);
      const DotAttentionOutput fwd = dot_attention_forward(qkv, heads, pattern, c);
      REQUIRE(fwd.probabilities.size() == static_cast<std::size_t>(heads));
      const Matrix d_qkv = dot_attention_backward(R, qkv, heads, fwd.probabilities);
      auto loss = [&] { return dot(dot_attention_forward(qkv, heads, pattern, c).out, R); };
      check_gradient(qkv, d_qkv, loss, "d_qkv");
    }
  }
}

TEST_CASE("reference dot attention: causal softmax rows, bias concentrates attention") {
  std::mt19937_64 rng(6);
  const Index T = 5, D = 6;
  const int heads = 3;
  const Matrix qkv = random_matrix(T, 3 * D, rng);
  const DotAttentionOutput fwd = dot_attention_forward(qkv, heads, random_pattern(T, rng), 0.7);
  for (const Matrix& att : fwd.probabilities) {
    for (Index i = 0; i < T; ++i) {
      CHECK(att.row(i).sum() == doctest::Approx(1.0).epsilon(1e-14));
      for (Index j = 0; j < T; ++j) {
        if (j > i)
          CHECK(att(i, j) == 0.0);
        else
          CHECK(att(i, j) > 0.0);
      }
    }
  }

  // One-hot pattern: query i should attend to key target[i] <= i; a large c makes it so.
  const std::vector<Index> target{0, 0, 1, 3, 2};
  Matrix one_hot = Matrix::Zero(T, T);
  for (Index i = 0; i < T; ++i) one_hot(i, target[static_cast<std::size_t>(i)]) = 1.0;
  const DotAttentionOutput biased = dot_attention_forward(qkv, heads, one_hot, 50.0);
  for (const Matrix& att : biased.probabilities)
    for (Index i = 0; i < T; ++i) CHECK(att(i, target[static_cast<std::size_t>(i)]) > 0.999);

  // c = 0 with an empty pattern is plain attention, the same as c = 0 with any pattern.
  const DotAttentionOutput plain = dot_attention_forward(qkv, heads, Matrix(), 0.0);
  const DotAttentionOutput zero_c = dot_attention_forward(qkv, heads, one_hot, 0.0);
  CHECK((plain.out - zero_c.out).norm() == 0.0);
}

TEST_CASE("reference cross entropy: weighted mean and finite differences") {
  std::mt19937_64 rng(7);
  const int B = 2, T = 5, V = 3;
  const std::vector<int> targets{0, 2, 1, 1, 0, 2, 2, 0, 1, 0};
  const std::vector<double> weights{0.0, 1.0, 0.5, 0.0, 2.0};

  // uniform logits: CE = log V everywhere, whatever the weights
  CHECK(cross_entropy_forward(Matrix::Zero(B * T, V), targets, B, T, weights) ==
        doctest::Approx(std::log(3.0)).epsilon(1e-14));

  Matrix logits = random_matrix(B * T, V, rng, 2.0);
  const Matrix d_logits = cross_entropy_backward(logits, targets, B, T, weights);
  CHECK(d_logits.row(0).norm() == 0.0);  // weight 0
  CHECK(d_logits.row(8).norm() == 0.0);  // b = 1, t = 3: weight 0
  auto loss = [&] { return cross_entropy_forward(logits, targets, B, T, weights); };
  check_gradient(logits, d_logits, loss, "d_logits");

  CHECK_THROWS_AS(cross_entropy_forward(logits, targets, B, T, std::vector<double>(5, 0.0)),
                  emergent::Error);
}

TEST_CASE("reference transformer: every parameter entry against finite differences") {
  const int V = 3, D = 6, L = 2, F = 7, max_len = 7, B = 2, T = 5;
  const std::vector<int> tokens{2, 0, 0, 1, 2, 1, 1, 2, 0, 0};
  const std::vector<int> targets{0, 0, 1, 2, 1, 1, 2, 0, 0, 2};
  const std::vector<double> weights{0.0, 1.0, 0.5, 0.0, 2.0};
  for (int heads : {1, 3, 6}) {
    CAPTURE(heads);
    std::mt19937_64 rng(100 + static_cast<unsigned>(heads));
    Parameters p = random_parameters(V, D, heads, L, F, max_len, rng, 0.5);
    const Matrix pattern = random_pattern(T, rng);
    const double c = 0.7;

    Parameters grads;  // empty: filled with zeros on first use
    std::vector<Matrix> attention;
    const double loss = transformer_loss_and_gradients(p, heads, tokens, targets, B, T, weights,
                                                       pattern, c, &grads, &attention);
    CHECK(std::isfinite(loss));
    REQUIRE(attention.size() == static_cast<std::size_t>(L * B * heads));
    for (const Matrix& att : attention) {
      CHECK(att.rows() == T);
      CHECK(att(0, 0) == doctest::Approx(1.0));
      CHECK(att(1, 2) == 0.0);
    }
    REQUIRE(grads.tensors.size() == parameter_names(L).size());

    auto loss_of_p = [&] {
      return transformer_loss_and_gradients(p, heads, tokens, targets, B, T, weights, pattern, c,
                                            nullptr, nullptr);
    };
    for (const std::string& name : parameter_names(L)) {
      CAPTURE(name);
      check_gradient(p[name], grads[name], loss_of_p, name);
    }
    CHECK(grads["embed.position.weight"].row(T).norm() == 0.0);  // past T: unused

    // gradients accumulate
    const Parameters once = grads;
    transformer_loss_and_gradients(p, heads, tokens, targets, B, T, weights, pattern, c, &grads,
                                   nullptr);
    for (const auto& [name, g] : once.tensors)
      CHECK((grads[name] - 2 * g).norm() <= 1e-12 * (1 + g.norm()));
  }
}

TEST_CASE("reference transformer: names, shapes and errors") {
  std::mt19937_64 rng(9);
  const Parameters p = random_parameters(3, 6, 3, 2, 7, 7, rng, 0.02);
  const emergent::Shape s = infer_shape(p, 3);
  CHECK(s == emergent::Shape{
                 .vocab = 3, .d_model = 6, .heads = 3, .layers = 2, .d_ff = 7, .max_len = 7});
  CHECK(p["layers.1.mixer.qkv.weight"].rows() == 18);
  CHECK(p["layers.1.mixer.qkv.bias"].rows() == 1);
  CHECK(p["layers.1.mixer.qkv.bias"].cols() == 18);
  const Parameters z = zero_like(p);
  CHECK(z.tensors.size() == p.tensors.size());
  CHECK(z["head.weight"].norm() == 0.0);
  CHECK_THROWS_AS(infer_shape(p, 4), emergent::Error);  // 6 % 4 != 0
  CHECK_THROWS_AS(p["no.such.tensor"], emergent::Error);
  Parameters broken = p;
  broken["layers.0.mlp.proj.weight"] = Matrix::Zero(6, 6);
  CHECK_THROWS_AS(infer_shape(broken, 3), emergent::Error);
}
