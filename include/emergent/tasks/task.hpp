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
  // The weights and target above are the same for every sequence. A task whose learnable
  // positions depend on the sampled tokens (Dyck: the positions whose next token is a closing
  // bracket) says so and gives them for the batch just sampled: both weights per token, [batch,
  // length] each, and the attention target per sequence, [batch, length, length]; its fixed
  // attention_target() and analysis_queries() are empty. The attention analysis then reads every
  // query whose row of its sequence's target is not empty, over the keys up to the query.
  virtual bool weights_per_sequence() const { return false; }
  virtual void sequence_weights(std::span<const std::int32_t> /*inputs*/,
                                std::span<const std::int32_t> /*targets*/, int /*batch*/,
                                std::span<float> /*full*/, std::span<float> /*predictable*/) const {
  }
  virtual void sequence_attention_targets(std::span<const std::int32_t> /*inputs*/,
                                          std::span<const std::int32_t> /*targets*/, int /*batch*/,
                                          std::span<float> /*target*/) const {}
};

// The loss weights of a sampled batch: the task's fixed ones ([length]) or, for a task with
// weights per sequence, [batch, length] each.
struct BatchWeights {
  std::vector<float> full, predictable;
};
inline BatchWeights batch_weights(const SequenceTask& task, std::span<const std::int32_t> inputs,
                                  std::span<const std::int32_t> targets, int batch) {
  if (!task.weights_per_sequence())
    return {task.full_loss_weights(), task.predictable_loss_weights()};
  BatchWeights w{std::vector<float>(inputs.size()), std::vector<float>(inputs.size())};
  task.sequence_weights(inputs, targets, batch, w.full, w.predictable);
  return w;
}

// The attention target of a sampled batch: the task's fixed one ([length, length]) or, for a
// task with weights per sequence, [batch, length, length] (the bias pattern and the analysis).
inline std::vector<float> batch_attention_target(const SequenceTask& task,
                                                 std::span<const std::int32_t> inputs,
                                                 std::span<const std::int32_t> targets, int batch) {
  if (!task.weights_per_sequence()) return task.attention_target();
  std::vector<float> target(inputs.size() * static_cast<std::size_t>(task.length()));
  task.sequence_attention_targets(inputs, targets, batch, target);
  return target;
}

// A task class with weights per sequence (SequenceTask::sequence_weights).
template <class Task>
concept HasSequenceWeights = requires(const Task& task, std::span<const std::int32_t> tokens,
                                      std::span<float> weights) {
  task.sequence_weights(tokens, tokens, 0, weights, weights);
  task.sequence_attention_targets(tokens, tokens, 0, weights);
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
  bool weights_per_sequence() const override { return HasSequenceWeights<Task>; }
  void sequence_weights(std::span<const std::int32_t> inputs, std::span<const std::int32_t> targets,
                        int batch, std::span<float> full,
                        std::span<float> predictable) const override {
    if constexpr (HasSequenceWeights<Task>)
      task_.sequence_weights(inputs, targets, batch, full, predictable);
  }
  void sequence_attention_targets(std::span<const std::int32_t> inputs,
                                  std::span<const std::int32_t> targets, int batch,
                                  std::span<float> target) const override {
    if constexpr (HasSequenceWeights<Task>)
      task_.sequence_attention_targets(inputs, targets, batch, target);
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
