// LayerNorm over the last dimension: y = (x - mean) / sqrt(var + eps) * gamma + beta, with the
// biased variance and eps = 1e-5 (PyTorch's defaults). The forward saves mean and 1/std per
// row for the backward, as llm.c does.
#pragma once

#include <Eigen/Core>
#include <cmath>
#include <cstdint>
#include <emergent/core/parallel.hpp>

namespace emergent::nn {

// One row of D values; Eigen vectorises the row sums (in a fixed order, so deterministically).
template <class Real>
using Row = Eigen::Map<Eigen::Array<Real, 1, Eigen::Dynamic>>;
template <class Real>
using ConstRow = Eigen::Map<const Eigen::Array<Real, 1, Eigen::Dynamic>>;

inline constexpr double kLayerNormEps = 1e-5;

// y[N,D], mean[N], rstd[N] <- x[N,D], gamma[D], beta[D]
template <class Real>
void layernorm_forward(Real* y, Real* mean, Real* rstd, const Real* x, const Real* gamma,
                       const Real* beta, int rows, int dim) {
  const ConstRow<Real> g(gamma, dim), b(beta, dim);
  parallel_for(rows, [&](std::int64_t n) {
    const ConstRow<Real> xr(x + n * dim, dim);
    const Real m = xr.sum() / dim;
    const Real r = Real(1) / std::sqrt((xr - m).square().sum() / dim + Real(kLayerNormEps));
    Row<Real>(y + n * dim, dim) = (xr - m) * r * g + b;
    mean[n] = m;
    rstd[n] = r;
  });
}

// dx[N,D] += dL/dx; dgamma[D] += sum_n dy xhat; dbeta[D] += sum_n dy   <- dy[N,D], x, mean, rstd
template <class Real>
void layernorm_backward(Real* dx, Real* dgamma, Real* dbeta, const Real* dy, const Real* x,
                        const Real* mean, const Real* rstd, const Real* gamma, int rows, int dim) {
  const ConstRow<Real> g(gamma, dim);
  parallel_for(rows, [&](std::int64_t n) {
    const ConstRow<Real> dyr(dy + n * dim, dim), xr(x + n * dim, dim);
    const Real m = mean[n], r = rstd[n];
    // dxhat = dy * gamma; dx = r * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat))
    const auto dxhat = dyr * g;
    const auto xhat = (xr - m) * r;
    const Real mean_dxhat = dxhat.sum() / dim, mean_dxhat_xhat = (dxhat * xhat).sum() / dim;
    Row<Real>(dx + n * dim, dim) += r * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
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
