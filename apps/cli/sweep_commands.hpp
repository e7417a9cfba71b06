// `emergent sweep`: a grid of runs from a sweep file (experiment/sweep_file.hpp) into a folder.
//   emergent sweep FILE --out DIR [--jobs N] [--shard I/N] [--quiet]
//   emergent sweep FILE --out DIR --backend cuda    the runs train as mixed device ensembles
//                  [--max-members N]               (thrust-omp: on the CPU), as many per
//                                                  ensemble as the device's memory allows
//   emergent sweep FILE --out DIR --extend         add the runs of an extended FILE to DIR's sweep
//   emergent sweep FILE --dry-run                  the runs, checked; nothing started
//   emergent sweep FILE --compile-only [--backend B] [--jobs N] [--shard I/N]
//                                                  the programs its runs need that the build
//                                                  lacks (shapes not prebuilt), N at a time
//   emergent sweep status DIR                 done, running and left, with an ETA
//   emergent sweep collect DIR                every shard's rows, once each, into DIR/results.jsonl
//   emergent sweep summarize DIR --by S,s [--json F]    seed-ensemble statistics per group, and
//                                                      the log-rank test across all the groups
//
// DIR/sweep.json               the resolved runs in sweep order: id, label, config; the folder is
//                              bound to them (experiment/sweep_folder.hpp): another file is
//                              refused, rows of other ids are ignored
// DIR/runs/<id>/               one run folder each (train/trainer.hpp), trained by a child
//                              `emergent train --config DIR/runs/<id>/config.json` process
// DIR/rows/shard-I-of-N.jsonl  a result row per finished run, appended as it finishes
//
// Nothing is lost or done twice: a run is done when some rows file holds its id; a restart
// skips those and resumes the others from their checkpoints (bit-identical, runs being
// deterministic for a given thread count, which is part of their config: 1 unless the file sets
// `threads`). A child dies with its sweep (PR_SET_PDEATHSIG), so `kill -9` of the sweep leaves
// no orphan training, and the run-folder lock refuses a second trainer of the same run.
#pragma once

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <emergent/experiment/result_rows.hpp>
#include <emergent/experiment/run_id.hpp>
#include <emergent/experiment/shard.hpp>
#include <emergent/experiment/sweep_file.hpp>
#include <emergent/experiment/sweep_folder.hpp>
#include <emergent/experiment/sweep_plan.hpp>
#include <emergent/experiment/sweep_status.hpp>
#include <emergent/experiment/sweep_summary.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/ensemble_members.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/run_lock.hpp>
#include <emergent/train/self_pretraining_config.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "device_backend.hpp"
#include "train_commands.hpp"

namespace emergent::cli {

inline std::string duration_text(double seconds) {
  char text[32];
  if (seconds < 120)
    std::snprintf(text, sizeof text, "%.0fs", seconds);
  else if (seconds < 7200)
    std::snprintf(text, sizeof text, "%.0fm%02.0fs", std::floor(seconds / 60),
                  std::fmod(seconds, 60));
  else
    std::snprintf(text, sizeof text, "%.1fh", seconds / 3600);
  return text;
}

inline int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

class SweepCommands {
 public:
  // compiler_info: shape_compiler.json, for device programs of shapes not prebuilt.
  explicit SweepCommands(CLI::App& app, std::filesystem::path compiler_info = {})
      : compiler_info_(std::move(compiler_info)) {
    sweep_ = app.add_subcommand(
        "sweep", "run a grid of runs from a sweep file into a folder (resumable, shardable)");
    sweep_->add_option("file", file_, "sweep file (.toml or .json)");
    sweep_->add_option("--out", out_, "sweep folder");
    sweep_
        ->add_option("--jobs", jobs_,
                     "runs at a time (default: cores / threads per run); with --compile-only or "
                     "a device backend, compiles at a time")
        ->check(CLI::Range(1, kMaxJobs));
    sweep_->add_option("--shard", shard_,
                       "I/N: run only this share (default: the Slurm array task's, else 0/1)");
    sweep_->add_flag("--quiet", quiet_, "no progress line");
    sweep_
        ->add_option("--backend", backend_,
                     "cpu (one process per run), or cuda / thrust-omp: the runs in mixed device "
                     "ensembles (runs that share the shape, batch and optimiser settings, "
                     "whatever their task parameters, seeds, schedules and biases), one ensemble "
                     "at a time")
        ->check(CLI::IsMember(kBackends))
        ->capture_default_str();
    sweep_
        ->add_option("--max-members", max_members_,
                     "device backends: at most N runs per ensemble (default: as many as 80% of "
                     "the device's memory holds, by train/memory_estimate.hpp)")
        ->check(CLI::Range(1, 1 << 20));
    sweep_->add_flag("--extend", extend_,
                     "the file adds runs to the folder's sweep (it may not drop or change one)");
    sweep_->add_flag("--dry-run", dry_run_,
                     "check the file and list its runs (id and settings); start and write nothing");
    sweep_->add_flag("--compile-only", compile_only_,
                     "compile the programs the runs need for --backend that the build lacks "
                     "(shapes not prebuilt; cached for the sweep), --jobs at a time (default: "
                     "cores, one per 4 GiB of memory), and train nothing");
    status_ = sweep_->add_subcommand("status",
                                     "done, running and left runs of a sweep folder, with an ETA");
    collect_ = sweep_->add_subcommand("collect", "merge every shard's rows into DIR/results.jsonl");
    summarize_ = sweep_->add_subcommand(
        "summarize",
        "seed-ensemble statistics of the finished runs, per group; with two groups or more, the "
        "log-rank test of their emergence steps (one test across all the groups, every "
        "combination of the --by fields being one group)");
    for (CLI::App* command : {status_, collect_, summarize_})
      command->add_option("dir", dir_, "sweep folder")->required();
    summarize_->add_option("--by", by_, "config fields to group by, e.g. S,s")->delimiter(',');
    summarize_->add_option("--json", json_, "also write the groups as JSON to this file");
  }

