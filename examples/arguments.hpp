// The command lines of the example programs: positional arguments with defaults, each all of one
// type or an error naming it and the program's usage line; and a step that a run may not have
// reached, written ">N" with N the steps it trained. (attention_bias.cpp, the README's program,
// keeps its own copy so that it stands alone.)
#pragma once

#include <cstdint>
#include <emergent/core/error.hpp>
#include <optional>
#include <sstream>
#include <string>

namespace examples {

// argv[i] as a T, all of it; `fallback` when there is no argv[i].
template <class T>
T argument(int argc, char** argv, int i, T fallback, const std::string& usage) {
  std::istringstream in(i < argc ? argv[i] : "");
  if (i < argc && (!(in >> fallback) || !in.eof()))
    throw emergent::Error("bad argument '" + in.str() + "' (" + usage + ")");
  return fallback;
}

inline std::string step_text(std::optional<std::int64_t> step, std::int64_t steps_done) {
  return step ? std::to_string(*step) : '>' + std::to_string(steps_done);
}

}  // namespace examples
