// Mamba-1 block of ONE sequence (Gu & Dao, arXiv:2312.00752), in double, written for clarity:
// the sequential recurrence with every state kept, and its hand-derived backward. It checks
// mixers/mamba.hpp (tests only). Sizes come from the parameters: E = rows of A_log (d_inner),
// N = cols of A_log (d_state), K = cols of conv1d.weight (d_conv), R = cols of dt_proj.weight.
//
// Forward, x [T,D]:
//   [xc | z]  = x in_proj^T                                          [T,E] each
//   c[t,e]    = conv_b[e] + sum_j conv_w[e,j] xc[t-K+1+j, e]   (xc = 0 before t = 0)
//   u         = SiLU(c)
//   [dl | Bm | Cm] = u x_proj^T                                      [T,R], [T,N], [T,N]
//   pre       = dl dt_proj^T + dt_b;   delta = softplus(pre)         [T,E]
//   A         = -exp(A_log)                                          [E,N]
//   h[t,e,n]  = exp(delta[t,e] A[e,n]) h[t-1,e,n] + delta[t,e] Bm[t,n] u[t,e],   h[-1] = 0
//   y[t,e]    = sum_n Cm[t,n] h[t,e,n] + Dskip[e] u[t,e]
//   out       = (y * SiLU(z)) out_proj^T                             [T,D]
// Backward (research notes A1.3): g = dout out_proj; dy = g SiLU(z); dz = g y SiLU'(z);
//   G[t] = dy[t,e] Cm[t,n] + exp(delta[t+1] A) G[t+1]   (G[T] = 0), the adjoint of h[t];
//   dCm[t,n] = sum_e dy h[t];  dBm[t,n] = sum_e G delta u;  du = Dskip dy + sum_n G delta Bm;
//   ddelta = sum_n G (Bm u + A exp(delta A) h[t-1]);  dA = sum_t G delta exp(delta A) h[t-1];
//   dA_log = dA A;  dDskip = sum_t dy u;  dpre = ddelta sigmoid(pre); then the Linear and
//   conv backwards: dc = du SiLU'(c), dxc[s,e] = sum_j conv_w[e,j] dc[s+K-1-j, e].
#pragma once

#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/linear.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>
#include <vector>

namespace emergent::reference {

struct MambaReference {
  static double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
  static double silu(double v) { return v * sigmoid(v); }
  static double silu_derivative(double v) {
    const double s = sigmoid(v);
    return s * (1.0 + v * (1.0 - s));
  }
  static double softplus(double v) {
    return v > 0 ? v + std::log1p(std::exp(-v)) : std::log1p(std::exp(v));
  }

  // Everything the forward computes, for the backward.
  struct Trace {
    Matrix xc, z, c, u, dl, Bm, Cm, pre, delta, A, y, gated, out;
    std::vector<Matrix> h;  // h[t+1] = state after token t, [E,N]; h[0] = 0
  };

  Trace trace(const MixerParameters& p, const Matrix& x) const {
    const Matrix& conv_w = p.at("conv1d.weight");
    const Matrix& A_log = p.at("A_log");
    const Index T = x.rows(), E = A_log.rows(), N = A_log.cols(), K = conv_w.cols();
    const Index R = p.at("dt_proj.weight").cols();
    require(p.at("in_proj.weight").rows() == 2 * E, "MambaReference", "in_proj is not [2E, D]");
    require(p.at("x_proj.weight").rows() == R + 2 * N, "MambaReference", "x_proj is not [R+2N, E]");
    Trace r;
    const Matrix xz = linear_forward(x, p.at("in_proj.weight"));
    r.xc = xz.leftCols(E);
    r.z = xz.rightCols(E);
    r.c = Matrix(T, E);
    for (Index t = 0; t < T; ++t)
      for (Index e = 0; e < E; ++e) {
        double s = p.at("conv1d.bias")(0, e);
        for (Index j = 0; j < K; ++j) {
          const Index source = t - K + 1 + j;
          if (source >= 0) s += conv_w(e, j) * r.xc(source, e);
        }
        r.c(t, e) = s;
      }
    r.u = r.c.unaryExpr([](double v) { return silu(v); });
    const Matrix dbc = linear_forward(r.u, p.at("x_proj.weight"));
    r.dl = dbc.leftCols(R);
    r.Bm = dbc.middleCols(R, N);
    r.Cm = dbc.rightCols(N);
    r.pre = linear_forward(r.dl, p.at("dt_proj.weight"), p.at("dt_proj.bias").row(0).transpose());
    r.delta = r.pre.unaryExpr([](double v) { return softplus(v); });
    r.A = -A_log.array().exp().matrix();
    r.h.assign(static_cast<std::size_t>(T) + 1, Matrix::Zero(E, N));
    r.y = Matrix(T, E);
    for (Index t = 0; t < T; ++t) {
      const Matrix& before = r.h[static_cast<std::size_t>(t)];
      Matrix& after = r.h[static_cast<std::size_t>(t) + 1];
      for (Index e = 0; e < E; ++e) {
        double y = p.at("D")(0, e) * r.u(t, e);
        for (Index n = 0; n < N; ++n) {
          after(e, n) = std::exp(r.delta(t, e) * r.A(e, n)) * before(e, n) +
                        r.delta(t, e) * r.Bm(t, n) * r.u(t, e);
          y += r.Cm(t, n) * after(e, n);
        }
        r.y(t, e) = y;
      }
    }
    r.gated = r.y.array() * r.z.unaryExpr([](double v) { return silu(v); }).array();
    r.out = linear_forward(r.gated, p.at("out_proj.weight"));
    return r;
  }

