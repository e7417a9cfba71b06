// What the tests of training runs read back from a run folder: a file's bytes (checkpoints
// compared bit for bit) and the metrics rows, and a guard that restores the thread count a test
// changes.
#pragma once

#include <doctest/doctest.h>

#include <emergent/core/parallel.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

inline std::string read_bytes(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The rows of `dir`/metrics.jsonl, without their wall-clock field unless `drop_wall` is false
// (the only field that differs between two runs that must agree).
inline std::vector<nlohmann::json> read_metrics(const std::filesystem::path& dir,
                                                bool drop_wall = true) {
  std::ifstream in(dir / "metrics.jsonl");
  REQUIRE(in.good());
  std::vector<nlohmann::json> rows;
  std::string line;
  while (std::getline(in, line)) {
    REQUIRE_FALSE(line.empty());
    nlohmann::json row = nlohmann::json::parse(line);
    REQUIRE(row.contains("wall_s"));
    if (drop_wall) row.erase("wall_s");
    rows.push_back(std::move(row));
  }
  return rows;
}

struct ThreadCountGuard {
  int saved = emergent::thread_count();
  ~ThreadCountGuard() { emergent::set_thread_count(saved); }
};
