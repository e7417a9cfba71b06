// Learning-rate schedules: linear warmup from 0 to the peak over `warmup_steps`, then either
// constant or a cosine decay to `min_ratio * peak` at `total_steps`.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <string>

namespace emergent {

struct LrSchedule {
  enum class Kind { constant, cosine };
  double peak = 1e-3;
  std::int64_t warmup_steps = 100;
  Kind kind = Kind::constant;
  std::int64_t total_steps = 0;  // where the cosine reaches its minimum
  double min_ratio = 0.1;

  // Learning rate of step `step` (0-based): step 0 uses peak / warmup_steps.
  double at(std::int64_t step) const {
    if (step < warmup_steps) return peak * double(step + 1) / double(warmup_steps);
    if (kind == Kind::constant || total_steps <= warmup_steps) return peak;
    const double progress =
        std::min(1.0, double(step - warmup_steps) / double(total_steps - warmup_steps));
    const double cosine = 0.5 * (1.0 + std::cos(3.14159265358979323846 * progress));
    return peak * (min_ratio + (1.0 - min_ratio) * cosine);
  }
};

inline LrSchedule::Kind parse_schedule_kind(const std::string& name) {
  if (name == "constant") return LrSchedule::Kind::constant;
  if (name == "cosine") return LrSchedule::Kind::cosine;
  throw Error("schedule: unknown value '" + name + "' (expected constant or cosine)");
}

inline std::string to_string(LrSchedule::Kind kind) {
  return kind == LrSchedule::Kind::constant ? "constant" : "cosine";
}

}  // namespace emergent
