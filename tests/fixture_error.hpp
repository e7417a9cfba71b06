// How far our values are from a golden fixture's (float32 in the file): the worst absolute
// difference over the largest absolute fixture value, so one number per tensor whatever its scale.
// tests/mixer_golden.hpp and tests/test_encoder.cpp judge their fixtures by it.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace fixture_error {

inline double relative_error(const std::vector<double>& ours, const std::vector<float>& theirs) {
  REQUIRE(ours.size() == theirs.size());
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) {
    diff = std::max(diff, std::abs(ours[i] - double(theirs[i])));
    scale = std::max(scale, std::abs(double(theirs[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace fixture_error
