// The MLP activations a GPT-NeoX config can name (hf_config.hpp), applied in place:
//   gelu_erf   0.5 z (1 + erf(z / sqrt 2))                           hidden_act "gelu" (Pythia)
//   gelu_tanh  0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))       "gelu_new",
//              "gelu_pytorch_tanh", "gelu_fast" (the same function, evaluated alike to ~1 ulp)
// erf and tanh go through Eigen's vectorised packet functions (as nn/gelu.hpp does).
// Single-threaded: the caller splits the rows.
#pragma once

#include <Eigen/Core>
#include <cstdint>
#include <emergent/io/hf_config.hpp>
#include <unsupported/Eigen/SpecialFunctions>

namespace emergent::neox {

// z[count] <- activation(z[count])
inline void apply_activation(NeoxActivation activation, float* z, std::int64_t count) {
  Eigen::Map<Eigen::ArrayXf> x(z, count);
  if (activation == NeoxActivation::gelu_erf) {
    constexpr float inv_sqrt2 = 0.70710678118654752440f;
    x = 0.5f * x * (1.0f + (x * inv_sqrt2).erf());
  } else {
    constexpr float sqrt_2_over_pi = 0.79788456080286535588f;
    x = 0.5f * x * (1.0f + (sqrt_2_over_pi * (x + 0.044715f * x.cube())).tanh());
  }
}

}  // namespace emergent::neox
