// A sweep file: a grid of runs as data, in TOML (toml++) or JSON, over any declared parameter
// (train/config.hpp: the task's, the model's and the training settings, mixer and shape
// included).
//
//   [base]                     # every run; any declared name
//   task = "linear-map"
//   steps = 2000
//   stop_below = 0.01
//
//   [[grid]]                   # a block: the cartesian product of its axes
//   S = [8, 16]                # an array is an axis, a single value is fixed for the block
//   s = [1, 3]
//   seeds = 3                  # shorthand: seed = 0, 1, 2 (or a list: seeds = [0, 5]); in
//                              # [base], every block's (unless the block sets seeds or seed)
//
//   [[grid]]                   # the sweep is the union of its blocks, in file order
//   S = 32
//   zip = { d_model = [128, 128], heads = [32, 1] }   # lists varied together, not crossed
//
// JSON has the same structure ({"base": {...}, "grid": [{...}, ...]}). Within a block the axes
// are crossed in the order of their names (alphabetical: TOML tables keep no order), the first
// name outermost, then the zipped lists. A file without blocks is the one run of its base; a file
// with neither is refused.
// Expansion checks only the file's structure; each run's settings are then checked by
// resolve_config, which names the file, the block and the run.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <emergent/core/error.hpp>
#include <emergent/io/json.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

// toml++ 3.3 guards a parser precondition with TOML_ASSERT_ASSUME, which aborts in a debug build
// and becomes an optimiser assumption in a clang release build, and malformed table headers
// ("[&a]", "[[[1]]]") break it: found by tests/fuzz/fuzz_sweep_file.cpp, fixed upstream in
// marzer/tomlplusplus PR #301. Its checks are kept here, as an Error, whatever the build.
namespace emergent::sweep_detail {
[[noreturn]] inline void toml_check_failed(const char* check) {
  throw Error(std::string("toml++: malformed input broke a parser check (") + check + ")");
}
}  // namespace emergent::sweep_detail
#pragma push_macro("NDEBUG")
#undef NDEBUG
// (A check inside one of toml++'s noexcept functions still ends the program, as an assert would;
// the parser's, the ones input reaches, are not noexcept.)
#define TOML_ASSERT(expr) \
  ((expr) ? static_cast<void>(0) : ::emergent::sweep_detail::toml_check_failed(#expr))
#include <toml++/toml.h>
#pragma pop_macro("NDEBUG")
#include <cassert>  // assert as NDEBUG says again

namespace emergent {

namespace sweep_detail {

inline nlohmann::json from_toml(const toml::node& node, const std::string& where) {
  if (const auto* table = node.as_table()) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, value] : *table)
      object[std::string(key.str())] = from_toml(value, where);
    return object;
  }
  if (const auto* array = node.as_array()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& value : *array) list.push_back(from_toml(value, where));
    return list;
  }
  if (const auto* v = node.as_integer()) return v->get();
  if (const auto* v = node.as_floating_point()) {
    // JSON has no inf or nan: keep them as text so that the field's check names them.
    const double d = v->get();
    return std::isfinite(d) ? nlohmann::json(d)
                            : nlohmann::json(d > 0 ? "inf" : (d < 0 ? "-inf" : "nan"));
  }
  if (const auto* v = node.as_string()) return v->get();
  if (const auto* v = node.as_boolean()) return v->get();
  throw Error(where + ": dates and times are not settings");
}

