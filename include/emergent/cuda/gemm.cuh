// Batched GEMM on row-major matrices, the two interfaces every product of cuda/ goes through:
//   C[b] = alpha op(A[b]) op(B[b]) + beta C[b]     b in [0, batch), op = N or T
//   C[b]: m x n with row stride ldc; op(A[b]): m x k; op(B[b]): k x n
// gemm_strided_batched finds X[b] at X + b * stride_x; gemm_batched reads X[b] from a device
// table of one pointer per batch, so that matrices lying in place inside wider rows (attention's
// heads inside the QKV projection's output) need no copy into blocks of their own.
// On CUDA they are cublasGemmStridedBatchedEx and cublasGemmBatchedEx (column-major, so they
// compute C^T = op(B)^T op(A)^T) in float, or with TF32 inputs when gemm_precision() says tf32
// (opt-in; fp32 by default, so results match the reference). Under Thrust's OpenMP system they
// are Eigen's GEMM, batches in parallel. beta = 0 overwrites C (NaN-filled scratch included).
#pragma once

#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/cuda/device_system.cuh>
#include <string>

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

// A batch of matrices given by a device table of their first elements.
struct MatrixList {
  float* const* data;  // [batch] (an operand A or B is only read)
  int ld;              // row stride
  Op op = Op::N;
};

#if EMERGENT_DEVICE_IS_CUDA
inline void check_cublas(cublasStatus_t status, const char* what) {
  require(status == CUBLAS_STATUS_SUCCESS, "cuBLAS",
          std::string(what) + " failed with status " + std::to_string(int(status)));
}

// One handle per process, on device_stream(), in cuBLAS's default (non-TF32) math mode, with a
// workspace of its own so that a captured step (cuda/step.cuh) allocates nothing.
inline cublasHandle_t cublas_handle() {
  static cublasHandle_t handle = [] {
    cublasHandle_t h = nullptr;
    check_cublas(cublasCreate(&h), "cublasCreate");
    check_cublas(cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    check_cublas(cublasSetStream(h, device_stream()), "cublasSetStream");
    constexpr std::size_t kWorkspace = std::size_t(32) << 20;
    void* workspace = nullptr;
    check_cuda(cudaMalloc(&workspace, kWorkspace), "cudaMalloc of the cuBLAS workspace");
    check_cublas(cublasSetWorkspace(h, workspace, kWorkspace), "cublasSetWorkspace");
    return h;
  }();
  return handle;
}
#endif

// The precision of the GEMMs: fp32 (the default; the CPU-equivalence tests hold it to their
// tolerances) or tf32 (CUDA only: the tensor cores' TF32 inputs, float accumulation). Chosen once
// per process, before the first step (`--precision` of the ensemble programs).
enum class Precision { fp32, tf32 };
inline Precision& gemm_precision() {
  static Precision precision = Precision::fp32;
  return precision;
}
inline const char* precision_name(Precision p) { return p == Precision::tf32 ? "tf32" : "fp32"; }
inline Precision parse_precision(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  require(name == "tf32", "--precision", "must be fp32 or tf32 (got '" + name + "')");
  require(EMERGENT_DEVICE_IS_CUDA, "--precision",
          "tf32 is a precision of the CUDA build's tensor cores; the OpenMP build has fp32 only");
  return Precision::tf32;
}

#if EMERGENT_DEVICE_IS_CUDA
inline cublasOperation_t cublas_op(Op o) { return o == Op::N ? CUBLAS_OP_N : CUBLAS_OP_T; }
inline cublasComputeType_t cublas_compute() {
  return gemm_precision() == Precision::tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}
#else
// One product of the batch on the host, by Eigen: a and b the first elements of A and B.
inline void eigen_gemm(int m, int n, int k, float alpha, const float* a, int lda, Op op_a,
                       const float* b, int ldb, Op op_b, float beta, float* c, int ldc) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Stride = Eigen::OuterStride<>;
  using ConstMap = Eigen::Map<const RowMatrix, Eigen::Unaligned, Stride>;
  using Map = Eigen::Map<RowMatrix, Eigen::Unaligned, Stride>;
  // op(X), rows x cols as used
  auto operand = [](const float* x, int ld, Op op, int rows, int cols) {
    return op == Op::N ? ConstMap(x, rows, cols, Stride(ld)) : ConstMap(x, cols, rows, Stride(ld));
  };
  const ConstMap A = operand(a, lda, op_a, m, k), B = operand(b, ldb, op_b, k, n);
  Map C(c, m, n, Stride(ldc));
  if (beta == 0.0f)
    C.setZero();
  else if (beta != 1.0f)
    C *= beta;
  if (k == 0) return;
  if (op_a == Op::N && op_b == Op::N)
    C.noalias() += alpha * (A * B);
  else if (op_a == Op::N)
    C.noalias() += alpha * (A * B.transpose());
  else if (op_b == Op::N)
    C.noalias() += alpha * (A.transpose() * B);
  else
    C.noalias() += alpha * (A.transpose() * B.transpose());
}

