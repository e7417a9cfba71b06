// From a TrainConfig to the task it names, plus the task's emergence metric and thresholds.
//
// Emergence is read off the trailing mean of `kSmoothingRows` logged rows of one metric
// (analysis/emergence.hpp), with thresholds that mean the same thing for every task:
//   emergence_step: the metric leaves the plateau (chance level): the abrupt drop begins. The
//                   steps before it are the paper's plateau length.
//   midpoint_step:  halfway from chance to zero;  solved_step: close to the floor.
// A threshold never reached leaves the run censored.
// Linear map (metric x1_loss, chance ln 2): emergence < ln 2 - 0.03 (the first rows of A are being
//   learned), midpoint < ln 2 / 2 (about half the rows), solved < 0.05.
// Cellular automaton (metric loss, chance ln C): emergence < 1.3, the paper's plateau threshold
//   for C = 4 (scaled as 1.3 / ln 4 * ln C for other C); midpoint < ln C / 2; solved < 0.2.
#pragma once

#include <cmath>
#include <memory>
#include <string>

#include "../analysis/emergence.hpp"
#include "../tasks/cellular_automaton.hpp"
#include "../tasks/linear_map.hpp"
#include "../tasks/task.hpp"
#include "config.hpp"

namespace emergent {

inline constexpr int kSmoothingRows = 5;

struct TaskSetup {
  std::unique_ptr<SequenceTask> task;
  std::string predictable_name;  // metric prefix of the learnable predictions: "x1", "next_state"
  EmergenceThresholds thresholds;
};

inline TaskSetup make_task(const TrainConfig& c) {
  if (c.is_cellular_automaton()) {
    const double chance = std::log(double(c.colours));
    return {std::make_unique<TaskAdapter<CellularAutomaton>>(CellularAutomaton(
                c.state_size, c.states, c.colours, c.window, c.depth, c.rules, c.task_seed)),
            "next_state",
            {"loss", 1.3 / std::log(4.0) * chance, chance / 2, 0.2}};
  }
  const double ln2 = std::log(2.0);
  return {std::make_unique<TaskAdapter<LinearMap>>(LinearMap(c.state_size, c.ones_per_row, c.task_seed)), "x1",
          {"x1_loss", ln2 - 0.03, ln2 / 2, 0.05}};
}

}  // namespace emergent
