// Strided-batched GEMM on row-major matrices, the one interface every product of cuda/ goes
// through:
//   C[b] = alpha op(A[b]) op(B[b]) + beta C[b]     b in [0, batch), op = N or T
//   C[b]: m x n with row stride ldc; op(A[b]): m x k; op(B[b]): k x n; X[b] = X + b * stride_x
// On CUDA it is cublasSgemmStridedBatched (column-major, so it computes C^T = op(B)^T op(A)^T),
// with cuBLAS's default math mode: no TF32, so results match the reference. Under Thrust's
// OpenMP system it is Eigen's GEMM, batches in parallel. beta = 0 overwrites C (NaN-filled
// scratch included).
#pragma once

#include <cstdint>
#include <string>

#include "../core/error.hpp"
#include "device_system.cuh"

#if EMERGENT_DEVICE_IS_CUDA
#include <cublas_v2.h>
#else
#include <Eigen/Core>
#endif

namespace emergent::cuda {

enum class Op { N, T };

struct MatrixArg {
  const float* data;
  int ld;               // row stride
  std::int64_t stride;  // between batches
  Op op = Op::N;
};

#if EMERGENT_DEVICE_IS_CUDA
inline void check_cublas(cublasStatus_t status, const char* what) {
  require(status == CUBLAS_STATUS_SUCCESS, "cuBLAS",
          std::string(what) + " failed with status " + std::to_string(int(status)));
}

// One handle per process, in cuBLAS's default (non-TF32) math mode.
inline cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return h;
  }();
  return handle;
}
#endif

inline void gemm_strided_batched(int m, int n, int k, float alpha, MatrixArg a, MatrixArg b,
                                 float beta, float* c, int ldc, std::int64_t stride_c,
                                 std::int64_t batch) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  ++device_counts().launches;
  ++device_counts().gemms;
#if EMERGENT_DEVICE_IS_CUDA
  auto op = [](Op o) { return o == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T; };
  check_cublas(cublasSgemmStridedBatched(cublas_handle(), op(b.op), op(a.op), n, m, k, &alpha,
                                         b.data, b.ld, b.stride, a.data, a.ld, a.stride, &beta, c,
                                         ldc, stride_c, static_cast<int>(batch)),
               "cublasSgemmStridedBatched");
#else
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using Map = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  // op(X) of batch i, rows x cols as used
  auto operand = [](const MatrixArg& x, std::int64_t i, int rows, int cols) {
    return x.op == Op::N ? ConstMap(x.data + i * x.stride, rows, cols, Stride(x.ld))
                         : ConstMap(x.data + i * x.stride, cols, rows, Stride(x.ld));
  };
  auto one = [&](std::int64_t i) {
    const ConstMap A = operand(a, i, m, k), B = operand(b, i, k, n);
    Map C(c + i * stride_c, m, n, Stride(ldc));
    if (beta == 0.0f)
      C.setZero();
    else if (beta != 1.0f)
      C *= beta;
    if (k == 0) return;
    if (a.op == Op::N && b.op == Op::N)
      C.noalias() += alpha * (A * B);
    else if (a.op == Op::N)
      C.noalias() += alpha * (A * B.transpose());
    else if (b.op == Op::N)
      C.noalias() += alpha * (A.transpose() * B);
    else
      C.noalias() += alpha * (A.transpose() * B.transpose());
  };
  if (batch == 1) return one(0);  // Eigen's own threads
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < batch; ++i) one(i);
#endif
}

}  // namespace emergent::cuda
