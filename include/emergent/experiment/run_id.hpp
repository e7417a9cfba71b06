// The stable id of a run: the first 12 hex digits of the SHA-256 of its resolved config
// (config.json's object, keys sorted, as nlohmann::json dumps it). The same settings give the
// same id in every process, shard and restart, so the id names the run's folder and its result
// row; any change of a setting (seed, steps, a shape field) is another run. Observations
// (Parameter::observation: what is recorded, not what is learned) are left out, so that asking
// for attention snapshots, or a later version declaring a new observation, keeps every id. So are
// settings added later (Parameter::added_later) while at their default, the older behaviour.
#pragma once

#include <emergent/io/sha256.hpp>
#include <emergent/settings/parameters.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

inline std::string run_id(nlohmann::json resolved_config, const std::vector<Parameter>& declared) {
  for (const Parameter& p : declared)
    if (left_out_of_id(p, resolved_config)) resolved_config.erase(p.name);
  Sha256 hash;
  hash.update(resolved_config.dump());
  return hash.hex_digest().substr(0, 12);
}

}  // namespace emergent
