// Intersection-over-union between learned attention and a task's target pattern, per target
// row, with the best head chosen per row. Several heads may share one task (in the paper's
// Fig. 3 two heads jointly learn one row of A), so each row of the target is credited to
// whichever head matches it best rather than asking every head to match every row.
//
// For a target row q (a query whose target support S_q = {j in [key_begin, key_end) :
// target[q, j] > 0} is non-empty) and a head h: take the k = |S_q| keys in [key_begin, key_end)
// with the largest averaged attention pattern[h, q, :], then IoU = |top_k ∩ S_q| / |top_k ∪ S_q|.
// Using k = |S_q| makes the measure threshold-free: it asks whether the head's k strongest keys
// are exactly the k right ones.
//
// Ties, exactly:
//   - within a row, keys of equal attention are ranked by ascending key index (a stable sort on
//     descending attention), so a flat row picks the lowest keys;
//   - between heads, the best head is the lowest head index among those with the largest IoU.
// Rows whose support in the key range is empty are skipped (for the linear map: the queries
// inside x0).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <emergent/analysis/attention_entropy.hpp>
#include <emergent/core/error.hpp>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace emergent {

struct RowIou {
  std::vector<int> queries;    // the target rows, ascending
  std::vector<double> iou;     // best IoU over heads, per target row
  std::vector<int> best_head;  // the head achieving it (lowest index on ties), per target row
};

// IoU of head h's top-|support| keys with the target support, for one query row.
inline double head_row_iou(std::span<const double> pattern, int T, int head, int query,
                           std::span<const int> support, int key_begin, int key_end) {
  const double* row = pattern.data() + (static_cast<std::size_t>(head) * T + query) * T;
  std::vector<int> keys(static_cast<std::size_t>(key_end - key_begin));
  std::iota(keys.begin(), keys.end(), key_begin);
  std::stable_sort(keys.begin(), keys.end(), [row](int a, int b) { return row[a] > row[b]; });
  const std::size_t k = support.size();
  std::size_t intersection = 0;
  for (std::size_t r = 0; r < k; ++r) {
    if (std::find(support.begin(), support.end(), keys[r]) != support.end()) ++intersection;
  }
  return static_cast<double>(intersection) / static_cast<double>(2 * k - intersection);
}

// Per target row: best IoU over heads and the head achieving it.
// pattern: [heads, T, T] (batch_averaged_pattern); target: [T, T] query x key.
inline RowIou best_head_row_ious(std::span<const double> pattern, int heads, int T,
                                 std::span<const float> target, int key_begin, int key_end) {
  require(heads >= 1 && T >= 1, "best_head_row_ious", "heads and T must be >= 1");
  require(pattern.size() == static_cast<std::size_t>(heads) * T * T, "best_head_row_ious pattern",
          "size " + std::to_string(pattern.size()) + ", expected heads*T*T");
  require(target.size() == static_cast<std::size_t>(T) * T, "best_head_row_ious target",
          "size " + std::to_string(target.size()) + ", expected T*T");
  require(0 <= key_begin && key_begin < key_end && key_end <= T, "best_head_row_ious key range",
          "need 0 <= key_begin < key_end <= T");
  RowIou result;
  std::vector<int> support;
  for (int query = 0; query < T; ++query) {
    support.clear();
    for (int key = key_begin; key < key_end; ++key) {
      if (target[static_cast<std::size_t>(query) * T + key] > 0.0f) support.push_back(key);
    }
    if (support.empty()) continue;
    double best_iou = -1.0;
    int best = 0;
    for (int h = 0; h < heads; ++h) {
      const double iou = head_row_iou(pattern, T, h, query, support, key_begin, key_end);
      if (iou > best_iou) {  // strict: the lowest head index wins ties
        best_iou = iou;
        best = h;
      }
    }
    result.queries.push_back(query);
    result.iou.push_back(best_iou);
    result.best_head.push_back(best);
  }
  return result;
}

// Mean over target rows of the best-head IoU: 1 when every row of the target is reproduced
// exactly by some head, 0 when no head's top keys touch any row's support.
inline double best_head_row_iou(std::span<const double> pattern, int heads, int T,
                                std::span<const float> target, int key_begin, int key_end) {
  const RowIou rows = best_head_row_ious(pattern, heads, T, target, key_begin, key_end);
  require(!rows.iou.empty(), "best_head_row_iou target",
          "no row of the target has support in the key range");
  double total = 0.0;
  for (double iou : rows.iou) total += iou;
  return total / static_cast<double>(rows.iou.size());
}

// Chance: the IoU that heads without any knowledge of the target get. A head whose top k keys
// of n are a uniformly random k-subset meets the support (also k keys) in i keys with the
// hypergeometric probability C(k, i) C(n-k, k-i) / C(n, k), and scores i / (2k - i).
//   chance_row_iou(n, k, 1)   its expected IoU;
//   chance_row_iou(n, k, M)   the expected best of M such heads, which is what the best-head
//                             IoU of a model with M heads (all layers) gets by chance: with k = 3
//                             of n = 4 keys (the automaton at S = 4) it is 1 - 0.75^M, already
//                             0.9999 for 32 heads, so a best-head IoU of 1 there means nothing.
inline double chance_row_iou(int keys, int support, int heads) {
  require(keys >= 1 && support >= 1 && support <= keys && heads >= 1, "chance_row_iou",
          "need 1 <= support <= keys and heads >= 1");
  const int n = keys, k = support;
  const auto log_choose = [](int a, int b) {
    return std::lgamma(a + 1.0) - std::lgamma(b + 1.0) - std::lgamma(a - b + 1.0);
  };
  // P(I = i) for i = max(0, 2k - n) .. k; IoU increases with i, so P(best <= i) = F(i)^M.
  double expected = 0.0, below = 0.0;
  for (int i = std::max(0, 2 * k - n); i <= k; ++i) {
    const double p = std::exp(log_choose(k, i) + log_choose(n - k, k - i) - log_choose(n, k));
    const double at_most = std::min(1.0, below + p);
    expected += double(i) / double(2 * k - i) * (std::pow(at_most, heads) - std::pow(below, heads));
    below = at_most;
  }
  return expected;
}

}  // namespace emergent
