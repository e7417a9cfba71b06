// Per-head attention entropy and IoU with a task's target, from the attention the model kept in
// its workspaces during the last forward pass, each beside what chance gets.
//
// The pattern is averaged over the batch first (as the paper's Fig. 3 maps are), per layer and
// head; a task whose target differs per sequence (Dyck) is read sequence by sequence instead. Then
// for each of the task's analysis queries, restricted to the keys where its target lies (x0 for the
// linear map; the previous state for the cellular automaton) and renormalised:
//   entropy[layer][head] = mean over queries of -sum_j a_j ln a_j   (nats)
//   head_iou[layer][head] = mean over target rows of that head's IoU: its top-|support| keys
//         against the support (analysis/attention_iou.hpp)
//   head_iou_chance = the same for a head attending to random keys
//   iou = mean over target rows of the best head's IoU (any head of any layer: different rows
//         are learned by different heads)
//   iou_chance = the mean over rows of the expected best of L*H random heads
//   iou_above_chance = (iou - iou_chance) / (1 - iou_chance): 0 for a model that knows nothing
//         (more or less: an untrained model's heads are not exactly random), 1 for every row
//         found; 0 where chance leaves less than 0.05 to 1 (the best head would find every row
//         by chance; the per-head IoU against head_iou_chance still tells)
#pragma once

#include <algorithm>
#include <emergent/analysis/attention_entropy.hpp>
#include <emergent/analysis/attention_iou.hpp>
#include <emergent/core/error.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/tasks/task.hpp>
#include <span>
#include <utility>
#include <vector>

namespace emergent {

struct AttentionAnalysis {
  bool available = false;                     // false for mixers that keep no attention
  std::vector<std::vector<double>> entropy;   // [layer][head], nats
  std::vector<std::vector<double>> head_iou;  // [layer][head]: mean over target rows
  double head_iou_chance = 0;                 // one head attending to random keys
  double iou = 0;                             // best head per target row, mean over rows
  double iou_chance = 0;                      // the best of L*H random heads, mean over rows
  double iou_above_chance = 0;                // (iou - iou_chance) / (1 - iou_chance)
};

// The attention of the last forward pass averaged over the batch: per layer, [head][query][key]
// (H * T * T, row-major). `slices`: the workspaces that together hold the batch (one per
// data-parallel slice). Only for mixers that keep attention probabilities (KeepsAttention).
template <class Net>
std::vector<std::vector<double>> batch_averaged_patterns(
    std::span<const typename Net::Workspace* const> slices) {
  static_assert(KeepsAttention<typename Net::Mixer>);
  require(!slices.empty(), "batch_averaged_patterns", "no workspace");
  const int T = slices.front()->length, H = Net::shape.heads;
  int batch = 0;
  for (const auto* ws : slices) batch += ws->batch;
  std::vector<std::vector<double>> patterns;
  for (int l = 0; l < Net::L; ++l) {
    std::vector<double> pattern(static_cast<std::size_t>(H) * T * T, 0.0);
    for (const auto* ws : slices) {
      const std::size_t count = static_cast<std::size_t>(ws->batch) * H * T * T;
      const std::vector<double> part = batch_averaged_pattern(
          std::span<const float>(ws->layers[l].mixer.att, count), ws->batch, H, T);
      for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] += part[i] * ws->batch / batch;
    }
    patterns.push_back(std::move(pattern));
  }
  return patterns;
}

namespace attention_summary_detail {
// The sums of an analysis over target rows, one pattern ([layer][head * T * T]) at a time: the
// batch-averaged pattern with the task's fixed target, or each sequence's own with its own.
struct RowSums {
  std::vector<std::vector<double>> entropy, head_iou;  // [layer][head]
  std::size_t queries = 0;
  double iou = 0, chance = 0, head_chance = 0;
  int rows = 0;

  RowSums(int layers, int heads)
      : entropy(layers, std::vector<double>(heads, 0.0)),
        head_iou(layers, std::vector<double>(heads, 0.0)) {}

  // `queries` with their key ranges [begin, end), the target [T, T] of this pattern.
  template <class KeyRange>
  void add(const std::vector<std::vector<double>>& patterns, int T,
           const std::vector<int>& query_list, const KeyRange& key_range,
           std::span<const float> target) {
    const int L = int(patterns.size()), H = int(entropy.front().size());
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        for (int q : query_list) {
          const auto [begin, end] = key_range(q);
          entropy[l][h] += restricted_row_entropy(
              patterns[l].data() + (static_cast<std::size_t>(h) * T + q) * T, begin, end);
        }
    queries += query_list.size();
    const int M = L * H;
    for (int q : query_list) {
      const auto [begin, end] = key_range(q);
      std::vector<int> support;
      for (int j = begin; j < end; ++j)
        if (target[static_cast<std::size_t>(q) * T + j] > 0) support.push_back(j);
      if (support.empty()) continue;
      double best = 0;
      for (int l = 0; l < L; ++l)
        for (int h = 0; h < H; ++h) {
          const double row_iou = head_row_iou(patterns[l], T, h, q, support, begin, end);
          head_iou[l][h] += row_iou;
          best = std::max(best, row_iou);
        }
      iou += best;
      const int keys = end - begin, k = static_cast<int>(support.size());
      chance += chance_row_iou(keys, k, M);
      head_chance += chance_row_iou(keys, k, 1);
      ++rows;
    }
  }

