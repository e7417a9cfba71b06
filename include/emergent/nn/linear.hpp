// Linear layer y = x W^T + b, weight stored [out, in] (PyTorch and llm.c layout).
// The GEMMs go through Eigen, which blocks and vectorises them and splits them across the
// OpenMP threads; each output element is reduced by one thread in a fixed order, so results
// are deterministic for a given thread count.
#pragma once

#include <Eigen/Core>

namespace emergent::nn {

template <class Real>
using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class Real>
using MatrixMap = Eigen::Map<RowMatrix<Real>>;
template <class Real>
using ConstMatrixMap = Eigen::Map<const RowMatrix<Real>>;
template <class Real>
using VectorMap = Eigen::Map<Eigen::Matrix<Real, 1, Eigen::Dynamic>>;
template <class Real>
using ConstVectorMap = Eigen::Map<const Eigen::Matrix<Real, 1, Eigen::Dynamic>>;

// y[N,out] = x[N,in] w[out,in]^T + b[out]; b may be null (no bias).
template <class Real>
void linear_forward(Real* y, const Real* x, const Real* w, const Real* b, int rows, int in, int out) {
  MatrixMap<Real> Y(y, rows, out);
  ConstMatrixMap<Real> X(x, rows, in), W(w, out, in);
  Y.noalias() = X * W.transpose();
  if (b) Y.rowwise() += ConstVectorMap<Real>(b, out);
}

// dx[N,in] = dy w (overwritten; skipped when dx is null); dw[out,in] += dy^T x;
// db[out] += sum_n dy[n,:]. Parameter gradients accumulate, the input gradient does not.
template <class Real>
void linear_backward(Real* dx, Real* dw, Real* db, const Real* dy, const Real* x, const Real* w,
                     int rows, int in, int out) {
  ConstMatrixMap<Real> dY(dy, rows, out), X(x, rows, in), W(w, out, in);
  if (dx) MatrixMap<Real>(dx, rows, in).noalias() = dY * W;
  MatrixMap<Real>(dw, out, in).noalias() += dY.transpose() * X;
  if (db) VectorMap<Real>(db, out) += dY.colwise().sum();
}

}  // namespace emergent::nn
