// The seeds of `emergent train --seeds`: "0-15" (inclusive), "1,4,9", or both ("0-3,8"), at most
// kMaxSeeds of them, and the run folder each seed gets under --out.
#pragma once

#include <charconv>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/settings/parameters.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

namespace emergent::cli {

inline constexpr std::uint64_t kMaxSeeds = 10000;

inline std::vector<std::uint64_t> parse_seed_list(const std::string& text,
                                                  const std::string& where) {
  std::vector<std::uint64_t> seeds;
  std::size_t at = 0;
  // Seeds as the `seed` setting allows them: 0 to limits::kSeed.
  const auto max_seed = static_cast<std::uint64_t>(limits::kSeed);
  auto number = [&](const std::string& part) {
    std::uint64_t seed = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), seed);
    require(!part.empty() && error == std::errc() && end == part.data() + part.size() &&
                seed <= max_seed,
            where,
            "'" + text + "' is not a seed list (allowed: 0-15, 1,4,9, or 0-3,8; seeds from 0 to " +
                std::to_string(max_seed) + ")");
    return seed;
  };
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      seeds.push_back(number(item));
    } else {
      const std::uint64_t first = number(item.substr(0, dash)),
                          last = number(item.substr(dash + 1));
      require(first <= last && last - first < kMaxSeeds - seeds.size(), where,
              "range '" + item + "' must go up, and the list may hold at most " +
                  std::to_string(kMaxSeeds) + " seeds");
      for (std::uint64_t s = first; s <= last; ++s) seeds.push_back(s);
    }
    require(seeds.size() <= kMaxSeeds, where,
            "the list may hold at most " + std::to_string(kMaxSeeds) + " seeds");
    at = comma + 1;
  }
  std::set<std::uint64_t> seen;
  for (std::uint64_t seed : seeds)
    require(seen.insert(seed).second, where, "seed " + std::to_string(seed) + " is listed twice");
  return seeds;
}

inline std::filesystem::path seed_run_folder(const std::filesystem::path& out, std::uint64_t seed) {
  return out / ("seed_" + std::to_string(seed));
}

}  // namespace emergent::cli
