// Capability prompt sets: N prompts of one kind evaluated together, the paper's multi-sample form
// (arXiv 2606.25010 App. A.2) beside its single-prompt one.
//
//   the set        make_capability_prompt(kind, seed, length) at seeds 0, 1, 2, ...; a seed whose
//                  text an earlier seed already gave is skipped, so the set holds N distinct
//                  texts and is the same everywhere (ioi has only 8 x 7 x 4 x 4 = 896 texts;
//                  short repetitions 10^length)
//   per prompt     p(target) and whether the greedy next token is the target (next_token.hpp)
//   aggregated     mean p(target) over the set; accuracy = the share of prompts whose greedy
//                  next token is the target; the set is solved when accuracy >= threshold
//                  (0.5 by default in the CLI)
//
// A checkpoint's evaluation on a set (CheckpointSetEvaluation) plugs into search_emergence
// (checkpoint_search.hpp) as the one-prompt CheckpointEvaluation does.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/analysis/capability_prompts.hpp>
#include <emergent/analysis/next_token.hpp>
#include <emergent/core/error.hpp>
#include <emergent/io/tokenizer.hpp>
#include <emergent/neox/network.hpp>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace emergent {

inline constexpr int kMaxPromptSetCount = 100000;

struct SeededPrompt {
  std::uint64_t seed = 0;
  CapabilityPrompt prompt;
};

// Seeds tried before a set of `count` distinct texts is given up as impossible.
inline std::uint64_t prompt_set_seed_budget(int count) {
  return 64 * static_cast<std::uint64_t>(count) + 4096;
}

// `count` prompts of `kind` with distinct texts, from seeds 0, 1, 2, ... in order.
inline std::vector<SeededPrompt> make_prompt_set(std::string_view kind, int count, int length = 8) {
  require(count >= 1 && count <= kMaxPromptSetCount, "prompt set",
          "count must be in [1, " + std::to_string(kMaxPromptSetCount) + "]");
  std::vector<SeededPrompt> set;
  std::set<std::string> seen;
  const std::uint64_t budget = prompt_set_seed_budget(count);
  for (std::uint64_t seed = 0; seed < budget && set.size() < std::size_t(count); ++seed) {
    CapabilityPrompt p = make_capability_prompt(kind, seed, length);
    if (seen.insert(p.text).second) set.push_back({seed, std::move(p)});
  }
  require(set.size() == std::size_t(count), "prompt set",
          "only " + std::to_string(set.size()) + " distinct " + std::string(kind) + " prompts" +
              (kind == "ioi" ? "" : " of length " + std::to_string(length)) + " among seeds 0.." +
              std::to_string(budget - 1) + "; ask for at most that many");
  return set;
}

// How a prompt of a set is named in messages: `ioi prompt (seed 5) "Then, ..." -> " Kate"`.
inline std::string prompt_set_label(const SeededPrompt& p) {
  return p.prompt.kind + " prompt (seed " + std::to_string(p.seed) + ") \"" + p.prompt.text +
         "\" -> \"" + p.prompt.target + "\"";
}

// Encodes every prompt; a target that is not one token is an error naming its prompt.
inline std::vector<CapabilityTokens> prompt_set_tokens(const BpeTokenizer& tokenizer,
                                                       std::span<const SeededPrompt> set) {
  std::vector<CapabilityTokens> out;
  out.reserve(set.size());
  for (const SeededPrompt& p : set)
    out.push_back(capability_tokens(tokenizer, p.prompt, prompt_set_label(p)));
  return out;
}

struct PromptSetScore {
  std::vector<NextTokenPrediction> prompts;  // per prompt, in set order
  double mean_p_target = 0;                  // mean of p(target) over the set
  double accuracy = 0;  // share of prompts whose greedy next token is the target
  bool solved = false;  // accuracy >= threshold
};

// Aggregates per-prompt predictions; threshold in [0, 1].
inline PromptSetScore score_prompt_set(std::vector<NextTokenPrediction> predictions,
                                       double threshold) {
  require(!predictions.empty(), "score_prompt_set", "the prompt set is empty");
  require(std::isfinite(threshold) && threshold >= 0 && threshold <= 1, "score_prompt_set",
          "the accuracy threshold must be in [0, 1]");
  PromptSetScore s;
  double p_sum = 0;
  int right = 0;
  for (const NextTokenPrediction& p : predictions) {
    p_sum += p.p_target;
    right += p.solved ? 1 : 0;
  }
  const double n = double(predictions.size());
  s.mean_p_target = p_sum / n;
  s.accuracy = double(right) / n;
  s.solved = s.accuracy >= threshold;
  s.prompts = std::move(predictions);
  return s;
}

// One forward per prompt.
inline PromptSetScore evaluate_prompt_set(const neox::Network& network,
                                          std::span<const CapabilityTokens> set, double threshold) {
  std::vector<NextTokenPrediction> predictions;
  predictions.reserve(set.size());
  for (const CapabilityTokens& t : set)
    predictions.push_back(predict_next(network, t.prompt, t.target));
  return score_prompt_set(std::move(predictions), threshold);
}

// One checkpoint of a suite on a prompt set, for search_emergence.
struct CheckpointSetEvaluation {
  std::int64_t step = 0;
  std::string sha256;
  PromptSetScore score;
};

inline bool is_solved(const CheckpointSetEvaluation& e) { return e.score.solved; }

}  // namespace emergent
