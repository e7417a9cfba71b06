// Small JSON helpers shared by the programs that write result rows and summaries.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>

namespace emergent {

// The value, or null for an absent one (a censored step, an unknown emergence point).
template <class T>
nlohmann::json json_or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace emergent
