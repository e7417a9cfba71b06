// Exact GELU (PyTorch's default, docs/model.md): GELU(z) = 0.5 z (1 + erf(z / sqrt 2)).
// Derivative: Phi(z) + z phi(z), with Phi the standard normal CDF and phi its density.
#pragma once

#include <cmath>
#include <emergent/reference/matrix.hpp>
#include <numbers>

namespace emergent::reference {

// z [N,F] -> [N,F]
inline Matrix gelu_forward(const Matrix& z) {
  Matrix y(z.rows(), z.cols());
  for (Index i = 0; i < z.size(); ++i) {
    const double v = z.data()[i];
    y.data()[i] = 0.5 * v * (1.0 + std::erf(v / std::numbers::sqrt2));
  }
  return y;
}

// d_y [N,F], z [N,F] (the forward's input) -> d_z [N,F]
inline Matrix gelu_backward(const Matrix& d_y, const Matrix& z) {
  const double inv_sqrt_2pi = 0.5 * std::numbers::inv_sqrtpi * std::numbers::sqrt2;
  Matrix d_z(z.rows(), z.cols());
  for (Index i = 0; i < z.size(); ++i) {
    const double v = z.data()[i];
    const double cdf = 0.5 * (1.0 + std::erf(v / std::numbers::sqrt2));
    const double pdf = inv_sqrt_2pi * std::exp(-0.5 * v * v);
    d_z.data()[i] = d_y.data()[i] * (cdf + v * pdf);
  }
  return d_z;
}

}  // namespace emergent::reference
