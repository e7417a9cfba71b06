// tasks/linear_map.hpp's sampler on the device: sample b of step t for member e, from the same
// Philox words as LinearMap::sample (key = that member's data seed, stream = t, word
// (b << 32) + k / 32 holds bit k % 32 of x0), so a step's batch is the same on every backend.
// A (the task's matrix) is shared: the members of an ensemble are seeds of one task.
#pragma once

#include <array>
#include <cstdint>
#include <emergent/core/philox.hpp>
#include <emergent/cuda/device_system.cuh>
#include <emergent/tasks/linear_map.hpp>
#include <span>
#include <vector>

namespace emergent::cuda {

class DeviceLinearMap {
 public:
  explicit DeviceLinearMap(const LinearMap& task) : state_size_(task.state_size()) {
    copy_to_device<std::uint8_t>(task.matrix(), matrix_);
  }

  int length() const { return 2 * state_size_ - 1; }

  // inputs, targets [E, batch, length()] of step `step`; seeds [E] on the device.
  void sample(const std::uint64_t* seeds, int members, std::uint64_t step, int batch,
              std::int32_t* inputs, std::int32_t* targets) const {
    sample_at(seeds, members, StepValue{step}, batch, inputs, targets);
  }
  // The same, the step read on the device from *step (so that a captured step samples the step
  // the host wrote there before replaying it).
  void sample(const std::uint64_t* seeds, int members, const std::uint64_t* step, int batch,
              std::int32_t* inputs, std::int32_t* targets) const {
    sample_at(seeds, members, StepPointer{step}, batch, inputs, targets);
  }

  // (Public: nvcc's device lambdas may not be in private member functions.)
  struct StepValue {
    std::uint64_t value;
    EMERGENT_HD std::uint64_t operator()() const { return value; }
  };
  struct StepPointer {
    const std::uint64_t* at;
    EMERGENT_HD std::uint64_t operator()() const { return *at; }
  };

  template <class Step>
  void sample_at(const std::uint64_t* seeds, int members, Step step_of, int batch,
                 std::int32_t* inputs, std::int32_t* targets) const {
    const int S = state_size_, T = length();
    const std::uint8_t* A = raw(matrix_);
    for_each_index(std::int64_t(members) * batch, [=] EMERGENT_HD(std::int64_t i) {
      const std::uint64_t step = step_of();
      const std::uint64_t seed = seeds[i / batch], b = std::uint64_t(i % batch);
      const std::array<std::uint32_t, 2> key{std::uint32_t(seed), std::uint32_t(seed >> 32)};
      std::int32_t* in = inputs + i * T;
      std::int32_t* out = targets + i * T;
      // x0, then x1 = A x0 mod 2, written straight into the shifted inputs and targets
      std::uint32_t words[4] = {};
      std::uint64_t cached = ~std::uint64_t(0);
      auto x0 = [&](int k) {
        const std::uint64_t index = (b << 32) + std::uint64_t(k / 32);
        if (index / 4 != cached) {
          cached = index / 4;
          const auto block = philox4x32_10({std::uint32_t(step), std::uint32_t(step >> 32),
                                            std::uint32_t(cached), std::uint32_t(cached >> 32)},
                                           key);
          for (int w = 0; w < 4; ++w) words[w] = block[w];
        }
        return std::int32_t((words[index % 4] >> (k % 32)) & 1u);
      };
      std::int32_t previous = x0(0);
      for (int k = 1; k < S; ++k) {
        const std::int32_t bit = x0(k);
        in[k - 1] = previous;
        out[k - 1] = bit;
        previous = bit;
      }
      for (int r = 0; r < S; ++r) {
        std::int32_t parity = 0;
        for (int j = 0; j < S; ++j) parity ^= A[r * S + j] & x0(j);
        in[S - 1 + r] = previous;
        out[S - 1 + r] = parity;
        previous = parity;
      }
    });
  }

 private:
  int state_size_;
  DeviceVector<std::uint8_t> matrix_;
};

}  // namespace emergent::cuda