  bool selected() const { return sweep_->parsed(); }

  int run() const {
    if (status_->parsed()) return status();
    if (collect_->parsed()) return collect();
    if (summarize_->parsed()) return summarize();
    require(!file_.empty(), "emergent sweep", "needs a sweep FILE");
    if (dry_run_) return list_runs();
    if (compile_only_) return compile_only();
    require(!out_.empty(), "emergent sweep", "needs --out DIR (or --dry-run)");
    return run_sweep();
  }

 private:
  int list_runs() const {
    const std::vector<PlannedRun> runs = plan_sweep(file_, resolve_max_len);
    for (const PlannedRun& r : runs) std::printf("%s  %s\n", r.id.c_str(), r.label.c_str());
    std::printf("%s: %zu runs, every one checked\n", file_.c_str(), runs.size());
    return 0;
  }

  // A program a sweep needs: its path, or why it could not be compiled.
  struct Program {
    std::filesystem::path path;
    std::string error;
  };

  // The program that trains runs of (mixer, shape) on the sweep's backend, for the shapes the
  // build lacks: compiled (or taken from the cache, shape_compiler.hpp) here, `jobs` at a time,
  // each once, so that a sweep over many shapes (Fig. 6's 42) waits for the slowest compile
  // rather than for their sum. By describe(mixer, shape); on the CPU backend, a prebuilt shape
  // has none (the run uses the build's own registry).
  std::map<std::string, Program> compile_programs(const std::vector<TrainConfig>& configs) const {
    std::map<std::string, Program> programs;
    std::vector<std::pair<std::string, const TrainConfig*>> todo;
    for (const TrainConfig& c : configs) {
      const std::string key = describe(c.mixer, c.shape);
      if (backend_ == "cpu" && find_compiled(c.mixer, c.shape)) continue;
      if (programs.emplace(key, Program{}).second) todo.emplace_back(key, &c);
    }
    std::atomic<std::size_t> next{0};
    const auto worker = [&] {
      for (std::size_t i; (i = next++) < todo.size();) {
        const TrainConfig& c = *todo[i].second;
        Program& program = programs.at(todo[i].first);  // the map's nodes stay where they are
        try {
          program.path = backend_ == "cpu"
                             ? compiled_shape_program(compiler_info_, c.mixer, c.shape)
                             : device_program(backend_, c.mixer, c.shape, compiler_info_);
        } catch (const std::exception& e) {
          program.error = e.what();
        }
      }
    };
    std::vector<std::thread> pool;
    for (int j = 0; j < std::min<int>(compile_jobs(), int(todo.size())); ++j)
      pool.emplace_back(worker);
    for (std::thread& t : pool) t.join();
    return programs;
  }

