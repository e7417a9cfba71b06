// Trains an ensemble of runs on the device (cuda/model.cuh), each run into its own run folder,
// written exactly as the CPU's RunTrainer (train/trainer.hpp) writes one: config.json (that
// run's), metrics.jsonl, step_NNNNNN.safetensors checkpoints with the CPU's tensor names and both
// AdamW moments, summary.json. So a run started here resumes on the CPU and the other way round,
// and a sweep reads either.
//
// The members are any runs of one compiled model whose steps have the same shape
// (train/ensemble_members.hpp): seeds of one config, or a mixed ensemble whose members differ in
// the task and its parameters, the seed, the schedule, the steps, the bias strength. Each member
// resumes from its own latest checkpoint and keeps its own step count: the ensemble's t-th step
// is member e's step start_e + t, with its own learning rate, AdamW bias corrections and batch.
// A member that has reached its steps (or whose early stop, stop_below, fired) is checkpointed
// and summarised there and then frozen (learning rate 0) while the others run on; so is one whose
// loss is not finite, with the CPU's "stopped" summary, and the ensemble then fails naming it.
//
// The analysis as the CPU run has it: every analysis_every-th logged row carries the per-head
// attention entropy and IoU of that step's batch (the device averages each member's attention
// over its batch; the host analyses it, analysis/attention_summary.hpp); save_attention_at saves
// those maps; with eval_every, the held-out columns are the device's forward of every member's
// parameters on its fixed held-out set (the CPU's batches, train/compiled_model.hpp: the data
// streams of steps kEvalStep, kEvalStep + 1, ...), and emergence reads them.
// The batches are made on the device when every member's task is a linear map (cuda/
// linear_map.cuh), or every member's a cellular automaton (cuda/cellular_automaton.cuh), padded
// or not; otherwise each member's on the host by its task, from the same Philox streams, and
// copied. A task whose learnable positions and target move with the sequence (Dyck:
// the closers and their openers, tasks/task.hpp) has its loss weights, held-out part and bias
// patterns made on the host for each batch and copied with it (then every member's weights are
// per token: set_task_weights), and its analysis reads each sequence's attention against that
// sequence's target, as the CPU's does (the maps of every sequence copied back at the steps that
// analyse such a member).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <emergent/analysis/attention_summary.hpp>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/cellular_automaton.cuh>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/step.cuh>
#include <emergent/io/text_file.hpp>
#include <emergent/optim/schedule.hpp>
#include <emergent/tasks/cellular_automaton.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <emergent/train/attention_snapshot.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/compiled_model.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/ensemble_members.hpp>
#include <emergent/train/init_source.hpp>
#include <emergent/train/run_folder.hpp>
#include <emergent/train/run_lock.hpp>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent::cuda {

// The run folder of one member of an ensemble, and its own task, schedule and progress.
struct EnsembleMember {
  TrainConfig config;
  std::filesystem::path run_dir;
  TaskSetup setup;
  LrSchedule schedule;
  std::string config_text;
  nlohmann::json changed_on_resume;  // what a resume changed, for the next metrics row
  nlohmann::json init_record;        // what a new stage took (init_from), for its first row
  std::int64_t start = 0;            // the step it resumes from
  std::int64_t saved_step = -1;      // the step of the checkpoint written last
  RunHistory history;
  std::unique_ptr<RunLock> lock;
  std::optional<std::int64_t> done_at;       // the steps done when it finished or stopped early
  std::vector<float> final_params;           // once done
  double wall = 0;                           // the ensemble's seconds when it was done
  std::vector<std::int64_t> snapshot_steps;  // save_attention_at, sorted
  std::string failure;                       // why it stopped on a non-finite loss, if it did
  int batch = 0, length = 0;  // its own sequences per step and positions (the ensemble's: most)
  int index = 0;              // its place among the ensemble's configs
};

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = ::emergent::GeluMlp>
class EnsembleTrainer {
 public:
  using Device = EnsembleModel<MixerT, S, ChannelT>;
  using Net = typename Device::Cpu;
  static constexpr std::size_t P = Device::P;

  // One member per config, into run_dirs[i] (the configs' shared settings must agree:
  // train/ensemble_members.hpp).
  EnsembleTrainer(const std::vector<TrainConfig>& configs,
                  const std::vector<std::filesystem::path>& run_dirs, bool show_progress)
      : show_progress_(show_progress),
        members_(make_members(configs, run_dirs)),
        batch_(most(members_, &EnsembleMember::batch)),
        length_(most(members_, &EnsembleMember::length)),
        padded_(std::any_of(
            members_.begin(), members_.end(),
            [&](const EnsembleMember& m) { return m.batch != batch_ || m.length != length_; })),
        step_(std::in_place, int(members_.size()), batch_, length_, adamw_config(configs[0]),
              decay_ranges(), device_sampler(members_, batch_, length_, padded_),
              data_seeds(members_)) {}

