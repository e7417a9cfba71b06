// Where a stage starts from: config "init_from" names another run, and this finds the checkpoint
// whose parameters the new run takes (train/warm_start.hpp). It may name
//   a checkpoint file       step_NNNNNN.safetensors of any run
//   a run folder            its last checkpoint; the run must be finished (finished_run_checkpoint:
//                           not being trained, its summary.json written at its latest checkpoint,
//                           not stopped on a non-finite loss)
//   a sweep folder          (sweep.json) its one run with the same seed as the new run, finished
// so that a sweep axis `init_from = ["", "runs/ppt-dyck", "runs/ppt-nca"]` gives each seed of
// the real task the pre-pretrained model of the same seed. Relative paths are relative to the
// working directory of the process. The new run records what was found (InitSource::json) in its
// first metrics row and in its summary.json (so in its sweep row): which checkpoint, which step.
#pragma once

#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/sha256.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/run_lock.hpp>
#include <emergent/train/warm_start.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace emergent {

struct InitSource {
  std::filesystem::path checkpoint;
  std::int64_t step = 0;  // updates the source had done
  std::string task;       // the source run's task, from its recorded config
  std::string sha256;     // of the checkpoint file
  nlohmann::json json() const {
    return {
        {"checkpoint", checkpoint.string()}, {"step", step}, {"task", task}, {"sha256", sha256}};
  }
};

namespace init_source_detail {
// A run is finished when no process trains it, its summary.json is written and not a stop on a
// non-finite loss, and its latest checkpoint is the step that summary.json says it ended at (a
// run being extended, or killed while it was, has a summary.json of its earlier end).
inline std::filesystem::path finished_run_checkpoint(const std::filesystem::path& run,
                                                     const std::string& where) {
  const std::filesystem::path summary_path = run / "summary.json";
  require(!RunLock::held(run), where,
          "run " + run.string() + " is being trained now (its lock is held): wait for it to end");
  require(std::filesystem::exists(summary_path), where,
          "run " + run.string() + " is not finished (no summary.json): train it first");
  const nlohmann::json summary = read_json_file(summary_path);
  require(!summary.contains("stopped"), where,
          "run " + run.string() + " stopped on a non-finite loss (its summary.json says why)");
  const auto checkpoint = latest_checkpoint(run);
  require(checkpoint.has_value(), where, "run " + run.string() + " has no checkpoint");
  const std::int64_t ended = summary.value("steps_done", std::int64_t(-1)),
                     latest = *checkpoint_step(checkpoint->filename().string());
  require(ended == latest, where,
          "run " + run.string() + " is not finished: its latest checkpoint is step " +
              std::to_string(latest) + " but its summary.json says it ended at step " +
              std::to_string(ended) +
              " (an extension under way or killed); finish it first, or name the checkpoint "
              "file itself");
  return *checkpoint;
}

}  // namespace init_source_detail

// `where` names the field in errors ("config: field 'init_from'").
inline InitSource find_init_source(const std::string& init_from, std::uint64_t seed,
                                   const std::string& where) {
  using namespace init_source_detail;
  const std::filesystem::path path(init_from);
  require(std::filesystem::exists(path), where,
          "'" + init_from +
              "' does not exist: expected a checkpoint file, a finished run folder or a sweep "
              "folder");
  InitSource source;
  if (std::filesystem::is_regular_file(path)) {
    require(checkpoint_step(path.filename().string()).has_value(), where,
            "'" + init_from + "' is not a checkpoint (step_NNNNNN.safetensors)");
    source.checkpoint = path;
  } else if (std::filesystem::exists(path / "sweep.json")) {
    const nlohmann::json plan = read_json_file(path / "sweep.json");
    std::vector<std::string> ids;
    for (const nlohmann::json& run : plan.at("runs"))
      if (run.at("config").value("seed", std::uint64_t(0)) == seed)
        ids.push_back(run.at("id").get<std::string>());
    require(ids.size() == 1, where,
            "sweep folder '" + init_from + "' holds " + std::to_string(ids.size()) +
                " runs with seed " + std::to_string(seed) +
                ": a stage needs exactly one (one source task per sweep folder)");
    source.checkpoint = finished_run_checkpoint(path / "runs" / ids.front(), where);
  } else {
    require(std::filesystem::exists(path / "config.json"), where,
            "'" + init_from + "' is neither a checkpoint, a run folder nor a sweep folder");
    source.checkpoint = finished_run_checkpoint(path, where);
  }
  const SafetensorsFile file(source.checkpoint);
  const auto& metadata = file.metadata();
  if (const auto it = metadata.find("step"); it != metadata.end())
    source.step = std::stoll(it->second);
  if (const auto it = metadata.find("config"); it != metadata.end())
    source.task = parse_json_text(it->second, source.checkpoint.string() + ": metadata 'config'")
                      .value("task", std::string());
  source.sha256 = sha256_hex(file.file_bytes());
  return source;
}

// One line for the log of a stage's start: what `record` (take_init_source's) took, from where.
inline std::string init_source_line(const nlohmann::json& record) {
  const std::size_t taken = record.at("taken").size(), fresh = record.at("fresh").size();
  std::string line = "init_from: took " + std::to_string(taken) + " of " +
                     std::to_string(taken + fresh) + " tensors of " +
                     record.at("checkpoint").get<std::string>() + " (step " +
                     std::to_string(record.at("step").get<std::int64_t>()) + ")";
  if (fresh > 0) {
    line += "; fresh:";
    for (const nlohmann::json& name : record.at("fresh")) line += " " + name.get<std::string>();
  }
  return line;
}

// A stage's start, as both trainers make it: the source that `init_from` names, its tensors
// that `init_take` selects over `params` (freshly initialised). Returns what the first metrics
// row records as "init_source": the source, and the tensors taken and left fresh.
inline nlohmann::json take_init_source(const std::string& init_from, const std::string& init_take,
                                       std::uint64_t seed,
                                       const std::vector<ParameterTensor>& tensors,
                                       std::span<float> params) {
  const InitSource source = find_init_source(init_from, seed, "config: field 'init_from'");
  const WarmStartReport report = take_parameters(SafetensorsFile(source.checkpoint), tensors,
                                                 params, init_take, "config: field 'init_take'");
  nlohmann::json record = source.json();
  record["taken"] = report.taken;
  record["fresh"] = report.fresh;
  return record;
}

}  // namespace emergent
