// Where a sweep folder stands: runs done (a row holds them), running (their run-folder lock is
// held), left (and of those, started), and the mean wall time of the finished ones.
#pragma once

#include <cstddef>
#include <emergent/experiment/sweep_folder.hpp>
#include <emergent/io/json.hpp>
#include <emergent/train/run_lock.hpp>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace emergent {

struct SweepStatus {
  std::size_t total = 0, finished = 0, left = 0, started = 0;
  std::vector<std::string> running;  // "id {label}"
  double seconds_per_run = 0;        // over the finished runs with a summary; 0 if none
  std::string ignored_text;          // rows ignored, as collected_rows says
};

inline SweepStatus sweep_status(const std::filesystem::path& dir) {
  const nlohmann::json plan = read_sweep_plan(dir);
  const CollectedRows collected = collected_rows(dir, plan["runs"]);
  const std::set<std::string> done = collected.done_ids();
  SweepStatus s;
  s.total = plan["runs"].size();
  s.ignored_text = collected.ignored_text();
  double seconds = 0;
  int timed = 0;
  for (const nlohmann::json& run : plan["runs"]) {
    const std::string id = run["id"];
    const std::filesystem::path run_dir = dir / "runs" / id;
    if (done.count(id)) {
      ++s.finished;
      if (std::filesystem::exists(run_dir / "summary.json")) {
        seconds += read_json_file(run_dir / "summary.json").value("wall_s", 0.0);
        ++timed;
      }
    } else if (RunLock::held(run_dir)) {
      s.running.push_back(id + " {" + run["label"].get<std::string>() + "}");
    } else {
      ++s.left;
      s.started += std::filesystem::exists(run_dir / "metrics.jsonl") ? 1 : 0;
    }
  }
  if (timed > 0) s.seconds_per_run = seconds / timed;
  return s;
}

}  // namespace emergent
