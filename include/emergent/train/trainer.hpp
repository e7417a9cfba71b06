// The trainer: one run folder per run, resumable, with the metrics the paper plots.
//
// <run>/config.json      everything needed to rerun (train/config.hpp)
// <run>/metrics.jsonl    one row per `log_every` steps: step, loss (full sequence, what the
//                        paper plots), <p>_loss and <p>_accuracy on the learnable predictions
//                        (p = x1 for the linear map, next_state for the automaton), lr,
//                        grad_norm, wall_s; every `analysis_every` steps also
//                        attention_entropy [layer][head], attention_head_iou [layer][head] and
//                        attention_iou (best head per row) with their chance values and
//                        attention_iou_above_chance
//                        (analysis/attention_summary.hpp)
//                        with eval_every, also eval_loss, eval_<p>_loss and eval_<p>_accuracy
//                        on a fixed held-out set, after the step's update; emergence and
//                        stop_below then read eval_<metric>
// <run>/step_NNNNNN.safetensors  checkpoints (train/checkpoint.hpp)
// <run>/attention/step_NNNNNN.safetensors  attention maps of the steps `save_attention_at`
//                        names (train/attention_snapshot.hpp)
// <run>/summary.json     final losses, emergence steps, IoU
//
// Resume: a run folder with checkpoints continues from the latest one, as the same run
// (train/run_binding.hpp: an edited config.json or another configuration is refused; more steps
// or a later stop are allowed and recorded as changed_on_resume in the next metrics row). Data of
// step t is a pure function of (seed, t) and the checkpoint holds parameters and both AdamW
// moments, so the continuation is bit-identical to an uninterrupted run with the same thread count.
// Metric rows after the checkpoint are dropped (they are recomputed), so nothing is logged twice.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <emergent/analysis/attention_summary.hpp>
#include <emergent/analysis/emergence.hpp>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/model/data_parallel.hpp>
#include <emergent/optim/adamw.hpp>
#include <emergent/optim/schedule.hpp>
#include <emergent/train/attention_snapshot.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/compiled_model.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/init_source.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/run_folder.hpp>
#include <emergent/train/run_lock.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

// Trains one run of a compiled model (train/compiled_model.hpp). Trainer<Net> below is the
// same for a model type known at compile time.
//
// It is a template for the build's sake alone: as BasicRunTrainer<void> its members (defined
// below the class, out of it, so not inline) are compiled in every unit that trains, as a
// header-only library's code is, unless the unit is built with EMERGENT_COMPILED_TRAINER, which
// declares the instantiation extern: then one unit compiles them, src/run_trainer.cpp, which the
// project's CLI, examples, test suite and shape programs link (examples/sparsity.cpp: 28.4 ->
// 15.4 s to compile).
template <class Unused = void>
class BasicRunTrainer {
 public:
  BasicRunTrainer(TrainConfig config, std::filesystem::path run_dir,
                  std::unique_ptr<TrainableModel> model, bool show_progress = true);

  // Trains to config.steps (or the early stop), resuming from the run folder if it holds a
  // checkpoint. Returns the summary that is also written to summary.json.
  RunSummary run();

  std::span<const float> parameters() const { return params_; }
  const SequenceTask& task() const { return *setup_.task; }

 private:
  static AdamWConfig adamw_config(const TrainConfig& c) {
    return {c.beta1, c.beta2, 1e-8, c.weight_decay, c.max_grad_norm};
  }
  static std::vector<DecayRange> decay_ranges(const TrainableModel& model) {
    std::vector<DecayRange> ranges;
    for (const auto& t : model.tensors()) ranges.push_back({t.offset, t.size, t.weight_decay});
    return ranges;
  }
  static double seconds_between(std::chrono::steady_clock::time_point a,
                                std::chrono::steady_clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
  }
  static double seconds_since(std::chrono::steady_clock::time_point a) {
    return seconds_between(a, std::chrono::steady_clock::now());
  }

  // Initialises a new run, or loads the latest checkpoint of one that is resumed. Returns the
  // first step to run.
  std::int64_t prepare_run_folder();

