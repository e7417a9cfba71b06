// metrics.jsonl of a resumed run: the rows of the steps before the checkpoint it resumes from are
// kept (and returned, for the trainer's history), everything from that step on is dropped, so
// that the resumed run writes them again exactly once. A row cut by the kill ends the kept part.
#pragma once

#include <cstdint>
#include <emergent/io/text_file.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

inline std::vector<nlohmann::json> keep_metrics_before(const std::filesystem::path& path,
                                                       std::int64_t step) {
  std::vector<nlohmann::json> rows;
  std::string kept, line;
  std::ifstream in(path);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json row;
    try {
      row = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      break;  // a row cut by the kill: everything after it is recomputed
    }
    if (row.at("step").get<std::int64_t>() >= step) break;
    rows.push_back(std::move(row));
    kept += line + "\n";
  }
  write_text_atomically(path, kept);
  return rows;
}

}  // namespace emergent
