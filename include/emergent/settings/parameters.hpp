// Declared parameters: every setting a run has (of its task, its model and its training) is
// declared once, with its name, type, default, allowed values and one line of help. From that
// one declaration come config.json, validation, the CLI flags and the axes a sweep may vary, so
// a setting cannot be accepted by one of them and refused (or silently ignored) by another.
//
//   real("lr", 1e-3, above(0), "peak learning rate")       -> --lr, "lr" in config.json and sweeps
//   integer("S", 16, at_least(1), "state size S")
//   text("schedule", "constant", {"constant", "cosine"}, "after warmup")
//
// A value is checked against its declaration wherever it comes from: the wrong type, a number
// out of range or not finite (inf, nan), or a text not among the choices is an Error naming the
// place, the field, the value and what is allowed.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace emergent {

enum class ParameterType { integer, real, text };

// [low, high] with either end open; infinite ends mean unbounded.
struct Range {
  double low = -std::numeric_limits<double>::infinity();
  double high = std::numeric_limits<double>::infinity();
  bool low_open = false, high_open = false;

  bool contains(double v) const {
    return (low_open ? v > low : v >= low) && (high_open ? v < high : v <= high);
  }
};

inline Range at_least(double low) {
  return {low, std::numeric_limits<double>::infinity(), false, true};
}
inline Range above(double low) {
  return {low, std::numeric_limits<double>::infinity(), true, true};
}
inline Range between(double low, double high) { return {low, high, false, false}; }
inline Range from_below(double low, double high) {
  return {low, high, false, true};
}  // [low, high)

// Upper bounds that no real experiment reaches by accident (the paper's largest runs: 10^5
// steps, 4,096 tokens per step, D = 512, 64 heads), so that a typo (an extra digit, a negative
// number where an unsigned one is read) is refused in one line before anything is allocated.
// Every numeric parameter has a finite upper bound (tests/test_experiment.cpp checks it);
// together they still allow runs larger than any machine, which the memory estimate
// (train/memory_estimate.hpp) refuses with the number.
namespace limits {
inline constexpr double kSteps = 1e9;             // steps, step intervals, warmups
inline constexpr double kBatchTokens = 16777216;  // 2^24 tokens per step
inline constexpr double kWidth = 65536;           // d_model, d_ff
inline constexpr double kHeads = 4096;
inline constexpr double kLayers = 1024;
inline constexpr double kPositions = 1048576;  // 2^20: positions, sequence lengths, vocab
inline constexpr double kExamples = 1e8;       // examples of a data set
inline constexpr double kLearningRate = 1e3;   // learning rates and weight decay
inline constexpr double kMagnitude = 1e6;      // biases, clipping norms, loss thresholds
inline constexpr double kSeed = 4e18;          // seeds (below 2^63)
}  // namespace limits

struct Parameter {
  std::string name;  // config.json key and sweep axis; CLI flag --name with '_' written '-'
  ParameterType type = ParameterType::integer;
  nlohmann::json default_value;
  Range range;                       // integer and real
  std::vector<std::string> choices;  // text: the allowed values
  std::string help;
  // Changes what a run records, not what it learns (attention snapshots): left out of the run's
  // id, absent from an older config.json without complaint, and free to change on a resume.
  bool observation = false;
  // Declared after runs existed, with a default that is the older behaviour: at its default it
  // is left out of the run's id and may be absent from an older config.json, so that every
  // earlier run keeps its id and resumes (see added_later below).
  bool added_later = false;

  std::string flag() const {
    std::string f = "--" + name;
    for (char& ch : f)
      if (ch == '_') ch = '-';
    return f;
  }
};

inline Parameter integer(std::string name, std::int64_t default_value, Range range,
                         std::string help) {
  return {std::move(name), ParameterType::integer, default_value, range, {}, std::move(help)};
}
inline Parameter real(std::string name, double default_value, Range range, std::string help) {
  return {std::move(name), ParameterType::real, default_value, range, {}, std::move(help)};
}
inline Parameter text(std::string name, std::string default_value, std::vector<std::string> choices,
                      std::string help) {
  return {std::move(name),    ParameterType::text, std::move(default_value), {},
          std::move(choices), std::move(help)};
}

// The same declaration, marked as an observation (Parameter::observation).
inline Parameter observation(Parameter p) {
  p.observation = true;
  return p;
}

// The same declaration, marked as added after runs existed (Parameter::added_later).
inline Parameter added_later(Parameter p) {
  p.added_later = true;
  return p;
}

// Whether a resolved config may leave `p` out (an older config.json) and the run id does.
inline bool left_out_of_id(const Parameter& p, const nlohmann::json& resolved_config) {
  if (p.observation) return true;
  if (!p.added_later) return false;
  const auto it = resolved_config.find(p.name);
  return it == resolved_config.end() || *it == p.default_value;
}

namespace parameter_detail {
inline std::string number_text(double v) {
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream out;
  out.precision(15);
  out << v;
  return out.str();
}
}  // namespace parameter_detail

// "an integer in [1, inf)", "a finite number in (0, inf)", "one of constant, cosine".
inline std::string allowed_values(const Parameter& p) {
  using parameter_detail::number_text;
  if (p.type == ParameterType::text) {
    if (p.choices.empty()) return "any text";
    std::string s = "one of ";
    for (std::size_t i = 0; i < p.choices.size(); ++i)
      s += (i ? ", " : "") + (p.choices[i].empty() ? std::string("\"\"") : p.choices[i]);
    return s;
  }
  const std::string interval =
      std::string(p.range.low_open || std::isinf(p.range.low) ? "(" : "[") +
      number_text(p.range.low) + ", " + number_text(p.range.high) +
      (p.range.high_open || std::isinf(p.range.high) ? ")" : "]");
  return (p.type == ParameterType::integer ? "an integer in " : "a finite number in ") + interval;
}