// one(i) for every batch, in parallel, each product by Eigen on one thread, a single one too:
// Eigen's own threads would cut its sums over k into other blocks (its blocking sizes depend on
// the thread count), so a member's numbers would change with the ensemble's size (a compacted
// ensemble of one, a single seed), where now they are the same bits in any ensemble.
template <class One>
void eigen_batches(std::int64_t batch, One one) {
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < batch; ++i) one(i);
}
#endif

inline void gemm_strided_batched(int m, int n, int k, float alpha, MatrixArg a, MatrixArg b,
                                 float beta, float* c, int ldc, std::int64_t stride_c,
                                 std::int64_t batch) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  ++device_counts().launches;
  ++device_counts().gemms;
#if EMERGENT_DEVICE_IS_CUDA
  check_cublas(
      cublasGemmStridedBatchedEx(cublas_handle(), cublas_op(b.op), cublas_op(a.op), n, m, k, &alpha,
                                 b.data, CUDA_R_32F, b.ld, b.stride, a.data, CUDA_R_32F, a.ld,
                                 a.stride, &beta, c, CUDA_R_32F, ldc, stride_c,
                                 static_cast<int>(batch), cublas_compute(), CUBLAS_GEMM_DEFAULT),
      "cublasGemmStridedBatchedEx");
#else
  eigen_batches(batch, [&](std::int64_t i) {
    eigen_gemm(m, n, k, alpha, a.data + i * a.stride, a.ld, a.op, b.data + i * b.stride, b.ld, b.op,
               beta, c + i * stride_c, ldc);
  });
#endif
}

// The same product with the batch's matrices in pointer tables (c.op is ignored: C is written
// as it lies).
inline void gemm_batched(int m, int n, int k, float alpha, MatrixList a, MatrixList b, float beta,
                         MatrixList c, std::int64_t batch) {
  if (batch <= 0 || m <= 0 || n <= 0) return;
  ++device_counts().launches;
  ++device_counts().gemms;
#if EMERGENT_DEVICE_IS_CUDA
  check_cublas(
      cublasGemmBatchedEx(cublas_handle(), cublas_op(b.op), cublas_op(a.op), n, m, k, &alpha,
                          reinterpret_cast<const void* const*>(b.data), CUDA_R_32F, b.ld,
                          reinterpret_cast<const void* const*>(a.data), CUDA_R_32F, a.ld, &beta,
                          reinterpret_cast<void* const*>(c.data), CUDA_R_32F, c.ld,
                          static_cast<int>(batch), cublas_compute(), CUBLAS_GEMM_DEFAULT),
      "cublasGemmBatchedEx");
#else
  eigen_batches(batch, [&](std::int64_t i) {
    eigen_gemm(m, n, k, alpha, a.data[i], a.ld, a.op, b.data[i], b.ld, b.op, beta, c.data[i], c.ld);
  });
#endif
}

}  // namespace emergent::cuda
