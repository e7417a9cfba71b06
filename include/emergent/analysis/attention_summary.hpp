// Per-head attention entropy and IoU with a task's target, from the attention the model kept in
// its workspaces during the last forward pass, each beside what chance gets.
//
// The pattern is averaged over the batch first (as the paper's Fig. 3 maps are), per layer and
// head. Then for each of the task's analysis queries, restricted to the keys where its target
// lies (x0 for the linear map; the previous state for the cellular automaton) and renormalised:
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

#include <emergent/analysis/attention_entropy.hpp>
#include <emergent/analysis/attention_iou.hpp>
#include <emergent/core/error.hpp>
#include <emergent/mixers/mixer.hpp>
#include <emergent/tasks/task.hpp>
#include <span>
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

// `slices`: the workspaces that together hold the batch (one per data-parallel slice). Mixers
// without attention probabilities (KeepsAttention) give an analysis marked unavailable.
template <class Net>
AttentionAnalysis analyse_attention(std::span<const typename Net::Workspace* const> slices,
                                    const SequenceTask& task, std::span<const float> target) {
  if constexpr (!KeepsAttention<typename Net::Mixer>) {
    return {};
  } else {
    if (task.weights_per_sequence()) return {};  // no fixed target (tasks/task.hpp)
    require(!slices.empty(), "analyse_attention", "no workspace");
    const int T = slices.front()->length, H = Net::shape.heads;
    const std::vector<int> queries = task.analysis_queries();
    AttentionAnalysis out;
    out.available = true;
    const std::vector<std::vector<double>> patterns = batch_averaged_patterns<Net>(slices);
    for (int l = 0; l < Net::L; ++l) {
      std::vector<double> entropy(H, 0.0);
      for (int h = 0; h < H; ++h) {
        for (int q : queries) {
          const auto [begin, end] = task.analysis_key_range(q);
          entropy[h] += restricted_row_entropy(
              patterns[l].data() + (static_cast<std::size_t>(h) * T + q) * T, begin, end);
        }
        entropy[h] /= std::max<std::size_t>(1, queries.size());
      }
      out.entropy.push_back(std::move(entropy));
    }
    const int M = Net::L * H;
    out.head_iou.assign(Net::L, std::vector<double>(H, 0.0));
    double iou_sum = 0, chance_sum = 0, head_chance_sum = 0;
    int rows = 0;
    for (int q : queries) {
      const auto [begin, end] = task.analysis_key_range(q);
      std::vector<int> support;
      for (int j = begin; j < end; ++j)
        if (target[static_cast<std::size_t>(q) * T + j] > 0) support.push_back(j);
      if (support.empty()) continue;
      double best = 0;
      for (int l = 0; l < Net::L; ++l)
        for (int h = 0; h < H; ++h) {
          const double iou = head_row_iou(patterns[l], T, h, q, support, begin, end);
          out.head_iou[l][h] += iou;
          best = std::max(best, iou);
        }
      iou_sum += best;
      const int keys = end - begin, k = static_cast<int>(support.size());
      chance_sum += chance_row_iou(keys, k, M);
      head_chance_sum += chance_row_iou(keys, k, 1);
      ++rows;
    }
    if (rows > 0) {
      for (auto& layer : out.head_iou)
        for (double& v : layer) v /= rows;
      out.iou = iou_sum / rows;
      out.iou_chance = chance_sum / rows;
      out.head_iou_chance = head_chance_sum / rows;
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
}

}  // namespace emergent
