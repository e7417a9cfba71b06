// Helpers of the device tests: random host data, reference matrices from device buffers, and the
// relative error the checks bound.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/reference/matrix.hpp>
#include <random>
#include <span>
#include <vector>

namespace device_checks {

namespace ref = emergent::reference;
using emergent::cuda::DeviceVector;

// Uniform in [-scale, scale], rounded to float (both sides then compute with the same values).
inline std::vector<float> random_floats(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = float(u(rng));
  return v;
}

inline DeviceVector<float> to_device(const std::vector<float>& host) {
  DeviceVector<float> d;
  emergent::cuda::copy_to_device<float>(host, d);
  return d;
}

// rows x cols of `values` starting at `offset` (row-major) as a double matrix
// `values` once for each of `members` members ([E, ...]: loss weights, bias patterns).
inline std::vector<float> for_each_member(const std::vector<float>& values, int members) {
  std::vector<float> all;
  for (int e = 0; e < members; ++e) all.insert(all.end(), values.begin(), values.end());
  return all;
}

inline ref::Matrix matrix(std::span<const float> values, std::size_t offset, int rows, int cols) {
  ref::Matrix m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = values[offset + std::size_t(r) * cols + c];
  return m;
}
inline ref::Vector vector(std::span<const float> values, std::size_t offset, int n) {
  ref::Vector v(n);
  for (int i = 0; i < n; ++i) v(i) = values[offset + std::size_t(i)];
  return v;
}

// ||actual - expected|| / ||expected|| over `count` values of actual from `offset`
inline double relative_error(std::span<const float> actual, std::size_t offset,
                             const double* expected, std::size_t count) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const double d = double(actual[offset + i]) - expected[i];
    diff += d * d;
    norm += expected[i] * expected[i];
  }
  return norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm);
}
inline double relative_error(std::span<const float> actual, std::size_t offset,
                             const ref::Matrix& expected) {
  return relative_error(actual, offset, expected.data(), std::size_t(expected.size()));
}
inline double relative_error(std::span<const float> actual, std::size_t offset,
                             const ref::Vector& expected) {
  return relative_error(actual, offset, expected.data(), std::size_t(expected.size()));
}

// float against double, for values of order 1 after a few dozen operations
inline constexpr double kTolerance = 2e-5;

}  // namespace device_checks
