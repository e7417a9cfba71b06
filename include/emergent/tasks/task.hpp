// What the trainer needs of a task, as one interface, so that a run's task is a run-time choice
// (config.json "task") while the model stays a compile-time type.
//
// A task is a generator: fresh sequences every step from a counter-based Philox stream keyed by
// (data_seed, step, sample), a ground-truth attention target [length, length] (query x key), and
// loss weights. `TaskAdapter<T>` wraps any class with the methods below (LinearMap,
// CellularAutomaton) into this interface.
//
// A task also declares itself (tasks/registry.hpp lists the declared ones):
//   static constexpr const char* task_name;          config "task"
//   static std::vector<Parameter> parameters();      its settings (settings/parameters.hpp)
//   static Shape default_shape();                    the model it is trained with by default
//   static TaskSetup setup(const ParameterValues&);  the task, its emergence metric and thresholds
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

// Where one metric's thresholds lie: the metrics.jsonl column they apply to (e.g. "x1_loss") and
// the values that mark leaving the plateau, halfway and (nearly) solved (analysis/emergence.hpp).
struct EmergenceThresholds {
  std::string metric;
  double emergence_below = 0, midpoint_below = 0, solved_below = 0;
};

// The thresholds by name, as a config names one (train/config.hpp, stop_at).
inline constexpr std::pair<const char*, double EmergenceThresholds::*> kNamedThresholds[] = {
    {"emergence", &EmergenceThresholds::emergence_below},
    {"midpoint", &EmergenceThresholds::midpoint_below},
    {"solved", &EmergenceThresholds::solved_below}};

class SequenceTask {
 public:
  virtual ~SequenceTask() = default;
  virtual int vocab() const = 0;
  virtual int length() const = 0;  // model positions: tokens per sequence - 1
  virtual void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
                      std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const = 0;
  virtual std::vector<float> attention_target() const = 0;   // [length, length]
  virtual std::vector<float> full_loss_weights() const = 0;  // the training objective
  virtual std::vector<float> predictable_loss_weights()
      const = 0;                                          // predictions that can be learned
  virtual std::vector<int> analysis_queries() const = 0;  // queries with a known target
  virtual std::pair<int, int> analysis_key_range(int query) const = 0;  // keys the target lies in
};

template <class Task>
class TaskAdapter final : public SequenceTask {
 public:
  explicit TaskAdapter(Task task) : task_(std::move(task)) {}
  int vocab() const override { return task_.vocab(); }
  int length() const override { return task_.length(); }
  void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
              std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const override {
    task_.sample(data_seed, step, batch, inputs, targets);
  }
  std::vector<float> attention_target() const override { return task_.attention_target(); }
  std::vector<float> full_loss_weights() const override { return task_.full_loss_weights(); }
  std::vector<float> predictable_loss_weights() const override {
    return task_.predictable_loss_weights();
  }
  std::vector<int> analysis_queries() const override { return task_.analysis_queries(); }
  std::pair<int, int> analysis_key_range(int query) const override {
    return task_.analysis_key_range(query);
  }
  const Task& task() const { return task_; }

 private:
  Task task_;
};

// A task as a run uses it: the generator, the name of its learnable predictions (metric prefix
// "x1", "next_state") and where emergence is read off.
struct TaskSetup {
  std::unique_ptr<SequenceTask> task;
  std::string predictable_name;
  EmergenceThresholds thresholds;
};

}  // namespace emergent
