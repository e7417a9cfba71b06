// Softmax cross-entropy over the vocabulary with a per-position loss weight:
//   loss = sum_{b,t} w[t] CE(b,t) / (B sum_t w[t]),  CE = logsumexp(logits) - logits[target].
// The forward keeps the softmax probabilities; the backward turns them into dlogits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/parallel.hpp>

namespace emergent::nn {

// probs[N,V], ce[N], correct[N] (1 if argmax == target) <- logits[N,V], targets[N]
template <class Real>
void cross_entropy_forward(Real* probs, Real* ce, Real* correct, const Real* logits,
                           const std::int32_t* targets, std::int64_t rows, int vocab) {
  parallel_for(rows, [&](std::int64_t n) {
    const Real* l = logits + n * vocab;
    Real* p = probs + n * vocab;
    int argmax = 0;
    for (int v = 1; v < vocab; ++v)
      if (l[v] > l[argmax]) argmax = v;
    const Real max = l[argmax];
    Real sum = 0;
    for (int v = 0; v < vocab; ++v) {
      p[v] = std::exp(l[v] - max);
      sum += p[v];
    }
    for (int v = 0; v < vocab; ++v) p[v] /= sum;
    ce[n] = std::log(sum) + max - l[targets[n]];
    correct[n] = argmax == targets[n] ? Real(1) : Real(0);
  });
}

// dlogits[N,V] = (probs - onehot(target)) * weights[n % length] * scale   (N = batch * length)
template <class Real>
void cross_entropy_backward(Real* dlogits, const Real* probs, const std::int32_t* targets,
                            const Real* weights, std::int64_t rows, int length, int vocab,
                            Real scale) {
  parallel_for(rows, [&](std::int64_t n) {
    const Real w = weights[n % length] * scale;
    const Real* p = probs + n * vocab;
    Real* d = dlogits + n * vocab;
    for (int v = 0; v < vocab; ++v) d[v] = p[v] * w;
    d[targets[n]] -= w;
  });
}

// sum_{b,t} w[t] values[b,t] / (batch sum_t w[t]) over per-token values [batch, length] (the losses
// or hits of cross_entropy_forward), in double and in row order; 0 when every weight is 0.
template <class Real>
double weighted_token_mean(const Real* values, int batch, int length, const float* weights) {
  double total = 0, weight_sum = 0;
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < length; ++t) {
      total += weights[t] * double(values[static_cast<std::size_t>(b) * length + t]);
      weight_sum += weights[t];
    }
  return weight_sum > 0 ? total / weight_sum : 0.0;
}

// Per-token weights [batch, length] (a task whose learnable positions depend on the sampled
// tokens): the mean over sequences of each sequence's weighted mean sum_t w[b,t] values[b,t] /
// sum_t w[b,t], a sequence without weight counting 0; in double and in row order.
template <class Real>
double sequence_weighted_mean(const Real* values, int batch, int length, const float* weights) {
  double total = 0;
  for (int b = 0; b < batch; ++b) {
    double sum = 0, weight_sum = 0;
    for (int t = 0; t < length; ++t) {
      const std::size_t n = static_cast<std::size_t>(b) * length + t;
      sum += weights[n] * double(values[n]);
      weight_sum += weights[n];
    }
    if (weight_sum > 0) total += sum / weight_sum;
  }
  return batch > 0 ? total / batch : 0.0;
}

}  // namespace emergent::nn
