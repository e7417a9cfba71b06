// nn/layernorm.hpp on the device, for an ensemble: y = (x - mean) / sqrt(var + eps) gamma + beta
// over rows of `dim`, biased variance, eps 1e-5. `rows` rows per member; member e's gamma and
// beta start at `+ e * param_stride`.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/reduce.cuh>

namespace emergent::cuda {

inline constexpr float kLayerNormEps = 1e-5f;

#if EMERGENT_DEVICE_IS_CUDA
// The CUDA kernels of a row each: one warp per row, the lanes striding over the row (coalesced),
// the row's sums by warp_sum. Their twins are the functors below (same formulas; the sums in
// another order, so within float rounding of them, not bit for bit).
template <class = void>
__global__ void layernorm_forward_rows(float* y, float* mean, float* rstd, const float* x,
                                       const float* gamma, const float* beta,
                                       std::int64_t param_stride, std::int64_t rows,
                                       std::int64_t all_rows, int dim) {
  const std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= all_rows) return;
  const std::int64_t e = r / rows;
  const float* xr = x + r * dim;
  const float* g = gamma + e * param_stride;
  const float* b = beta + e * param_stride;
  float sum = 0;
  for (int d = lane; d < dim; d += 32) sum += xr[d];
  const float m = warp_sum(sum) / dim;
  float squares = 0;
  for (int d = lane; d < dim; d += 32) squares += (xr[d] - m) * (xr[d] - m);
  const float s = 1.0f / sqrtf(warp_sum(squares) / dim + kLayerNormEps);
  for (int d = lane; d < dim; d += 32) y[r * dim + d] = (xr[d] - m) * s * g[d] + b[d];
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = s;
  }
}

template <class = void>
__global__ void layernorm_backward_rows(float* dx, const float* dy, const float* x,
                                        const float* mean, const float* rstd, const float* gamma,
                                        std::int64_t param_stride, std::int64_t rows,
                                        std::int64_t all_rows, int dim) {
  const std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= all_rows) return;
  const float* g = gamma + (r / rows) * param_stride;
  const float* dyr = dy + r * dim;
  const float* xr = x + r * dim;
  const float m = mean[r], s = rstd[r];
  float mean_dxhat = 0, mean_dxhat_xhat = 0;
  for (int d = lane; d < dim; d += 32) {
    const float dxhat = dyr[d] * g[d];
    mean_dxhat += dxhat;
    mean_dxhat_xhat += dxhat * (xr[d] - m) * s;
  }
  mean_dxhat = warp_sum(mean_dxhat) / dim;
  mean_dxhat_xhat = warp_sum(mean_dxhat_xhat) / dim;
  for (int d = lane; d < dim; d += 32)
    dx[r * dim + d] += s * (dyr[d] * g[d] - mean_dxhat - (xr[d] - m) * s * mean_dxhat_xhat);
}
#endif

// y[E*rows, dim], mean[E*rows], rstd[E*rows] <- x
inline void layernorm_forward(float* y, float* mean, float* rstd, const float* x,
                              const float* gamma, const float* beta, std::int64_t param_stride,
                              int members, std::int64_t rows, int dim) {
#if EMERGENT_DEVICE_IS_CUDA
  if (run_cuda_kernel())
    return launch_warp_per_row(layernorm_forward_rows<>, members * rows, y, mean, rstd, x, gamma,
                               beta, param_stride, rows, members * rows, dim);
#endif
  for_each_index(members * rows, [=] EMERGENT_HD(std::int64_t r) {  // the twin
    const std::int64_t e = r / rows;
    const float* xr = x + r * dim;
    const float* g = gamma + e * param_stride;
    const float* b = beta + e * param_stride;
    float sum = 0;
    for (int d = 0; d < dim; ++d) sum += xr[d];
    const float m = sum / dim;
    float squares = 0;
    for (int d = 0; d < dim; ++d) squares += (xr[d] - m) * (xr[d] - m);
    const float s = 1.0f / sqrtf(squares / dim + kLayerNormEps);
    for (int d = 0; d < dim; ++d) y[r * dim + d] = (xr[d] - m) * s * g[d] + b[d];
    mean[r] = m;
    rstd[r] = s;
  });
}

// dx += dL/dx; dgamma += sum_rows dy xhat; dbeta += sum_rows dy (in reduce.cuh's order)
inline void layernorm_backward(float* dx, float* dgamma, float* dbeta, const float* dy,
                               const float* x, const float* mean, const float* rstd,
                               const float* gamma, std::int64_t param_stride, int members,
                               std::int64_t rows, int dim) {
#if EMERGENT_DEVICE_IS_CUDA
  if (run_cuda_kernel())
    launch_warp_per_row(layernorm_backward_rows<>, members * rows, dx, dy, x, mean, rstd, gamma,
                        param_stride, rows, members * rows, dim);
  else
#endif
    for_each_index(members * rows, [=] EMERGENT_HD(std::int64_t r) {  // the twin
      const float* g = gamma + (r / rows) * param_stride;
      const float* dyr = dy + r * dim;
      const float* xr = x + r * dim;
      const float m = mean[r], s = rstd[r];
      float mean_dxhat = 0, mean_dxhat_xhat = 0;
      for (int d = 0; d < dim; ++d) {
        const float dxhat = dyr[d] * g[d];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * (xr[d] - m) * s;
      }
      mean_dxhat /= dim;
      mean_dxhat_xhat /= dim;
      for (int d = 0; d < dim; ++d)
        dx[r * dim + d] += s * (dyr[d] * g[d] - mean_dxhat - (xr[d] - m) * s * mean_dxhat_xhat);
    });
  float* const sums[2] = {dgamma, dbeta};  // one pass over the rows for both
  column_sums_of<float, 2>(
      sums, param_stride, members, rows, dim, true,
      [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int d) {
        const std::int64_t n = e * rows + r;
        const float g = dy[n * dim + d];
        return ColumnValues<float, 2>{{g * (x[n * dim + d] - mean[n]) * rstd[n], g}};
      });
}

}  // namespace emergent::cuda
