// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
// biased variance and eps = 1e-5 (PyTorch's defaults). The forward saves mean and 1/std per
// row for the backward, as llm.c does.
#pragma once

#include <cmath>

#include "../core/parallel.hpp"

namespace emergent::nn {

inline constexpr double kLayerNormEps = 1e-5;

// y[N,D], mean[N], rstd[N] <- x[N,D], gamma[D], beta[D]
template <class Real>
void layernorm_forward(Real* y, Real* mean, Real* rstd, const Real* x, const Real* gamma,
                       const Real* beta, int rows, int dim) {
  parallel_for(rows, [&](std::int64_t n) {
    const Real* xr = x + n * dim;
    Real* yr = y + n * dim;
    Real sum = 0;
    for (int d = 0; d < dim; ++d) sum += xr[d];
    const Real m = sum / dim;
    Real var = 0;
    for (int d = 0; d < dim; ++d) var += (xr[d] - m) * (xr[d] - m);
    const Real r = Real(1) / std::sqrt(var / dim + Real(kLayerNormEps));
    for (int d = 0; d < dim; ++d) yr[d] = (xr[d] - m) * r * gamma[d] + beta[d];
    mean[n] = m;
    rstd[n] = r;
  });
}

// dx[N,D] += dL/dx; dgamma[D] += sum_n dy xhat; dbeta[D] += sum_n dy   <- dy[N,D], x, mean, rstd
template <class Real>
void layernorm_backward(Real* dx, Real* dgamma, Real* dbeta, const Real* dy, const Real* x,
                        const Real* mean, const Real* rstd, const Real* gamma, int rows, int dim) {
  parallel_for(rows, [&](std::int64_t n) {
    const Real* dyr = dy + n * dim;
    const Real* xr = x + n * dim;
    Real* dxr = dx + n * dim;
    const Real m = mean[n], r = rstd[n];
    // dxhat = dy * gamma; dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    Real mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (int d = 0; d < dim; ++d) {
      const Real dxhat = dyr[d] * gamma[d];
      mean_dxhat += dxhat;
      mean_dxhat_xhat += dxhat * (xr[d] - m) * r;
    }
    mean_dxhat /= dim;
    mean_dxhat_xhat /= dim;
    for (int d = 0; d < dim; ++d) {
      const Real xhat = (xr[d] - m) * r;
      dxr[d] += r * (dyr[d] * gamma[d] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
  });
  // The parameter gradients reduce over rows; one pass in row order keeps them deterministic.
  for (int n = 0; n < rows; ++n) {
    const Real* dyr = dy + static_cast<std::int64_t>(n) * dim;
    const Real* xr = x + static_cast<std::int64_t>(n) * dim;
    const Real m = mean[n], r = rstd[n];
    for (int d = 0; d < dim; ++d) {
      dgamma[d] += dyr[d] * (xr[d] - m) * r;
      dbeta[d] += dyr[d];
    }
  }
}

}  // namespace emergent::nn
