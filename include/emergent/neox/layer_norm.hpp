// LayerNorm over the last dimension as torch.nn.LayerNorm computes it in the forward pass:
// y = (x - mean) / sqrt(var + eps) * weight + bias, biased variance, eps inside the square root,
// eps from the config (nn/layernorm.hpp fixes eps = 1e-5 and saves statistics for a backward
// that inference does not need). Row statistics are accumulated in double, so the result is
// within an ulp or two of PyTorch's float kernel. Single-threaded: the caller splits the rows.
#pragma once

#include <cmath>
#include <cstdint>

namespace emergent::neox {

// y[rows, dim] <- x[rows, dim], weight[dim], bias[dim]; y may not alias x.
inline void layer_norm(float* y, const float* x, const float* weight, const float* bias, int rows,
                       int dim, float eps) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    double sum = 0;
    for (int i = 0; i < dim; ++i) sum += xr[i];
    const double mean = sum / dim;
    double squares = 0;
    for (int i = 0; i < dim; ++i) squares += (xr[i] - mean) * (xr[i] - mean);
    const auto mean_f = static_cast<float>(mean);
    const auto rstd = static_cast<float>(1.0 / std::sqrt(squares / dim + static_cast<double>(eps)));
    for (int i = 0; i < dim; ++i) yr[i] = (xr[i] - mean_f) * rstd * weight[i] + bias[i];
  }
}

}  // namespace emergent::neox