  // Nothing for a mixer without attention probabilities (its snapshot would be empty).
  void save_attention(std::int64_t step, double loss, std::span<const float> target);

  // Writes the checkpoint of `step`; returns the step.
  std::int64_t save(std::int64_t step, const std::string& config_text);

  // Training on a non-finite loss or gradient would poison every later step: stop with the step
  // and the first tensor whose gradient is not finite, record why in summary.json, and leave the
  // checkpoints as they are (none is written after the last good step).
  [[noreturn]] void stop_not_finite(std::int64_t step, const std::string& what);

  void print_progress(std::int64_t step, std::int64_t start_step,
                      std::chrono::steady_clock::time_point started, double loss) const;

  TrainConfig config_;
  std::filesystem::path run_dir_;
  bool show_progress_;
  std::unique_ptr<TrainableModel> model_;
  TaskSetup setup_;
  int batch_;  // sequences per step
  std::vector<float> params_, grads_;
  AdamW<float> optimizer_;
  RunHistory history_;
  std::int64_t saved_step_ = -1;  // the step of the checkpoint this process wrote last
  nlohmann::json init_record_;    // the stage's source, until the first metrics row holds it
};

template <class Unused>
BasicRunTrainer<Unused>::BasicRunTrainer(TrainConfig config, std::filesystem::path run_dir,
                                         std::unique_ptr<TrainableModel> model, bool show_progress)
    : config_(std::move(config)),
      run_dir_(std::move(run_dir)),
      show_progress_(show_progress),
      model_(std::move(model)),
      setup_(with_emergence_source(make_task(config_), config_)),
      batch_(std::max(1, config_.batch_tokens / (setup_.task->length() + 1))),
      params_(model_->parameter_count()),
      grads_(model_->parameter_count()),
      optimizer_(adamw_config(config_), decay_ranges(*model_), model_->parameter_count()) {
  validate(config_);
  // The data-parallel split, so the trajectory, depends on the thread count: 0 (OpenMP's
  // default) is recorded as the count it means here, so that config.json says what ran and a
  // resume on another count is recorded as a change (changed_on_resume).
  if (config_.threads == 0) config_.threads = thread_count();
  require(config_.precision == "fp32", "config",
          "field 'precision' = '" + config_.precision +
              "' is not allowed here: the CPU trains in fp32 (tf32: --backend cuda)");
  require_memory_fits(estimated_training_bytes(config_), machine_memory_bytes(),
                      "this machine's memory", "config",
                      "batch_tokens = " + std::to_string(config_.batch_tokens) + " and the shape");
  require(config_.shape == model_->shape(), "config", "shape does not match the compiled model");
  require(config_.mixer == model_->mixer(), "config",
          "mixer '" + config_.mixer + "' does not match the compiled model's (" + model_->mixer() +
              ")");
  require(config_.bias == 0 || model_->takes_attention_bias(), "config",
          "field 'bias' must be 0: mixer " + config_.mixer + " has no attention logits to bias");
}

