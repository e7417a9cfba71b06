// A deterministic share of a sweep for one of N processes: run i (in sweep order) belongs to
// shard i mod N. Shards share nothing but the sweep folder and never run the same run, so a Slurm
// job array, GNU parallel or any launcher spreads a sweep over machines with no coordinator.
// Without --shard, a Slurm array task takes its own (shard_from_environment).
#pragma once

#include <charconv>
#include <cstdlib>
#include <emergent/core/error.hpp>
#include <optional>
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

// The shard of this Slurm array task, or 0/1 outside an array. An array of evenly spaced ids
// (--array=0-15, 1-7:2, 0,2,4,6) gives task SLURM_ARRAY_TASK_ID shard
// (ID - SLURM_ARRAY_TASK_MIN) / SLURM_ARRAY_TASK_STEP of SLURM_ARRAY_TASK_COUNT. An array whose
// ids are not evenly spaced (--array=1,2,5) cannot be mapped onto shards by its variables, and a
// task id without a count gives no share: both are refused, naming the variables and --shard.
// Each variable must be a whole number, or the sweep refuses to guess its share.
inline Shard shard_from_environment() {
  const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
  if (!id) return {};
  const auto variable = [](const char* name) -> std::optional<long long> {
    const char* text = std::getenv(name);
    if (!text) return std::nullopt;
    const std::string value = text;
    long long v = 0;
    const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    require(ec == std::errc() && ptr == value.data() + value.size(), name,
            "= '" + value + "' is not a whole number (Slurm sets it; --shard I/N overrides it)");
    return v;
  };
  const long long task = *variable("SLURM_ARRAY_TASK_ID");
  const std::optional<long long> count = variable("SLURM_ARRAY_TASK_COUNT");
  require(count.has_value(), "SLURM_ARRAY_TASK_ID",
          "= " + std::to_string(task) +
              " is set but SLURM_ARRAY_TASK_COUNT is not, so this task's share of the sweep is "
              "unknown; pass --shard I/N");
  const long long first = variable("SLURM_ARRAY_TASK_MIN").value_or(0),
                  step = variable("SLURM_ARRAY_TASK_STEP").value_or(1),
                  last = variable("SLURM_ARRAY_TASK_MAX").value_or(first + step * (*count - 1));
  const std::string array = "SLURM_ARRAY_TASK_MIN " + std::to_string(first) + ", _MAX " +
                            std::to_string(last) + ", _STEP " + std::to_string(step) + ", _COUNT " +
                            std::to_string(*count);
  require(*count >= 1 && step >= 1 && last == first + step * (*count - 1), "SLURM_ARRAY_TASK_ID",
          "this array's ids are not evenly spaced (" + array +
              "), so a task's id does not say its shard; submit --array=0-" +
              std::to_string(*count - 1) + " (or any evenly spaced ids), or pass --shard I/N");
  require(task >= first && task <= last && (task - first) % step == 0, "SLURM_ARRAY_TASK_ID",
          "= " + std::to_string(task) + " is not one of this array's ids (" + array + ")");
  return parse_shard(std::to_string((task - first) / step) + "/" + std::to_string(*count),
                     "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
}

}  // namespace emergent
