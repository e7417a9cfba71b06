// A sweep folder bound to its resolved sweep. DIR/sweep.json holds the runs a sweep file expands
// to (id, label, config, in sweep order) and `runs_hash`, the SHA-256 of their ids in that
// order. A sweep started on the folder with a file that expands to other runs (an edited file,
// another file) is refused, naming what differs; `--extend` accepts a file that keeps every run
// of the folder's sweep and adds others, and never one that drops or changes a run. The check
// and the write happen under an exclusive lock of DIR/.sweep.lock, so two shards starting
// together, or a second sweep started on a running one, see one sweep.json.
//
// Result rows (DIR/rows/*.jsonl, experiment/result_rows.hpp) count only when their id is a run
// of sweep.json: status, collect and summarize say how many others they ignored.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <emergent/core/error.hpp>
#include <emergent/experiment/result_rows.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/sha256.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/train/run_binding.hpp>
#include <emergent/train/run_lock.hpp>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

// The SHA-256 of the runs' ids in order: a sweep's identity.
inline std::string sweep_runs_hash(const nlohmann::json& runs) {
  Sha256 hash;
  for (const nlohmann::json& run : runs) hash.update(run.at("id").get<std::string>() + "\n");
  return hash.hex_digest();
}

// An exclusive lock of DIR/.sweep.lock while it lives (waits for another holder).
class SweepFolderLock {
 public:
  explicit SweepFolderLock(const std::filesystem::path& dir) {
    const std::filesystem::path path = dir / ".sweep.lock";
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    require(fd_ >= 0, path.string(), std::string("cannot open: ") + std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0)
      require(errno == EINTR, path.string(), std::string("cannot lock: ") + std::strerror(errno));
  }
  ~SweepFolderLock() { ::close(fd_); }
  SweepFolderLock(const SweepFolderLock&) = delete;
  SweepFolderLock& operator=(const SweepFolderLock&) = delete;

 private:
  int fd_ = -1;
};

inline nlohmann::json read_sweep_plan(const std::filesystem::path& dir) {
  require(std::filesystem::exists(dir / "sweep.json"), dir.string(),
          "is not a sweep folder (no sweep.json); start it with `emergent sweep FILE --out DIR`");
  nlohmann::json plan = read_json_file(dir / "sweep.json");
  const std::string where = (dir / "sweep.json").string();
  require(plan.is_object() && plan.contains("runs") && plan["runs"].is_array(), where,
          "field 'runs' (a list) is missing");
  for (const nlohmann::json& run : plan["runs"])
    require(run.is_object() && run.contains("id") && run["id"].is_string() &&
                run.contains("label") && run.contains("config") && run["config"].is_object(),
            where, "a run lacks its id, label or config");
  return plan;
}

namespace sweep_folder_detail {
inline std::string run_text(const nlohmann::json& run) {
  return run.at("id").get<std::string>() + " {" + run.at("label").get<std::string>() + "}";
}
// "2 runs: a {S=4}, b {S=8}" (at most 3 named).
inline std::string runs_text(const std::vector<const nlohmann::json*>& runs) {
  std::string text = std::to_string(runs.size()) + (runs.size() == 1 ? " run: " : " runs: ");
  for (std::size_t i = 0; i < runs.size() && i < 3; ++i)
    text += (i ? ", " : "") + run_text(*runs[i]);
  return text + (runs.size() > 3 ? ", ..." : "");
}
}  // namespace sweep_folder_detail

