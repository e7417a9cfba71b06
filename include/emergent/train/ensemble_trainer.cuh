// Trains the seeds of one configuration as one ensemble on the device (cuda/model.cuh), each
// seed into its own run folder, written exactly as the CPU's RunTrainer (train/trainer.hpp)
// writes one: config.json (that seed's), metrics.jsonl, step_NNNNNN.safetensors checkpoints with
// the CPU's tensor names and both AdamW moments, summary.json. So a run started here resumes on
// the CPU and the other way round, and a sweep reads either.
//
// Differences, by design:
//   - the members resume together: each must have a checkpoint at the step the ensemble resumes
//     from (the earliest latest one);
//   - metrics rows carry no attention entropy or IoU (summary.json's held-out eval does, from
//     the CPU forward of the final parameters), and save_attention_at and eval_every are not
//     supported;
//   - a member whose early stop (stop_below) fires is checkpointed and summarised there; the
//     ensemble runs on until every member has stopped or reached `steps`.
// The linear map's batches are made on the device (cuda/linear_map.cuh); other tasks' on the
// host by the task itself, from the same Philox streams, and copied.
#pragma once

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <emergent/cuda/adamw.cuh>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/linear_map.cuh>
#include <emergent/cuda/model.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/step.cuh>
#include <emergent/optim/schedule.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/compiled_model.hpp>
#include <emergent/train/config.hpp>
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

// The run folder of one seed of an ensemble.
struct EnsembleMember {
  TrainConfig config;
  std::filesystem::path run_dir;
  std::string config_text;
  nlohmann::json changed_on_resume;  // what a resume changed, for the next metrics row
  std::int64_t saved_step = -1;      // the step of the checkpoint written last
  RunHistory history;
  std::unique_ptr<RunLock> lock;
  std::optional<std::int64_t> stopped_at;  // the step its early stop fired (steps done)
  std::vector<float> final_params;         // when stopped early
};

template <template <Shape, class> class MixerT, Shape S>
class EnsembleTrainer {
 public:
  using Device = EnsembleModel<MixerT, S>;
  using Net = typename Device::Cpu;
  static constexpr std::size_t P = Device::P;

  // One member per seed, into run_dirs[i]; base.seed is replaced by each seed.
  EnsembleTrainer(const TrainConfig& base, const std::vector<std::uint64_t>& seeds,
                  const std::vector<std::filesystem::path>& run_dirs, bool show_progress)
      : base_(base),
        setup_(make_task(base)),
        batch_(std::max(1, base.batch_tokens / (setup_.task->length() + 1))),
        show_progress_(show_progress),
        step_(int(seeds.size()), batch_, setup_.task->length(),
              {base.beta1, base.beta2, 1e-8, base.weight_decay, base.max_grad_norm}, decay_ranges(),
              float(base.bias), linear_map(*setup_.task), seeds) {
    validate(base);
    require(base.mixer == Net::Mixer::name, "config",
            "field 'mixer' is " + base.mixer + ", not the compiled ensemble's " +
                std::string(Net::Mixer::name));
    require(base.shape == S, "config", "shape does not match the compiled ensemble");
    require(base.save_attention_at.empty(), "config",
            "field 'save_attention_at' is not supported on the device backend: leave it empty, or "
            "train with --backend cpu");
    require(base.eval_every == 0, "config",
            "field 'eval_every' is not supported on the device backend: leave it 0, or train with "
            "--backend cpu");
    require(!setup_.task->weights_per_sequence(), "config",
            "task " + base.task +
                " has loss weights per sequence, not supported on the device "
                "backend yet: train it with --backend cpu");
    require(base.init_from.empty(), "config",
            "field 'init_from' is not supported on the device backend yet: leave it empty, or "
            "train the stage with --backend cpu");
    require(!seeds.empty() && seeds.size() == run_dirs.size(), "EnsembleTrainer",
            "need one run folder per seed");
    for (std::size_t e = 0; e < seeds.size(); ++e) {
      EnsembleMember m;
      m.config = base;
      m.config.seed = seeds[e];
      m.run_dir = run_dirs[e];
      members_.push_back(std::move(m));
    }
  }

