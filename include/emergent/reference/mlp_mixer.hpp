// Causal token-mixing matrix (mixers/mlp_mixer.hpp) for ONE sequence, in double, written as the
// textbook sums. Parameters by their local names:
//   weight [1, T_max (T_max + 1) / 2]  lower triangle of W packed by rows: W[i,j] at i (i + 1) / 2
//   + j bias   [1, T_max]
// Forward, x [T,D] -> y [T,D], T <= T_max:
//   y[i,d] = sum_{j<=i} W[i,j] x[j,d] + b[i]
// Backward, by differentiating that sum term by term:
//   dx[j,d] = sum_{i>=j} W[i,j] dy[i,d]      dW[i,j] = sum_d dy[i,d] x[j,d]  (j <= i)
//   db[i]   = sum_d dy[i,d]                  entries of rows i >= T get no gradient
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/reference/matrix.hpp>
#include <emergent/reference/mixer.hpp>

namespace emergent::reference {

struct MlpMixerReference {
  static Index packed_index(Index i, Index j) { return i * (i + 1) / 2 + j; }

  Matrix forward(const MixerParameters& p, const Matrix& x) const {
    const Matrix& w = p.at("weight");
    const Matrix& b = p.at("bias");
    const Index T = x.rows(), D = x.cols();
    check(w, b, T);
    Matrix y = Matrix::Zero(T, D);
    for (Index i = 0; i < T; ++i)
      for (Index d = 0; d < D; ++d) {
        double sum = b(0, i);
        for (Index j = 0; j <= i; ++j) sum += w(0, packed_index(i, j)) * x(j, d);
        y(i, d) = sum;
      }
    return y;
  }

  MixerGradients backward(const MixerParameters& p, const Matrix& x, const Matrix& dy) const {
    const Matrix& w = p.at("weight");
    const Matrix& b = p.at("bias");
    const Index T = x.rows(), D = x.cols();
    check(w, b, T);
    require(dy.rows() == T && dy.cols() == D, "MlpMixerReference::backward", "dy is not [T,D]");
    MixerGradients g{Matrix::Zero(T, D), zeros_like(p)};
    Matrix& dw = g.dparams["weight"];
    Matrix& db = g.dparams["bias"];
    for (Index i = 0; i < T; ++i)
      for (Index d = 0; d < D; ++d) {
        db(0, i) += dy(i, d);
        for (Index j = 0; j <= i; ++j) {
          g.dx(j, d) += w(0, packed_index(i, j)) * dy(i, d);
          dw(0, packed_index(i, j)) += dy(i, d) * x(j, d);
        }
      }
    return g;
  }

 private:
  static void check(const Matrix& w, const Matrix& b, Index T) {
    const Index max_len = b.cols();
    require(w.rows() == 1 && b.rows() == 1, "MlpMixerReference", "weight and bias are [1, n]");
    require(w.cols() == max_len * (max_len + 1) / 2, "MlpMixerReference",
            "weight is not the packed triangle of bias's length");
    require(T >= 1 && T <= max_len, "MlpMixerReference", "length is outside [1, max_len]");
  }
};

}  // namespace emergent::reference
