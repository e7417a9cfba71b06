// The capability metric of the paper's Pythia analysis (arXiv 2606.25010 §2, App. A.2): run a
// prompt, look at the distribution over the token after its last position. A prompt is solved
// when the greedy next token is the target; the continuous metric is p(target).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/neox/network.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

struct NextTokenPrediction {
  double p_target = 0;       // softmax probability of the target after the last position
  std::int32_t greedy = -1;  // argmax token (the lowest id on ties)
  double p_greedy = 0;
  bool solved = false;  // greedy == target
};

// Softmax over one row of logits [vocab], in double.
inline NextTokenPrediction predict_from_logits(std::span<const float> row, std::int32_t target) {
  require(target >= 0 && static_cast<std::size_t>(target) < row.size(), "predict_from_logits",
          "target token " + std::to_string(target) + " is outside the vocabulary of " +
              std::to_string(row.size()));
  const auto best = std::max_element(row.begin(), row.end());
  const double max = *best;
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - max);
  NextTokenPrediction p;
  p.greedy = static_cast<std::int32_t>(best - row.begin());
  p.p_greedy = 1.0 / sum;
  p.p_target = std::exp(double(row[static_cast<std::size_t>(target)]) - max) / sum;
  p.solved = p.greedy == target;
  return p;
}

// The prediction after the last token of `tokens`.
inline NextTokenPrediction predict_next(const neox::Network& network,
                                        std::span<const std::int32_t> tokens, std::int32_t target,
                                        const neox::ForwardHooks& hooks = {}) {
  require(!tokens.empty(), "predict_next", "the prompt has no tokens");
  const std::vector<float> logits = network.forward(tokens, hooks);
  const std::size_t vocab = logits.size() / tokens.size();
  return predict_from_logits(
      std::span<const float>(logits).subspan((tokens.size() - 1) * vocab, vocab), target);
}

}  // namespace emergent
