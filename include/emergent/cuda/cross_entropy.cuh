// nn/cross_entropy.hpp on the device: softmax cross-entropy per row with a per-position weight,
//   loss_e = sum_{b,t} w_e[t] CE(e,b,t) / (B sum_t w_e[t]),  CE = logsumexp(logits) -
//   logits[target],
// or a weight per token (below).
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/reduce.cuh>

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

// The loss weights: each member's over positions, w [E, T], member e's row w_e (a mixed
// ensemble's members may train different tasks of one length), or, `per_token`, one per token,
// w [E, B, T], for a task whose learnable positions depend on the sampled tokens (Dyck): member
// e's loss is then the mean over its sequences of each one's weighted mean (a sequence without
// weight counting 0), as the CPU's Model has it (nn::sequence_weighted_mean). `member_batch`
// [E], if given, is each member's own count of sequences (the others of the B are padding, all
// their weights 0: members with fewer, shorter sequences packed into one ensemble), else B.

// dlogits = (probs - onehot(target)) w scale for row n = (e, b, t), the scales read on the device
// (from loss_scale below), so that a step asks nothing of the host: w_e[t] scale[e], or per token
// w[e, b, t] scale[e, b] / B (the CPU rounds w / sum_t w once where this multiplies by the rounded
// 1 / sum_t w: the same for Dyck's weights of 0 and 1, within an ulp otherwise).
inline void cross_entropy_backward(float* dlogits, const float* probs, const std::int32_t* targets,
                                   const float* weights, std::int64_t rows, int batch, int length,
                                   int vocab, const float* scale, bool per_token = false,
                                   const int* member_batch = nullptr) {
  const std::int64_t member_rows = std::int64_t(batch) * length;
  for_each_index(rows * vocab, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t n = i / vocab, e = n / member_rows;
    const float inverse_batch = float(1.0 / (member_batch ? member_batch[e] : batch));
    const float w = per_token ? weights[n] * scale[n / length] * inverse_batch
                              : weights[e * length + n % length] * scale[e];
    dlogits[i] = probs[i] * w - (int(i % vocab) == targets[n] ? w : 0.0f);
  });
}

// scale[e] = 1 / (batch sum_t w_e[t]), or per token scale[e, b] = 1 / sum_t w[e, b, t] (0 when
// the weights sum to 0), the sums in double in order: the factor each token's weight gets.
inline void loss_scale(float* scale, const float* weights, int members, int batch, int length,
                       bool per_token = false) {
  if (per_token) {
    for_each_index(std::int64_t(members) * batch, [=] EMERGENT_HD(std::int64_t s) {
      double weight_sum = 0;
      for (int t = 0; t < length; ++t) weight_sum += weights[s * length + t];
      scale[s] = weight_sum > 0 ? float(1.0 / weight_sum) : 0.0f;
    });
    return;
  }
  for_each_index(members, [=] EMERGENT_HD(std::int64_t e) {
    double weight_sum = 0;
    for (int t = 0; t < length; ++t) weight_sum += weights[e * length + t];
    scale[e] = weight_sum > 0 ? float(1.0 / (batch * weight_sum)) : 0.0f;
  });
}

// out[e * out_stride] = sum_{b,t} w_e[t] values[e,b,t] / (B sum_t w_e[t]), in double (the rows
// in reduce.cuh's order); per token, the mean over b of sum_t w values / sum_t w: each sequence's
// into `sequence_means` [E * B] (one thread a sequence), then each member's (one thread a
// member, in order).
inline void weighted_member_means(double* out, std::int64_t out_stride, const float* values,
                                  const float* weights, int members, int batch, int length,
                                  bool per_token = false, const int* member_batch = nullptr,
                                  double* sequence_means = nullptr) {
  const std::int64_t rows = std::int64_t(batch) * length;
  if (per_token) {
    require(sequence_means != nullptr, "weighted_member_means",
            "weights per token need a buffer of one double per sequence");
    for_each_index(std::int64_t(members) * batch, [=] EMERGENT_HD(std::int64_t s) {
      double sum = 0, weight_sum = 0;
      for (int t = 0; t < length; ++t) {
        const std::int64_t n = s * length + t;
        sum += weights[n] * double(values[n]);
        weight_sum += weights[n];
      }
      sequence_means[s] = weight_sum > 0 ? sum / weight_sum : 0.0;
    });
    for_each_index(members, [=] EMERGENT_HD(std::int64_t e) {
      double total = 0;
      for (int b = 0; b < batch; ++b) total += sequence_means[e * batch + b];
      out[e * out_stride] = total / (member_batch ? member_batch[e] : batch);
    });
    return;
  }
  column_sums<double>(out, out_stride, members, rows, 1, false,
                      [=] EMERGENT_HD(std::int64_t e, std::int64_t r, int) {
                        return double(weights[e * length + r % length]) * values[e * rows + r];
                      });
  for_each_index(members, [=] EMERGENT_HD(std::int64_t e) {
    double weight_sum = 0;
    for (int t = 0; t < length; ++t) weight_sum += weights[e * length + t];
    weight_sum *= batch;
    out[e * out_stride] = weight_sum > 0 ? out[e * out_stride] / weight_sum : 0.0;
  });
}
inline void weighted_member_means(double* out, const float* values, const float* weights,
                                  int members, int batch, int length, bool per_token = false,
                                  const int* member_batch = nullptr,
                                  double* sequence_means = nullptr) {
  weighted_member_means(out, 1, values, weights, members, batch, length, per_token, member_batch,
                        sequence_means);
}

}  // namespace emergent::cuda