  std::vector<RunSummary> run() {
    const TrainConfig& first = members_[0].config;
    if (first.threads > 0) set_thread_count(first.threads);
    int E = int(members_.size());
    const int B = batch_, T = length_;
    for (EnsembleMember& m : members_) {
      std::error_code error;
      std::filesystem::create_directories(m.run_dir, error);
      require(!error && std::filesystem::is_directory(m.run_dir), m.run_dir.string(),
              "cannot be a run folder; choose another --out");
      m.lock = std::make_unique<RunLock>(m.run_dir);
      const RunBinding binding = bind_train_run(m.run_dir, m.config);
      m.config_text = binding.config_text;
      m.changed_on_resume = binding.changed_on_resume;
    }
    prepare();
    set_task_weights();
    std::vector<std::int32_t> inputs(std::size_t(E) * B * T), targets(inputs.size());
    sample_held_out_sets();
    std::vector<std::ofstream> metrics;
    for (EnsembleMember& m : members_) {
      metrics.emplace_back(m.run_dir / "metrics.jsonl", std::ios::app);
      require(metrics.back().good(), (m.run_dir / "metrics.jsonl").string(),
              "cannot open for appending");
    }
    // The profiling mode (cuda/profile.cuh): EMERGENT_DEVICE_PROFILE=FILE writes each op's
    // device time and the launches and host synchronisations of a step to FILE.
    // EMERGENT_DEVICE_COUNTS=FILE writes the counts alone (the step runs as it does unprofiled:
    // as a CUDA graph under CUDA).
    const char* profile_path = std::getenv("EMERGENT_DEVICE_PROFILE");
    const char* counts_path = std::getenv("EMERGENT_DEVICE_COUNTS");
    OpProfiler& profiler = OpProfiler::instance();
    if (profile_path) {
      profiler.reset();
      profiler.enable();
    }
    StepCounter counter;
    const auto started = started_ = std::chrono::steady_clock::now();
    auto last_progress = started;
    std::vector<std::int64_t> steps(E);
    std::vector<double> lrs(E);
    std::int64_t t = 0;  // the ensemble's steps: member e's step is its start + t
    for (; running() > 0; ++t) {
      counter.begin();
      for (int e = 0; e < E; ++e) {
        const EnsembleMember& m = members_[e];
        steps[e] = m.start + t;
        lrs[e] = m.done_at ? 0.0 : m.schedule.at(steps[e]);
      }
      if (!step_->samples_on_device()) {
        OpScope scope("data.sample_host");
        for (int e = 0; e < E; ++e)
          if (!members_[e].done_at) sample_member(e, std::uint64_t(steps[e]), inputs, targets);
        step_->upload_batch(inputs, targets);
        if (sequence_tasks_) upload_sequence_weights(inputs, targets, steps, weights_, true);
      }
      step_->run(steps, lrs);  // returns at once: the device runs on
      // does a member log, checkpoint, finish, or read its attention (a member with targets
      // per sequence: each sequence's) at this step?
      bool any = false, attention = false, sequences = false;
      for (const EnsembleMember& m : members_)
        if (!m.done_at) {
          any = any || records(m, m.start + t);
          attention = attention || analysed(m, m.start + t) || snapshot(m, m.start + t);
          sequences =
              sequences || (m.setup.task->weights_per_sequence() && analysed(m, m.start + t));
        }
      if (any) {  // the host waits here, and only here
        const std::vector<MemberReport> report = step_->report(predictable_);
        stop_nonfinite(report);
        const std::vector<double> maps =
            attention ? step_->model.batch_averaged_attention() : std::vector<double>();
        const std::vector<std::vector<float>> sequence_maps =
            sequences ? step_->model.sequence_attention() : std::vector<std::vector<float>>();
        const std::vector<HeldOutLosses> held_out =
            evaluates(t) ? step_->held_out(held_inputs_, held_targets_, held_batches_, predictable_,
                                           [&](int b) {
                                             if (sequence_tasks_) upload(held_weights_[b]);
                                           })
                         : std::vector<HeldOutLosses>();
        const std::size_t per_member = maps.size() / E;
        for (int e = 0; e < E; ++e) {
          EnsembleMember& m = members_[e];
          const std::int64_t step = steps[e];
          if (m.done_at) continue;
          const MemberReport& r = report[e];
          // its batch-averaged maps (over its own sequences), at its own length
          const std::vector<double> map =
              own_positions(e, std::span(maps).subspan(std::size_t(e) * per_member, per_member));
          if (snapshot(m, step) && !map.empty())
            write_attention_snapshot(m.run_dir, step, S.layers, S.heads, m.length,
                                     std::vector<float>(map.begin(), map.end()), targets_[e],
                                     r.loss);
          if (step % m.config.log_every == 0) {
            nlohmann::json row = metrics_row(step, r.loss, m.setup.predictable_name, r.part_loss,
                                             r.part_accuracy, lrs[e], r.gradient_norm,
                                             seconds_since(started) + m.history.wall_offset);
            if (analysed(m, step) && !map.empty())
              row.update(to_json(analyse_member(e, map, sequence_maps)));
            if (!m.init_record.empty()) row["init_source"] = std::exchange(m.init_record, {});
            if (!m.changed_on_resume.empty())  // the first row after a resume that extended it
              row["changed_on_resume"] =
                  std::exchange(m.changed_on_resume, nlohmann::json::object());
            if (m.config.eval_every > 0 && step % m.config.eval_every == 0)
              row.update(held_out_columns(
                  m.setup.predictable_name,
                  {held_out[e].loss, held_out[e].part_loss, held_out[e].part_accuracy, {}}));
            append_metrics_row(metrics[e], m.run_dir, row);
            if (row.contains(m.setup.thresholds.metric))
              m.history.add(step, row.at(m.setup.thresholds.metric).get<double>(), r.loss);
          }
          if (m.history.stopped_below(m.config.stop_below) || step + 1 == m.config.steps) {
            finish(e, step + 1);
          } else if ((step + 1) % m.config.checkpoint_every == 0) {
            save(e, step + 1);
          }
        }
        if (compacts()) {
          compact(metrics);
          E = int(members_.size());
          inputs.assign(std::size_t(E) * B * T, 0);  // the padding token 0 again
          targets.assign(inputs.size(), 0);
          steps.resize(E);
          lrs.resize(E);
        }
      }
      counter.end(any);
      if (profile_path) {
        profiler.finish_step();
        // cuBLAS's first calls and first allocations are not a step's
        if (t == kProfileWarmup - 1) profiler.reset();
      }
      if (show_progress_ && seconds_since(last_progress) > 1.0) {
        last_progress = std::chrono::steady_clock::now();
        const double rate = double(t + 1) / std::max(seconds_since(started), 1e-9);
        std::fprintf(stderr,
                     "\rensemble of %d runs (%s)  step %lld of %lld  %d running  %.0f steps/s  "
                     "%.0f tok/s   ",
                     E, kDeviceSystem, (long long)(t + 1), (long long)longest(), running(), rate,
                     rate * E * B * (T + 1));
      }
    }
    if (show_progress_) std::fprintf(stderr, "\n");
    std::vector<RunSummary> summaries;
    const double wall = seconds_since(started);
    if (profile_path) {
      write_profile(profile_path, counter, wall, t, true);
      profiler.enable(false);
    } else if (counts_path) {
      write_profile(counts_path, counter, wall, t, false);
    }
    std::string failures;
    for (EnsembleMember& m : members_) finished_.push_back(std::move(m));
    members_.clear();
    std::sort(finished_.begin(), finished_.end(),  // in the order of the configs
              [](const EnsembleMember& a, const EnsembleMember& b) { return a.index < b.index; });
    for (EnsembleMember& m : finished_) {
      if (!m.failure.empty()) {
        failures += (failures.empty() ? "" : "\n") + m.failure;
        continue;
      }
      const EvalResult eval = evaluate<Net>(m.final_params, *m.setup.task, m.config.seed, m.batch,
                                            float(m.config.bias));
      summaries.push_back(write_run_summary(m.run_dir, m.setup, m.history, *m.done_at,
                                            m.wall + m.history.wall_offset, eval));
    }
    if (!failures.empty()) throw Error(failures);  // the others are summarised
    return summaries;
  }

