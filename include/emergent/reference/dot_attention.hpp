// Causal multi-head dot attention of ONE sequence, with the additive attention bias c * P of
// the paper's intervention (docs/model.md). The qkv projection and the output projection are
// Linear layers outside this op. For each head h (columns h*dh .. (h+1)*dh-1 of q, k and v):
//   scores[i,j] = q_i . k_j / sqrt(dh) + c * P[i,j]   for j <= i,   -inf for j > i
//   att[i,:]    = softmax(scores[i,:])                [H][T,T]
//   o_i         = sum_j att[i,j] v_j                  out = concat_h o   [T,D]
// Backward, per head, with d_att[i,j] = d_o_i . v_j:
//   d_v_j       = sum_i att[i,j] d_o_i
//   d_scores    = att * (d_att - rowsum(att * d_att))        (softmax Jacobian; 0 where masked)
//   d_q_i       = sum_j d_scores[i,j] k_j / sqrt(dh),   d_k_j = sum_i d_scores[i,j] q_i / sqrt(dh)
// P and c are constants of the weights' gradients; dot_attention_bias_gradient gives dL/dc per
// head, sum_ij d_scores[i,j] P[i,j].
// Bidirectional attention (an encoder) is the same with every key j < n visible to every query,
// n the sequence's real length (keys from n on are padding): Visibility{false, n}.
// DotAttentionReference (at the end) is the whole mixer, with its qkv and out Linear layers, as
// the mixer suites take it (tests/mixer_suite.hpp, tests/device/device_mixer_checks.hpp).
#pragma once

#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>
#include <vector>

namespace emergent::reference {

// Which keys query i sees: j <= i (causal), or j < keys (bidirectional; keys < 0: all T).
struct Visibility {
  bool causal = true;
  Index keys = -1;
  Index end(Index i, Index T) const { return causal ? i + 1 : (keys < 0 ? T : keys); }
};

struct DotAttentionOutput {
  Matrix out;                         // [T,D], heads concatenated
  std::vector<Matrix> probabilities;  // [H] of [T,T] (query x key), zero above the diagonal
};

// qkv [T,3D], heads H (D % H == 0), bias_pattern [T,T] (or empty when bias_strength is 0)
//   -> out [T,D], probabilities [H][T,T]
inline DotAttentionOutput dot_attention_forward(const Matrix& qkv, int heads,
                                                const Matrix& bias_pattern, double bias_strength,
                                                Visibility visible = {}) {
  const Index T = qkv.rows(), D = qkv.cols() / 3, H = heads;
  require(qkv.cols() % 3 == 0, "dot_attention_forward", "qkv width is not 3*D");
  require(H >= 1 && D % H == 0, "dot_attention_forward", "d_model is not a multiple of heads");
  const bool biased = bias_pattern.size() != 0;
  require(!biased || (bias_pattern.rows() == T && bias_pattern.cols() == T),
          "dot_attention_forward", "bias pattern is not [T,T]");
  require(biased || bias_strength == 0.0, "dot_attention_forward",
          "nonzero bias strength with an empty bias pattern");
  const Index dh = D / H;
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));

  DotAttentionOutput result{Matrix::Zero(T, D), std::vector<Matrix>(static_cast<std::size_t>(H))};
  for (Index h = 0; h < H; ++h) {
    const Index q0 = h * dh, k0 = D + h * dh, v0 = 2 * D + h * dh;
    Matrix& att = result.probabilities[static_cast<std::size_t>(h)];
    att = Matrix::Zero(T, T);
    for (Index i = 0; i < T; ++i) {
      // scores of the visible keys j <= i; masked ones stay exactly 0 after the softmax
      double max_score = -INFINITY;
      const Index end = visible.end(i, T);
      for (Index j = 0; j < end; ++j) {
        double s = 0;
        for (Index d = 0; d < dh; ++d) s += qkv(i, q0 + d) * qkv(j, k0 + d);
        s = s * scale + (biased ? bias_strength * bias_pattern(i, j) : 0.0);
        att(i, j) = s;
        if (s > max_score) max_score = s;
      }
      double sum = 0;
      for (Index j = 0; j < end; ++j) {
        att(i, j) = std::exp(att(i, j) - max_score);
        sum += att(i, j);
      }
      for (Index j = 0; j < end; ++j) att(i, j) /= sum;
      for (Index j = 0; j < end; ++j)
        for (Index d = 0; d < dh; ++d) result.out(i, h * dh + d) += att(i, j) * qkv(j, v0 + d);
    }
  }
  return result;
}

