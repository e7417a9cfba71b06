// The whole pre-LN GPT of docs/model.md in the Eigen reference, loss and gradients:
//   x      = embed.token.weight[tokens] + embed.position.weight[0..T-1]          [B*T,D]
//   per layer l:  x += out(attention(qkv(LN1(x))));  x += proj(GELU(fc(LN2(x))))
//   logits = LN_final(x) head.weight^T                                           [B*T,V]
//   loss   = weighted cross entropy (cross_entropy.hpp)
// Parameters are held by name (the names of docs/model.md); vectors (biases, LayerNorm
// weights) are stored as 1-row matrices [1,n]. Activations are [B*T, width], row b*T + t.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/reference/cross_entropy.hpp>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/embedding.hpp>
#include <emergent/reference/gelu.hpp>
#include <emergent/reference/layernorm.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/matrix.hpp>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace emergent::reference {

struct Parameters {
  std::map<std::string, Matrix> tensors;  // name -> [rows, cols]; vectors are [1, n]

  // Inserts an empty matrix for an unknown name (std::map semantics).
  Matrix& operator[](const std::string& name) { return tensors[name]; }
  // Throws emergent::Error naming the tensor when it is missing.
  const Matrix& operator[](const std::string& name) const {
    auto it = tensors.find(name);
    require(it != tensors.end(), name, "no such parameter tensor");
    return it->second;
  }
  bool contains(const std::string& name) const { return tensors.count(name) != 0; }
};

// The parameter names of an L-layer model, in the order of the contiguous buffer (docs/model.md).
inline std::vector<std::string> parameter_names(int layers) {
  std::vector<std::string> names{"embed.token.weight", "embed.position.weight"};
  for (int l = 0; l < layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    for (const char* suffix : {"ln1.weight", "ln1.bias", "mixer.qkv.weight", "mixer.qkv.bias",
                               "mixer.out.weight", "mixer.out.bias", "ln2.weight", "ln2.bias",
                               "mlp.fc.weight", "mlp.fc.bias", "mlp.proj.weight", "mlp.proj.bias"})
      names.push_back(p + suffix);
  }
  names.insert(names.end(), {"final_ln.weight", "final_ln.bias", "head.weight"});
  return names;
}

// All tensors of a model of the given shape, filled with zeros.
inline Parameters zero_parameters(const Shape& s) {
  const Index V = s.vocab, D = s.d_model, F = s.d_ff;
  Parameters p;
  p["embed.token.weight"] = Matrix::Zero(V, D);
  p["embed.position.weight"] = Matrix::Zero(s.max_len, D);
  for (int l = 0; l < s.layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    p[pre + "ln1.weight"] = Matrix::Zero(1, D);
    p[pre + "ln1.bias"] = Matrix::Zero(1, D);
    p[pre + "mixer.qkv.weight"] = Matrix::Zero(3 * D, D);
    p[pre + "mixer.qkv.bias"] = Matrix::Zero(1, 3 * D);
    p[pre + "mixer.out.weight"] = Matrix::Zero(D, D);
    p[pre + "mixer.out.bias"] = Matrix::Zero(1, D);
    p[pre + "ln2.weight"] = Matrix::Zero(1, D);
    p[pre + "ln2.bias"] = Matrix::Zero(1, D);
    p[pre + "mlp.fc.weight"] = Matrix::Zero(F, D);
    p[pre + "mlp.fc.bias"] = Matrix::Zero(1, F);
    p[pre + "mlp.proj.weight"] = Matrix::Zero(D, F);
    p[pre + "mlp.proj.bias"] = Matrix::Zero(1, D);
  }
  p["final_ln.weight"] = Matrix::Zero(1, D);
  p["final_ln.bias"] = Matrix::Zero(1, D);
  p["head.weight"] = Matrix::Zero(V, D);
  return p;
}