 private:
  static constexpr std::int64_t kProfileWarmup = 5;

  static AdamWConfig adamw_config(const TrainConfig& c) {
    return {c.beta1, c.beta2, 1e-8, c.weight_decay, c.max_grad_norm};
  }

  // Whether to drop the finished members from the device ensemble now: once they are a quarter
  // of it or more. A finished member is frozen (learning rate 0) but would otherwise still cost
  // its forward and backward every step until the last member finishes (in a sweep whose runs
  // mostly stop early, most of the work). EMERGENT_DEVICE_COMPACT=0 keeps them.
  bool compacts() const {
    const int E = int(members_.size()), live = running();
    return compacting_ && live > 0 && 4 * (E - live) >= E;
  }
  static bool compacting_wanted() {
    const char* compact = std::getenv("EMERGENT_DEVICE_COMPACT");
    return !(compact && std::string(compact) == "0");
  }

  // A new device ensemble of the members still training, each with its parameters, AdamW moments
  // and update count, in the same layout (batch_, length_; weights per token if they were), so
  // that every sum of a member keeps its order: under OpenMP a member's numbers are the same bits
  // as without the compaction (test_device_trainer.cpp). The finished members, their checkpoints
  // and final parameters taken already, wait in finished_ for their summaries.
  void compact(std::vector<std::ofstream>& metrics) {
    const std::vector<float> params = copy_to_host(step_->model.params),
                             first = copy_to_host(step_->optimizer.first_moment()),
                             second = copy_to_host(step_->optimizer.second_moment());
    std::vector<float> live_params, live_first, live_second;
    std::vector<std::int64_t> updates;
    std::vector<EnsembleMember> live;
    std::vector<std::ofstream> live_metrics;
    for (std::size_t e = 0; e < members_.size(); ++e) {
      if (members_[e].done_at) {
        finished_.push_back(std::move(members_[e]));
        continue;
      }
      for (auto [from, to] : {std::pair{&params, &live_params}, std::pair{&first, &live_first},
                              std::pair{&second, &live_second}})
        to->insert(to->end(), from->begin() + e * P, from->begin() + (e + 1) * P);
      updates.push_back(step_->optimizer.steps(int(e)));
      live.push_back(std::move(members_[e]));
      live_metrics.push_back(std::move(metrics[e]));
    }
    members_ = std::move(live);
    metrics = std::move(live_metrics);
    step_.reset();
    step_.emplace(int(members_.size()), batch_, length_, adamw_config(members_[0].config),
                  decay_ranges(), device_sampler(members_, batch_, length_, padded_),
                  data_seeds(members_));
    upload_state(live_params, live_first, live_second);
    for (std::size_t e = 0; e < updates.size(); ++e) step_->optimizer.set_steps(int(e), updates[e]);
    set_task_weights();
    sample_held_out_sets();
  }

