// Gated DeltaNet layer of ONE sequence, in double, written for clarity (tests only): the plain
// token-by-token recurrence in the paper's layout (arXiv 2412.06464, eq. 10), state S [Dh(v) x
// Dh(k)] per head, and its hand-derived backward. The fast mixer (mixers/gated_deltanet.hpp)
// uses the transposed state, a chunked forward and a differently arranged backward, so the two
// agree only if both are right. Parameters by the fast mixer's names (FLA's):
//
//   q = SiLU(conv(x Wq^T)), k = SiLU(conv(x Wk^T)), v = SiLU(conv(x Wv^T))   conv: kernel 4, causal
//   per head: q^ = q / sqrt(|q|^2 + 1e-6) / sqrt(Dh), k^ = k / sqrt(|k|^2 + 1e-6)
//             beta = sigmoid(x Wb^T), g = -exp(A_log) softplus(x Wa^T + dt_bias), alpha = exp(g)
//             S_t = alpha_t S_{t-1} (I - beta_t k^ k^T) + beta_t v_t k^T,   o_t = S_t q^_t
//             z = o / sqrt(mean(o^2) + 1e-5) * w_norm * SiLU(x Wg^T)
//   y = z Wo^T
//
// Backward of the recurrence, t = T-1..0, from dS = 0, with P = S_{t-1}, M = I - beta k k^T:
//   dq^ = S_t^T do,  dS += do q^T
//   dalpha = <dS, P M>,  dbeta = <dS, v k^T - alpha P k k^T>,  dv = beta dS k
//   dk = beta dS^T v - alpha beta (P^T dS + dS^T P) k,  dg = alpha dalpha,  dS <- alpha dS M
#pragma once

#include <algorithm>
#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>
#include <string>
#include <vector>

namespace emergent::reference {

struct GatedDeltaNetReference {
  int heads = 1;
  static constexpr int kConv = 4;
  static constexpr double kL2Eps = 1e-6, kNormEps = 1e-5;

  static double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
  static double softplus(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); }
  static double silu(double z) { return z * sigmoid(z); }
  static double silu_grad(double z) { return sigmoid(z) * (1.0 + z * (1.0 - sigmoid(z))); }

  // Causal depthwise conv: out[t,c] = sum_j w[c,j] in[t-3+j, c]  (in [T,C], w [C,4]).
  static Matrix conv(const Matrix& in, const Matrix& w) {
    Matrix out = Matrix::Zero(in.rows(), in.cols());
    for (Index t = 0; t < in.rows(); ++t)
      for (Index c = 0; c < in.cols(); ++c)
        for (int j = 0; j < kConv; ++j) {
          const Index s = t - (kConv - 1) + j;
          if (s >= 0) out(t, c) += w(c, j) * in(s, c);
        }
    return out;
  }

  // d_in from d_out; accumulates d_w.
  static Matrix conv_backward(const Matrix& d_out, const Matrix& in, const Matrix& w, Matrix& d_w) {
    Matrix d_in = Matrix::Zero(in.rows(), in.cols());
    for (Index t = 0; t < in.rows(); ++t)
      for (Index c = 0; c < in.cols(); ++c)
        for (int j = 0; j < kConv; ++j) {
          const Index s = t - (kConv - 1) + j;
          if (s < 0) continue;
          d_in(s, c) += w(c, j) * d_out(t, c);
          d_w(c, j) += d_out(t, c) * in(s, c);
        }
    return d_in;
  }

  // Everything the forward computes, kept for the backward.
  struct Forward {
    Matrix q_pre, k_pre, v_pre, g_pre, a_pre, b_pre;  // projections
    Matrix q_conv, k_conv, v_conv;                    // conv outputs (before SiLU)
    Matrix q_act, k_act, v_act;                       // after SiLU [T,D]
    Matrix q_hat, k_hat;                 // per-head normalised (q_hat includes 1/sqrt(Dh))
    Matrix beta, g, z_gate;              // [T,H]; z_gate = a_pre + dt_bias
    std::vector<std::vector<Matrix>> S;  // [H][T+1] states (S[h][0] = 0)
    Matrix o, z, y;                      // core output [T,D], normed and gated [T,D], y
  };

