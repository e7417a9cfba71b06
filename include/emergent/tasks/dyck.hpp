// Dyck-k: well-nested brackets of k types, the formal language of pre-pretraining studies
// (docs/pre-pretraining.md). A model that predicts which bracket closes next must find the
// matching opener, which can be arbitrarily far back: the ideal attention of that prediction is
// one key, the opener, and it moves from sequence to sequence (unlike the linear map's).
//
// Tokens: opener of type j is j, its closer k + j (vocab 2k). A sequence is `tokens` tokens of a
// bounded random walk over nesting depth d, words written one after another:
//   d = 0          open (a new word starts)
//   d = max_depth  close (the depth bound)
//   otherwise      open with probability open_probability, else close
// An opener's type is uniform over the k types; a closer closes the innermost open bracket. So
// the words' lengths follow the excursion lengths of this walk (2 with probability 1 - p, longer
// ones geometrically rarer for p < 1/2), and the last word is cut off by the end of the
// sequence. Every prefix is balanced-or-open: depth never below 0 or above max_depth, and every
// closer matches the opener on top of the stack.
//
// What is learnable: when the next token is a closer, its type is determined by the prefix (the
// innermost open bracket); whether the walk opens or closes is a coin flip. So the learnable
// predictions are those whose target is a closer, their loss and accuracy are the metric
// ("closing"), and the loss is masked to them (loss = "closing", the default) or is the plain
// next-token loss on every position (loss = "all"). These positions differ per sequence, so the
// task gives its weights per sequence (tasks/task.hpp) and its attention target per sequence
// (`attention_target_of`: the query before a closer to that closer's opener), which the
// attention analysis and the attention-bias intervention read as they read the linear map's.
//
// Sample b of step t: decision i is word (b << 32) + 2i of the Philox stream (data_seed, t), the
// opener type word (b << 32) + 2i + 1, so a sample is the same for every batch size and thread
// count.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/task.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace emergent {

class Dyck {
 public:
  Dyck(int types, int max_depth, double open_probability, int tokens, bool loss_on_closers)
      : types_(types),
        max_depth_(max_depth),
        open_probability_(open_probability),
        tokens_(tokens),
        loss_on_closers_(loss_on_closers) {
    require(
        types >= 2, "Dyck k",
        "field 'k' = " + std::to_string(types) + " is not allowed: expected >= 2 bracket types");
    require(max_depth >= 1, "Dyck max_depth",
            "field 'max_depth' = " + std::to_string(max_depth) + " is not allowed: expected >= 1");
    require(open_probability > 0 && open_probability < 1, "Dyck open_probability",
            "field 'open_probability' must lie in (0, 1)");
    require(tokens >= max_depth + 2, "Dyck tokens",
            "field 'tokens' = " + std::to_string(tokens) +
                " is not allowed: a sequence needs >= max_depth + 2 = " +
                std::to_string(max_depth + 2) + " tokens, so that it holds a closer to predict");
  }

  // The declaration (tasks/task.hpp). Emergence is read off the loss on the closers. With the
  // loss on the closers, the model first learns that a closer comes (loss ln k: any of the k
  // types) and then which one (0); with the plain loss the closers' loss also pays for not
  // knowing that a closer comes, about -ln(1 - p) at depths below the bound, so its thresholds
  // sit that much higher.
  static constexpr const char* task_name = "dyck";
  static std::vector<Parameter> parameters() {
    return {integer("k", 2, between(2, 1024), "bracket types (vocab 2k)"),
            integer("max_depth", 4, between(1, limits::kPositions), "nesting depth bound"),
            real("open_probability", 0.5, Range{0, 1, true, true},
                 "chance of opening below the depth bound (words: excursions of the walk)"),
            integer("tokens", 64, between(3, limits::kPositions), "tokens per sequence"),
            text("loss", "closing", {"closing", "all"},
                 "the training loss: on the positions whose next token is a closer (its type is "
                 "determined), or the plain next-token loss on every position")};
  }
  static Shape default_shape() {
    return {.vocab = 0, .d_model = 128, .heads = 8, .layers = 2, .d_ff = 512, .max_len = 0};
  }
  static TaskSetup setup(const ParameterValues& v) {
    const bool closers = v.text("loss") == "closing";
    const double k = double(v.integer("k")),
                 unknown_turn = closers ? 0.0 : -std::log(1 - v.real("open_probability"));
    return {std::make_unique<TaskAdapter<Dyck>>(
                Dyck(int(v.integer("k")), int(v.integer("max_depth")), v.real("open_probability"),
                     int(v.integer("tokens")), closers)),
            "closing",
            {"closing_loss", unknown_turn + std::log(k) - 0.03, unknown_turn + std::log(k) / 2,
             unknown_turn + 0.05}};
  }