  // The members, their configs checked (each alone, then that they form one ensemble).
  static std::vector<EnsembleMember> make_members(const std::vector<TrainConfig>& configs,
                                                  const std::vector<std::filesystem::path>& dirs) {
    require(!configs.empty() && configs.size() == dirs.size(), "EnsembleTrainer",
            "need one run folder per member");
    // A member is named by its run folder (its config.json is written only once it binds).
    std::vector<std::string> where;
    for (std::size_t e = 0; e < dirs.size(); ++e)
      where.push_back("member " + std::to_string(e) + "'s config (run folder " + dirs[e].string() +
                      ")");
    std::vector<EnsembleMember> members;
    for (std::size_t e = 0; e < configs.size(); ++e) {
      const TrainConfig& c = configs[e];
      validate(c);
      require(c.mixer == Net::Mixer::name, where[e],
              "field 'mixer' is " + c.mixer + ", not the compiled ensemble's " +
                  std::string(Net::Mixer::name));
      require(c.shape == S, where[e], "shape does not match the compiled ensemble");
      EnsembleMember m;
      m.config = c;
      m.run_dir = dirs[e];
      m.setup = with_emergence_source(make_task(c, where[e]), c);
      m.batch = sequences_per_step(c);
      m.length = m.setup.task->length();
      m.snapshot_steps = attention_snapshot_steps(c.save_attention_at, where[e]);
      m.schedule = {c.lr, c.warmup_steps, parse_schedule_kind(c.schedule), c.steps, c.min_lr_ratio};
      m.index = int(e);
      members.push_back(std::move(m));
    }
    require_one_ensemble(configs, where);
    return members;
  }

  // The device's sampler of the members' tasks when every member's is a linear map, or every
  // member's an automaton, else none (their batches are made on the host). Padded members sample
  // their own batch of their own length into the ensemble's [batch, length] (which, once the
  // longest have finished and left it, may be longer than any member's: compact()).
  static std::optional<DeviceSampler> device_sampler(const std::vector<EnsembleMember>& members,
                                                     int batch, int length, bool padded) {
    const std::vector<int> batches = padded ? own_batches(members) : std::vector<int>();
    if (auto maps = tasks_of<LinearMap>(members)) return DeviceLinearMap(*maps, batches, length);
    if (auto automata = tasks_of<CellularAutomaton>(members))
      return DeviceCellularAutomaton(*automata, batch, batches, length);
    return std::nullopt;
  }
  // Each member's own sequences a step (EnsembleMember::batch), in the ensemble's order.
  static std::vector<int> own_batches(const std::vector<EnsembleMember>& members) {
    std::vector<int> batches;
    for (const EnsembleMember& m : members) batches.push_back(m.batch);
    return batches;
  }
  template <class Task>
  static std::optional<std::vector<const Task*>> tasks_of(
      const std::vector<EnsembleMember>& members) {
    std::vector<const Task*> tasks;
    for (const EnsembleMember& m : members) {
      const auto* adapter = dynamic_cast<const TaskAdapter<Task>*>(m.setup.task.get());
      if (!adapter) return std::nullopt;
      tasks.push_back(&adapter->task());
    }
    return tasks;
  }
  static std::vector<std::uint64_t> data_seeds(const std::vector<EnsembleMember>& members) {
    std::vector<std::uint64_t> seeds;
    for (const EnsembleMember& m : members) seeds.push_back(m.config.seed);
    return seeds;
  }
  static void append(std::vector<float>& to, const std::vector<float>& values) {
    to.insert(to.end(), values.begin(), values.end());
  }

  // Whether member m's step `step` logs, checkpoints or is its last.
  static bool records(const EnsembleMember& m, std::int64_t step) {
    return step % m.config.log_every == 0 || (step + 1) % m.config.checkpoint_every == 0 ||
           step + 1 == m.config.steps || snapshot(m, step);
  }
  // Whether member m's step `step` is a logged row with the attention analysis, as the CPU's.
  static bool analysed(const EnsembleMember& m, std::int64_t step) {
    return step % m.config.log_every == 0 && step % m.config.analysis_every == 0;
  }
  static bool snapshot(const EnsembleMember& m, std::int64_t step) {
    return std::binary_search(m.snapshot_steps.begin(), m.snapshot_steps.end(), step);
  }
  // One member's batch-averaged maps [layer][head * T * T], as analyse_patterns takes them.
  std::vector<std::vector<double>> by_layer(std::span<const double> map) const {
    std::vector<std::vector<double>> layers;
    const std::size_t per_layer = map.size() / S.layers;
    for (int l = 0; l < S.layers; ++l)
      layers.emplace_back(map.begin() + l * per_layer, map.begin() + (l + 1) * per_layer);
    return layers;
  }
  // Whether a running member evaluates on its held-out set at the ensemble's step t.
  bool evaluates(std::int64_t t) const {
    for (const EnsembleMember& m : members_) {
      const std::int64_t step = m.start + t;
      if (!m.done_at && m.config.eval_every > 0 && step % m.config.eval_every == 0 &&
          step % m.config.log_every == 0)
        return true;
    }
    return false;
  }
  // Each member's fixed held-out batches, as the CPU's held_out_losses samples them (batch b is
  // the data stream of step kEvalStep + b), for the largest eval_batches of the members.
  void sample_held_out_sets() {
    held_batches_.clear(), held_inputs_.clear(), held_targets_.clear(), held_weights_.clear();
    int most = 0;
    for (const EnsembleMember& m : members_) {
      held_batches_.push_back(m.config.eval_every > 0 ? m.config.eval_batches : 1);
      if (m.config.eval_every > 0) most = std::max(most, m.config.eval_batches);
    }
    const std::size_t one = std::size_t(batch_) * length_;
    for (int b = 0; b < most; ++b) {
      std::vector<std::int32_t>& in = held_inputs_.emplace_back(members_.size() * one);
      std::vector<std::int32_t>& out = held_targets_.emplace_back(in.size());
      for (std::size_t e = 0; e < members_.size(); ++e)
        sample_member(int(e), kEvalStep + std::uint64_t(b), in, out);
      if (sequence_tasks_) {  // this batch's weights and bias patterns, computed once
        held_weights_.push_back(weights_);
        upload_sequence_weights(in, out, {}, held_weights_.back(), false);
      }
    }
  }