  // Compiles at a time: --jobs, else the cores, at most one per 4 GiB of memory (a unit of the
  // device program takes up to 3 GB in nvcc or g++).
  int compile_jobs() const {
    if (jobs_ > 0) return jobs_;
    const double per_compile = 4.0 * (1 << 30);
    return std::max(1, std::min(available_cores(), int(machine_memory_bytes() / per_compile)));
  }

  static std::vector<TrainConfig> training_configs(const std::vector<const PlannedRun*>& runs) {
    std::vector<TrainConfig> configs;
    for (const PlannedRun* r : runs)
      if (!is_self_pretraining(r->config) && !is_language_model(r->config))
        configs.push_back(train_config_from_json(r->config, "run " + r->id));
    return configs;
  }

  // --shard, else the Slurm array task's, else all (0/1).
  Shard chosen_shard() const {
    return shard_.empty() ? shard_from_environment() : parse_shard(shard_, "--shard");
  }

  int compile_only() const {
    const std::vector<PlannedRun> runs = plan_sweep(file_, resolve_max_len);
    const Shard shard = chosen_shard();
    std::vector<const PlannedRun*> mine;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (shard.owns(i)) mine.push_back(&runs[i]);
    const std::map<std::string, Program> programs = compile_programs(training_configs(mine));
    std::size_t failed = 0;
    for (const auto& [what, program] : programs)
      if (!program.error.empty())
        ++failed, std::fprintf(stderr, "sweep: %s\n", program.error.c_str());
    std::fprintf(stderr, "sweep %s: %zu programs for --backend %s ready, %zu failed\n",
                 file_.c_str(), programs.size() - failed, backend_.c_str(), failed);
    return failed > 0 ? 1 : 0;
  }

  int run_sweep() const {
    const std::filesystem::path dir = out_;
    const std::vector<PlannedRun> runs = plan_sweep(file_, resolve_max_len);
    const Shard shard = chosen_shard();
    for (const std::filesystem::path& folder : {dir, dir / "rows", dir / "runs"}) {
      std::error_code error;
      std::filesystem::create_directories(folder, error);
      require(!error && std::filesystem::is_directory(folder), "--out " + out_,
              folder.string() + " cannot be a folder (" +
                  (error ? error.message() : std::string("a file is in the way")) + ")");
    }
    const nlohmann::json plan = sweep_plan_json(file_, runs);
    bind_sweep_folder(dir, plan, extend_);

    const CollectedRows collected = collected_rows(dir, plan["runs"]);
    const std::set<std::string> done = collected.done_ids();
    std::vector<const PlannedRun*> todo;
    std::size_t mine = 0;
    for (std::size_t i = 0; i < runs.size(); ++i)
      if (shard.owns(i)) {
        ++mine;
        if (!done.count(runs[i].id)) todo.push_back(&runs[i]);
      }
    int threads = 1;
    for (const PlannedRun& r : runs) threads = std::max(threads, r.config.at("threads").get<int>());
    const int jobs = jobs_ > 0 ? jobs_ : std::max(1, available_cores() / threads);
    const std::string how =
        backend_ == "cpu" ? std::to_string(jobs) + " at a time" : "mixed ensembles on " + backend_;
    std::fprintf(stderr, "sweep %s: %zu runs, %zu in %s, %zu of them to run, %s%s\n", file_.c_str(),
                 runs.size(), mine, shard.name().c_str(), todo.size(), how.c_str(),
                 collected.ignored_text().c_str());

    char self[4096] = {};
    const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
    require(n > 0, "/proc/self/exe", "cannot find this program to start runs");
    const std::filesystem::path rows_file = dir / "rows" / (shard.name() + ".jsonl");
    for (const PlannedRun* r : todo)
      require(r->config.value("precision", "fp32") == "fp32" || backend_ == "cuda",
              "run " + r->id + " {" + r->label + "}",
              "precision tf32 is the CUDA device backend's: run the sweep with --backend cuda");
    if (backend_ != "cpu") return run_ensembles(dir, todo, rows_file);
    std::atomic<std::size_t> next{0}, finished{0}, failed{0}, running{0};
    std::mutex mutex;
    double finished_seconds = 0;
    std::vector<std::string> failures;
    const auto started = std::chrono::steady_clock::now();
    const auto worker = [&] {
      for (std::size_t i; (i = next++) < todo.size();) {
        const PlannedRun& r = *todo[i];
        ++running;
        const auto run_started = std::chrono::steady_clock::now();
        std::string error;
        try {
          const nlohmann::json row = run_one(self, dir, r);
          std::lock_guard lock(mutex);
          append_row(rows_file, row);
        } catch (const std::exception& e) {
          error = e.what();
        }
        --running;
        std::lock_guard lock(mutex);
        if (error.empty()) {
          ++finished;
          finished_seconds +=
              std::chrono::duration<double>(std::chrono::steady_clock::now() - run_started).count();
        } else {
          ++failed;
          failures.push_back(error);
          std::fprintf(stderr, "\nsweep: %s\n", error.c_str());
        }
      }
    };
    std::vector<std::thread> pool;
    for (int j = 0; j < std::min<int>(jobs, static_cast<int>(todo.size())); ++j)
      pool.emplace_back(worker);
    for (int tick = 1; finished + failed < todo.size(); ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (quiet_ || tick % 5 != 0) continue;  // a progress line every second
      std::lock_guard lock(mutex);
      const std::size_t complete = finished.load();
      const double per_run = complete ? finished_seconds / double(complete) : 0;
      const std::size_t left = todo.size() - complete - failed;
      std::fprintf(
          stderr, "\rsweep: %zu/%zu done, %zu running, %zu left, %zu failed, %s elapsed, ETA %s   ",
          mine - todo.size() + complete, mine, running.load(), left - running, failed.load(),
          duration_text(
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count())
              .c_str(),
          complete
              ? duration_text(per_run * double(left) /
                              double(std::max<std::size_t>(1, std::min<std::size_t>(jobs, left))))
                    .c_str()
              : "?");
    }
    for (std::thread& t : pool) t.join();
    if (!quiet_) std::fprintf(stderr, "\n");
    std::fprintf(stderr, "sweep: %zu of %zu runs of %s done, %zu failed\n",
                 mine - todo.size() + finished, mine, shard.name().c_str(), failed.load());
    return failed > 0 ? 1 : 0;
  }

