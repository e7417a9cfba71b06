// Exact GELU, 0.5 z (1 + erf(z / sqrt 2)), PyTorch's nn.GELU() default (not the tanh form).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "../core/parallel.hpp"

namespace emergent::nn {

// y[n] <- gelu(z[n])
template <class Real>
void gelu_forward(Real* y, const Real* z, std::int64_t count) {
  constexpr Real inv_sqrt2 = Real(0.70710678118654752440);
  parallel_for((count + 4095) / 4096, [&](std::int64_t chunk) {
    const std::int64_t end = std::min<std::int64_t>(count, (chunk + 1) * 4096);
    for (std::int64_t i = chunk * 4096; i < end; ++i)
      y[i] = Real(0.5) * z[i] * (Real(1) + std::erf(z[i] * inv_sqrt2));
  });
}

// dz[n] = dy[n] * gelu'(z[n]);  gelu'(z) = Phi(z) + z phi(z)
template <class Real>
void gelu_backward(Real* dz, const Real* dy, const Real* z, std::int64_t count) {
  constexpr Real inv_sqrt2 = Real(0.70710678118654752440);
  constexpr Real inv_sqrt_2pi = Real(0.39894228040143267794);
  parallel_for((count + 4095) / 4096, [&](std::int64_t chunk) {
    const std::int64_t end = std::min<std::int64_t>(count, (chunk + 1) * 4096);
    for (std::int64_t i = chunk * 4096; i < end; ++i) {
      const Real cdf = Real(0.5) * (Real(1) + std::erf(z[i] * inv_sqrt2));
      const Real pdf = inv_sqrt_2pi * std::exp(Real(-0.5) * z[i] * z[i]);
      dz[i] = dy[i] * (cdf + z[i] * pdf);
    }
  });
}

}  // namespace emergent::nn