  // Loss weights (full and the held-out part's), [E, T] or per token [E, B, T], and bias
  // patterns, [E, T, T] or per sequence [E, B, T, T]: those of the batch trained on, and of each
  // held-out batch.
  struct TaskWeights {
    std::vector<float> full, predictable, patterns;
  };

  // Each member's task: its loss weights, the weights of its held-out part (the report's
  // predictable_name columns) and its bias pattern and strength, [E, ...] each. With a task whose
  // weights and target are per sequence (Dyck) among them, or members of different lengths or
  // batches (padded to the most of each: their padding has weight 0), the weights are per token
  // ([E, B, T]: cuda/cross_entropy.cuh), a fixed task's rows repeated for each of its own
  // sequences, the others' rewritten for every batch (upload_sequence_weights); the patterns are
  // per sequence ([E, B, T, T]) only if such a task is biased, else one per member in the corner.
  void set_task_weights() {
    const std::size_t B = batch_, T = length_, TT = T * T;
    targets_.clear(), strengths_.clear(), weights_ = {};
    sequence_tasks_ = std::any_of(members_.begin(), members_.end(), [](const EnsembleMember& m) {
      return m.setup.task->weights_per_sequence();
    });
    per_token_ = per_token_ || padded_ || sequence_tasks_;  // once per token, kept (compact)
    // patterns per sequence only for a biased member whose target moves with the sequence (else
    // one per member, the member's in the corner of the ensemble's [T, T])
    sequence_patterns_ = std::any_of(members_.begin(), members_.end(), [](const EnsembleMember& m) {
      return m.config.bias != 0 && m.setup.task->weights_per_sequence();
    });
    for (const EnsembleMember& m : members_) {
      const SequenceTask& task = *m.setup.task;
      const std::vector<float> full = task.full_loss_weights(),
                               part = task.predictable_loss_weights(),
                               pattern = task.attention_target();
      targets_.push_back(pattern);
      strengths_.push_back(float(m.config.bias));
      if (!per_token_) {  // one row per member; every member has this length
        append(weights_.full, full);
        append(weights_.predictable, part);
        append(weights_.patterns, pattern.empty() ? std::vector<float>(TT, 0.0f) : pattern);
        continue;
      }
      // empty for a task with weights per sequence: its rows come with each batch
      const std::size_t rows = task.weights_per_sequence() ? 0 : std::size_t(m.batch);
      std::vector<float> block(B * T, 0.0f), part_block(block.size(), 0.0f);
      for (std::size_t b = 0; b < rows; ++b) {
        std::copy(full.begin(), full.end(), block.begin() + b * T);
        std::copy(part.begin(), part.end(), part_block.begin() + b * T);
      }
      append(weights_.full, block);
      append(weights_.predictable, part_block);
      std::vector<float> patterns(sequence_patterns_ ? B * TT : TT, 0.0f);
      if (!pattern.empty())
        for (std::size_t b = 0; b < (sequence_patterns_ ? rows : 1); ++b)
          place<float>(pattern, 1, m.length, m.length, patterns, b * TT, T);
      append(weights_.patterns, patterns);
    }
    if (per_token_) step_->model.set_weights_per_token();
    if (padded_) step_->model.set_member_batches(own_batches(members_));
    copy_to_device<float>(weights_.full, step_->model.loss_weights);
    copy_to_device<float>(weights_.predictable, predictable_);
    step_->model.set_bias(weights_.patterns, strengths_);  // also unbiased: the strengths say off
  }

