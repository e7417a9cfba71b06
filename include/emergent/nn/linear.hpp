// Linear layer y = x W^T + b, weight stored [out, in] (PyTorch and llm.c layout).
//
// In fp32 on AVX-512 or AVX2 the three products go through nn/gemm.hpp, which reads W and dY in
// place (no transposed copies) and adds the bias inside the forward's micro-kernel; in other
// builds, in double, and for layers narrower than 16 outputs (the vocabulary head of a binary
// task, where a tile would be mostly padding) they go through Eigen. Either way each output element
// is reduced by one thread in a fixed order, so results are deterministic for a given thread
// count.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <emergent/nn/gemm.hpp>
#include <type_traits>

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

// Whether a layer with `out` outputs runs on the fp32 kernel of nn/gemm.hpp.
template <class Real>
constexpr bool uses_gemm_kernel(int out) {
  return std::is_same_v<Real, float> && kGemmKernel && out >= 16;
}

// y[N,out] = x[N,in] w[out,in]^T + b[out]; b may be null (no bias).
template <class Real>
void linear_forward(Real* y, const Real* x, const Real* w, const Real* b, int rows, int in,
                    int out) {
  if constexpr (std::is_same_v<Real, float> && kGemmKernel) {
    if (uses_gemm_kernel<Real>(out)) {
      gemm(rows, out, in, {x, in, 1}, {w, 1, in}, y, out, false, b);
      return;
    }
  }
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
  if (db)  // row by row, vectorised along the row (Eigen's colwise sum walks a row-major dY by
           // columns)
    for (int n = 0; n < rows; ++n)
      VectorMap<Real>(db, out) += ConstVectorMap<Real>(dy + std::int64_t(n) * out, out);
  if constexpr (std::is_same_v<Real, float> && kGemmKernel) {
    if (uses_gemm_kernel<Real>(out)) {
      if (dx) gemm(rows, in, out, {dy, out, 1}, {w, in, 1}, dx, in, false);
      gemm(out, in, rows, {dy, 1, out}, {x, in, 1}, dw, in, true);
      return;
    }
  }
  ConstMatrixMap<Real> dY(dy, rows, out), X(x, rows, in), W(w, out, in);
  if (dx) MatrixMap<Real>(dx, rows, in).noalias() = dY * W;
  MatrixMap<Real>(dw, out, in).noalias() += dY.transpose() * X;
}

}  // namespace emergent::nn