  // Trains one run in a child process and returns its result row.
  static nlohmann::json run_one(const char* self, const std::filesystem::path& dir,
                                const PlannedRun& r) {
    const std::filesystem::path run_dir = dir / "runs" / r.id;
    std::filesystem::create_directories(run_dir);
    require_planned_config(run_dir, r);
    if (!std::filesystem::exists(run_dir / "config.json"))
      write_text_atomically(run_dir / "config.json", r.config.dump(2) + "\n");
    const std::string config = (run_dir / "config.json").string(), out = run_dir.string(),
                      log = (run_dir / "train.log").string();
    const char* command = is_self_pretraining(r.config) ? "spt"
                          : is_language_model(r.config) ? "lm"
                                                        : "train";
    run_child(self, {command, "--config", config, "--out", out, "--quiet"}, log,
              "run " + r.id + " {" + r.label + "}");
    return result_row(r, run_dir);
  }

  // `program args...` in a child that dies with this process; throws (naming `what`, the log and
  // the child's last line of output, its reason) unless it exits 0. The child writes to a pipe
  // and this process appends what it reads to `log`, so that the reason survives even where
  // the log cannot be written (a full disk): then the error says so too.
  static void run_child(const std::string& program, const std::vector<std::string>& args,
                        const std::string& log, const std::string& what) {
    std::vector<std::string> all = {program};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    int output[2];
    require(::pipe2(output, O_CLOEXEC) == 0, what,
            std::string("cannot start a training process: ") + std::strerror(errno));
    const pid_t parent = ::getpid();
    const pid_t pid = ::fork();
    if (pid < 0) ::close(output[0]), ::close(output[1]);
    require(pid >= 0, what, "cannot start a training process");
    if (pid == 0) {  // only async-signal-safe calls until exec
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(1);
      ::dup2(output[1], 1), ::dup2(output[1], 2);  // dup2's copies stay open across exec
      ::execv(program.c_str(), argv.data());
      ::_exit(127);
    }
    ::close(output[1]);
    const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    std::string log_error = log_fd < 0 ? std::strerror(errno) : "";
    std::string tail;  // the output's last 4 KiB
    char buffer[4096];
    for (;;) {
      const ssize_t n = ::read(output[0], buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      if (log_fd >= 0 && log_error.empty() &&
          write_until_error(log_fd, buffer, static_cast<std::size_t>(n)) <
              static_cast<std::size_t>(n))
        log_error = std::strerror(errno);
      tail.append(buffer, static_cast<std::size_t>(n));
      if (tail.size() > 4096) tail.erase(0, tail.size() - 4096);
    }
    ::close(output[0]);
    if (log_fd >= 0 && ::close(log_fd) != 0 && log_error.empty()) log_error = std::strerror(errno);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    const std::string reason = last_line(tail);
    throw Error(what + ": " +
                (WIFEXITED(status)
                     ? "failed with exit status " + std::to_string(WEXITSTATUS(status))
                     : "was killed by signal " + std::to_string(WTERMSIG(status))) +
                (reason.empty() ? std::string() : " (" + reason + ")") + "; its log: " + log +
                (log_error.empty() ? std::string() : " (not written: " + log_error + ")"));
  }

  // The last non-empty line of `text` (lines end with '\n' or a progress line's '\r').
  static std::string last_line(const std::string& text) {
    const std::size_t end = text.find_last_not_of("\r\n ");
    if (end == std::string::npos) return "";
    const std::size_t newline = text.find_last_of("\r\n", end);
    const std::size_t begin = newline == std::string::npos ? 0 : newline + 1;
    return text.substr(begin, end + 1 - begin);
  }

  // --backend cuda|thrust-omp: the runs to do are packed into mixed ensembles
  // (experiment/sweep_plan.hpp's ensemble_groups), each trained as one
  // (build/emergent_ensemble_<backend>, train/ensemble_trainer.cuh) into the runs' own folders,
  // one ensemble at a time (one device). An ensemble holds as many runs as 80% of the device's
  // memory holds by the estimate (train/memory_estimate.hpp; the program's --memory says how
  // much it has), or --max-members; a run too large for the device alone is refused by the
  // program in one line, and the sweep goes on with the others. The programs of the shapes the
  // build lacks are compiled first, all at once (compile_programs). Rows as for the CPU.
  int run_ensembles(const std::filesystem::path& dir, const std::vector<const PlannedRun*>& todo,
                    const std::filesystem::path& rows_file) const {
    for (const PlannedRun* r : todo) {
      const std::string where = "run " + r->id + " {" + r->label + "}";
      require(!is_self_pretraining(r->config) && !is_language_model(r->config), where,
              "self-pretraining and language-model runs train with --backend cpu only");
    }
    const double memory = device_memory(ensemble_program(backend_), dir);
    const auto max_members = [&](const TrainConfig& config) {
      const double each = estimated_training_bytes(config, 1);
      std::size_t n = memory > 0 ? std::size_t(0.8 * memory / each) : std::size_t(1) << 20;
      if (max_members_ > 0) n = std::min<std::size_t>(n, max_members_);
      return std::max<std::size_t>(n, 1);
    };
    const std::vector<std::vector<const PlannedRun*>> groups = ensemble_groups(todo, max_members);
    const std::map<std::string, Program> programs = compile_programs(training_configs(todo));
    std::size_t finished = 0, failed = 0;
    for (const std::vector<const PlannedRun*>& group : groups) {
      std::string configs, run_dirs;
      for (const PlannedRun* r : group) {
        const std::filesystem::path run_dir = dir / "runs" / r->id;
        std::filesystem::create_directories(run_dir);
        const std::filesystem::path config = run_dir / "ensemble-config.json";
        write_text_atomically(config, r->config.dump(2) + "\n");
        if (!configs.empty()) configs += ',', run_dirs += ',';
        configs += config.string();
        run_dirs += run_dir.string();
      }
      const std::filesystem::path first = dir / "runs" / group.front()->id;
      const std::string what = "ensemble of " + std::to_string(group.size()) + " runs from {" +
                               group.front()->label + "}";
      if (!quiet_) std::fprintf(stderr, "sweep: an %s\n", what.c_str());
      // A member whose loss is not finite stops alone (train/ensemble_trainer.cuh): the
      // ensemble fails, but the members it summarised in this attempt are done.
      const auto started = std::filesystem::file_time_type::clock::now();
      try {
        const TrainConfig config = train_config_from_json(group.front()->config, what);
        const Program& program = programs.at(describe(config.mixer, config.shape));
        if (!program.error.empty()) throw Error(program.error);
        run_child(program.path.string(), {"--configs", configs, "--run-dirs", run_dirs, "--quiet"},
                  (first / "ensemble.log").string(), what);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "sweep: %s\n", e.what());
      }
      for (const PlannedRun* r : group) {
        const std::filesystem::path summary = dir / "runs" / r->id / "summary.json";
        std::error_code error;
        const bool fresh = std::filesystem::exists(summary) &&
                           std::filesystem::last_write_time(summary, error) >= started && !error &&
                           !read_json_file(summary).contains("stopped");
        if (fresh) append_row(rows_file, result_row(*r, dir / "runs" / r->id));
        ++(fresh ? finished : failed);
      }
    }
    std::fprintf(stderr, "sweep: %zu runs done in %zu ensembles on %s, %zu failed\n", finished,
                 groups.size(), backend_.c_str(), failed);
    return failed > 0 ? 1 : 0;
  }

