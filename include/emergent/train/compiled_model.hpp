// One compiled model (a Model<Mixer, Shape> type) behind a run-time interface: what the trainer
// and evaluation need of a model, and nothing else. The trainer (train/trainer.hpp), its JSON,
// checkpoints and metrics are then ordinary code compiled once per program, and a shape compiled
// on demand (apps/cli/shape_compiler.hpp) instantiates only this file's CompiledModel<Net>:
// the numerical code, whose compile time is the price of a specialised binary.
#pragma once

#include <cstdint>
#include <emergent/analysis/attention_summary.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/model/model.hpp>
#include <emergent/tasks/task.hpp>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace emergent {

struct EvalResult {
  double loss = 0;
  double predictable_loss = 0, predictable_accuracy = 0;  // x1 for the linear map
  AttentionAnalysis attention;
};

// Losses and attention of a checkpoint on a deterministic batch: the data stream of step
// kEvalStep, which no training run reaches.
inline constexpr std::uint64_t kEvalStep = std::uint64_t{1} << 40;

// The losses of one forward pass, in `ws`, on the batch of data step `data_step` (sampled into
// `inputs` and `targets`); `target` receives the batch's attention target (the task's fixed one,
// or each sequence's: tasks/task.hpp), which is also the bias pattern.
template <class Net>
EvalResult batch_losses(std::span<const float> params, const SequenceTask& task,
                        std::uint64_t data_seed, std::uint64_t data_step, int batch, float bias,
                        typename Net::Workspace& ws, std::vector<std::int32_t>& inputs,
                        std::vector<std::int32_t>& targets, std::vector<float>& target) {
  const int T = task.length();
  inputs.resize(static_cast<std::size_t>(batch) * T);
  targets.resize(inputs.size());
  task.sample(data_seed, data_step, batch, inputs, targets);
  const BatchWeights weights = batch_weights(task, inputs, targets, batch);
  target = batch_attention_target(task, inputs, targets, batch);
  EvalResult r;
  r.loss =
      Net::forward(params,
                   {batch, T, inputs, targets, weights.full,
                    bias != 0 ? std::span<const float>(target) : std::span<const float>(), bias},
                   ws);
  r.predictable_loss = Net::weighted_mean(ws, weights.predictable);
  r.predictable_accuracy = Net::weighted_accuracy(ws, weights.predictable);
  return r;
}

template <class Net>
EvalResult evaluate(std::span<const float> params, const SequenceTask& task,
                    std::uint64_t data_seed, int batch, float bias,
                    std::vector<std::int32_t>* inputs_out = nullptr,
                    std::vector<std::int32_t>* targets_out = nullptr) {
  std::vector<std::int32_t> inputs, targets;
  std::vector<float> target;
  typename Net::Workspace ws;  // forward only: the ops spread over the threads themselves
  EvalResult r = batch_losses<Net>(params, task, data_seed, kEvalStep, batch, bias, ws, inputs,
                                   targets, target);
  const typename Net::Workspace* slices[] = {&ws};
  r.attention = analyse_attention<Net>(slices, task, target);
  if (inputs_out) *inputs_out = inputs;
  if (targets_out) *targets_out = targets;
  return r;
}

// The mean losses of a checkpoint on a fixed held-out set: `batches` batches, the data streams
// of steps kEvalStep, kEvalStep + 1, ... (the first is evaluate's batch), forward only in `ws`.
// The same set every time, so that its curve moves only with the parameters (trainer's
// eval_every). No attention analysis.
template <class Net>
EvalResult held_out_losses(std::span<const float> params, const SequenceTask& task,
                           std::uint64_t data_seed, int batch, int batches, float bias,
                           typename Net::Workspace& ws) {
  std::vector<std::int32_t> inputs, targets;
  std::vector<float> target;
  EvalResult r;
  for (int b = 0; b < batches; ++b) {
    const EvalResult one = batch_losses<Net>(params, task, data_seed, kEvalStep + std::uint64_t(b),
                                             batch, bias, ws, inputs, targets, target);
    r.loss += one.loss;
    r.predictable_loss += one.predictable_loss;
    r.predictable_accuracy += one.predictable_accuracy;
  }
  r.loss /= batches;
  r.predictable_loss /= batches;
  r.predictable_accuracy /= batches;
  return r;
}

