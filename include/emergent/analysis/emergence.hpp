// Plateau length and emergence time from a loss curve (steps, values), as logged by the trainer.
//
// The paper measures the plateau as the number of steps before the model makes any progress,
// with a threshold a little below chance (CA task: loss < 1.3 against ln 4 = 1.386); whether it
// smooths the loss is not stated (docs/paper-notes.md §2). Here:
//   - smoothing is a trailing window mean of the last `window` logged points. Trailing, not
//     centred or EMA-with-lookahead, because a detection at step t must use only values up to t:
//     then the answer does not change when the run goes on, and an online monitor and a post-hoc
//     analysis agree. At the start the window is partial (the mean of the points so far).
//   - emergence_step = first step where the smoothed loss < emergence_below, a little below
//     chance: the loss has left the plateau by more than the noise (a margin, not "any decrease",
//     because a batch loss wanders around chance during the plateau). The steps before it are the
//     plateau length.
//   - midpoint_step and solved_step: the same for halfway down and for (nearly) solved.
// All are censored (std::nullopt) when the curve never gets there within the run; a seed
// ensemble counts such runs as censored, never as "emerged at the last step".
#pragma once

#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/tasks/task.hpp>  // EmergenceThresholds, declared by each task
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace emergent {

// out[i] = mean(values[max(0, i - window + 1) .. i]).
inline std::vector<double> trailing_mean(std::span<const double> values, int window) {
  require(window >= 1, "trailing_mean window", "must be >= 1, got " + std::to_string(window));
  std::vector<double> smoothed(values.size());
  double sum = 0.0;
  const std::size_t width = static_cast<std::size_t>(window);
  for (std::size_t i = 0; i < values.size(); ++i) {
    sum += values[i];
    if (i >= width) sum -= values[i - width];
    const std::size_t count = i + 1 < width ? i + 1 : width;
    smoothed[i] = sum / static_cast<double>(count);
  }
  return smoothed;
}

// The first step whose trailing-window mean is strictly below `threshold`; nullopt if none
// (censored).
inline std::optional<std::int64_t> first_step_below(std::span<const std::int64_t> steps,
                                                    std::span<const double> values,
                                                    double threshold, int window) {
  require(steps.size() == values.size(), "first_step_below",
          "steps (" + std::to_string(steps.size()) + ") and values (" +
              std::to_string(values.size()) + ") differ in length");
  const std::vector<double> smoothed = trailing_mean(values, window);
  for (std::size_t i = 0; i < smoothed.size(); ++i) {
    if (smoothed[i] < threshold) return steps[i];
  }
  return std::nullopt;
}

struct EmergenceSummary {
  std::optional<std::int64_t> emergence_step, midpoint_step, solved_step;
  double final_value = 0.0;  // trailing-window mean at the last logged point
};

// final_value is smoothed like the rest, so that one noisy last batch does not decide whether a
// run "ended solved".
inline EmergenceSummary summarize_emergence(std::span<const std::int64_t> steps,
                                            std::span<const double> values,
                                            const EmergenceThresholds& thresholds, int window) {
  require(!values.empty(), "summarize_emergence", "the curve is empty");
  EmergenceSummary summary;
  summary.emergence_step = first_step_below(steps, values, thresholds.emergence_below, window);
  summary.midpoint_step = first_step_below(steps, values, thresholds.midpoint_below, window);
  summary.solved_step = first_step_below(steps, values, thresholds.solved_below, window);
  summary.final_value = trailing_mean(values, window).back();
  return summary;
}

}  // namespace emergent