  // The bytes an ensemble may take on the backend's device (its program's --memory; 0: unknown).
  static double device_memory(const std::filesystem::path& program,
                              const std::filesystem::path& dir) {
    const std::filesystem::path log = dir / "device-memory.txt";
    run_child(program.string(), {"--memory"}, log.string(), program.string() + " --memory");
    std::ifstream in(log);
    double bytes = 0;
    return in >> bytes ? bytes : 0.0;
  }

  int status() const {
    const std::filesystem::path dir = dir_;
    const SweepStatus s = sweep_status(dir);
    std::printf("%s: %zu runs: %zu done, %zu running, %zu left (%zu of them started)%s\n",
                dir.c_str(), s.total, s.finished, s.running.size(), s.left, s.started,
                s.ignored_text.c_str());
    for (const std::string& r : s.running) std::printf("  running %s\n", r.c_str());
    if (s.seconds_per_run > 0 && s.finished < s.total) {
      const double concurrency = std::max<double>(1, double(s.running.size()));
      std::printf("ETA %s (%.1f s per finished run, %zu at a time%s)\n",
                  duration_text(s.seconds_per_run * double(s.left + s.running.size()) / concurrency)
                      .c_str(),
                  s.seconds_per_run, std::max<std::size_t>(1, s.running.size()),
                  s.running.empty() ? ", none running now" : "");
    }
    return 0;
  }

