// softplus(z) = log(1 + e^z) and its inverse, and the step-size init built on them that Mamba
// (mamba_simple.py's dt_proj.bias) and Gated DeltaNet (FLA's dt_bias) share:
//
//   softplus(z)      = max(z, 0) + log1p(e^-|z|)    finite for every finite z
//   softplus^-1(y)   = y + log(-expm1(-y))          y > 0
//   step bias(u)     = softplus^-1(dt),  dt = max(exp(log dt_min + u (log dt_max - log dt_min)),
//   dt_floor)
//                      for u uniform in [0, 1): dt log-uniform in [1e-3, 1e-1], floored at 1e-4,
//                      so that softplus(bias) = dt at init
#pragma once

#include <algorithm>
#include <cmath>

namespace emergent::nn {

template <class Real>
Real softplus(Real z) {
  return std::max(z, Real(0)) + std::log1p(std::exp(-std::abs(z)));
}

inline double inverse_softplus(double y) { return y + std::log(-std::expm1(-y)); }

inline constexpr double kStepSizeMin = 1e-3, kStepSizeMax = 1e-1, kStepSizeFloor = 1e-4;

inline double initial_step_bias(double uniform) {
  const double log_min = std::log(kStepSizeMin), log_max = std::log(kStepSizeMax);
  return inverse_softplus(
      std::max(std::exp(log_min + uniform * (log_max - log_min)), kStepSizeFloor));
}

}  // namespace emergent::nn