  std::vector<RunSummary> run() {
    if (base_.threads > 0) set_thread_count(base_.threads);
    const SequenceTask& task = *setup_.task;
    const int E = int(members_.size()), B = batch_, T = task.length();
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
    const std::int64_t start = prepare();
    const std::vector<float> target = task.attention_target();
    copy_to_device<float>(task.full_loss_weights(), step_.model.loss_weights);
    copy_to_device<float>(target, step_.model.bias_pattern);
    DeviceVector<float> predictable;
    copy_to_device<float>(task.predictable_loss_weights(), predictable);
    std::vector<std::uint64_t> seeds;
    for (const EnsembleMember& m : members_) seeds.push_back(m.config.seed);
    const bool device_data = linear_map(task) != nullptr;
    std::vector<std::int32_t> inputs(std::size_t(E) * B * T), targets(inputs.size());
    const LrSchedule schedule{base_.lr, base_.warmup_steps, parse_schedule_kind(base_.schedule),
                              base_.steps, base_.min_lr_ratio};
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
    const auto started = std::chrono::steady_clock::now();
    auto last_progress = started;
    std::int64_t step = start;
    for (; step < base_.steps && running() > 0; ++step) {
      counter.begin();
      const double lr = schedule.at(step);
      if (!device_data) {
        OpScope scope("data.sample_host");
        for (int e = 0; e < E; ++e)
          task.sample(seeds[e], std::uint64_t(step), B,
                      std::span(inputs).subspan(std::size_t(e) * B * T, std::size_t(B) * T),
                      std::span(targets).subspan(std::size_t(e) * B * T, std::size_t(B) * T));
        step_.upload_batch(inputs, targets);
      }
      step_.run(step, lr);  // returns at once: the device runs on
      const bool logs = step % base_.log_every == 0,
                 checkpoints = (step + 1) % base_.checkpoint_every == 0;
      if (logs || checkpoints) {  // the host waits here, and only here
        const std::vector<MemberReport> report = step_.report(predictable);
        check_finite(report);
        const std::string& name = setup_.predictable_name;
        for (int e = 0; e < E && logs; ++e) {
          EnsembleMember& m = members_[e];
          if (m.stopped_at) continue;
          const MemberReport& r = report[e];
          nlohmann::json row =
              metrics_row(step, r.loss, name, r.part_loss, r.part_accuracy, lr, r.gradient_norm,
                          seconds_since(started) + m.history.wall_offset);
          if (!m.changed_on_resume.empty())  // the first row after a resume that extended it
            row["changed_on_resume"] = std::exchange(m.changed_on_resume, nlohmann::json::object());
          append_metrics_row(metrics[e], m.run_dir, row);
          m.history.add(step, row.at(setup_.thresholds.metric).get<double>(), r.loss);
          if (m.history.stopped_below(m.config.stop_below)) {
            m.stopped_at = step + 1;
            save(e, step + 1);
            m.final_params = copy_to_host(step_.model.params, std::size_t(e) * P, P);
          }
        }
        if (checkpoints)
          for (int e = 0; e < E; ++e)
            if (!members_[e].stopped_at) save(e, step + 1);
      }
      counter.end(logs || checkpoints);
      if (profile_path) {
        profiler.finish_step();
        // cuBLAS's first calls and first allocations are not a step's
        if (step == start + kProfileWarmup - 1) profiler.reset();
      }
      if (show_progress_ && seconds_since(last_progress) > 1.0) {
        last_progress = std::chrono::steady_clock::now();
        const double rate = double(step + 1 - start) / std::max(seconds_since(started), 1e-9);
        std::fprintf(stderr,
                     "\rensemble of %d seeds (%s)  step %lld/%lld  %.0f steps/s  %.0f tok/s   ", E,
                     kDeviceSystem, (long long)(step + 1), (long long)base_.steps, rate,
                     rate * E * B * (T + 1));
      }
    }
    if (show_progress_) std::fprintf(stderr, "\n");
    if (step > start) check_finite(step_.report(predictable));  // the steps since the last check
    std::vector<RunSummary> summaries;
    const double wall = seconds_since(started);
    if (profile_path) {
      write_profile(profile_path, counter, wall, step - start, true);
      profiler.enable(false);
    } else if (counts_path) {
      write_profile(counts_path, counter, wall, step - start, false);
    }
    for (int e = 0; e < E; ++e) {
      EnsembleMember& m = members_[e];
      std::vector<float> params = m.final_params;
      if (!m.stopped_at) {
        // The last step's checkpoint, unless the loop just wrote it (each is written once).
        if (m.saved_step != step && (step > start || !latest_checkpoint(m.run_dir))) save(e, step);
        params = copy_to_host(step_.model.params, std::size_t(e) * P, P);
      }
      const EvalResult eval = evaluate<Net>(params, task, m.config.seed, B, float(base_.bias));
      summaries.push_back(write_run_summary(m.run_dir, setup_, m.history,
                                            m.stopped_at.value_or(step),
                                            wall + m.history.wall_offset, eval));
    }
    return summaries;
  }

 private:
  static constexpr std::int64_t kProfileWarmup = 5;

  // The task when its batches are made on the device (the linear map), else null.
  static const LinearMap* linear_map(const SequenceTask& task) {
    const auto* adapter = dynamic_cast<const TaskAdapter<LinearMap>*>(&task);
    return adapter ? &adapter->task() : nullptr;
  }

