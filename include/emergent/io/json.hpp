// Small JSON helpers shared by the programs that read settings and write result rows and
// summaries.
#pragma once

#include <emergent/core/error.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace emergent {

// The value, or null for an absent one (a censored step, an unknown emergence point).
template <class T>
nlohmann::json json_or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// JSON text parsed strictly: invalid JSON, or a key written twice in one object (which
// nlohmann::json, like most readers, would resolve silently as "the last one wins", while TOML
// refuses it), is an Error naming `where`.
inline nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const nlohmann::json::parser_callback_t check = [&](int, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start) open_objects.emplace_back();
    if (event == Event::object_end && !open_objects.empty()) open_objects.pop_back();
    if (event == Event::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": not valid JSON (" + e.what() + ")");
  }
  require(duplicate.empty(), where,
          "key '" + duplicate + "' is written twice in one object (give each setting once)");
  return value;
}

// A JSON file, parsed strictly (parse_json_text); a folder or a missing file is an Error naming
// the path.
inline nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::error_code error;
  require(!std::filesystem::is_directory(path, error), path.string(),
          "is a folder, not a JSON file");
  std::ifstream in(path, std::ios::binary);
  require(in.good(), path.string(), "cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  require(!in.bad(), path.string(), "cannot read");
  return parse_json_text(text.str(), path.string());
}

}  // namespace emergent
