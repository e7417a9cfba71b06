// Exact GELU, 0.5 z (1 + erf(z / sqrt 2)), PyTorch's nn.GELU() default (not the tanh form).
// erf and exp go through Eigen's vectorised packet functions (accurate to a few ulp in float):
// the scalar libm erf was a quarter of a training step.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/parallel.hpp>
#include <unsupported/Eigen/SpecialFunctions>

namespace emergent::nn {

template <class Real>
using ArrayMap = Eigen::Map<Eigen::Array<Real, Eigen::Dynamic, 1>>;
template <class Real>
using ConstArrayMap = Eigen::Map<const Eigen::Array<Real, Eigen::Dynamic, 1>>;

inline constexpr std::int64_t kGeluChunk = 4096;

// y[n] <- gelu(z[n])
template <class Real>
void gelu_forward(Real* y, const Real* z, std::int64_t count) {
  constexpr Real inv_sqrt2 = Real(0.70710678118654752440);
  parallel_for((count + kGeluChunk - 1) / kGeluChunk, [&](std::int64_t chunk) {
    const std::int64_t begin = chunk * kGeluChunk, n = std::min(count, begin + kGeluChunk) - begin;
    const ConstArrayMap<Real> zc(z + begin, n);
    ArrayMap<Real>(y + begin, n) = Real(0.5) * zc * (Real(1) + (zc * inv_sqrt2).erf());
  });
}

// dz[n] = dy[n] * gelu'(z[n]);  gelu'(z) = Phi(z) + z phi(z). dz may alias dy.
template <class Real>
void gelu_backward(Real* dz, const Real* dy, const Real* z, std::int64_t count) {
  constexpr Real inv_sqrt2 = Real(0.70710678118654752440);
  constexpr Real inv_sqrt_2pi = Real(0.39894228040143267794);
  parallel_for((count + kGeluChunk - 1) / kGeluChunk, [&](std::int64_t chunk) {
    const std::int64_t begin = chunk * kGeluChunk, n = std::min(count, begin + kGeluChunk) - begin;
    const ConstArrayMap<Real> zc(z + begin, n), dyc(dy + begin, n);
    const auto cdf = Real(0.5) * (Real(1) + (zc * inv_sqrt2).erf());
    const auto pdf = inv_sqrt_2pi * (Real(-0.5) * zc.square()).exp();
    ArrayMap<Real>(dz + begin, n) = dyc * (cdf + zc * pdf);
  });
}

}  // namespace emergent::nn
