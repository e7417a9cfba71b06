// What every trainer of a run folder shares (the CPU's RunTrainer, train/trainer.hpp, and the
// device ensembles', train/ensemble_trainer.cuh), so that a run folder is the same whichever
// backend wrote it and either can resume it:
//   bind_train_run           config.json of a new run, or the check that a resumed one is the
//                            same run (train/run_binding.hpp)
//   with_emergence_source    the metric emergence reads: the training batch's or the held-out set's
//   metrics_row              a row of metrics.jsonl, without the attention analysis, and
//   held_out_columns         its held-out columns, and
//   append_metrics_row       its appending
//   RunHistory               the logged emergence metric and loss, refilled on resume
//   write_run_summary        summary.json: final losses, emergence steps, the held-out eval
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <emergent/analysis/attention_summary.hpp>
#include <emergent/analysis/emergence.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/train/compiled_model.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/metrics_file.hpp>
#include <emergent/train/run_binding.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace emergent {

// Emergence is read off the trailing mean of `kSmoothingRows` logged rows of the task's metric
// (analysis/emergence.hpp), with thresholds each task declares (tasks/task.hpp) so that they
// mean the same thing for every task:
//   emergence_step: the metric leaves the plateau (chance level): the abrupt drop begins. The
//                   steps before it are the paper's plateau length.
//   midpoint_step:  halfway from chance to zero;  solved_step: close to the floor.
// A threshold never reached leaves the run censored.
inline constexpr int kSmoothingRows = 5;

struct RunSummary {
  std::int64_t steps_done = 0;
  double final_loss = 0, final_metric = 0;  // smoothed loss and emergence metric at the end
  std::optional<std::int64_t> emergence_step, midpoint_step, solved_step;
  EvalResult eval;
  double wall_seconds = 0;
};

// The attention fields of a metrics row or summary: none for a mixer without attention.
inline nlohmann::json to_json(const AttentionAnalysis& a) {
  if (!a.available) return nlohmann::json::object();
  return {{"attention_entropy", a.entropy},
          {"attention_head_iou", a.head_iou},
          {"attention_head_iou_chance", a.head_iou_chance},
          {"attention_iou", a.iou},
          {"attention_iou_chance", a.iou_chance},
          {"attention_iou_above_chance", a.iou_above_chance}};
}

// The fields a resume of `config` may change: how far it goes (steps, unless a cosine schedule
// takes its shape from them; stop_below), the threads it runs on and what it observes.
inline std::set<std::string> resume_may_change(const TrainConfig& config) {
  std::set<std::string> keys = {"stop_below", "threads"};
  if (config.schedule != "cosine") keys.insert("steps");
  for (const Parameter& p : training_parameters())
    if (p.observation) keys.insert(p.name);
  return keys;
}

// Binds the run folder `run_dir` to `config` (train/run_binding.hpp): config.json of a new run,
// or the check that a resumed one is the same run, against its checkpoint's record and
// config.json.
inline RunBinding bind_train_run(const std::filesystem::path& run_dir, const TrainConfig& config) {
  return bind_run_folder(run_dir, to_json(config), resume_may_change(config),
                         [](const nlohmann::json& j, const std::string& where) {
                           return to_json(train_config_from_json(j, where));
                         });
}

// The task's setup with the emergence metric the run reads: the training batch's (e.g. "loss"),
// or with eval_every the same metric on the fixed held-out set ("eval_loss"), whose curve does
// not move with each batch's sequences, so that a plateau's end is not read off a lucky batch.
inline TaskSetup with_emergence_source(TaskSetup setup, const TrainConfig& config) {
  if (config.eval_every > 0) setup.thresholds.metric = "eval_" + setup.thresholds.metric;
  return setup;
}

// A row of metrics.jsonl: the full loss, the loss and accuracy of the learnable predictions
// (named "<predictable>_loss", "<predictable>_accuracy"), the learning rate, the gradient norm
// before clipping, and the wall time of the run so far.
inline nlohmann::json metrics_row(std::int64_t step, double loss, const std::string& predictable,
                                  double predictable_loss, double predictable_accuracy, double lr,
                                  double grad_norm, double wall_seconds) {
  return {{"step", step},
          {"loss", loss},
          {predictable + "_loss", predictable_loss},
          {predictable + "_accuracy", predictable_accuracy},
          {"lr", lr},
          {"grad_norm", grad_norm},
          {"wall_s", wall_seconds}};
}

// The held-out columns of a metrics row: eval_loss, eval_<predictable>_loss and _accuracy.
inline nlohmann::json held_out_columns(const std::string& predictable, const EvalResult& held_out) {
  return {{"eval_loss", held_out.loss},
          {"eval_" + predictable + "_loss", held_out.predictable_loss},
          {"eval_" + predictable + "_accuracy", held_out.predictable_accuracy}};
}

