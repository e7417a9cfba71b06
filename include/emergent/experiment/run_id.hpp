// The stable id of a run: the first 12 hex digits of the SHA-256 of its resolved config
// (config.json's object, keys sorted, as nlohmann::json dumps it). The same settings give the
// same id in every process, shard and restart, so the id names the run's folder and its result
// row; any change of a setting (seed, steps, a shape field) is another run.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "../io/sha256.hpp"

namespace emergent {

inline std::string run_id(const nlohmann::json& resolved_config) {
  Sha256 hash;
  hash.update(resolved_config.dump());
  return hash.hex_digest().substr(0, 12);
}

}  // namespace emergent