  // Copies `count` blocks of `rows` x `width` values (one after another in `from`) into `to` from
  // `at` on, block i at at + i * stride^2 (`stride` = the ensemble's length), row r at + r *
  // stride: a member's tokens, weights or [T_e, T_e] patterns into the ensemble's padded layout.
  template <class Value>
  static void place(std::span<const Value> from, std::size_t count, std::size_t rows,
                    std::size_t width, std::span<Value> to, std::size_t at, std::size_t stride) {
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t r = 0; r < rows; ++r)
        std::copy_n(from.begin() + (i * rows + r) * width, width,
                    to.begin() + at + i * stride * stride + r * stride);
  }

  // The inverse of place(): the `count` blocks of `rows` x `width` values that place() would have
  // put into `from` at `at`, one after another (a member's own tokens or maps, without padding).
  template <class Value>
  static std::vector<Value> unplace(std::span<const Value> from, std::size_t count,
                                    std::size_t rows, std::size_t width, std::size_t at,
                                    std::size_t stride) {
    std::vector<Value> out(count * rows * width);
    for (std::size_t i = 0; i < count; ++i)
      for (std::size_t r = 0; r < rows; ++r)
        std::copy_n(from.begin() + at + i * stride * stride + r * stride, width,
                    out.begin() + (i * rows + r) * width);
    return out;
  }

  // Member e's batch of data step `data_step` into its rows of inputs, targets [E, B, T]: its own
  // sequences and length, its padding left as it is (tokens 0, weight 0).
  void sample_member(int e, std::uint64_t data_step, std::span<std::int32_t> inputs,
                     std::span<std::int32_t> targets) const {
    const EnsembleMember& m = members_[e];
    const std::size_t one = std::size_t(batch_) * length_, own = std::size_t(m.batch) * m.length;
    if (!padded_) {
      m.setup.task->sample(m.config.seed, data_step, batch_, inputs.subspan(e * one, one),
                           targets.subspan(e * one, one));
      return;
    }
    std::vector<std::int32_t> in(own), out(own);
    m.setup.task->sample(m.config.seed, data_step, m.batch, in, out);
    place<std::int32_t>(in, 1, m.batch, m.length, inputs, e * one, length_);
    place<std::int32_t>(out, 1, m.batch, m.length, targets, e * one, length_);
  }
  // Member e's own sequences of a batch [E, B, T], without the padding: [B_e, T_e].
  std::vector<std::int32_t> own_tokens(int e, std::span<const std::int32_t> tokens) const {
    const EnsembleMember& m = members_[e];
    return unplace<std::int32_t>(tokens, 1, m.batch, m.length, std::size_t(e) * batch_ * length_,
                                 length_);
  }

  // For the members whose task has weights per sequence, the weights (and where its bias or its
  // analysis reads it, the attention target) of the batch `inputs`, `targets` [E, B, T] written
  // into their rows of `into`; `into` uploaded as the step's (the bias patterns only if a member
  // is biased). `running`: only the members not done (a step; a held-out batch has them all).
  void upload_sequence_weights(std::span<const std::int32_t> inputs,
                               std::span<const std::int32_t> targets,
                               std::span<const std::int64_t> steps, TaskWeights& into,
                               bool running) {
    const std::size_t T = length_, one = std::size_t(batch_) * T;
    for (std::size_t e = 0; e < members_.size(); ++e) {
      EnsembleMember& m = members_[e];
      const SequenceTask& task = *m.setup.task;
      if (!task.weights_per_sequence() || (running && m.done_at)) continue;
      const std::vector<std::int32_t> in = own_tokens(int(e), inputs),
                                      out = own_tokens(int(e), targets);
      std::vector<float> full(in.size()), part(in.size());
      task.sequence_weights(in, out, m.batch, full, part);
      place<float>(full, 1, m.batch, m.length, into.full, e * one, T);
      place<float>(part, 1, m.batch, m.length, into.predictable, e * one, T);
      const bool analysis = running && analysed(m, steps[e]);
      if (m.config.bias == 0 && !analysis) continue;
      std::vector<float> target(in.size() * m.length);
      task.sequence_attention_targets(in, out, m.batch, target);
      if (m.config.bias != 0)
        place<float>(target, m.batch, m.length, m.length, into.patterns, e * one * T, T);
      if (running) targets_[e] = std::move(target);
    }
    upload(into);
  }
  void upload(const TaskWeights& weights) {
    copy_to_device<float>(weights.full, step_->model.loss_weights);
    copy_to_device<float>(weights.predictable, predictable_);
    if (sequence_patterns_) step_->model.set_bias(weights.patterns, strengths_);
  }

  // Member e's batch-averaged maps [layer][head][T][T] (the device's, over its own sequences)
  // at its own length: [layer][head][T_e][T_e], the corner its positions hold.
  std::vector<double> own_positions(std::size_t e, std::span<const double> map) const {
    if (map.empty()) return {};
    const std::size_t own = members_[e].length;
    return unplace<double>(map, std::size_t(S.layers) * S.heads, own, own, 0, length_);
  }
  // Member e's attention of the last forward, each layer's [B_e, H, T_e, T_e] (its own
  // sequences and positions), out of every sequence's [E, B, H, T, T] (sequence_attention()).
  std::vector<std::vector<float>> member_attention(
      std::size_t e, const std::vector<std::vector<float>>& sequence_maps) const {
    const EnsembleMember& m = members_[e];
    const std::size_t H = S.heads, T = length_;
    std::vector<std::vector<float>> layers;
    for (const std::vector<float>& all : sequence_maps)
      layers.push_back(
          unplace<float>(all, m.batch * H, m.length, m.length, e * batch_ * H * T * T, T));
    return layers;
  }

  // Member e's attention analysis of the step just reported: of its batch-averaged maps `map`,
  // or for a task with targets per sequence, of each sequence's map (analysis/
  // attention_summary.hpp's analyse_sequences, as the CPU run reads them).
  AttentionAnalysis analyse_member(std::size_t e, std::span<const double> map,
                                   const std::vector<std::vector<float>>& sequence_maps) const {
    const EnsembleMember& m = members_[e];
    const SequenceTask& task = *m.setup.task;
    if (!task.weights_per_sequence())
      return analyse_patterns(by_layer(map), S.heads, m.length, task, targets_[e]);
    const std::vector<std::vector<float>> own = member_attention(e, sequence_maps);
    const std::size_t per_sequence = std::size_t(S.heads) * m.length * m.length;
    return analyse_sequences(S.layers, S.heads, m.length, m.batch, targets_[e],
                             [&](int l, int b) { return own[l].data() + b * per_sequence; });
  }

  static int most(const std::vector<EnsembleMember>& members, int EnsembleMember::*field) {
    int n = 0;
    for (const EnsembleMember& m : members) n = std::max(n, m.*field);
    return n;
  }

  // Member e is done after `steps_done` steps (its last step, or its early stop): its checkpoint
  // of that step (unless written already) and its final parameters; from now on it is frozen.
  void finish(int e, std::int64_t steps_done) {
    EnsembleMember& m = members_[e];
    if (m.saved_step != steps_done) save(e, steps_done);
    m.final_params = copy_to_host(step_->model.params, std::size_t(e) * P, P);
    m.done_at = steps_done;
    m.wall = seconds_since(started_);
  }

  // The most steps a member has left.
  std::int64_t longest() const {
    std::int64_t most = 0;
    for (const EnsembleMember& m : members_) most = std::max(most, m.config.steps - m.start);
    return most;
  }

  // A member whose loss or gradient norm was not finite at a step since the last check stops
  // there, as the CPU run does: summary.json records why ("stopped"), and it gets no later row or
  // checkpoint (its last good one stays). The other members train on; run() then fails naming it.
  void stop_nonfinite(const std::vector<MemberReport>& report) {
    for (std::size_t e = 0; e < members_.size(); ++e) {
      const MemberReport& r = report[e];
      EnsembleMember& m = members_[e];
      if (!r.nonfinite_step || (m.done_at && *r.nonfinite_step >= *m.done_at)) continue;
      const auto last = latest_checkpoint(m.run_dir);
      const std::string reason = "training stopped at step " + std::to_string(*r.nonfinite_step) +
                                 ": the loss is " + std::to_string(r.nonfinite_loss) +
                                 " and the gradient norm " + std::to_string(r.nonfinite_norm);
      write_text_atomically(
          m.run_dir / "summary.json",
          nlohmann::json{{"stopped", reason},
                         {"step", *r.nonfinite_step},
                         {"last_checkpoint", last ? nlohmann::json(last->filename().string())
                                                  : nlohmann::json(nullptr)}}
                  .dump(2) +
              "\n");
      m.failure = m.run_dir.string() + ": " + reason + ". " +
                  (last ? "The last good checkpoint is " + last->filename().string()
                        : std::string("No checkpoint was written")) +
                  "; a smaller lr may avoid it";
      m.done_at = *r.nonfinite_step;
    }
  }

  // What the steps asked of the device (device_counts()), kept apart for the steps that log or
  // checkpoint (their copies to the host are by design) and the others.
  struct StepCounter {
    DeviceCounts at, plain, logging;
    std::int64_t plain_steps = 0, logging_steps = 0;
    void begin() { at = device_counts(); }
    void end(bool logs) {
      const DeviceCounts now = device_counts();
      DeviceCounts& into = logs ? logging : plain;
      into.launches += now.launches - at.launches;
      into.gemms += now.gemms - at.gemms;
      into.syncs += now.syncs - at.syncs;
      into.uploads += now.uploads - at.uploads;
      ++(logs ? logging_steps : plain_steps);
    }
  };

  void write_profile(const char* path, const StepCounter& counter, double wall, std::int64_t steps,
                     bool ops) const {
    const OpProfiler& profiler = OpProfiler::instance();
    char line[512];
    std::string text;
    std::snprintf(line, sizeof line,
                  "device %s (%s, %s): %zu members, batch %d, length %d, %lld steps in %.3f s "
                  "(%.3f ms/step%s)\n",
                  ops ? "profile" : "counts", kDeviceSystem, precision_name(gemm_precision()),
                  members_.size(), batch_, length_, (long long)steps, wall,
                  1e3 * wall / double(std::max<std::int64_t>(steps, 1)),
                  ops ? ", with the profiler's own synchronisation each step" : "");
    text += line;
    if (ops) {
      std::snprintf(line, sizeof line, "ops over the last %lld steps:\n",
                    (long long)profiler.steps());
      text += line;
      text += profiler.table();
    }
    if (step_->graph_launches() > 0) {
      std::snprintf(line, sizeof line,
                    "each step's device part is one CUDA graph of %lld launches\n",
                    (long long)step_->graph_launches());
      text += line;
    }
    auto per = [&](const char* what, const DeviceCounts& c, std::int64_t n) {
      const double d = double(std::max<std::int64_t>(n, 1));
      std::snprintf(line, sizeof line,
                    "%s steps (%lld): per step %.1f launches (%.1f GEMMs), %.1f host "
                    "synchronisations, %.1f uploads\n",
                    what, (long long)n, double(c.launches) / d, double(c.gemms) / d,
                    double(c.syncs) / d, double(c.uploads) / d);
      text += line;
    };
    per("plain", counter.plain, counter.plain_steps);
    per("logging or checkpoint", counter.logging, counter.logging_steps);
    std::fputs(text.c_str(), stderr);
    std::ofstream out(path);
    out << text;
    require(out.good(), path, "cannot write the device profile");
  }

  static std::vector<DecayRange> decay_ranges() {
    std::vector<DecayRange> ranges;
    for (const ParameterTensor& t : Net::tensors())
      ranges.push_back({t.offset, t.size, t.weight_decay});
    return ranges;
  }
  static double seconds_since(std::chrono::steady_clock::time_point a) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  }
  int running() const {
    int n = 0;
    for (const EnsembleMember& m : members_) n += !m.done_at;
    return n;
  }

  // Each member starts from its own latest checkpoint (its parameters, both AdamW moments and
  // its update count), or, without one, from its seed's initialisation at step 0, over which a
  // stage (init_from) takes its source's tensors as the CPU trainer does. A member that is
  // finished already (its steps done, or its early stop fired) is done there.
  void prepare() {
    const std::vector<ParameterTensor> tensors = Net::tensors();
    const std::size_t E = members_.size();
    std::vector<float> all(P * E), m1(all.size()), m2(all.size());
    for (std::size_t e = 0; e < E; ++e) {
      EnsembleMember& m = members_[e];
      const std::span<float> p = std::span(all).subspan(e * P, P);
      const auto latest = latest_checkpoint(m.run_dir);
      if (!latest) {  // a new run
        Net::init(p, m.config.seed);
        if (!m.config.init_from.empty())
          m.init_record =
              take_init_source(m.config.init_from, m.config.init_take, m.config.seed, tensors, p);
        std::filesystem::remove(m.run_dir / "metrics.jsonl");
        m.history = RunHistory{};
        m.history.set_init_source(m.init_record);
        m.start = 0;
        step_->optimizer.set_steps(int(e), 0);
      } else {
        const CheckpointState state = load_checkpoint(
            *latest, tensors, p, std::span(m1).subspan(e * P, P), std::span(m2).subspan(e * P, P));
        m.start = m.saved_step = state.step;
        m.history = RunHistory::resume(m.run_dir, state.step, m.setup.thresholds.metric);
        step_->optimizer.set_steps(int(e), state.optimizer_steps);
      }
      if (m.start >= m.config.steps || m.history.stopped_below(m.config.stop_below)) {
        m.done_at = m.start;
        m.final_params.assign(p.begin(), p.end());
      }
    }
    upload_state(all, m1, m2);
    if (show_progress_)
      for (const EnsembleMember& m : members_)
        if (m.start > 0)
          std::fprintf(stderr, "%s: resuming from step %lld\n", m.run_dir.c_str(),
                       (long long)m.start);
  }

  // Every member's parameters and both AdamW moments, [E, P] each, onto the device.
  void upload_state(const std::vector<float>& params, const std::vector<float>& first,
                    const std::vector<float>& second) {
    copy_to_device<float>(params, step_->model.params);
    copy_to_device<float>(first, step_->optimizer.first_moment());
    copy_to_device<float>(second, step_->optimizer.second_moment());
  }

  // Member e's checkpoint after `step` updates.
  void save(int e, std::int64_t step) {
    const std::size_t at = std::size_t(e) * P;
    const std::vector<float> p = copy_to_host(step_->model.params, at, P),
                             m1 = copy_to_host(step_->optimizer.first_moment(), at, P),
                             m2 = copy_to_host(step_->optimizer.second_moment(), at, P);
    save_checkpoint(checkpoint_path(members_[e].run_dir, step), Net::tensors(), p, m1, m2,
                    {step, step_->optimizer.steps(e), members_[e].config_text});
    members_[e].saved_step = step;
  }

  bool show_progress_;
  std::chrono::steady_clock::time_point started_;
  std::vector<EnsembleMember> members_;
  int batch_, length_;  // the most sequences and positions of a member
  bool padded_;         // members of different lengths or batches, padded to those
  std::optional<EnsembleStep<MixerT, S, ChannelT>> step_;  // anew when it compacts
  std::vector<EnsembleMember> finished_;                   // members compacted away
  bool compacting_ = compacting_wanted();                  // unless EMERGENT_DEVICE_COMPACT=0
  // each member's attention target: its task's [T, T], or, with targets per sequence, the
  // [B, T, T] of the batch last analysed or biased
  std::vector<std::vector<float>> targets_;
  // with weights per token; with a task whose weights and target are per sequence; with bias
  // patterns per sequence
  bool per_token_ = false, sequence_tasks_ = false, sequence_patterns_ = false;
  TaskWeights weights_;
  std::vector<TaskWeights> held_weights_;
  std::vector<float> strengths_;  // [E] the bias strengths
  DeviceVector<float> predictable_;
  // the held-out sets: batch b of every member [E, B, T]; each member's batch count
  std::vector<std::vector<std::int32_t>> held_inputs_, held_targets_;
  std::vector<int> held_batches_;
};

}  // namespace emergent::cuda
