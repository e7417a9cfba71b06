// LayerNorm over the last dimension (docs/model.md):
//   y = (x - mean) / sqrt(var + eps) * weight + bias,   var biased (divided by D), eps = 1e-5.
// Backward, with x_hat = (x - mean) * rstd and g = d_y * weight, per row:
//   d_x = rstd * (g - mean(g) - x_hat * mean(g * x_hat)).
#pragma once

#include <cmath>
#include <emergent/core/error.hpp>
#include <emergent/reference/matrix.hpp>

namespace emergent::reference {

inline constexpr double layernorm_eps = 1e-5;

// x [N,D] -> x_hat [N,D] (normalised, before weight and bias), rstd [N] = 1/sqrt(var + eps)
inline void layernorm_normalize(const Matrix& x, Matrix& x_hat, Vector& rstd) {
  const Index N = x.rows(), D = x.cols();
  x_hat.resize(N, D);
  rstd.resize(N);
  for (Index n = 0; n < N; ++n) {
    double mean = 0;
    for (Index d = 0; d < D; ++d) mean += x(n, d);
    mean /= static_cast<double>(D);
    double var = 0;
    for (Index d = 0; d < D; ++d) var += (x(n, d) - mean) * (x(n, d) - mean);
    var /= static_cast<double>(D);
    rstd(n) = 1.0 / std::sqrt(var + layernorm_eps);
    for (Index d = 0; d < D; ++d) x_hat(n, d) = (x(n, d) - mean) * rstd(n);
  }
}

// x [N,D], weight [D], bias [D] -> y [N,D]
inline Matrix layernorm_forward(const Matrix& x, const Vector& weight, const Vector& bias) {
  require(weight.size() == x.cols() && bias.size() == x.cols(), "layernorm_forward",
          "weight/bias size differs from the last dimension");
  Matrix x_hat;
  Vector rstd;
  layernorm_normalize(x, x_hat, rstd);
  Matrix y(x.rows(), x.cols());
  for (Index n = 0; n < x.rows(); ++n)
    for (Index d = 0; d < x.cols(); ++d) y(n, d) = x_hat(n, d) * weight(d) + bias(d);
  return y;
}

// d_y [N,D], x [N,D], weight [D] -> d_x [N,D]; accumulates d_weight [D], d_bias [D]
inline Matrix layernorm_backward(const Matrix& d_y, const Matrix& x, const Vector& weight,
                                 Vector& d_weight, Vector& d_bias) {
  const Index N = x.rows(), D = x.cols();
  Matrix x_hat;
  Vector rstd;
  layernorm_normalize(x, x_hat, rstd);  // recomputed: clarity over speed
  Matrix d_x(N, D);
  for (Index n = 0; n < N; ++n) {
    double mean_g = 0, mean_g_xhat = 0;
    for (Index d = 0; d < D; ++d) {
      const double g = d_y(n, d) * weight(d);
      mean_g += g;
      mean_g_xhat += g * x_hat(n, d);
      d_weight(d) += d_y(n, d) * x_hat(n, d);
      d_bias(d) += d_y(n, d);
    }
    mean_g /= static_cast<double>(D);
    mean_g_xhat /= static_cast<double>(D);
    for (Index d = 0; d < D; ++d) {
      const double g = d_y(n, d) * weight(d);
      d_x(n, d) = rstd(n) * (g - mean_g - x_hat(n, d) * mean_g_xhat);
    }
  }
  return d_x;
}

}  // namespace emergent::reference