class TrainableModel {
 public:
  virtual ~TrainableModel() = default;
  virtual std::string mixer() const = 0;
  virtual Shape shape() const = 0;
  virtual bool takes_attention_bias() const = 0;
  virtual std::size_t parameter_count() const = 0;
  virtual std::vector<ParameterTensor> tensors() const = 0;
  virtual void init(std::span<float> params, std::uint64_t seed) const = 0;
  // One data-parallel step on `threads` threads (train/trainer.hpp): grads overwritten.
  // `analysed`: the step's attention is read afterwards (analyse_last_step, last_step_attention),
  // so every slice's workspace is kept (model/data_parallel.hpp).
  virtual double step(std::span<const float> params, std::span<float> grads, const ForwardInput& in,
                      int threads, bool analysed) = 0;
  // Of the last step's batch; the attention only after a step that was `analysed`.
  virtual double weighted_mean(std::span<const float> weights) const = 0;
  virtual double weighted_accuracy(std::span<const float> weights) const = 0;
  virtual AttentionAnalysis analyse_last_step(const SequenceTask& task,
                                              std::span<const float> target) const = 0;
  // The last step's attention averaged over its batch, [layer][head][query][key] flattened;
  // empty for a mixer without attention probabilities.
  virtual std::vector<float> last_step_attention() const = 0;
  virtual EvalResult evaluate(std::span<const float> params, const SequenceTask& task,
                              std::uint64_t data_seed, int batch, float bias,
                              std::vector<std::int32_t>* inputs_out,
                              std::vector<std::int32_t>* targets_out) const = 0;
  virtual EvalResult held_out(std::span<const float> params, const SequenceTask& task,
                              std::uint64_t data_seed, int batch, int batches, float bias) = 0;
};

template <class Net>
class CompiledModel final : public TrainableModel {
  static_assert(std::is_same_v<typename Net::Scalar, float>, "training runs in fp32");

 public:
  std::string mixer() const override { return std::string(Net::Mixer::name); }
  Shape shape() const override { return Net::shape; }
  bool takes_attention_bias() const override { return KeepsAttention<typename Net::Mixer>; }
  std::size_t parameter_count() const override { return Net::parameter_count; }
  std::vector<ParameterTensor> tensors() const override { return Net::tensors(); }
  void init(std::span<float> params, std::uint64_t seed) const override { Net::init(params, seed); }
  double step(std::span<const float> params, std::span<float> grads, const ForwardInput& in,
              int threads, bool analysed) override {
    if (!parallel_step_) parallel_step_ = std::make_unique<DataParallelStep<Net>>(threads);
    return parallel_step_->run(params, grads, in, analysed);
  }
  double weighted_mean(std::span<const float> weights) const override {
    return parallel_step_->weighted_mean(weights);
  }
  double weighted_accuracy(std::span<const float> weights) const override {
    return parallel_step_->weighted_accuracy(weights);
  }
  AttentionAnalysis analyse_last_step(const SequenceTask& task,
                                      std::span<const float> target) const override {
    return analyse_attention<Net>(parallel_step_->workspaces(), task, target);
  }
  std::vector<float> last_step_attention() const override {
    if constexpr (!KeepsAttention<typename Net::Mixer>) {
      return {};
    } else {
      std::vector<float> flat;
      for (const std::vector<double>& layer :
           batch_averaged_patterns<Net>(parallel_step_->workspaces()))
        flat.insert(flat.end(), layer.begin(), layer.end());
      return flat;
    }
  }
  EvalResult evaluate(std::span<const float> params, const SequenceTask& task,
                      std::uint64_t data_seed, int batch, float bias,
                      std::vector<std::int32_t>* inputs_out,
                      std::vector<std::int32_t>* targets_out) const override {
    return emergent::evaluate<Net>(params, task, data_seed, batch, bias, inputs_out, targets_out);
  }
  EvalResult held_out(std::span<const float> params, const SequenceTask& task,
                      std::uint64_t data_seed, int batch, int batches, float bias) override {
    if (!held_out_workspace_) held_out_workspace_ = std::make_unique<typename Net::Workspace>();
    return held_out_losses<Net>(params, task, data_seed, batch, batches, bias,
                                *held_out_workspace_);
  }

 private:
  std::unique_ptr<DataParallelStep<Net>> parallel_step_;
  std::unique_ptr<typename Net::Workspace> held_out_workspace_;
};

// A new CompiledModel<Net> behind the interface: what Trainer<Net> (train/trainer.hpp) trains.
//
// Compiled where it is used, as a header-only library's code is, unless the unit is built with
// EMERGENT_PREBUILT_MODELS: then it is only declared here, and the program links a unit that
// instantiates it for its Net. The project's examples whose every model is one of the registry's
// prebuilt shapes are built so (CMakeLists.txt, the examples' loop) and link those units
// (apps/registry/), whose make_entry instantiates it (examples/mixers.cpp: about 30 -> 6 s to
// compile). The programs are built with g++'s default -ffp-contract=fast, under which a unit's
// inlining decides where a * b + c becomes one FMA, so a model compiled in another unit may
// round differently in the last bits: dot attention's runs are byte-equal either way, the
// other mixers' are not.
template <class Net>
std::unique_ptr<TrainableModel> make_trainable();

#ifndef EMERGENT_PREBUILT_MODELS
template <class Net>
std::unique_ptr<TrainableModel> make_trainable() {
  return std::make_unique<CompiledModel<Net>>();
}
#endif

}  // namespace emergent