// toml++ 3.3 reaches __builtin_unreachable (undefined behaviour) when it classifies some non-ASCII
// characters, e.g. a file that is just "ϊ", one after a line-ending backslash in a multi-line
// string, or one in a string that follows a malformed value (found by
// tests/fuzz/fuzz_sweep_file.cpp; upstream marzer/tomlplusplus issues 190 and 295, fixed after
// 3.3). So toml++ is never given a non-ASCII byte: in a comment each becomes '?', in a one-line
// "..." string each character becomes its \uXXXX escape (the same string to TOML), and anywhere
// else it is refused, naming where it is. Settings themselves are ASCII.
inline std::string ascii_for_toml(const std::string& text, const std::string& where) {
  enum class In { code, comment, basic, literal, multi_basic, multi_literal } in = In::code;
  int line = 1, column = 0;
  std::string out;
  out.reserve(text.size());
  const auto refuse = [&](const std::string& what) {
    throw Error(where + ":" + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    ++column;
    if (static_cast<unsigned char>(ch) >= 0x80) {
      if (in == In::comment) {
        out += '?';
        continue;
      }
      if (in != In::basic)
        refuse(std::string("a non-ASCII character ") +
               (in == In::code ? "outside a comment or a string" : "outside a \"...\" string") +
               " (toml++ 3.3, the TOML reader, mishandles some: write it as \\uXXXX in a \"...\" "
               "string)");
      // One UTF-8 character: its lead byte says how many continuation bytes follow.
      const auto lead = static_cast<unsigned char>(ch);
      const std::size_t extra = lead >= 0xF0 ? 3 : lead >= 0xE0 ? 2 : 1;
      std::uint32_t code = lead & (0x3Fu >> extra);
      bool valid = lead >= 0xC2 && lead < 0xF5 && i + extra < text.size();
      for (std::size_t k = 1; valid && k <= extra; ++k) {
        const auto next = static_cast<unsigned char>(text[i + k]);
        valid = (next & 0xC0) == 0x80;
        code = code << 6 | (next & 0x3Fu);
      }
      if (!valid) refuse("a string that is not UTF-8");
      char escape[11];
      std::snprintf(escape, sizeof escape, code <= 0xFFFF ? "\\u%04X" : "\\U%08X", code);
      out += escape;
      i += extra;
      continue;
    }
    out += ch;
    const auto starts = [&](const char* token) {
      return text.compare(i, std::strlen(token), token) == 0;
    };
    const auto take = [&](std::size_t more) {  // the rest of a token of 1 + more characters
      out.append(text, i + 1, more);
      i += more, column += static_cast<int>(more);
    };
    if (ch == '\n') {
      ++line;
      column = 0;
      if (in == In::comment || in == In::basic || in == In::literal)
        in = In::code;  // they end with the line
      continue;
    }
    switch (in) {
      case In::code:
        if (ch == '#')
          in = In::comment;
        else if (starts("\"\"\""))
          in = In::multi_basic, take(2);
        else if (starts("'''"))
          in = In::multi_literal, take(2);
        else if (ch == '"')
          in = In::basic;
        else if (ch == '\'')
          in = In::literal;
        break;
      case In::basic:
      case In::multi_basic:
        if (ch == '\\' && i + 1 < text.size() && text[i + 1] != '\n') {  // an escape
          if (static_cast<unsigned char>(text[i + 1]) >= 0x80)
            refuse("a backslash before a non-ASCII character (not an escape TOML knows)");
          take(1);
        } else if (in == In::basic && ch == '"')
          in = In::code;
        else if (in == In::multi_basic && starts("\"\"\""))
          in = In::code, take(2);
        break;
      case In::literal:
        if (ch == '\'') in = In::code;
        break;
      case In::multi_literal:
        if (starts("'''")) in = In::code, take(2);
        break;
      case In::comment:
        break;
    }
  }
  return out;
}

}  // namespace sweep_detail

// The file as JSON, whichever of the two it is written in (by its extension: .toml or .json).
inline nlohmann::json read_sweep_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  require(in.good(), path.string(), "cannot open the sweep file");
  std::ostringstream text;
  text << in.rdbuf();
  if (path.extension() == ".json") return parse_json_text(text.str(), path.string());
  require(path.extension() == ".toml", path.string(), "a sweep file is .toml or .json");
  const std::string ascii = sweep_detail::ascii_for_toml(text.str(), path.string());
  try {
    return sweep_detail::from_toml(toml::parse(ascii, path.string()), path.string());
  } catch (const Error& e) {
    throw Error(path.string() + ": not valid TOML (" + e.what() + ")");
  } catch (const toml::parse_error& e) {
    const auto& where = e.source().begin;
    throw Error(path.string() + ":" + std::to_string(where.line) + ":" +
                std::to_string(where.column) + ": not valid TOML (" + std::string(e.description()) +
                ")");
  }
}

// One run of a sweep before its settings are resolved: the flat settings given, and where they
// come from (for messages).
struct SweepRun {
  nlohmann::json settings;
  std::string origin;  // "sweeps/x.toml: grid block 2"
};

// The most runs one sweep file may expand into: far past any grid of the paper (the largest,
// Fig. 5a full, is 120 runs), and small enough that a hostile file cannot exhaust memory.
inline constexpr std::size_t kMaxSweepRuns = 100000;