  AttentionAnalysis result() const {
    AttentionAnalysis out;
    out.available = true;
    out.entropy = entropy;
    for (auto& layer : out.entropy)
      for (double& v : layer) v /= std::max<std::size_t>(1, queries);
    out.head_iou = head_iou;
    if (rows > 0) {
      for (auto& layer : out.head_iou)
        for (double& v : layer) v /= rows;
      out.iou = iou / rows;
      out.iou_chance = chance / rows;
      out.head_iou_chance = head_chance / rows;
      // Where chance leaves less than kMinimumRoom to 1, the best-head IoU cannot tell a learned
      // pattern from a random one (the automaton at S = 4: 3 target keys of 4, chance 0.9999 for
      // 32 heads): report 0 rather than a ratio of two rounding errors.
      constexpr double kMinimumRoom = 0.05;
      out.iou_above_chance = 1 - out.iou_chance >= kMinimumRoom
                                 ? (out.iou - out.iou_chance) / (1 - out.iou_chance)
                                 : 0.0;
    }
    return out;
  }
};
}  // namespace attention_summary_detail

// The analysis of batch-averaged patterns ([layer][head * T * T], as batch_averaged_patterns
// gives them, or the device ensemble's, cuda/model.cuh) against a task's fixed target [T, T].
inline AttentionAnalysis analyse_patterns(const std::vector<std::vector<double>>& patterns,
                                          int heads, int T, const SequenceTask& task,
                                          std::span<const float> target) {
  attention_summary_detail::RowSums sums(int(patterns.size()), heads);
  sums.add(
      patterns, T, task.analysis_queries(), [&](int q) { return task.analysis_key_range(q); },
      target);
  return sums.result();
}

// A task with targets per sequence (tasks/task.hpp): `target` [sequences, T, T], each sequence's
// attention read against its own target at every query whose target row is not empty, over the
// keys up to the query. attention(l, s) points at layer l's [H, T, T] of sequence s.
template <class SequenceAttention>
AttentionAnalysis analyse_sequences(int layers, int heads, int T, int sequences,
                                    std::span<const float> target, SequenceAttention attention) {
  require(target.size() >= std::size_t(sequences) * T * T, "analyse_attention",
          "the target must hold [batch, length, length] for a task with targets per sequence");
  attention_summary_detail::RowSums sums(layers, heads);
  const std::size_t TT = static_cast<std::size_t>(T) * T, per_sequence = heads * TT;
  std::vector<std::vector<double>> patterns(layers, std::vector<double>(per_sequence));
  for (int s = 0; s < sequences; ++s) {
    const std::span<const float> own = target.subspan(s * TT, TT);
    std::vector<int> queries;
    for (int q = 0; q < T; ++q)
      if (std::any_of(own.begin() + q * T, own.begin() + (q + 1) * T,
                      [](float v) { return v > 0; }))
        queries.push_back(q);
    for (int l = 0; l < layers; ++l) {
      const float* att = attention(l, s);
      std::copy(att, att + per_sequence, patterns[l].begin());
    }
    sums.add(
        patterns, T, queries,
        [](int q) {
          return std::pair<int, int>{0, q + 1};
        },
        own);
  }
  return sums.result();
}

// `slices`: the workspaces that together hold the batch (one per data-parallel slice); `target`:
// the task's fixed target [T, T], or for a task with targets per sequence (tasks/task.hpp) the
// batch's [batch, T, T] (analyse_sequences). Mixers without attention probabilities
// (KeepsAttention) give an analysis marked unavailable.
template <class Net>
AttentionAnalysis analyse_attention(std::span<const typename Net::Workspace* const> slices,
                                    const SequenceTask& task, std::span<const float> target) {
  if constexpr (!KeepsAttention<typename Net::Mixer>) {
    return {};
  } else {
    require(!slices.empty(), "analyse_attention", "no workspace");
    const int T = slices.front()->length, H = Net::shape.heads;
    if (!task.weights_per_sequence())
      return analyse_patterns(batch_averaged_patterns<Net>(slices), H, T, task, target);
    std::vector<std::pair<const typename Net::Workspace*, int>> sequences;  // (slice, b)
    for (const auto* ws : slices)
      for (int b = 0; b < ws->batch; ++b) sequences.emplace_back(ws, b);
    const std::size_t per_sequence = static_cast<std::size_t>(H) * T * T;
    return analyse_sequences(Net::L, H, T, int(sequences.size()), target, [&](int l, int s) {
      const auto& [ws, b] = sequences[s];
      return ws->layers[l].mixer.att + b * per_sequence;
    });
  }
}

}  // namespace emergent