// The value, checked and normalised (integers as int64, reals as double); `where` names the
// file or flag it came from.
inline nlohmann::json checked_value(const Parameter& p, const nlohmann::json& value,
                                    const std::string& where) {
  const auto refuse = [&](const std::string& shown) {
    throw Error(where + ": field '" + p.name + "' = " + shown + " is not allowed: expected " +
                allowed_values(p));
  };
  switch (p.type) {
    case ParameterType::integer: {
      std::int64_t v = 0;
      if (value.is_number_integer()) {
        if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
          refuse(value.dump());
        v = value.get<std::int64_t>();
      } else if (value.is_number_float() && std::isfinite(value.get<double>()) &&
                 value.get<double>() == std::floor(value.get<double>()) &&
                 std::abs(value.get<double>()) < 9e15) {
        v = static_cast<std::int64_t>(value.get<double>());  // 2.0 from a TOML float or JSON tool
      } else {
        refuse(value.dump());
      }
      if (!p.range.contains(double(v))) refuse(std::to_string(v));
      return v;
    }
    case ParameterType::real: {
      if (!value.is_number()) refuse(value.dump());
      const double v = value.get<double>();
      if (!std::isfinite(v) || !p.range.contains(v)) refuse(parameter_detail::number_text(v));
      return v;
    }
    case ParameterType::text: {
      if (!value.is_string()) refuse(value.dump());
      const std::string v = value.get<std::string>();
      if (!p.choices.empty() && std::find(p.choices.begin(), p.choices.end(), v) == p.choices.end())
        refuse("'" + v + "'");
      return v;
    }
  }
  return value;
}

// A value written on a command line ("1e-3", "inf", "cosine"), checked like any other.
inline nlohmann::json parse_value(const Parameter& p, const std::string& written,
                                  const std::string& where) {
  const auto refuse = [&]() -> nlohmann::json {
    throw Error(where + ": '" + written + "' is not allowed for " + p.flag() + ": expected " +
                allowed_values(p));
  };
  if (p.type == ParameterType::text) return checked_value(p, written, where);
  const char* begin = written.data();
  const char* end = begin + written.size();
  if (p.type == ParameterType::integer) {
    std::int64_t v = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, v);
    if (ec != std::errc() || ptr != end) return refuse();
    return checked_value(p, v, where);
  }
  // Decimal only: strtod would also read hexadecimal ("0x10" as 16), which an integer refuses.
  if (written.find_first_not_of("0123456789+-.eE") != std::string::npos) return refuse();
  char* parsed_end = nullptr;
  const double v = std::strtod(begin, &parsed_end);
  if (written.empty() || parsed_end != end) return refuse();
  if (!std::isfinite(v)) refuse();
  return checked_value(p, v, where);
}

// A warmup longer than the run never reaches the peak learning rate: refused when it was chosen
// (any value but the default, which short runs, as the tests', keep).
inline void require_warmup_within(std::int64_t warmup, std::int64_t steps,
                                  std::int64_t default_warmup, const std::string& where) {
  require(warmup <= steps || warmup == default_warmup, where,
          "field 'warmup_steps' = " + std::to_string(warmup) +
              " is not allowed: it must be at most steps = " + std::to_string(steps) +
              " (a longer warmup never reaches the peak learning rate)");
}

inline const Parameter* find_parameter(const std::vector<Parameter>& parameters,
                                       const std::string& name) {
  for (const Parameter& p : parameters)
    if (p.name == name) return &p;
  return nullptr;
}

inline std::string parameter_names(const std::vector<Parameter>& parameters) {
  std::string s;
  for (std::size_t i = 0; i < parameters.size(); ++i) s += (i ? ", " : "") + parameters[i].name;
  return s;
}

// The values of one declared group, read from a JSON object: defaults for what is absent,
// each present value checked. Keys of the object that the group does not declare are left for
// the caller (a config spans several groups).
class ParameterValues {
 public:
  ParameterValues() = default;
  ParameterValues(const std::vector<Parameter>& declared, const nlohmann::json& given,
                  const std::string& where) {
    values_ = nlohmann::json::object();
    for (const Parameter& p : declared)
      values_[p.name] =
          given.contains(p.name) ? checked_value(p, given.at(p.name), where) : p.default_value;
  }

  // A whole run's settings, `given`, as one group: `given` must be a JSON object, and a key the
  // group does not declare is refused in one line naming what `kind` takes ("self-pretraining").
  static ParameterValues whole(const std::vector<Parameter>& declared, const nlohmann::json& given,
                               const std::string& where, const std::string& kind) {
    require(given.is_object(), where, "expected a JSON object of settings");
    for (const auto& [key, value] : given.items())
      require(
          find_parameter(declared, key) != nullptr, where,
          "unknown field '" + key + "' (" + kind + " takes: " + parameter_names(declared) + ")");
    return ParameterValues(declared, given, where);
  }

  std::int64_t integer(const std::string& name) const { return at(name).get<std::int64_t>(); }
  double real(const std::string& name) const { return at(name).get<double>(); }
  std::string text(const std::string& name) const { return at(name).get<std::string>(); }
  const nlohmann::json& json() const { return values_; }

 private:
  const nlohmann::json& at(const std::string& name) const {
    require(values_.contains(name), "ParameterValues", "'" + name + "' is not declared");
    return values_.at(name);
  }
  nlohmann::json values_ = nlohmann::json::object();
};

}  // namespace emergent
