// nn/gelu.hpp on the device: the exact GELU 0.5 z (1 + erf(z / sqrt 2)) and its derivative
// Phi(z) + z phi(z), elementwise.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>

namespace emergent::cuda {

inline void gelu_forward(float* y, const float* z, std::int64_t count) {
  for_each_index(count, [=] EMERGENT_HD(std::int64_t i) {
    y[i] = 0.5f * z[i] * (1.0f + erff(z[i] * 0.70710678118654752440f));
  });
}

// dz = dy gelu'(z); dz may alias dy
inline void gelu_backward(float* dz, const float* dy, const float* z, std::int64_t count) {
  for_each_index(count, [=] EMERGENT_HD(std::int64_t i) {
    const float cdf = 0.5f * (1.0f + erff(z[i] * 0.70710678118654752440f));
    const float pdf = 0.39894228040143267794f * expf(-0.5f * z[i] * z[i]);
    dz[i] = dy[i] * (cdf + z[i] * pdf);
  });
}

}  // namespace emergent::cuda