  int collect() const {
    const std::filesystem::path dir = dir_;
    const nlohmann::json plan = read_sweep_plan(dir);
    const CollectedRows collected = collected_rows(dir, plan["runs"]);
    std::string text;
    for (const nlohmann::json& row : collected.rows) text += row.dump() + "\n";
    write_text_atomically(dir / "results.jsonl", text);
    std::printf("%s: %zu rows of %zu runs%s\n", (dir / "results.jsonl").c_str(),
                collected.rows.size(), plan["runs"].size(), collected.ignored_text().c_str());
    return 0;
  }

  int summarize() const {
    const std::filesystem::path dir = dir_;
    const nlohmann::json plan = read_sweep_plan(dir);
    const CollectedRows collected = collected_rows(dir, plan["runs"]);
    const std::vector<nlohmann::json>& rows = collected.rows;
    require(!rows.empty(), dir.string(), "has no finished runs yet" + collected.ignored_text());
    nlohmann::json older_defaults = nlohmann::json::object();  // for rows lacking these settings
    for (const Parameter& p : training_parameters())
      if (p.added_later) older_defaults[p.name] = p.default_value;
    const nlohmann::json groups = summarize_rows(rows, by_, dir.string(), older_defaults);
    std::printf("%zu finished runs of %zu%s\n%s", rows.size(), plan["runs"].size(),
                collected.ignored_text().c_str(), summary_table(groups).c_str());
    if (!json_.empty()) write_text_atomically(json_, groups.dump(2) + "\n");
    return 0;
  }

  CLI::App *sweep_ = nullptr, *status_ = nullptr, *collect_ = nullptr, *summarize_ = nullptr;
  std::string file_, out_, shard_, dir_, json_, backend_ = "cpu";
  std::size_t max_members_ = 0;  // 0: as memory allows
  std::filesystem::path compiler_info_;
  std::vector<std::string> by_;
  static constexpr int kMaxJobs = 4096;
  int jobs_ = 0;  // 0: cores / threads per run
  bool dry_run_ = false, extend_ = false, compile_only_ = false;
  bool quiet_ = false;
};

}  // namespace emergent::cli
