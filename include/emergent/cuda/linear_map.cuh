// tasks/linear_map.hpp's sampler on the device: sample b of step t for member e, from the same
// Philox words as LinearMap::sample (key = that member's data seed, stream = t, word
// (b << 32) + k / 32 holds bit k % 32 of x0), so a step's batch is the same on every backend.
// Each member has its own matrix A (a mixed ensemble's members may differ in sparsity or matrix
// seed) and its own step (members resumed from different checkpoints). Members of different S
// are padded (train/ensemble_trainer.cuh): each writes its own sequences, of its own length, into
// the first rows and positions of its block of the ensemble's [batch, length()], and leaves the
// padding as it is.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/cuda/device_system.cuh>
#include <emergent/tasks/linear_map.hpp>
#include <span>
#include <vector>

namespace emergent::cuda {

class DeviceLinearMap {
 public:
  // tasks[e]: member e's (one task for all members: every member samples it). batches[e]: the
  // sequences member e samples a step, when the members are padded (then the tasks' S may
  // differ); empty: every member samples the batch sample() is given, and S is common. length:
  // the ensemble's sequence length, at least every task's (0: the longest task's).
  explicit DeviceLinearMap(const std::vector<const LinearMap*>& tasks,
                           const std::vector<int>& batches = {}, int length = 0)
      : length_(length) {
    require(batches.empty() || batches.size() == tasks.size(), "DeviceLinearMap",
            "needs one batch per member");
    std::vector<Member> members;
    std::vector<std::uint8_t> matrices;
    for (std::size_t e = 0; e < tasks.size(); ++e) {
      const LinearMap& task = *tasks[e];
      require(!batches.empty() || task.state_size() == tasks[0]->state_size(), "DeviceLinearMap",
              "the members' state sizes differ: give each member's batch (a padded ensemble)");
      members.push_back(
          {task.state_size(), batches.empty() ? 0 : batches[e], std::int64_t(matrices.size())});
      matrices.insert(matrices.end(), task.matrix().begin(), task.matrix().end());
      require(length == 0 || task.length() <= length, "DeviceLinearMap",
              "a member's sequence is longer than the ensemble's");
      length_ = std::max(length_, task.length());
    }
    copy_to_device<Member>(members, members_);
    copy_to_device<std::uint8_t>(matrices, matrices_);
  }
  explicit DeviceLinearMap(const LinearMap& task) : DeviceLinearMap(std::vector{&task}) {}

  // The ensemble's sequence length: as given, else its longest member's.
  int length() const { return length_; }

  // inputs, targets [E, batch, length()] of step `step`; seeds [E] on the device.
  void sample(const std::uint64_t* seeds, int members, std::uint64_t step, int batch,
              std::int32_t* inputs, std::int32_t* targets) const {
    sample_at(seeds, members, StepValue{step}, batch, inputs, targets);
  }
  // The same, member e's step read on the device from steps[e] (so that a captured step samples
  // the steps the host wrote there before replaying it).
  void sample(const std::uint64_t* seeds, int members, const std::uint64_t* steps, int batch,
              std::int32_t* inputs, std::int32_t* targets) const {
    sample_at(seeds, members, StepPointer{steps}, batch, inputs, targets);
  }

  // One member's map (public, as the two below: nvcc's device lambdas may not be in private
  // member functions).
  struct Member {
    int state_size, batch;       // batch 0: the whole batch sample() is given
    std::int64_t matrix_offset;  // its S x S matrix in the matrices of every member
  };
  struct StepValue {
    std::uint64_t value;
    EMERGENT_HD std::uint64_t operator()(std::int64_t) const { return value; }
  };
  struct StepPointer {
    const std::uint64_t* at;
    EMERGENT_HD std::uint64_t operator()(std::int64_t member) const { return at[member]; }
  };

  template <class Step>
  void sample_at(const std::uint64_t* seeds, int members, Step step_of, int batch,
                 std::int32_t* inputs, std::int32_t* targets) const {
    const int T = length_;
    const Member* params = raw(members_);
    const std::uint8_t* matrices = raw(matrices_);
    const bool per_member = members_.size() > 1;  // else one task for every member
    for_each_index(std::int64_t(members) * batch, [=] EMERGENT_HD(std::int64_t i) {
      const std::int64_t e = i / batch;
      const Member m = params[per_member ? e : 0];
      const std::uint64_t b = std::uint64_t(i % batch);
      if (m.batch > 0 && b >= std::uint64_t(m.batch)) return;  // a padding row
      const int S = m.state_size;
      const std::uint64_t step = step_of(e), seed = seeds[e];
      const std::uint8_t* A = matrices + m.matrix_offset;
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
  int length_ = 0;
  DeviceVector<Member> members_;         // [E], or one for all
  DeviceVector<std::uint8_t> matrices_;  // each member's [S, S], one after another
};

}  // namespace emergent::cuda