  Matrix forward(const MixerParameters& p, const Matrix& x) const { return trace(p, x).out; }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dout) const {
    const Trace r = trace(p, x);
    const Matrix& conv_w = p.at("conv1d.weight");
    const Index T = x.rows(), E = r.A.rows(), N = r.A.cols(), K = conv_w.cols(), R = r.dl.cols();
    MixerGradients g{Matrix(), zeros_like(p)};
    MixerParameters& dp = g.dparams;

    // Gate.
    const Matrix d_gated =
        linear_backward(dout, r.gated, p.at("out_proj.weight"), dp["out_proj.weight"]);
    Matrix dy(T, E), dz(T, E);
    for (Index t = 0; t < T; ++t)
      for (Index e = 0; e < E; ++e) {
        dy(t, e) = d_gated(t, e) * silu(r.z(t, e));
        dz(t, e) = d_gated(t, e) * r.y(t, e) * silu_derivative(r.z(t, e));
      }

    // Selective scan, backwards in time; G is the adjoint of h[t], `carry` = exp(delta[t+1] A)
    // G[t+1].
    Matrix du = Matrix::Zero(T, E), d_delta = Matrix::Zero(T, E), dBm = Matrix::Zero(T, N),
           dCm = Matrix::Zero(T, N);
    Matrix dA = Matrix::Zero(E, N), carry = Matrix::Zero(E, N);
    for (Index t = T - 1; t >= 0; --t) {
      const Matrix& before = r.h[static_cast<std::size_t>(t)];
      const Matrix& after = r.h[static_cast<std::size_t>(t) + 1];
      for (Index e = 0; e < E; ++e) {
        const double delta = r.delta(t, e), u = r.u(t, e);
        du(t, e) += p.at("D")(0, e) * dy(t, e);
        dp["D"](0, e) += dy(t, e) * u;
        for (Index n = 0; n < N; ++n) {
          const double decay = std::exp(delta * r.A(e, n));
          const double G = dy(t, e) * r.Cm(t, n) + carry(e, n);
          dCm(t, n) += dy(t, e) * after(e, n);
          dBm(t, n) += G * delta * u;
          du(t, e) += G * delta * r.Bm(t, n);
          d_delta(t, e) += G * (r.Bm(t, n) * u + r.A(e, n) * decay * before(e, n));
          dA(e, n) += G * delta * decay * before(e, n);
          carry(e, n) = decay * G;
        }
      }
    }
    dp["A_log"] = dA.cwiseProduct(r.A);

    // Step size: softplus, then dt_proj.
    Matrix d_pre(T, E);
    for (Index t = 0; t < T; ++t)
      for (Index e = 0; e < E; ++e) d_pre(t, e) = d_delta(t, e) * sigmoid(r.pre(t, e));
    Vector d_dt_bias = Vector::Zero(E);
    const Matrix d_dl =
        linear_backward(d_pre, r.dl, p.at("dt_proj.weight"), dp["dt_proj.weight"], d_dt_bias);
    dp["dt_proj.bias"] = d_dt_bias.transpose();

    // x_proj.
    Matrix d_dbc(T, R + 2 * N);
    d_dbc << d_dl, dBm, dCm;
    du += linear_backward(d_dbc, r.u, p.at("x_proj.weight"), dp["x_proj.weight"]);

    // SiLU and the causal depthwise conv.
    Matrix dxz = Matrix::Zero(T, 2 * E);
    for (Index t = 0; t < T; ++t)
      for (Index e = 0; e < E; ++e) {
        const double dc = du(t, e) * silu_derivative(r.c(t, e));
        dp["conv1d.bias"](0, e) += dc;
        for (Index j = 0; j < K; ++j) {
          const Index source = t - K + 1 + j;
          if (source < 0) continue;
          dp["conv1d.weight"](e, j) += dc * r.xc(source, e);
          dxz(source, e) += conv_w(e, j) * dc;
        }
      }
    dxz.rightCols(E) = dz;
    g.dx = linear_backward(dxz, x, p.at("in_proj.weight"), dp["in_proj.weight"]);
    return g;
  }
};

}  // namespace emergent::reference
