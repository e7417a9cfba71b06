// nn/layernorm.hpp on the device, for an ensemble: y = (x - mean) / sqrt(var + eps) gamma + beta
// over rows of `dim`, biased variance, eps 1e-5. `rows` rows per member; member e's gamma and
// beta start at `+ e * param_stride`.
#pragma once

#include <cmath>
#include <cstdint>

#include "device_system.cuh"
#include "reduce.cuh"

namespace emergent::cuda {

inline constexpr float kLayerNormEps = 1e-5f;

// y[E*rows, dim], mean[E*rows], rstd[E*rows] <- x
inline void layernorm_forward(float* y, float* mean, float* rstd, const float* x,
                              const float* gamma, const float* beta, std::int64_t param_stride,
                              int members, std::int64_t rows, int dim) {
  for_each_index(members * rows, [=] EMERGENT_HD(std::int64_t r) {
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
  for_each_index(members * rows, [=] EMERGENT_HD(std::int64_t r) {
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
  column_sums<float>(dgamma, param_stride, members, rows, dim, true,
                     [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int d) {
                       const std::int64_t n = e * rows + r;
                       return dy[n * dim + d] * (x[n * dim + d] - mean[n]) * rstd[n];
                     });
  column_sums<float>(dbeta, param_stride, members, rows, dim, true,
                     [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int d) {
                       return dy[(e * rows + r) * dim + d];
                     });
}

}  // namespace emergent::cuda