// Same names and shapes as `p`, all zeros (a gradient accumulator).
inline Parameters zero_like(const Parameters& p) {
  Parameters z;
  for (const auto& [name, tensor] : p.tensors) z[name] = Matrix::Zero(tensor.rows(), tensor.cols());
  return z;
}

// The shape of the model whose tensors `p` holds (heads is not recorded by the tensors), after
// checking that every tensor of docs/model.md is present with its shape.
inline Shape infer_shape(const Parameters& p, int heads) {
  Shape s;
  s.vocab = static_cast<int>(p["embed.token.weight"].rows());
  s.d_model = static_cast<int>(p["embed.token.weight"].cols());
  s.max_len = static_cast<int>(p["embed.position.weight"].rows());
  s.heads = heads;
  s.layers = 0;
  while (p.contains("layers." + std::to_string(s.layers) + ".ln1.weight")) ++s.layers;
  require(s.layers >= 1, "layers.0.ln1.weight", "no transformer layer present");
  s.d_ff = static_cast<int>(p["layers.0.mlp.fc.weight"].rows());
  require(s.valid(), "reference::infer_shape", "invalid shape (d_model % heads != 0?)");
  const Parameters expected = zero_parameters(s);
  for (const auto& [name, tensor] : expected.tensors) {
    const Matrix& actual = p[name];
    require(actual.rows() == tensor.rows() && actual.cols() == tensor.cols(), name,
            "shape [" + std::to_string(actual.rows()) + "," + std::to_string(actual.cols()) +
                "], expected [" + std::to_string(tensor.rows()) + "," +
                std::to_string(tensor.cols()) + "]");
  }
  return s;
}

// Random parameters for tests: every tensor entry ~ N(0, scale), except LayerNorm weights
// ~ 1 + N(0, scale), so that biases and LayerNorm parameters are exercised too.
inline Parameters random_parameters(int vocab, int d_model, int heads, int layers, int d_ff,
                                    int max_len, std::mt19937_64& rng, double scale) {
  const Shape s{.vocab = vocab,
                .d_model = d_model,
                .heads = heads,
                .layers = layers,
                .d_ff = d_ff,
                .max_len = max_len};
  require(s.valid(), "reference::random_parameters", "invalid shape");
  Parameters p = zero_parameters(s);
  std::normal_distribution<double> normal(0.0, scale);
  for (const std::string& name : parameter_names(layers)) {  // fixed order: reproducible
    const bool is_layernorm_weight =
        name.find("ln") != std::string::npos && name.ends_with(".weight");
    Matrix& m = p[name];
    for (Index i = 0; i < m.size(); ++i)
      m.data()[i] = (is_layernorm_weight ? 1.0 : 0.0) + normal(rng);
  }
  return p;
}

namespace detail {
inline Vector as_vector(const Matrix& row) {
  return Eigen::Map<const Vector>(row.data(), row.size());
}
inline void add_vector(Matrix& row, const Vector& v) { row += v.transpose(); }

// What the backward needs of one layer's forward.
struct LayerActivations {
  Matrix x_in;                                     // [B*T,D] residual stream entering the layer
  Matrix a;                                        // [B*T,D] LN1(x_in)
  Matrix qkv;                                      // [B*T,3D]
  std::vector<std::vector<Matrix>> probabilities;  // [B][H] of [T,T]
  Matrix o;                                        // [B*T,D] attention output, heads concatenated
  Matrix x_mid;                                    // [B*T,D] x_in + mixer
  Matrix m;                                        // [B*T,D] LN2(x_mid)
  Matrix h_pre;                                    // [B*T,F] fc(m)
  Matrix h_post;                                   // [B*T,F] GELU(h_pre)
};
}  // namespace detail

