// Attention entropy per head: how sharply a head's batch-averaged attention concentrates on a
// few keys. The paper uses it to pick out the heads that learn a row of the target map: a loss
// jump coincides with an entropy drop in those heads (docs/paper-notes.md §2).
//
// Works on plain arrays so that it serves the trainer, the CUDA path and checkpoint analysis
// alike. Input: one layer's attention probabilities att [batch, heads, T, T] (query x key,
// causal softmax rows).
//
// For the linear map the paper's choice is: queries = the x1 predictions S-1 .. 2S-2 (position p
// predicts token p+1, see tasks/linear_map.hpp), keys = [0, S) (the x0 tokens).
#pragma once

#include <cmath>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

// Mean over the batch of att [batch, heads, T, T] -> [heads, T, T], in double so that averaging
// thousands of rows loses nothing. The paper's attention maps are averaged over samples: for a
// task whose target pattern is fixed (the linear map) the average shows the learned pattern
// without the data-dependent noise of one sample.
inline std::vector<double> batch_averaged_pattern(std::span<const float> att, int batch, int heads,
                                                  int T) {
  require(batch >= 1 && heads >= 1 && T >= 1, "batch_averaged_pattern",
          "batch, heads and T must be >= 1");
  const std::size_t per_sample = static_cast<std::size_t>(heads) * T * T;
  require(att.size() == static_cast<std::size_t>(batch) * per_sample, "batch_averaged_pattern att",
          "size " + std::to_string(att.size()) + ", expected batch*heads*T*T = " +
              std::to_string(static_cast<std::size_t>(batch) * per_sample));
  std::vector<double> pattern(per_sample, 0.0);
  for (int b = 0; b < batch; ++b) {
    const float* sample = att.data() + static_cast<std::size_t>(b) * per_sample;
    for (std::size_t e = 0; e < per_sample; ++e) pattern[e] += sample[e];
  }
  for (double& value : pattern) value /= batch;
  return pattern;
}

// Entropy (nats) of one row restricted to keys [key_begin, key_end) and renormalised over them.
// 0 log 0 = 0. A row with no mass in the range has no preference among those keys and counts as
// uniform, ln(key_end - key_begin), rather than NaN (which would poison a metrics log).
inline double restricted_row_entropy(const double* row, int key_begin, int key_end) {
  double mass = 0.0;
  for (int key = key_begin; key < key_end; ++key) mass += row[key];
  if (!(mass > 0.0)) return std::log(static_cast<double>(key_end - key_begin));
  double entropy = 0.0;
  for (int key = key_begin; key < key_end; ++key) {
    const double p = row[key] / mass;
    if (p > 0.0) entropy -= p * std::log(p);
  }
  return entropy;
}

// Per head: mean over `queries` of restricted_row_entropy of the averaged pattern [heads, T, T].
// Returns [heads]. Uniform attention over k keys gives ln k; a one-hot row gives 0.
inline std::vector<double> head_entropy(std::span<const double> pattern, int heads, int T,
                                        std::span<const int> queries, int key_begin, int key_end) {
  require(heads >= 1 && T >= 1, "head_entropy", "heads and T must be >= 1");
  require(pattern.size() == static_cast<std::size_t>(heads) * T * T, "head_entropy pattern",
          "size " + std::to_string(pattern.size()) + ", expected heads*T*T");
  require(0 <= key_begin && key_begin < key_end && key_end <= T, "head_entropy key range",
          "need 0 <= key_begin < key_end <= T");
  require(!queries.empty(), "head_entropy queries", "at least one query is needed");
  for (int query : queries) {
    require(0 <= query && query < T, "head_entropy queries",
            "query " + std::to_string(query) + " outside [0, T)");
  }
  std::vector<double> entropy(static_cast<std::size_t>(heads), 0.0);
  for (int h = 0; h < heads; ++h) {
    double total = 0.0;
    for (int query : queries) {
      const double* row = pattern.data() + (static_cast<std::size_t>(h) * T + query) * T;
      total += restricted_row_entropy(row, key_begin, key_end);
    }
    entropy[static_cast<std::size_t>(h)] = total / static_cast<double>(queries.size());
  }
  return entropy;
}

}  // namespace emergent
