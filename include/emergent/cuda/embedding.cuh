// nn/embedding.hpp on the device, for an ensemble of E models: x[e,b,t] = E_tok[e][token] +
// E_pos[e][t]. Member e's tables start at `params + e * param_stride`.
#pragma once

#include <cstdint>

#include "device_system.cuh"

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
// both in row order (as the CPU's serial scatter adds them).
inline void embedding_backward(float* d_token_table, float* d_position_table, const float* dx,
                               const std::int32_t* tokens, std::int64_t param_stride, int members,
                               int vocab, int batch, int length, int dim) {
  const std::int64_t rows = std::int64_t(batch) * length;
  for_each_index(std::int64_t(members) * vocab * dim, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t e = i / (std::int64_t(vocab) * dim);
    const int v = int((i / dim) % vocab), d = int(i % dim);
    float sum = d_token_table[e * param_stride + std::int64_t(v) * dim + d];
    for (std::int64_t n = 0; n < rows; ++n)
      if (tokens[e * rows + n] == v) sum += dx[(e * rows + n) * dim + d];
    d_token_table[e * param_stride + std::int64_t(v) * dim + d] = sum;
  });
  for_each_index(std::int64_t(members) * length * dim, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t e = i / (std::int64_t(length) * dim);
    const int t = int((i / dim) % length), d = int(i % dim);
    float sum = d_position_table[e * param_stride + std::int64_t(t) * dim + d];
    for (int b = 0; b < batch; ++b) sum += dx[(e * rows + std::int64_t(b) * length + t) * dim + d];
    d_position_table[e * param_stride + std::int64_t(t) * dim + d] = sum;
  });
}

}  // namespace emergent::cuda