  // Throws, as the CPU trainer does, for the first member (not stopped before it) whose loss or
  // gradient norm was not finite at a step since the last check.
  void check_finite(const std::vector<MemberReport>& report) const {
    for (std::size_t e = 0; e < members_.size(); ++e) {
      const MemberReport& r = report[e];
      const EnsembleMember& m = members_[e];
      if (r.nonfinite_step && (!m.stopped_at || *r.nonfinite_step < *m.stopped_at))
        throw Error(m.run_dir.string() + ": training stopped at step " +
                    std::to_string(*r.nonfinite_step) + ": the loss is " +
                    std::to_string(r.nonfinite_loss) + " and the gradient norm " +
                    std::to_string(r.nonfinite_norm) + "; a smaller lr may avoid it");
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
                  members_.size(), batch_, setup_.task->length(), (long long)steps, wall,
                  1e3 * wall / double(std::max<std::int64_t>(steps, 1)),
                  ops ? ", with the profiler's own synchronisation each step" : "");
    text += line;
    if (ops) {
      std::snprintf(line, sizeof line, "ops over the last %lld steps:\n",
                    (long long)profiler.steps());
      text += line;
      text += profiler.table();
    }
    if (step_.graph_launches() > 0) {
      std::snprintf(line, sizeof line,
                    "each step's device part is one CUDA graph of %lld launches\n",
                    (long long)step_.graph_launches());
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
    for (const EnsembleMember& m : members_) n += !m.stopped_at;
    return n;
  }

  // New members are initialised; resumed ones load their checkpoint of the step the ensemble
  // resumes from, the earliest latest checkpoint of the members that have not stopped early (a
  // member that has is finished, and keeps its own). Returns that step.
  std::int64_t prepare() {
    const std::vector<ParameterTensor> tensors = Net::tensors();
    std::vector<float> all(P * members_.size()), m1(all.size()), m2(all.size());
    std::optional<std::int64_t> start;
    for (std::size_t e = 0; e < members_.size(); ++e) {
      EnsembleMember& m = members_[e];
      const auto latest = latest_checkpoint(m.run_dir);
      if (!latest) {
        start = 0;
        continue;
      }
      const std::int64_t at = *checkpoint_step(latest->filename().string());
      m.history = RunHistory::resume(m.run_dir, at, setup_.thresholds.metric);
      if (m.history.stopped_below(m.config.stop_below)) {
        m.stopped_at = at;
        m.final_params.resize(P);
        load_parameters(SafetensorsFile(*latest), tensors, m.final_params);
      } else {
        start = start ? std::min(*start, at) : at;
      }
    }
    std::optional<std::int64_t> optimizer_steps;
    for (std::size_t e = 0; e < members_.size(); ++e) {
      EnsembleMember& m = members_[e];
      if (m.stopped_at) continue;
      const std::span<float> p = std::span(all).subspan(e * P, P);
      const auto path = checkpoint_path(m.run_dir, *start);
      if (!latest_checkpoint(m.run_dir)) {  // a new run (the ensemble starts at 0)
        Net::init(p, m.config.seed);
        std::filesystem::remove(m.run_dir / "metrics.jsonl");
        m.history = RunHistory{};
        optimizer_steps = 0;
        continue;
      }
      require(std::filesystem::exists(path), m.run_dir.string(),
              "has no checkpoint of step " + std::to_string(*start) +
                  ", where the other seeds of the ensemble resume; an ensemble resumes from one "
                  "step: train this seed alone (--backend cpu), or remove its later checkpoints");
      const CheckpointState state = load_checkpoint(
          path, tensors, p, std::span(m1).subspan(e * P, P), std::span(m2).subspan(e * P, P));
      require(!optimizer_steps || *optimizer_steps == state.optimizer_steps, path.string(),
              "its optimizer step count differs from the other seeds' at the same step");
      optimizer_steps = state.optimizer_steps;
      m.history = RunHistory::resume(m.run_dir, state.step, setup_.thresholds.metric);
    }
    copy_to_device<float>(all, step_.model.params);
    copy_to_device<float>(m1, step_.optimizer.first_moment());
    copy_to_device<float>(m2, step_.optimizer.second_moment());
    step_.optimizer.set_steps(optimizer_steps.value_or(0));
    if (show_progress_ && start.value_or(0) > 0)
      std::fprintf(stderr, "resuming an ensemble of %zu seeds from step %lld\n", members_.size(),
                   (long long)*start);
    return start.value_or(base_.steps);  // every member finished: nothing to run
  }

  // Member e's checkpoint after `step` updates.
  void save(int e, std::int64_t step) {
    const std::size_t at = std::size_t(e) * P;
    const std::vector<float> p = copy_to_host(step_.model.params, at, P),
                             m1 = copy_to_host(step_.optimizer.first_moment(), at, P),
                             m2 = copy_to_host(step_.optimizer.second_moment(), at, P);
    save_checkpoint(checkpoint_path(members_[e].run_dir, step), Net::tensors(), p, m1, m2,
                    {step, step_.optimizer.steps(), members_[e].config_text});
    members_[e].saved_step = step;
  }

  TrainConfig base_;
  TaskSetup setup_;
  int batch_;
  bool show_progress_;
  EnsembleStep<MixerT, S> step_;
  std::vector<EnsembleMember> members_;
};

}  // namespace emergent::cuda
