// nn/linear.hpp on the device, for an ensemble: y = x W^T + b, W stored [out, in]. Member e's
// W and b start at `+ e * param_stride`; its rows of x and y at `+ e * rows * in` and
// `+ e * rows * out`. The products are one strided-batched GEMM over the members (gemm.cuh).
#pragma once

#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/reduce.cuh>

namespace emergent::cuda {

// y[E*rows, out] = x[E*rows, in] W^T + b; b may be null
inline void linear_forward(float* y, const float* x, const float* w, const float* b,
                           std::int64_t param_stride, int members, std::int64_t rows, int in,
                           int out) {
  float beta = 0;
  if (b) {
    for_each_index(members * rows * out, [=] EMERGENT_HD(std::int64_t i) {
      y[i] = b[(i / (rows * out)) * param_stride + i % out];
    });
    beta = 1;
  }
  gemm_strided_batched(int(rows), out, in, 1.0f, {x, in, rows * in}, {w, in, param_stride, Op::T},
                       beta, y, out, rows * out, members);
}

// The bias epilogues of linear_forward(y, x, w, nullptr, ...), one pass each where the plain
// path makes two or three (the bias written into y before the GEMM reads it back, then GELU or
// the residual addition over y again):
//   z += b, g = GELU(z)            (the MLP's first layer: z kept for GELU's derivative)
//   y += b + residual              (a block's output layer and its residual connection)
inline void bias_gelu_forward(float* z, float* g, const float* b, std::int64_t param_stride,
                              int members, std::int64_t rows, int out) {
  for_each_index(members * rows * out, [=] EMERGENT_HD(std::int64_t i) {
    const float v = z[i] + b[(i / (rows * out)) * param_stride + i % out];
    z[i] = v;
    g[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));  // gelu.cuh's formula
  });
}
inline void bias_residual_forward(float* y, const float* b, const float* residual,
                                  std::int64_t param_stride, int members, std::int64_t rows,
                                  int out) {
  for_each_index(members * rows * out, [=] EMERGENT_HD(std::int64_t i) {
    y[i] = y[i] + b[(i / (rows * out)) * param_stride + i % out] + residual[i];
  });
}

// dx = dy W (overwritten; skipped when dx is null); dW += dy^T x; db += sum_rows dy (reduce.cuh's
// order)
inline void linear_backward(float* dx, float* dw, float* db, const float* dy, const float* x,
                            const float* w, std::int64_t param_stride, int members,
                            std::int64_t rows, int in, int out) {
  if (db)
    column_sums<float>(db, param_stride, members, rows, out, true,
                       [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int o) {
                         return dy[(e * rows + r) * out + o];
                       });
  if (dx)
    gemm_strided_batched(int(rows), in, out, 1.0f, {dy, out, rows * out}, {w, in, param_stride},
                         0.0f, dx, in, rows * in, members);
  gemm_strided_batched(out, in, int(rows), 1.0f, {dy, out, rows * out, Op::T}, {x, in, rows * in},
                       1.0f, dw, in, param_stride, members);
}

}  // namespace emergent::cuda
