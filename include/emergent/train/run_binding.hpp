// A run folder stays bound to the run it holds. Its latest checkpoint records the config the run
// was trained with (train/checkpoint.hpp), and that record, not config.json (which anyone can
// edit), says what the run is. A resume compares three sources field by field:
//   the checkpoint's recorded config   what the parameters and moments were trained with
//   config.json                        what the folder says (refused if edited)
//   the given config                   flags and --config, resolved
// Any difference in a field that changes the trajectory is refused, naming every field and all
// three values. The fields a resume may change are the caller's (`may_change`: how far the run
// goes, how it is executed or observed); their changes are returned, so that the trainer records
// them in the next metrics row.
//
// A folder without a checkpoint holds nothing trained (a start that failed or was killed before
// its first checkpoint: the trainer discards its metrics rows on restart), so it is not bound:
// its config.json is replaced, and a typo in a first attempt never blocks the retry, as long as
// it is a run's config (require_run_folder: a Hugging Face folder's config.json is refused).
#pragma once

#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/train/checkpoint.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

struct RunBinding {
  std::string config_text;            // config.json as written (and recorded in checkpoints)
  nlohmann::json changed_on_resume =  // {"steps": {"from": 20, "to": 40}}: what the resume changed
      nlohmann::json::object();
};

// A config read from disk (config.json, a checkpoint's record) resolved as the trainer resolves
// the given one, so that defaults and older files compare equal; throws an Error naming `where`.
using ConfigNormaliser = std::function<nlohmann::json(const nlohmann::json&, const std::string&)>;

// Every field whose value is not the same in all `sources` (named configs), except those of
// `skip`, with every source's value: "lr: 0.001 (step_000020.safetensors), 0.01 (config.json);
// S: ...". Empty when they agree.
inline std::string config_differences(
    const std::vector<std::pair<std::string, nlohmann::json>>& sources,
    const std::set<std::string>& skip = {}) {
  std::set<std::string> keys;
  for (const auto& [source, config] : sources)
    for (const auto& [key, value] : config.items()) keys.insert(key);
  std::string differences;
  for (const std::string& key : keys) {
    if (skip.count(key)) continue;
    const auto value = [&](const nlohmann::json& config) {
      return config.contains(key) ? config[key].dump() : std::string("(absent)");
    };
    bool differ = false;
    for (const auto& source : sources) differ |= value(source.second) != value(sources[0].second);
    if (!differ) continue;
    differences += std::string(differences.empty() ? "" : "; ") + key + ":";
    for (std::size_t i = 0; i < sources.size(); ++i)
      differences += std::string(i ? "," : "") + " " + value(sources[i].second) + " (" +
                     sources[i].first + ")";
  }
  return differences;
}

// A folder without a checkpoint is a run's only if what it holds is a run's start: its
// config.json (if any) one of this kind of run, and no sweep or Hugging Face model in it; else
// an Error, so that --out never overwrites another program's config.json.
inline void require_run_folder(const std::filesystem::path& run_dir,
                               const ConfigNormaliser& normalise) {
  for (const char* other :
       {"sweep.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin"})
    require(!std::filesystem::exists(run_dir / other), run_dir.string(),
            std::string("holds ") + other + ", so it is not a run folder (" +
                (other == std::string("sweep.json") ? "a sweep folder" : "a Hugging Face model") +
                "): choose another --out");
  const std::filesystem::path config_path = run_dir / "config.json";
  if (!std::filesystem::exists(config_path)) return;
  try {
    normalise(read_json_file(config_path), config_path.string());
  } catch (const Error& e) {
    throw Error(run_dir.string() +
                ": is not a run folder of this kind: its config.json is not this kind of run's "
                "config (" +
                e.what() + "); choose another --out (or delete the folder)");
  }
}

// Checks `given` (resolved) against the folder's checkpoint record and config.json, then writes
// config.json. See the top of this file.
inline RunBinding bind_run_folder(const std::filesystem::path& run_dir, const nlohmann::json& given,
                                  const std::set<std::string>& may_change,
                                  const ConfigNormaliser& normalise) {
  RunBinding binding;
  binding.config_text = given.dump(2);
  const std::filesystem::path config_path = run_dir / "config.json";
  const auto checkpoint = latest_checkpoint(run_dir);
  if (!checkpoint) require_run_folder(run_dir, normalise);
  if (checkpoint) {
    const std::string name = checkpoint->filename().string();
    const std::string record_where = checkpoint->string() + ": metadata field 'config'";
    nlohmann::json recorded;
    {
      const SafetensorsFile file(*checkpoint);
      const auto it = file.metadata().find("config");
      require(it != file.metadata().end(), checkpoint->string(),
              "metadata field 'config' is missing, so the run it belongs to is unknown");
      recorded = normalise(parse_json_text(it->second, record_where), record_where);
    }
    std::vector<std::pair<std::string, nlohmann::json>> sources = {{name, recorded}};
    if (std::filesystem::exists(config_path))
      sources.emplace_back("config.json",
                           normalise(read_json_file(config_path), config_path.string()));
    sources.emplace_back("given", given);

    const std::string differences = config_differences(sources, may_change);
    std::string allowed;
    for (const std::string& key : may_change) allowed += (allowed.empty() ? "" : ", ") + key;
    require(differences.empty(), run_dir.string(),
            "this run folder holds a run with another configuration: " + differences +
                ". A resume may change only " + allowed +
                "; to train another configuration choose a new --out (or delete the folder)");
    for (const std::string& key : may_change)
      if (recorded.contains(key) && given.contains(key) && recorded[key] != given[key])
        binding.changed_on_resume[key] = {{"from", recorded[key]}, {"to", given[key]}};
  }
  write_text_atomically(config_path, binding.config_text + "\n");
  return binding;
}

}  // namespace emergent