  Forward run(const MixerParameters& p, const Matrix& x) const {
    const Index T = x.rows(), D = x.cols(), H = heads, Dh = D / H;
    require(H >= 1 && D % H == 0, "GatedDeltaNetReference", "d_model is not a multiple of heads");
    const double scale = 1.0 / std::sqrt(double(Dh));
    Forward f;
    f.q_pre = linear_forward(x, p.at("q_proj.weight"));
    f.k_pre = linear_forward(x, p.at("k_proj.weight"));
    f.v_pre = linear_forward(x, p.at("v_proj.weight"));
    f.g_pre = linear_forward(x, p.at("g_proj.weight"));
    f.a_pre = linear_forward(x, p.at("a_proj.weight"));
    f.b_pre = linear_forward(x, p.at("b_proj.weight"));
    f.q_conv = conv(f.q_pre, p.at("q_conv1d.weight"));
    f.k_conv = conv(f.k_pre, p.at("k_conv1d.weight"));
    f.v_conv = conv(f.v_pre, p.at("v_conv1d.weight"));
    f.q_act = f.q_conv.unaryExpr(&silu);
    f.k_act = f.k_conv.unaryExpr(&silu);
    f.v_act = f.v_conv.unaryExpr(&silu);
    f.q_hat = f.q_act;
    f.k_hat = f.k_act;
    f.beta = f.b_pre.unaryExpr(&sigmoid);
    f.g = Matrix(T, H);
    f.z_gate = Matrix(T, H);
    const Matrix& A_log = p.at("A_log");
    const Matrix& dt_bias = p.at("dt_bias");
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < H; ++h) {
        auto qh = f.q_hat.block(t, h * Dh, 1, Dh);
        auto kh = f.k_hat.block(t, h * Dh, 1, Dh);
        qh *= scale / std::sqrt(qh.squaredNorm() + kL2Eps);
        kh /= std::sqrt(kh.squaredNorm() + kL2Eps);
        f.z_gate(t, h) = f.a_pre(t, h) + dt_bias(0, h);
        f.g(t, h) = -std::exp(A_log(0, h)) * softplus(f.z_gate(t, h));
      }
    f.o = Matrix::Zero(T, D);
    f.S.assign(static_cast<std::size_t>(H), std::vector<Matrix>());
    for (Index h = 0; h < H; ++h) {
      std::vector<Matrix>& S = f.S[static_cast<std::size_t>(h)];
      S.push_back(Matrix::Zero(Dh, Dh));
      for (Index t = 0; t < T; ++t) {
        const Vector q = f.q_hat.block(t, h * Dh, 1, Dh).transpose();
        const Vector k = f.k_hat.block(t, h * Dh, 1, Dh).transpose();
        const Vector v = f.v_act.block(t, h * Dh, 1, Dh).transpose();
        const double alpha = std::exp(f.g(t, h)), beta = f.beta(t, h);
        const Matrix M = Matrix::Identity(Dh, Dh) - beta * k * k.transpose();
        S.push_back(alpha * S.back() * M + beta * v * k.transpose());
        f.o.block(t, h * Dh, 1, Dh) = (S.back() * q).transpose();
      }
    }
    f.z = Matrix(T, D);
    const Matrix& w = p.at("o_norm.weight");
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < H; ++h) {
        const auto o = f.o.block(t, h * Dh, 1, Dh);
        const double r = 1.0 / std::sqrt(o.squaredNorm() / double(Dh) + kNormEps);
        for (Index c = 0; c < Dh; ++c)
          f.z(t, h * Dh + c) = o(0, c) * r * w(0, c) * silu(f.g_pre(t, h * Dh + c));
      }
    f.y = linear_forward(f.z, p.at("o_proj.weight"));
    return f;
  }

  Matrix forward(const MixerParameters& p, const Matrix& x) const { return run(p, x).y; }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dy) const {
    const Index T = x.rows(), D = x.cols(), H = heads, Dh = D / H;
    const Forward f = run(p, x);
    MixerGradients grads{Matrix(), zeros_like(p)};
    MixerParameters& d = grads.dparams;

    // y = z Wo^T
    const Matrix dz = linear_backward(dy, f.z, p.at("o_proj.weight"), d["o_proj.weight"]);

    // z = o r w SiLU(g_pre)
    const Matrix& w = p.at("o_norm.weight");
    Matrix d_o(T, D), d_g_pre(T, D);
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < H; ++h) {
        const auto o = f.o.block(t, h * Dh, 1, Dh);
        const double r = 1.0 / std::sqrt(o.squaredNorm() / double(Dh) + kNormEps);
        Vector dn(Dh), n(Dh);
        for (Index c = 0; c < Dh; ++c) {
          const Index col = h * Dh + c;
          n(c) = o(0, c) * r;
          const double s = silu(f.g_pre(t, col));
          d["o_norm.weight"](0, c) += dz(t, col) * n(c) * s;
          d_g_pre(t, col) = dz(t, col) * n(c) * w(0, c) * silu_grad(f.g_pre(t, col));
          dn(c) = dz(t, col) * w(0, c) * s;
        }
        // n = o r with r = (mean(o^2) + eps)^(-1/2): do = r (dn - n mean(dn n))
        const double mean_dn_n = dn.dot(n) / double(Dh);
        for (Index c = 0; c < Dh; ++c) d_o(t, h * Dh + c) = r * (dn(c) - n(c) * mean_dn_n);
      }

    // The recurrence, per head, backwards in time.
    Matrix d_q_hat = Matrix::Zero(T, D), d_k_hat = Matrix::Zero(T, D), d_v = Matrix::Zero(T, D);
    Matrix d_beta = Matrix::Zero(T, H), d_g = Matrix::Zero(T, H);
    for (Index h = 0; h < H; ++h) {
      const std::vector<Matrix>& S = f.S[static_cast<std::size_t>(h)];
      Matrix dS = Matrix::Zero(Dh, Dh);
      for (Index t = T - 1; t >= 0; --t) {
        const Vector q = f.q_hat.block(t, h * Dh, 1, Dh).transpose();
        const Vector k = f.k_hat.block(t, h * Dh, 1, Dh).transpose();
        const Vector v = f.v_act.block(t, h * Dh, 1, Dh).transpose();
        const Vector dout = d_o.block(t, h * Dh, 1, Dh).transpose();
        const double alpha = std::exp(f.g(t, h)), beta = f.beta(t, h);
        const Matrix& P = S[static_cast<std::size_t>(t)];
        const Matrix& St = S[static_cast<std::size_t>(t + 1)];
        const Matrix M = Matrix::Identity(Dh, Dh) - beta * k * k.transpose();
        d_q_hat.block(t, h * Dh, 1, Dh) = (St.transpose() * dout).transpose();
        dS += dout * q.transpose();
        const double d_alpha = (dS.array() * (P * M).array()).sum();
        d_beta(t, h) =
            (dS.array() * (v * k.transpose() - alpha * P * k * k.transpose()).array()).sum();
        d_v.block(t, h * Dh, 1, Dh) = (beta * dS * k).transpose();
        d_k_hat.block(t, h * Dh, 1, Dh) =
            (beta * dS.transpose() * v -
             alpha * beta * (P.transpose() * dS + dS.transpose() * P) * k)
                .transpose();
        d_g(t, h) = alpha * d_alpha;
        dS = alpha * dS * M;
      }
    }

    // Gates: beta = sigmoid(b_pre); g = -exp(A_log) softplus(a_pre + dt_bias).
    Matrix d_a_pre(T, H), d_b_pre(T, H);
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < H; ++h) {
        const double beta = f.beta(t, h);
        d_b_pre(t, h) = d_beta(t, h) * beta * (1 - beta);
        const double dzg = -d_g(t, h) * std::exp(p.at("A_log")(0, h)) * sigmoid(f.z_gate(t, h));
        d_a_pre(t, h) = dzg;
        d["dt_bias"](0, h) += dzg;
        d["A_log"](0, h) += d_g(t, h) * f.g(t, h);
      }

    // l2 norms (q^ = scale q r, k^ = k r, r = (|.|^2 + eps)^(-1/2)): d = scale r (d^ - u (u . d^)),
    // u = . r
    const double scale = 1.0 / std::sqrt(double(Dh));
    Matrix d_q_act(T, D), d_k_act(T, D);
    for (Index t = 0; t < T; ++t)
      for (Index h = 0; h < H; ++h) {
        auto l2_back = [&](const Matrix& act, const Matrix& d_hat, double s, Matrix& d_act) {
          const Vector a = act.block(t, h * Dh, 1, Dh).transpose();
          const Vector dh = d_hat.block(t, h * Dh, 1, Dh).transpose();
          const double r = 1.0 / std::sqrt(a.squaredNorm() + kL2Eps);
          const Vector unit = a * r;
          d_act.block(t, h * Dh, 1, Dh) = (s * r * (dh - unit * unit.dot(dh))).transpose();
        };
        l2_back(f.q_act, d_q_hat, scale, d_q_act);
        l2_back(f.k_act, d_k_hat, 1.0, d_k_act);
      }

    // SiLU, convs.
    const Matrix d_q_conv = d_q_act.cwiseProduct(f.q_conv.unaryExpr(&silu_grad));
    const Matrix d_k_conv = d_k_act.cwiseProduct(f.k_conv.unaryExpr(&silu_grad));
    const Matrix d_v_conv = d_v.cwiseProduct(f.v_conv.unaryExpr(&silu_grad));
    const Matrix d_q_pre =
        conv_backward(d_q_conv, f.q_pre, p.at("q_conv1d.weight"), d["q_conv1d.weight"]);
    const Matrix d_k_pre =
        conv_backward(d_k_conv, f.k_pre, p.at("k_conv1d.weight"), d["k_conv1d.weight"]);
    const Matrix d_v_pre =
        conv_backward(d_v_conv, f.v_pre, p.at("v_conv1d.weight"), d["v_conv1d.weight"]);

    // The input projections.
    grads.dx = linear_backward(d_q_pre, x, p.at("q_proj.weight"), d["q_proj.weight"]);
    grads.dx += linear_backward(d_k_pre, x, p.at("k_proj.weight"), d["k_proj.weight"]);
    grads.dx += linear_backward(d_v_pre, x, p.at("v_proj.weight"), d["v_proj.weight"]);
    grads.dx += linear_backward(d_g_pre, x, p.at("g_proj.weight"), d["g_proj.weight"]);
    grads.dx += linear_backward(d_a_pre, x, p.at("a_proj.weight"), d["a_proj.weight"]);
    grads.dx += linear_backward(d_b_pre, x, p.at("b_proj.weight"), d["b_proj.weight"]);
    return grads;
  }
};

}  // namespace emergent::reference