// p: parameters (layers and sizes inferred, heads given); tokens, targets [B*T] (row b*T + t);
// weights [T]; bias_pattern [T,T] (may be empty when bias_strength is 0) -> loss.
// grads (nullable): gradients ACCUMULATED into it; missing tensors are created as zeros.
// attention (nullable): OVERWRITTEN with L*B*H matrices [T,T], the probabilities of layer l,
// sequence b, head h at index (l*B + b)*H + h.
inline double transformer_loss_and_gradients(const Parameters& p, int heads,
                                             const std::vector<int>& tokens,
                                             const std::vector<int>& targets, int B, int T,
                                             const std::vector<double>& weights,
                                             const Matrix& bias_pattern, double bias_strength,
                                             Parameters* grads, std::vector<Matrix>* attention) {
  using detail::as_vector;
  const Shape s = infer_shape(p, heads);
  const Index D = s.d_model;
  require(B >= 1 && T >= 1 && T <= s.max_len, "transformer_loss_and_gradients",
          "need B >= 1 and 1 <= T <= max_len");
  require(tokens.size() == static_cast<std::size_t>(B) * static_cast<std::size_t>(T),
          "transformer_loss_and_gradients", "tokens size is not B*T");
  auto name = [](int l, const char* suffix) {
    return "layers." + std::to_string(l) + "." + suffix;
  };
  auto sequence = [T](Matrix& m, int b) { return m.middleRows(static_cast<Index>(b) * T, T); };

  // ---- forward ----
  std::vector<detail::LayerActivations> acts(static_cast<std::size_t>(s.layers));
  Matrix x = embedding_forward(tokens, T, p["embed.token.weight"], p["embed.position.weight"]);
  for (int l = 0; l < s.layers; ++l) {
    detail::LayerActivations& c = acts[static_cast<std::size_t>(l)];
    c.x_in = x;
    c.a = layernorm_forward(x, as_vector(p[name(l, "ln1.weight")]),
                            as_vector(p[name(l, "ln1.bias")]));
    c.qkv = linear_forward(c.a, p[name(l, "mixer.qkv.weight")],
                           as_vector(p[name(l, "mixer.qkv.bias")]));
    c.o = Matrix(static_cast<Index>(B) * T, D);
    for (int b = 0; b < B; ++b) {
      DotAttentionOutput att =
          dot_attention_forward(sequence(c.qkv, b), heads, bias_pattern, bias_strength);
      sequence(c.o, b) = att.out;
      c.probabilities.push_back(std::move(att.probabilities));
    }
    c.x_mid = x + linear_forward(c.o, p[name(l, "mixer.out.weight")],
                                 as_vector(p[name(l, "mixer.out.bias")]));
    c.m = layernorm_forward(c.x_mid, as_vector(p[name(l, "ln2.weight")]),
                            as_vector(p[name(l, "ln2.bias")]));
    c.h_pre =
        linear_forward(c.m, p[name(l, "mlp.fc.weight")], as_vector(p[name(l, "mlp.fc.bias")]));
    c.h_post = gelu_forward(c.h_pre);
    x = c.x_mid + linear_forward(c.h_post, p[name(l, "mlp.proj.weight")],
                                 as_vector(p[name(l, "mlp.proj.bias")]));
  }
  const Matrix y =
      layernorm_forward(x, as_vector(p["final_ln.weight"]), as_vector(p["final_ln.bias"]));
  const Matrix logits = linear_forward(y, p["head.weight"]);
  const double loss = cross_entropy_forward(logits, targets, B, T, weights);

  if (attention) {
    attention->clear();
    for (const auto& c : acts)
      for (const auto& per_sequence : c.probabilities)
        for (const Matrix& head : per_sequence) attention->push_back(head);
  }
  if (!grads) return loss;

  // ---- backward ----
  Parameters g = zero_like(p);
  auto vec = [&g](const std::string& n) { return Vector(Vector::Zero(g[n].size())); };
  Matrix d_logits = cross_entropy_backward(logits, targets, B, T, weights);
  Matrix d_y = linear_backward(d_logits, y, p["head.weight"], g["head.weight"]);
  Vector d_final_w = vec("final_ln.weight"), d_final_b = vec("final_ln.bias");
  // d_x: the gradient of the residual stream, walked back through the layers
  Matrix d_x = layernorm_backward(d_y, x, as_vector(p["final_ln.weight"]), d_final_w, d_final_b);
  detail::add_vector(g["final_ln.weight"], d_final_w);
  detail::add_vector(g["final_ln.bias"], d_final_b);
  for (int l = s.layers - 1; l >= 0; --l) {
    detail::LayerActivations& c = acts[static_cast<std::size_t>(l)];
    // MLP branch: x_out = x_mid + proj(GELU(fc(LN2(x_mid))))
    Vector d_proj_b = vec(name(l, "mlp.proj.bias")), d_fc_b = vec(name(l, "mlp.fc.bias"));
    Vector d_ln2_w = vec(name(l, "ln2.weight")), d_ln2_b = vec(name(l, "ln2.bias"));
    Matrix d_h_post = linear_backward(d_x, c.h_post, p[name(l, "mlp.proj.weight")],
                                      g[name(l, "mlp.proj.weight")], d_proj_b);
    Matrix d_h_pre = gelu_backward(d_h_post, c.h_pre);
    Matrix d_m = linear_backward(d_h_pre, c.m, p[name(l, "mlp.fc.weight")],
                                 g[name(l, "mlp.fc.weight")], d_fc_b);
    d_x += layernorm_backward(d_m, c.x_mid, as_vector(p[name(l, "ln2.weight")]), d_ln2_w, d_ln2_b);
    // attention branch: x_mid = x_in + out(attention(qkv(LN1(x_in))))
    Vector d_out_b = vec(name(l, "mixer.out.bias")), d_qkv_b = vec(name(l, "mixer.qkv.bias"));
    Vector d_ln1_w = vec(name(l, "ln1.weight")), d_ln1_b = vec(name(l, "ln1.bias"));
    Matrix d_o = linear_backward(d_x, c.o, p[name(l, "mixer.out.weight")],
                                 g[name(l, "mixer.out.weight")], d_out_b);
    Matrix d_qkv(c.qkv.rows(), c.qkv.cols());
    for (int b = 0; b < B; ++b)
      sequence(d_qkv, b) = dot_attention_backward(sequence(d_o, b), sequence(c.qkv, b), heads,
                                                  c.probabilities[static_cast<std::size_t>(b)]);
    Matrix d_a = linear_backward(d_qkv, c.a, p[name(l, "mixer.qkv.weight")],
                                 g[name(l, "mixer.qkv.weight")], d_qkv_b);
    d_x += layernorm_backward(d_a, c.x_in, as_vector(p[name(l, "ln1.weight")]), d_ln1_w, d_ln1_b);
    detail::add_vector(g[name(l, "mlp.proj.bias")], d_proj_b);
    detail::add_vector(g[name(l, "mlp.fc.bias")], d_fc_b);
    detail::add_vector(g[name(l, "ln2.weight")], d_ln2_w);
    detail::add_vector(g[name(l, "ln2.bias")], d_ln2_b);
    detail::add_vector(g[name(l, "mixer.out.bias")], d_out_b);
    detail::add_vector(g[name(l, "mixer.qkv.bias")], d_qkv_b);
    detail::add_vector(g[name(l, "ln1.weight")], d_ln1_w);
    detail::add_vector(g[name(l, "ln1.bias")], d_ln1_b);
  }
  embedding_backward(d_x, tokens, T, g["embed.token.weight"], g["embed.position.weight"]);

  for (auto& [n, tensor] : g.tensors) {
    Matrix& target = grads->tensors[n];
    if (target.size() == 0) target = Matrix::Zero(tensor.rows(), tensor.cols());
    require(target.rows() == tensor.rows() && target.cols() == tensor.cols(), n,
            "gradient tensor has the wrong shape");
    target += tensor;
  }
  return loss;
}

}  // namespace emergent::reference
