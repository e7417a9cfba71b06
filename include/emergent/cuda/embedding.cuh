// nn/embedding.hpp on the device, for an ensemble of E models: x[e,b,t] = E_tok[e][token] +
// E_pos[e][t]. Member e's tables start at `params + e * param_stride`.
#pragma once

#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/reduce.cuh>

namespace emergent::cuda {

// x[E*B*T, D] <- tokens[E*B*T]
inline void embedding_forward(float* x, const std::int32_t* tokens, const float* token_table,
                              const float* position_table, std::int64_t param_stride, int members,
                              int batch, int length, int dim) {
  const std::int64_t rows = std::int64_t(batch) * length;
  for_each_index(members * rows * dim, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t row = i / dim, e = row / rows, t = (row % rows) % length;
    const int d = int(i % dim);
    x[i] = token_table[e * param_stride + std::int64_t(tokens[row]) * dim + d] +
           position_table[e * param_stride + t * dim + d];
  });
}

// d_token_table[v,d] += sum over rows with token v of dx; d_position_table[t,d] += sum_b dx,
// both in reduce.cuh's order.
inline void embedding_backward(float* d_token_table, float* d_position_table, const float* dx,
                               const std::int32_t* tokens, std::int64_t param_stride, int members,
                               int vocab, int batch, int length, int dim) {
  const std::int64_t rows = std::int64_t(batch) * length;
  column_sums<float>(d_token_table, param_stride, members, rows, vocab * dim, true,
                     [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int c) {
                       const std::int64_t n = e * rows + r;
                       return tokens[n] == c / dim ? dx[n * dim + c % dim] : 0.0f;
                     });
  column_sums<float>(d_position_table, param_stride, members, batch, length * dim, true,
                     [=] EMERGENT_HD(std::int64_t e, std::int64_t b, int c) {
                       return dx[(e * rows + b * length) * dim + c];
                     });
}

}  // namespace emergent::cuda