// Appends `row` to the run's open metrics.jsonl, flushed, so that a kill loses no logged row.
inline void append_metrics_row(std::ofstream& metrics, const std::filesystem::path& run_dir,
                               const nlohmann::json& row) {
  metrics << row.dump() << '\n' << std::flush;
  require(metrics.good(), (run_dir / "metrics.jsonl").string(),
          "cannot append a metrics row (is the disk full?)");
}

// The emergence metric and the loss of every logged row, and the wall time already spent.
struct RunHistory {
  std::vector<std::int64_t> steps;
  std::vector<double> metric, loss;
  double wall_offset = 0;
  // A stage's source (init_from): the checkpoint, its step, task and SHA-256, as the first row
  // recorded it; empty for a run that started fresh.
  nlohmann::json init_source = nlohmann::json::object();

  // What summary.json keeps of a stage's first-row record (the tensors' lists stay in the row).
  void set_init_source(const nlohmann::json& record) {
    init_source = nlohmann::json::object();
    for (const char* key : {"checkpoint", "step", "task", "sha256"})
      if (record.contains(key)) init_source[key] = record[key];
  }

  void add(std::int64_t step, double metric_value, double loss_value) {
    steps.push_back(step);
    metric.push_back(metric_value);
    loss.push_back(loss_value);
  }
  double smoothed_metric() const {
    const std::size_t n = std::min<std::size_t>(kSmoothingRows, metric.size());
    return std::accumulate(metric.end() - n, metric.end(), 0.0) / double(n);
  }
  bool stopped_below(double stop_below) const {
    return stop_below > 0 && !metric.empty() && smoothed_metric() < stop_below;
  }

  // Keeps the rows of metrics.jsonl before `step` (the checkpoint a run resumes from) and reads
  // them back.
  static RunHistory resume(const std::filesystem::path& run_dir, std::int64_t step,
                           const std::string& metric_name) {
    RunHistory h;
    for (const nlohmann::json& row : keep_metrics_before(run_dir / "metrics.jsonl", step)) {
      if (row.contains(metric_name))  // held-out metrics are in every eval_every-th row only
        h.add(row.at("step").get<std::int64_t>(), row.at(metric_name).get<double>(),
              row.at("loss").get<double>());
      h.wall_offset = row.at("wall_s").get<double>();
      if (row.contains("init_source")) h.set_init_source(row.at("init_source"));
    }
    return h;
  }
};

// summary.json of a run that ran `steps_done` steps, with `eval` the held-out evaluation of its
// final parameters.
inline RunSummary write_run_summary(const std::filesystem::path& run_dir, const TaskSetup& setup,
                                    const RunHistory& history, std::int64_t steps_done, double wall,
                                    const EvalResult& eval) {
  const EmergenceThresholds& th = setup.thresholds;
  RunSummary s;
  s.steps_done = steps_done;
  s.wall_seconds = wall;
  s.eval = eval;
  if (!history.metric.empty()) {
    const EmergenceSummary e =
        summarize_emergence(history.steps, history.metric, th, kSmoothingRows);
    s.emergence_step = e.emergence_step;
    s.midpoint_step = e.midpoint_step;
    s.solved_step = e.solved_step;
    s.final_metric = e.final_value;
    s.final_loss = trailing_mean(history.loss, kSmoothingRows).back();
  }
  const std::string& name = setup.predictable_name;
  char definitions[512];
  std::snprintf(
      definitions, sizeof definitions,
      "metric %s smoothed by the trailing mean of %d logged rows; emergence_step: < %.4f; "
      "midpoint_step: < %.4f; solved_step: < %.4f; null = censored (never reached)",
      th.metric.c_str(), kSmoothingRows, th.emergence_below, th.midpoint_below, th.solved_below);
  nlohmann::json eval_json = {{"loss", s.eval.loss},
                              {name + "_loss", s.eval.predictable_loss},
                              {name + "_accuracy", s.eval.predictable_accuracy}};
  eval_json.update(to_json(s.eval.attention));
  nlohmann::json summary = {{"steps_done", s.steps_done},
                            {"final_loss", s.final_loss},
                            {"metric", th.metric},
                            {"final_metric", s.final_metric},
                            {"emergence_step", json_or_null(s.emergence_step)},
                            {"midpoint_step", json_or_null(s.midpoint_step)},
                            {"solved_step", json_or_null(s.solved_step)},
                            {"eval", eval_json},
                            {"wall_s", s.wall_seconds},
                            {"definitions", definitions}};
  if (!history.init_source.empty()) summary["init_source"] = history.init_source;
  write_text_atomically(run_dir / "summary.json", summary.dump(2) + "\n");
  return s;
}

}  // namespace emergent