// The runs of a sweep, in order (see the top of this file).
inline std::vector<SweepRun> expand_sweep(const nlohmann::json& sweep, const std::string& where) {
  require(sweep.is_object(), where, "a sweep is a table with 'base' and 'grid'");
  for (const auto& [key, value] : sweep.items())
    require(key == "base" || key == "grid" || key == "description", where,
            "unknown top-level key '" + key + "' (allowed: base, grid, description)");
  nlohmann::json base = sweep.value("base", nlohmann::json::object());
  require(base.is_object(), where, "'base' must be a table of settings");
  // `seeds` in the base is every block's seed axis; a block's own `seeds` or `seed` wins.
  nlohmann::json base_seeds;
  if (base.contains("seeds")) base_seeds = base["seeds"], base.erase("seeds");
  require(!base.empty() || sweep.contains("grid"), where,
          "the sweep has no settings (neither 'base' nor 'grid'): an empty or mistyped file would "
          "otherwise be one run of every default");
  nlohmann::json blocks = sweep.value("grid", nlohmann::json::array({nlohmann::json::object()}));
  if (blocks.is_object()) blocks = nlohmann::json::array({blocks});
  require(blocks.is_array() && !blocks.empty(), where,
          "'grid' must be a list of blocks ([[grid]] in TOML)");

  std::vector<SweepRun> runs;
  for (std::size_t b = 0; b < blocks.size(); ++b) {
    const std::string origin = where + ": grid block " + std::to_string(b + 1);
    nlohmann::json block = blocks[b];
    require(block.is_object(), origin, "a block must be a table");
    const bool zips_seed =
        block.contains("zip") && block["zip"].is_object() && block["zip"].contains("seed");
    if (!base_seeds.is_null() && !block.contains("seeds") && !block.contains("seed") && !zips_seed)
      block["seeds"] = base_seeds;
    // Axes: (names, rows of values); a plain axis has one name, a zip several.
    struct Axis {
      std::vector<std::string> names;
      std::vector<std::vector<nlohmann::json>> rows;
    };
    std::vector<Axis> axes;
    nlohmann::json fixed = nlohmann::json::object();
    for (const auto& [key, value] : block.items()) {
      if (key == "zip") {
        require(value.is_object() && !value.empty(), origin,
                "'zip' must be a table of lists of equal length");
        Axis axis;
        std::size_t length = 0;
        for (const auto& [name, list] : value.items()) {
          require(list.is_array() && !list.empty(), origin,
                  "zip field '" + name + "' must be a non-empty list");
          require(axis.names.empty() || list.size() == length, origin,
                  "zip field '" + name + "' has " + std::to_string(list.size()) +
                      " values, the others " + std::to_string(length));
          length = list.size();
          axis.names.push_back(name);
        }
        for (std::size_t i = 0; i < length; ++i) {
          std::vector<nlohmann::json> row;
          for (const std::string& name : axis.names) row.push_back(value[name][i]);
          axis.rows.push_back(row);
        }
        axes.push_back(axis);
        continue;
      }
      nlohmann::json values = value;
      std::string name = key;
      if (key == "seeds") {  // seeds = N: seed 0 .. N-1
        name = "seed";
        require(value.is_number_integer() || value.is_array(), origin,
                "'seeds' = " + value.dump() +
                    " is not allowed: expected a count N (an integer: seeds 0 to N-1) or a list "
                    "of seeds");
        if (value.is_number_integer()) {
          const std::int64_t n = value.get<std::int64_t>();
          require(n >= 1 && n <= static_cast<std::int64_t>(kMaxSweepRuns), origin,
                  "'seeds' = N must be from 1 to " + std::to_string(kMaxSweepRuns));
          values = nlohmann::json::array();
          for (std::int64_t s = 0; s < n; ++s) values.push_back(s);
        }
      }
      if (!values.is_array()) {
        fixed[name] = values;
        continue;
      }
      require(!values.empty(), origin, "axis '" + key + "' is an empty list");
      Axis axis{{name}, {}};
      for (const auto& v : values) axis.rows.push_back({v});
      axes.push_back(axis);
    }
    // Checked before anything is built, without overflow: the file's runs in all, not per block.
    const std::size_t room = kMaxSweepRuns - runs.size();
    const std::string too_many = "the file expands to more than " + std::to_string(kMaxSweepRuns) +
                                 " runs (the limit; split it into several files)";
    std::size_t count = 1;
    require(room >= 1, origin, too_many);
    for (const Axis& a : axes) {
      require(count <= room / a.rows.size(), origin, too_many);
      count *= a.rows.size();
    }
    for (std::size_t index = 0; index < count; ++index) {
      nlohmann::json settings = base;
      settings.update(fixed);
      std::size_t rest = index;
      for (std::size_t a = axes.size(); a-- > 0;) {  // the last axis varies fastest
        const Axis& axis = axes[a];
        const std::vector<nlohmann::json>& row = axis.rows[rest % axis.rows.size()];
        rest /= axis.rows.size();
        for (std::size_t n = 0; n < axis.names.size(); ++n) settings[axis.names[n]] = row[n];
      }
      runs.push_back({settings, origin});
    }
  }
  return runs;
}

}  // namespace emergent