  int vocab() const { return 2 * types_; }
  int length() const { return tokens_ - 1; }
  int types() const { return types_; }
  int max_depth() const { return max_depth_; }
  static bool is_closer(std::int32_t token, int types) { return token >= types; }

  // The `tokens` tokens of sample b of step `step`.
  std::vector<std::int32_t> sequence(std::uint64_t data_seed, std::uint64_t step, int b) const {
    const PhiloxStream stream(data_seed, step);
    const std::uint64_t base = static_cast<std::uint64_t>(b) << 32;
    const auto threshold = static_cast<std::uint32_t>(std::ldexp(open_probability_, 32) - 0.5);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(tokens_)), stack;
    for (int i = 0; i < tokens_; ++i) {
      const int depth = static_cast<int>(stack.size());
      const bool open = depth == 0 || (depth < max_depth_ &&
                                       stream.u32(base + 2 * std::uint64_t(i)) <= threshold);
      if (open) {
        const auto type = static_cast<std::int32_t>(
            stream.below(base + 2 * std::uint64_t(i) + 1, static_cast<std::uint32_t>(types_)));
        stack.push_back(type);
        tokens[i] = type;
      } else {
        tokens[i] = types_ + stack.back();
        stack.pop_back();
      }
    }
    return tokens;
  }

  void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
              std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
    const std::size_t T = static_cast<std::size_t>(length());
    require(inputs.size() == static_cast<std::size_t>(batch) * T && targets.size() == inputs.size(),
            "Dyck::sample", "inputs and targets must hold batch * length tokens");
    for (int b = 0; b < batch; ++b) {
      const std::vector<std::int32_t> tokens = sequence(data_seed, step, b);
      for (std::size_t p = 0; p < T; ++p) {
        inputs[b * T + p] = tokens[p];
        targets[b * T + p] = tokens[p + 1];
      }
    }
  }

  // For each position of a token sequence, the position of the opener its closer matches, or -1
  // (an opener, or a closer without an opener in the sequence).
  static std::vector<int> matching_openers(std::span<const std::int32_t> tokens, int types) {
    std::vector<int> match(tokens.size(), -1), stack;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (!is_closer(tokens[i], types)) {
        stack.push_back(static_cast<int>(i));
      } else if (!stack.empty()) {
        match[i] = stack.back();
        stack.pop_back();
      }
    }
    return match;
  }

  // Per sequence, [batch, length] each: full = the training loss's positions, predictable = the
  // positions whose target is a closer.
  void sequence_weights(std::span<const std::int32_t> /*inputs*/,
                        std::span<const std::int32_t> targets, int /*batch*/, std::span<float> full,
                        std::span<float> predictable) const {
    for (std::size_t n = 0; n < targets.size(); ++n) {
      predictable[n] = is_closer(targets[n], types_) ? 1.0f : 0.0f;
      full[n] = loss_on_closers_ ? predictable[n] : 1.0f;
    }
  }

  // The ideal attention of one sequence, [length, length] (query x key): the query at position p
  // whose target (token p + 1) is a closer has its one key at that closer's opener.
  std::vector<float> attention_target_of(std::span<const std::int32_t> inputs,
                                         std::span<const std::int32_t> targets) const {
    const std::size_t T = inputs.size();
    std::vector<std::int32_t> tokens(inputs.begin(), inputs.end());
    tokens.push_back(targets[T - 1]);
    const std::vector<int> match = matching_openers(tokens, types_);
    std::vector<float> target(T * T, 0.0f);
    for (std::size_t p = 0; p < T; ++p)
      if (match[p + 1] >= 0) target[p * T + static_cast<std::size_t>(match[p + 1])] = 1.0f;
    return target;
  }

  // attention_target_of for each sequence of a batch, [batch, length, length].
  void sequence_attention_targets(std::span<const std::int32_t> inputs,
                                  std::span<const std::int32_t> targets, int batch,
                                  std::span<float> target) const {
    const std::size_t T = static_cast<std::size_t>(length());
    for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
      const std::vector<float> one =
          attention_target_of(inputs.subspan(b * T, T), targets.subspan(b * T, T));
      std::copy(one.begin(), one.end(), target.begin() + static_cast<std::ptrdiff_t>(b * T * T));
    }
  }

  // The fixed views of tasks/task.hpp: none (every weight and target is per sequence).
  std::vector<float> attention_target() const { return {}; }
  std::vector<float> full_loss_weights() const { return {}; }
  std::vector<float> predictable_loss_weights() const { return {}; }
  std::vector<int> analysis_queries() const { return {}; }
  std::pair<int, int> analysis_key_range(int /*query*/) const { return {0, 0}; }

 private:
  int types_, max_depth_;
  double open_probability_;
  int tokens_;
  bool loss_on_closers_;
};

}  // namespace emergent
