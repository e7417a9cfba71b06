// The layout of the tasks whose sequence is a run of frames of N tokens each (the cellular
// automaton's recorded states, the neural cellular automaton's frames): frame 0 is noise and every
// later frame follows from the one before. So position p (which predicts token p + 1) is
// learnable from p = N - 1 on, and its attention target lies in the previous frame. The tasks
// say which cells of the previous frame a cell depends on; the rest of the SequenceTask view
// (tasks/task.hpp) is this.
#pragma once

#include <cstddef>
#include <emergent/core/error.hpp>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

struct FrameLayout {
  int frame_tokens = 1;  // N
  int frames = 1;        // T

  int length() const { return frame_tokens * frames - 1; }

  // The keys the query at position `query` attends to, ascending: empty for the N-1 queries that
  // predict tokens of frame 0; for the query predicting cell i of frame t >= 1, the cells j of
  // frame t-1 (positions (t-1)*N + j) that `depends_on(i, marked)` marks in `marked` (N flags,
  // all 0 before the call). `where` names the task in the errors.
  template <class DependsOn>
  std::vector<int> target_keys(int query, const DependsOn& depends_on,
                               const std::string& where) const {
    require(query >= 0 && query < length(), where + "::target_keys query",
            "must be in [0, " + std::to_string(length()) + "), got " + std::to_string(query));
    std::vector<int> keys;
    if (query < frame_tokens - 1) return keys;
    const int t = (query + 1) / frame_tokens, i = (query + 1) % frame_tokens;
    std::vector<char> marked(static_cast<std::size_t>(frame_tokens), 0);
    depends_on(i, marked);
    for (int j = 0; j < frame_tokens; ++j) {
      if (marked[static_cast<std::size_t>(j)] == 0) continue;
      const int key = (t - 1) * frame_tokens + j;
      // Causal: key <= t*N - 1 <= t*N + i - 1 = query.
      require(key <= query, where + "::target_keys",
              "target key above the diagonal (internal error)");
      keys.push_back(key);
    }
    return keys;
  }

  // [length, length] (query x key): 1 at (query, key) for key in target_keys(query), else 0, for
  // the learnable queries. Dense: the caller's target_keys is the sparse form.
  template <class TargetKeys>
  std::vector<float> attention_target(const TargetKeys& target_keys) const {
    const std::size_t L = static_cast<std::size_t>(length());
    std::vector<float> target(L * L, 0.0f);
    for (int query = frame_tokens - 1; query < length(); ++query)
      for (int key : target_keys(query))
        target[static_cast<std::size_t>(query) * L + static_cast<std::size_t>(key)] = 1.0f;
    return target;
  }

  // Every position weighted 1: the loss the paper plots.
  std::vector<float> full_loss_weights() const {
    return std::vector<float>(static_cast<std::size_t>(length()), 1.0f);
  }

  // 1 at positions N-1 .. T*N-2 (the predictions of frames 1 .. T-1), 0 at the N-1 predictions
  // inside frame 0, which is noise.
  std::vector<float> predictable_loss_weights() const {
    std::vector<float> weights(static_cast<std::size_t>(length()), 0.0f);
    for (int p = frame_tokens - 1; p < length(); ++p) weights[static_cast<std::size_t>(p)] = 1.0f;
    return weights;
  }

  // The queries whose attention is analysed: positions N-1 .. T*N-2 (those with a target).
  std::vector<int> analysis_queries() const {
    std::vector<int> queries;
    queries.reserve(static_cast<std::size_t>(length() - (frame_tokens - 1)));
    for (int p = frame_tokens - 1; p < length(); ++p) queries.push_back(p);
    return queries;
  }

  // [begin, end) of the previous frame for an analysed query: the query predicting a token of
  // frame t gets [(t-1)*N, t*N). `where` names the task in the error.
  std::pair<int, int> analysis_key_range(int query, const std::string& where) const {
    require(query >= frame_tokens - 1 && query < length(), where + "::analysis_key_range query",
            "must be in [N-1, length) = [" + std::to_string(frame_tokens - 1) + ", " +
                std::to_string(length()) + "), got " + std::to_string(query));
    const int t = (query + 1) / frame_tokens;
    return {(t - 1) * frame_tokens, t * frame_tokens};
  }
};

}  // namespace emergent