template <class Unused>
RunSummary BasicRunTrainer<Unused>::run() {
  set_thread_count(config_.threads);
  std::error_code error;
  std::filesystem::create_directories(run_dir_, error);
  require(!error && std::filesystem::is_directory(run_dir_), run_dir_.string(),
          "cannot be the run folder (" + (error ? error.message() : std::string("not a folder")) +
              "); choose another --out");
  const RunLock lock(run_dir_);
  const RunBinding binding = bind_train_run(run_dir_, config_);
  const std::string& config_text = binding.config_text;
  nlohmann::json changed_on_resume = binding.changed_on_resume;
  std::int64_t start_step = prepare_run_folder();

  const SequenceTask& task = *setup_.task;
  const int B = batch_, T = task.length();
  // Weights and attention target: the task's fixed ones, or each batch's (Dyck).
  const bool per_sequence = task.weights_per_sequence();
  BatchWeights weights = per_sequence ? BatchWeights{} : batch_weights(task, {}, {}, B);
  std::vector<float> target = per_sequence ? std::vector<float>() : task.attention_target();
  const std::string& name = setup_.predictable_name;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(B) * T), targets(inputs.size());
  const LrSchedule schedule{config_.lr, config_.warmup_steps, parse_schedule_kind(config_.schedule),
                            config_.steps, config_.min_lr_ratio};

  std::ofstream metrics(run_dir_ / "metrics.jsonl", std::ios::app);
  require(metrics.good(), (run_dir_ / "metrics.jsonl").string(), "cannot open for appending");
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  std::int64_t step = start_step;
  // A run that stopped early resumes from the checkpoint of its stop: it is finished.
  const bool stopped_early = history_.stopped_below(config_.stop_below);
  const std::vector<std::int64_t> snapshot_steps =
      attention_snapshot_steps(config_.save_attention_at, "config");
  for (; step < config_.steps && !stopped_early; ++step) {
    task.sample(config_.seed, static_cast<std::uint64_t>(step), B, inputs, targets);
    const bool snapshot = std::binary_search(snapshot_steps.begin(), snapshot_steps.end(), step),
               analysed = step % config_.log_every == 0 && step % config_.analysis_every == 0;
    if (per_sequence) {
      weights = batch_weights(task, inputs, targets, B);
      if (config_.bias != 0 || analysed) target = batch_attention_target(task, inputs, targets, B);
    }
    const std::span<const float> bias_pattern =
        config_.bias != 0 ? std::span<const float>(target) : std::span<const float>();
    const double loss = model_->step(
        params_, grads_, {B, T, inputs, targets, weights.full, bias_pattern, float(config_.bias)},
        config_.threads, snapshot || analysed);
    const double lr = schedule.at(step);
    if (!std::isfinite(loss)) stop_not_finite(step, "the loss is " + std::to_string(loss));
    const double grad_norm = optimizer_.step(params_, grads_, lr);
    if (!std::isfinite(grad_norm))
      stop_not_finite(step, "the gradient norm is " + std::to_string(grad_norm));

    if (snapshot) save_attention(step, loss, target);
    if (step % config_.log_every == 0) {
      nlohmann::json row = metrics_row(step, loss, name, model_->weighted_mean(weights.predictable),
                                       model_->weighted_accuracy(weights.predictable), lr,
                                       grad_norm, seconds_since(started) + history_.wall_offset);
      if (analysed) row.update(to_json(model_->analyse_last_step(task, target)));
      if (!init_record_.empty()) row["init_source"] = std::exchange(init_record_, {});
      if (!changed_on_resume.empty())  // the first row after a resume that extended the run
        row["changed_on_resume"] = std::exchange(changed_on_resume, nlohmann::json::object());
      if (config_.eval_every > 0 && step % config_.eval_every == 0)
        row.update(
            held_out_columns(name, model_->held_out(params_, task, config_.seed, B,
                                                    config_.eval_batches, float(config_.bias))));
      append_metrics_row(metrics, run_dir_, row);
      if (row.contains(setup_.thresholds.metric))
        history_.add(step, row.at(setup_.thresholds.metric).get<double>(), loss);
      if (history_.stopped_below(config_.stop_below)) {
        ++step;  // this step's update is done
        break;
      }
    }
    if ((step + 1) % config_.checkpoint_every == 0) saved_step_ = save(step + 1, config_text);
    if (show_progress_ && seconds_between(last_progress, std::chrono::steady_clock::now()) > 1.0) {
      last_progress = std::chrono::steady_clock::now();
      print_progress(step + 1, start_step, started, loss);
    }
  }
  if (show_progress_) std::fprintf(stderr, "\n");
  // The last step's checkpoint, unless the loop just wrote it (each is written once).
  if (saved_step_ != step && (step > start_step || !latest_checkpoint(run_dir_)))
    save(step, config_text);
  return write_run_summary(run_dir_, setup_, history_, step,
                           seconds_since(started) + history_.wall_offset,
                           model_->evaluate(params_, *setup_.task, config_.seed, batch_,
                                            float(config_.bias), nullptr, nullptr));
}

