// The GPT-NeoX checkpoints that transformers made for the tests (tests/golden/neox, by
// tests/golden/make_neox_golden.py) and the manifest that describes each one's cases.
#pragma once

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

inline const std::filesystem::path kNeoxGolden =
    std::filesystem::path(EMERGENT_SOURCE_DIR) / "tests" / "golden" / "neox";

inline nlohmann::json neox_manifest() {
  std::ifstream in(kNeoxGolden / "manifest.json");
  return nlohmann::json::parse(in);
}