// The gradient of the scores of head h: d_scores[i,j] = att * (d_att - rowsum(att * d_att)), with
// d_att[i,j] = d_o_i . v_j; zero wherever att is (masked keys).
inline Matrix dot_attention_score_gradient(const Matrix& d_out, const Matrix& qkv, int heads,
                                           const Matrix& att, Index h) {
  const Index T = qkv.rows(), D = qkv.cols() / 3, dh = D / heads;
  const Index v0 = 2 * D + h * dh, o0 = h * dh;
  Matrix d_scores = Matrix::Zero(T, T);
  for (Index i = 0; i < T; ++i) {
    double weighted = 0;  // sum_j att[i,j] d_att[i,j]
    for (Index j = 0; j < T; ++j) {
      double s = 0;
      for (Index d = 0; d < dh; ++d) s += d_out(i, o0 + d) * qkv(j, v0 + d);
      d_scores(i, j) = s;
      weighted += att(i, j) * s;
    }
    for (Index j = 0; j < T; ++j) d_scores(i, j) = att(i, j) * (d_scores(i, j) - weighted);
  }
  return d_scores;
}

// d_out [T,D], qkv [T,3D], heads H, probabilities [H][T,T] from the forward -> d_qkv [T,3D]
inline Matrix dot_attention_backward(const Matrix& d_out, const Matrix& qkv, int heads,
                                     const std::vector<Matrix>& probabilities) {
  const Index T = qkv.rows(), D = qkv.cols() / 3, H = heads, dh = D / H;
  require(d_out.rows() == T && d_out.cols() == D, "dot_attention_backward", "d_out is not [T,D]");
  require(static_cast<Index>(probabilities.size()) == H, "dot_attention_backward",
          "need one probability matrix per head");
  const double scale = 1.0 / std::sqrt(static_cast<double>(dh));

  Matrix d_qkv = Matrix::Zero(T, 3 * D);
  for (Index h = 0; h < H; ++h) {
    const Index q0 = h * dh, k0 = D + h * dh, v0 = 2 * D + h * dh, o0 = h * dh;
    const Matrix& att = probabilities[static_cast<std::size_t>(h)];
    const Matrix d_scores = dot_attention_score_gradient(d_out, qkv, heads, att, h);
    for (Index i = 0; i < T; ++i)
      for (Index j = 0; j < T; ++j)
        for (Index d = 0; d < dh; ++d) {
          d_qkv(j, v0 + d) += att(i, j) * d_out(i, o0 + d);
          d_qkv(i, q0 + d) += d_scores(i, j) * qkv(j, k0 + d) * scale;
          d_qkv(j, k0 + d) += d_scores(i, j) * qkv(i, q0 + d) * scale;
        }
  }
  return d_qkv;
}

// dL/dc_h = sum_ij d_scores[i,j] P[i,j] per head: the derivative of the loss along adding c P to
// head h's scores.
inline std::vector<double> dot_attention_bias_gradient(const Matrix& d_out, const Matrix& qkv,
                                                       int heads,
                                                       const std::vector<Matrix>& probabilities,
                                                       const Matrix& bias_pattern) {
  std::vector<double> grad(static_cast<std::size_t>(heads), 0.0);
  for (Index h = 0; h < heads; ++h)
    grad[static_cast<std::size_t>(h)] =
        dot_attention_score_gradient(d_out, qkv, heads, probabilities[static_cast<std::size_t>(h)],
                                     h)
            .cwiseProduct(bias_pattern)
            .sum();
  return grad;
}

// DotAttention as a mixer reference (reference/mixer.hpp's contract): the qkv Linear,
// dot_attention with an optional bias, the out Linear.
struct DotAttentionReference {
  int heads;
  Matrix pattern = Matrix();  // [T,T] attention bias pattern, empty for none
  double strength = 0.0;
  Visibility visible = {};  // causal by default; {false, n} for an encoder

  Matrix forward(const MixerParameters& p, const Matrix& x) const {
    const Matrix qkv = linear_forward(x, p.at("qkv.weight"), p.at("qkv.bias").row(0).transpose());
    const Matrix o = dot_attention_forward(qkv, heads, pattern, strength, visible).out;
    return linear_forward(o, p.at("out.weight"), p.at("out.bias").row(0).transpose());
  }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dy) const {
    MixerGradients g{Matrix(), zeros_like(p)};
    const Matrix qkv = linear_forward(x, p.at("qkv.weight"), p.at("qkv.bias").row(0).transpose());
    const DotAttentionOutput att = dot_attention_forward(qkv, heads, pattern, strength, visible);
    Vector d_out_bias = Vector::Zero(dy.cols()), d_qkv_bias = Vector::Zero(qkv.cols());
    const Matrix d_o =
        linear_backward(dy, att.out, p.at("out.weight"), g.dparams["out.weight"], d_out_bias);
    const Matrix d_qkv = dot_attention_backward(d_o, qkv, heads, att.probabilities);
    g.dx = linear_backward(d_qkv, x, p.at("qkv.weight"), g.dparams["qkv.weight"], d_qkv_bias);
    g.dparams["out.bias"] = d_out_bias.transpose();
    g.dparams["qkv.bias"] = d_qkv_bias.transpose();
    return g;
  }
};

}  // namespace emergent::reference
