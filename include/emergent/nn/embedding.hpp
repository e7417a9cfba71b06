// Token embedding plus learned absolute position embedding: x[b,t] = E[token] + P[t].
#pragma once

#include <cstdint>
#include <emergent/core/parallel.hpp>

namespace emergent::nn {

// x[B*T,D] <- tokens[B*T], token_table[V,D], position_table[max_len,D]
template <class Real>
void embedding_forward(Real* x, const std::int32_t* tokens, const Real* token_table,
                       const Real* position_table, int batch, int length, int dim) {
  parallel_for(static_cast<std::int64_t>(batch) * length, [&](std::int64_t n) {
    const Real* e = token_table + static_cast<std::int64_t>(tokens[n]) * dim;
    const Real* p = position_table + (n % length) * dim;
    Real* xr = x + n * dim;
    for (int d = 0; d < dim; ++d) xr[d] = e[d] + p[d];
  });
}

// d_token_table[V,D] += scatter(dx); d_position_table[T,D] += sum_b dx   <- dx[B*T,D]
// Serial in row order: the scatter has collisions, and a fixed order keeps it deterministic.
template <class Real>
void embedding_backward(Real* d_token_table, Real* d_position_table, const Real* dx,
                        const std::int32_t* tokens, int batch, int length, int dim) {
  for (std::int64_t n = 0; n < static_cast<std::int64_t>(batch) * length; ++n) {
    const Real* g = dx + n * dim;
    Real* e = d_token_table + static_cast<std::int64_t>(tokens[n]) * dim;
    Real* p = d_position_table + (n % length) * dim;
    for (int d = 0; d < dim; ++d) {
      e[d] += g[d];
      p[d] += g[d];
    }
  }
}

}  // namespace emergent::nn