// Writes DIR/sweep.json for `plan` ({"sweep_file", "runs"}), or checks that the folder's is the
// same sweep (or, with `extend`, one that `plan` only adds runs to). See the top of this file.
inline void bind_sweep_folder(const std::filesystem::path& dir, nlohmann::json plan, bool extend) {
  using sweep_folder_detail::runs_text;
  plan["runs_hash"] = sweep_runs_hash(plan.at("runs"));
  const SweepFolderLock lock(dir);
  const std::filesystem::path path = dir / "sweep.json";
  if (std::filesystem::exists(path)) {
    const nlohmann::json held = read_sweep_plan(dir);
    if (sweep_runs_hash(held["runs"]) == plan["runs_hash"]) return;  // the same sweep
    std::set<std::string> held_ids, new_ids;
    for (const nlohmann::json& run : held["runs"]) held_ids.insert(run["id"].get<std::string>());
    for (const nlohmann::json& run : plan["runs"]) new_ids.insert(run["id"].get<std::string>());
    std::vector<const nlohmann::json*> dropped, added;
    for (const nlohmann::json& run : held["runs"])
      if (!new_ids.count(run["id"].get<std::string>())) dropped.push_back(&run);
    for (const nlohmann::json& run : plan["runs"])
      if (!held_ids.count(run["id"].get<std::string>())) added.push_back(&run);
    const std::string file = plan.value("sweep_file", std::string("the sweep file"));
    const std::string held_file = held.value("sweep_file", std::string("?"));
    if (!extend || !dropped.empty()) {
      std::string what = "this folder holds the sweep of " + held_file + " (" +
                         std::to_string(held["runs"].size()) + " runs); " + file + " expands to " +
                         std::to_string(plan["runs"].size()) + " runs";
      if (!dropped.empty()) what += ", without " + runs_text(dropped);
      if (!added.empty()) what += ", with " + runs_text(added) + " not in it";
      if (!dropped.empty() && !added.empty())  // name the settings of the first changed run
        what += " (first changed run: " +
                config_differences(
                    {{"sweep.json", dropped[0]->at("config")}, {file, added[0]->at("config")}}) +
                ")";
      throw Error(path.string() + ": " + what +
                  (extend ? ". --extend only adds runs: it never drops or changes one"
                          : ". Use another --out, or --extend to add runs to this sweep"));
    }
    for (const nlohmann::json& run : held["runs"])
      require(!RunLock::held(dir / "runs" / run["id"].get<std::string>()), path.string(),
              "run " + sweep_folder_detail::run_text(run) +
                  " is training now: extend the sweep when no shard of it runs");
  }
  write_text_atomically(path, plan.dump(1) + "\n");
}

// The complete rows of every shard whose id is a run of `runs`, once per id, in the order of
// `runs`; `ignored` counts the rows of other ids. Two different rows for one id are an error.
struct CollectedRows {
  std::vector<nlohmann::json> rows;
  std::size_t ignored = 0;

  // The ids that have a row: the runs done.
  std::set<std::string> done_ids() const {
    std::set<std::string> done;
    for (const nlohmann::json& row : rows) done.insert(row.at("id").get<std::string>());
    return done;
  }

  std::string ignored_text() const {
    return ignored == 0 ? std::string()
                        : " (" + std::to_string(ignored) + (ignored == 1 ? " row" : " rows") +
                              " ignored: not runs of this sweep)";
  }
};

inline CollectedRows collected_rows(const std::filesystem::path& dir, const nlohmann::json& runs) {
  std::map<std::string, const nlohmann::json*> planned;  // id -> the sweep's config of the run
  for (const nlohmann::json& run : runs)
    planned[run.at("id").get<std::string>()] = &run.at("config");
  CollectedRows collected;
  std::map<std::string, nlohmann::json> by_id;
  std::map<std::string, std::string> source;
  if (std::filesystem::exists(dir / "rows"))
    for (const auto& entry : std::filesystem::directory_iterator(dir / "rows")) {
      if (entry.path().extension() != ".jsonl") continue;
      std::size_t number = 0;
      for (nlohmann::json& row : read_rows(entry.path())) {
        ++number;
        require(row.is_object() && row.contains("id") && row["id"].is_string() &&
                    row.contains("config") && row["config"].is_object() && row.contains("result") &&
                    row["result"].is_object(),
                entry.path().string(),
                "row " + std::to_string(number) +
                    " is not a result row (it needs 'id', 'config' and 'result')");
        const std::string id = row.at("id").get<std::string>();
        if (!planned.count(id)) {
          ++collected.ignored;
          continue;
        }
        // A row is its run's only if it says the run's config: an edited or foreign row would
        // count other settings' results under this run's id.
        const std::string differences =
            config_differences({{"sweep.json", *planned[id]}, {"row", row.at("config")}});
        require(differences.empty(), entry.path().string(),
                "row " + std::to_string(number) + " has the id of run " + id +
                    " but another config: " + differences +
                    ". Remove the row (its run then trains again) or restore it");
        if (by_id.count(id))
          require(by_id[id] == row, entry.path().string(),
                  "run " + id + " has a different row in " + source[id] +
                      " (runs are deterministic: investigate)");
        source[id] = entry.path().string();
        by_id[id] = std::move(row);
      }
    }
  for (const nlohmann::json& run : runs) {
    const auto it = by_id.find(run.at("id").get<std::string>());
    if (it != by_id.end()) collected.rows.push_back(it->second);
  }
  return collected;
}

}  // namespace emergent
