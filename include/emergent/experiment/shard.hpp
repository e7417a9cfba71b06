// A deterministic share of a sweep for one of N processes: run i (in sweep order) belongs to
// shard i mod N. Shards share nothing but the sweep folder and never run the same run, so a Slurm
// job array, GNU parallel or any launcher spreads a sweep over machines with no coordinator.
// Without --shard, a Slurm array task takes its own: SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN
// of SLURM_ARRAY_TASK_COUNT.
#pragma once

#include <charconv>
#include <cstdlib>
#include <emergent/core/error.hpp>
#include <string>
#include <system_error>

namespace emergent {

struct Shard {
  int index = 0, count = 1;
  bool owns(std::size_t run) const {
    return static_cast<int>(run % static_cast<std::size_t>(count)) == index;
  }
  std::string name() const {
    return "shard-" + std::to_string(index) + "-of-" + std::to_string(count);
  }
};

// "I/N" with 0 <= I < N.
inline Shard parse_shard(const std::string& text, const std::string& where) {
  const auto slash = text.find('/');
  Shard s;
  const auto whole = [&](const std::string& part, int& out) {
    const auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
    return ec == std::errc() && ptr == part.data() + part.size();
  };
  const bool ok = slash != std::string::npos && whole(text.substr(0, slash), s.index) &&
                  whole(text.substr(slash + 1), s.count) && s.count >= 1 && s.index >= 0 &&
                  s.index < s.count;
  require(ok, where, "'" + text + "' is not a shard: expected I/N with 0 <= I < N, e.g. 0/4");
  return s;
}

// The shard of this Slurm array task, or 0/1 outside an array.
// Each variable must be a whole number, or the sweep refuses to guess its share.
inline Shard shard_from_environment() {
  const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* count = std::getenv("SLURM_ARRAY_TASK_COUNT");
  if (!id || !count) return {};
  const auto number = [](const char* name, const char* text) {
    const std::string value = text;
    int v = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    require(ec == std::errc() && ptr == value.data() + value.size(), name,
            "= '" + value + "' is not a whole number (Slurm sets it; --shard I/N overrides it)");
    return v;
  };
  const char* min = std::getenv("SLURM_ARRAY_TASK_MIN");
  const int first = min ? number("SLURM_ARRAY_TASK_MIN", min) : 0;
  return parse_shard(std::to_string(number("SLURM_ARRAY_TASK_ID", id) - first) + "/" +
                         std::to_string(number("SLURM_ARRAY_TASK_COUNT", count)),
                     "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
}

}  // namespace emergent
