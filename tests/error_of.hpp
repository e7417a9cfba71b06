// The message of the emergent::Error that a call throws (the test fails if it throws none), and
// whether a message contains a part: how the tests check that bad input gets its one clear line.
#pragma once

#include <doctest/doctest.h>

#include <emergent/core/error.hpp>
#include <functional>
#include <string>

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const emergent::Error& e) {
    return e.what();
  }
  FAIL("expected emergent::Error");
  return {};
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}
