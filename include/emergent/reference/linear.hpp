// Linear layer in PyTorch layout (docs/model.md): y = x W^T + b, W stored [out, in].
// Backward: d_x = d_y W, d_W += d_y^T x, d_b += column sums of d_y.
// The overloads without a bias serve the head (logits = y head.weight^T).
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/reference/matrix.hpp>

namespace emergent::reference {

// x [N,in], weight [out,in] -> y [N,out]   (no bias)
inline Matrix linear_forward(const Matrix& x, const Matrix& weight) {
  require(x.cols() == weight.cols(), "linear_forward", "x width differs from weight's in");
  return x * weight.transpose();
}

// x [N,in], weight [out,in], bias [out] -> y [N,out]
inline Matrix linear_forward(const Matrix& x, const Matrix& weight, const Vector& bias) {
  require(bias.size() == weight.rows(), "linear_forward", "bias size differs from weight's out");
  Matrix y = linear_forward(x, weight);
  y.rowwise() += bias.transpose();
  return y;
}

// d_y [N,out], x [N,in], weight [out,in] -> d_x [N,in]; accumulates d_weight [out,in]  (no bias)
inline Matrix linear_backward(const Matrix& d_y, const Matrix& x, const Matrix& weight,
                              Matrix& d_weight) {
  d_weight += d_y.transpose() * x;
  return d_y * weight;
}

// d_y [N,out], x [N,in], weight [out,in] -> d_x [N,in]; accumulates d_weight [out,in], d_bias [out]
inline Matrix linear_backward(const Matrix& d_y, const Matrix& x, const Matrix& weight,
                              Matrix& d_weight, Vector& d_bias) {
  d_bias += d_y.colwise().sum().transpose();
  return linear_backward(d_y, x, weight, d_weight);
}

}  // namespace emergent::reference