template <class Unused>
std::int64_t BasicRunTrainer<Unused>::prepare_run_folder() {
  const auto checkpoint = latest_checkpoint(run_dir_);
  if (!checkpoint) {
    model_->init(params_, config_.seed);
    if (!config_.init_from.empty()) {  // a stage: its source's tensors over the fresh init
      init_record_ = take_init_source(config_.init_from, config_.init_take, config_.seed,
                                      model_->tensors(), std::span<float>(params_));
      history_.set_init_source(init_record_);
      if (show_progress_) std::fprintf(stderr, "%s\n", init_source_line(init_record_).c_str());
    }
    std::filesystem::remove(run_dir_ / "metrics.jsonl");
    return 0;
  }
  const CheckpointState state =
      load_checkpoint(*checkpoint, model_->tensors(), params_, optimizer_.first_moment(),
                      optimizer_.second_moment());
  optimizer_.set_steps(state.optimizer_steps);
  history_ = RunHistory::resume(run_dir_, state.step, setup_.thresholds.metric);
  if (show_progress_)
    std::fprintf(stderr, "resuming %s from step %lld\n", run_dir_.string().c_str(),
                 (long long)state.step);
  return state.step;
}

template <class Unused>
void BasicRunTrainer<Unused>::save_attention(std::int64_t step, double loss,
                                             std::span<const float> target) {
  const std::vector<float> attention = model_->last_step_attention();
  if (attention.empty()) return;
  const Shape shape = model_->shape();
  write_attention_snapshot(run_dir_, step, shape.layers, shape.heads, setup_.task->length(),
                           attention, target, loss);
}

template <class Unused>
std::int64_t BasicRunTrainer<Unused>::save(std::int64_t step, const std::string& config_text) {
  save_checkpoint(checkpoint_path(run_dir_, step), model_->tensors(), params_,
                  optimizer_.first_moment(), optimizer_.second_moment(),
                  {step, optimizer_.steps(), config_text});
  return step;
}

template <class Unused>
void BasicRunTrainer<Unused>::stop_not_finite(std::int64_t step, const std::string& what) {
  std::string tensor = "every gradient is finite";
  for (const ParameterTensor& t : model_->tensors()) {
    const auto g = std::span<const float>(grads_).subspan(t.offset, t.size);
    if (!std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); })) {
      tensor = "the first tensor whose gradient is not finite is '" + t.name + "'";
      break;
    }
  }
  const auto last = latest_checkpoint(run_dir_);
  const std::string reason =
      "training stopped at step " + std::to_string(step) + ": " + what + "; " + tensor;
  write_text_atomically(
      run_dir_ / "summary.json",
      nlohmann::json{{"stopped", reason},
                     {"step", step},
                     {"last_checkpoint",
                      last ? nlohmann::json(last->filename().string()) : nlohmann::json(nullptr)}}
              .dump(2) +
          "\n");
  throw Error(run_dir_.string() + ": " + reason + ". " +
              (last ? "The last good checkpoint is " + last->filename().string()
                    : std::string("No checkpoint was written")) +
              "; a smaller lr or gradient clipping may avoid it");
}

template <class Unused>
void BasicRunTrainer<Unused>::print_progress(std::int64_t step, std::int64_t start_step,
                                             std::chrono::steady_clock::time_point started,
                                             double loss) const {
  const double elapsed = seconds_since(started);
  const double rate = double(step - start_step) / std::max(elapsed, 1e-9);
  const double eta = double(config_.steps - step) / std::max(rate, 1e-9);
  std::fprintf(
      stderr, "\r%s  step %lld/%lld  loss %.4f  %s %.4f  %.0f steps/s  %.0f tok/s  ETA %.0fs   ",
      run_dir_.filename().string().c_str(), (long long)step, (long long)config_.steps, loss,
      setup_.thresholds.metric.c_str(), history_.metric.empty() ? 0.0 : history_.metric.back(),
      rate, rate * batch_ * (setup_.task->length() + 1), eta);
}

using RunTrainer = BasicRunTrainer<>;
#ifdef EMERGENT_COMPILED_TRAINER
extern template class BasicRunTrainer<void>;
#endif

template <class Net>
class Trainer : public RunTrainer {
 public:
  Trainer(TrainConfig config, std::filesystem::path run_dir, bool show_progress = true)
      : RunTrainer(std::move(config), std::move(run_dir), make_trainable<Net>(), show_progress) {}
};

}  // namespace emergent
