// nn/cross_entropy.hpp on the device: softmax cross-entropy per row with a per-position weight,
//   loss_e = sum_{b,t} w[t] CE(e,b,t) / (B sum_t w[t]),  CE = logsumexp(logits) - logits[target].
#pragma once

#include <cmath>
#include <cstdint>

#include "device_system.cuh"

namespace emergent::cuda {

// probs[R,V], ce[R], correct[R] (argmax == target) <- logits[R,V], targets[R]   (R = E*B*T)
inline void cross_entropy_forward(float* probs, float* ce, float* correct, const float* logits,
                                  const std::int32_t* targets, std::int64_t rows, int vocab) {
  for_each_index(rows, [=] EMERGENT_HD(std::int64_t n) {
    const float* l = logits + n * vocab;
    float* p = probs + n * vocab;
    int argmax = 0;
    for (int v = 1; v < vocab; ++v)
      if (l[v] > l[argmax]) argmax = v;
    const float max = l[argmax];
    float sum = 0;
    for (int v = 0; v < vocab; ++v) {
      p[v] = expf(l[v] - max);
      sum += p[v];
    }
    for (int v = 0; v < vocab; ++v) p[v] /= sum;
    ce[n] = logf(sum) + max - l[targets[n]];
    correct[n] = argmax == targets[n] ? 1.0f : 0.0f;
  });
}

// dlogits = (probs - onehot(target)) w[n % length] scale
inline void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                                   const float* weights, std::int64_t rows, int length, int vocab,
                                   float scale) {
  for_each_index(rows * vocab, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t n = i / vocab;
    const float w = weights[n % length] * scale;
    dlogits[i] = probs[i] * w - (int(i % vocab) == targets[n] ? w : 0.0f);
  });
}

// out[e] = sum_{b,t} w[t] values[e,b,t] / (B sum_t w[t]), in double, in row order: one index per
// member (a handful of members, thousands of rows: not worth a tree).
inline void weighted_member_means(double* out, const float* values, const float* weights,
                                  int members, int batch, int length) {
  for_each_index(members, [=] EMERGENT_HD(std::int64_t e) {
    double total = 0, weight_sum = 0;
    for (int b = 0; b < batch; ++b)
      for (int t = 0; t < length; ++t) {
        total += double(weights[t]) * values[(e * batch + b) * length + t];
        weight_sum += weights[t];
      }
    out[e] = weight_sum > 0 ? total / weight_sum : 0.0;
  });
}

}  // namespace emergent::cuda
