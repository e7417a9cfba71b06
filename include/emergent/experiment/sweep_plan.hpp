// A sweep's plan: the runs of a sweep file resolved and checked (ids, labels, configs as each
// run folder's config.json holds them), which of them are done, how they group into device
// ensembles, and a finished run's result row. The `emergent sweep` program (apps/cli/) adds the
// processes that train them; a program of one's own can plan and collect a sweep with this alone.
#pragma once

#include <algorithm>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <emergent/experiment/run_id.hpp>
#include <emergent/experiment/sweep_file.hpp>
#include <emergent/experiment/sweep_folder.hpp>
#include <emergent/io/json.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/ensemble_members.hpp>
#include <emergent/train/language_model_config.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/run_binding.hpp>
#include <emergent/train/self_pretraining_config.hpp>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace emergent {

// A run's config read from disk, resolved as plan_sweep resolves the sweep's.
inline nlohmann::json normalised_config(const nlohmann::json& config, const std::string& where) {
  if (is_self_pretraining(config)) return resolve_self_pretraining(config, where).json();
  if (is_language_model(config)) return resolve_language_model(config, where).json();
  return to_json(train_config_from_json(config, where));
}

struct PlannedRun {
  std::string id, label;
  nlohmann::json config;  // resolved, as config.json holds it
};

// The runs of a sweep file, resolved and checked (each against this machine's memory), in sweep
// order. A run's label shows the settings that differ between runs. `complete` finishes a
// training config before its id is taken: the CLI resolves max_len 0 there, as its registry of
// compiled shapes does (apps/cli/train_commands.hpp).
inline std::vector<PlannedRun> plan_sweep(const std::filesystem::path& file,
                                          const std::function<void(TrainConfig&)>& complete = {}) {
  const std::vector<SweepRun> runs = expand_sweep(read_sweep_file(file), file.string());
  std::map<std::string, std::set<std::string>> seen;
  for (const SweepRun& r : runs)
    for (const auto& [key, value] : r.settings.items()) seen[key].insert(value.dump());
  std::vector<PlannedRun> planned;
  std::set<std::string> ids;
  const double memory = machine_memory_bytes();
  for (const SweepRun& r : runs) {
    nlohmann::json settings = r.settings;
    if (!settings.contains("threads")) settings["threads"] = 1;
    std::string label;
    for (const auto& [key, value] : r.settings.items())
      if (seen[key].size() > 1 || runs.size() == 1)
        label += (label.empty() ? "" : " ") + key + "=" + value.dump();
    const std::string where = r.origin + ", run {" + label + "}";
    nlohmann::json config;
    std::string id;
    if (is_self_pretraining(settings)) {  // `emergent spt` runs (train/self_pretraining.hpp)
      config = resolve_self_pretraining(settings, where).json();
      id = run_id(config, self_pretraining_parameters());
    } else if (is_language_model(settings)) {  // `emergent lm` runs
      config = resolve_language_model(settings, where).json();
      id = run_id(config, language_model_parameters());
    } else {
      TrainConfig c = resolve_config(settings, where);
      require(c.threads > 0, where,
              "field 'threads' = 0 is not allowed in a sweep: a run's trajectory depends on its "
              "thread count, so every run names one (1 where the file leaves it out)");
      if (complete) complete(c);
      require_memory_fits(estimated_training_bytes(c), memory, "this machine's memory", where,
                          "batch_tokens and the shape");
      config = to_json(c);
      id = run_id(config, declared_parameters(c.task));
    }
    require(ids.insert(id).second, r.origin, "run {" + label + "} appears twice in the sweep");
    planned.push_back({id, label, config});
  }
  return planned;
}

// sweep.json's form of the plan (experiment/sweep_folder.hpp binds a folder to it).
inline nlohmann::json sweep_plan_json(const std::filesystem::path& file,
                                      const std::vector<PlannedRun>& runs) {
  nlohmann::json plan = {{"sweep_file", std::filesystem::absolute(file).string()},
                         {"runs", nlohmann::json::array()}};
  for (const PlannedRun& r : runs)
    plan["runs"].push_back({{"id", r.id}, {"label", r.label}, {"config", r.config}});
  return plan;
}

// A run folder's config.json, if there is one, is the sweep's run: an edited one would train
// another run under this run's id and row.
inline void require_planned_config(const std::filesystem::path& run_dir, const PlannedRun& r) {
  const std::filesystem::path path = run_dir / "config.json";
  if (!std::filesystem::exists(path)) return;
  const nlohmann::json on_disk = normalised_config(read_json_file(path), path.string());
  const std::string differences =
      config_differences({{"sweep.json", r.config}, {"config.json", on_disk}});
  require(differences.empty(), path.string(),
          "differs from the sweep's run " + r.id + " {" + r.label + "}: " + differences +
              ". Restore it (or delete the run folder to train the run anew)");
}

// The row of a finished run, from its folder's summary.json.
inline nlohmann::json result_row(const PlannedRun& r, const std::filesystem::path& run_dir) {
  nlohmann::json result = read_json_file(run_dir / "summary.json");
  result.erase("wall_s");  // rows hold what the run computed, which is deterministic
  return {{"id", r.id}, {"label", r.label}, {"config", r.config}, {"result", result}};
}

// At most this padding waste (PaddedMember::padding_waste) in an ensemble that a sweep packs: runs
// of different sequence lengths share one only where their batches are nearly the same size (the
// linear map's S = 5 and 6 at 1,024 tokens: 1.2), so a sweep over S trains each S in ensembles
// of its own, unpadded (and sampled on the device: train/ensemble_trainer.cuh), instead of every
// shorter run at the longest run's length and the most sequences (Fig. 5a's file: 4x the tokens).
inline constexpr double kMaxPaddingWaste = 1.25;

// The device ensembles a sweep's runs train in (--backend cuda|thrust-omp), in sweep order: the
// runs that may share one (train/ensemble_members.hpp: the same shared settings, whatever their
// task parameters, sequence lengths, seeds, schedules and biases) in groups of at most
// max_members(padded member) runs, the size the device's memory allows for members as the
// ensemble holds them (PaddedMember: the group's longest sequence and most sequences), and of at
// most kMaxPaddingWaste. A run joins the first group it may join, else starts one.
template <class MaxMembers>
std::vector<std::vector<const PlannedRun*>> ensemble_groups(
    const std::vector<const PlannedRun*>& runs, MaxMembers max_members) {
  std::vector<std::vector<const PlannedRun*>> groups;
  std::vector<PaddedMember> padded;                        // each group's
  std::map<std::string, std::vector<std::size_t>> by_key;  // shared settings -> their groups
  for (const PlannedRun* r : runs) {
    const TrainConfig config = train_config_from_json(r->config, "run " + r->id);
    std::vector<std::size_t>& candidates = by_key[shared_settings(config).dump()];
    bool joined_one = false;
    for (const std::size_t g : candidates) {
      PaddedMember joined = padded[g];
      joined.add(config);
      if (groups[g].size() + 1 <= max_members(joined.config()) &&
          joined.padding_waste() <= kMaxPaddingWaste) {
        groups[g].push_back(r);
        padded[g] = joined;
        joined_one = true;
        break;
      }
    }
    if (joined_one) continue;
    candidates.push_back(groups.size());
    groups.push_back({r});
    padded.emplace_back().add(config);
  }
  return groups;
}

}  // namespace emergent
