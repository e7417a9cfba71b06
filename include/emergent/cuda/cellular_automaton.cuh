// tasks/cellular_automaton.hpp's sampler on the device: sequence b of step t for member e, from
// the same Philox draws as CellularAutomaton::sample (key = that member's data seed, stream = t;
// the rule below(b << 30, N), cell i of s_0 below((b << 30) + 1 + i, C)) and the same automaton
// steps (CellularAutomaton::record_states), so a step's batch is the same on every backend and
// no batch is made on the host or uploaded. One index per (member, sequence), which writes its
// sequence's recorded states into scratch and then its inputs and targets rows. Each member has
// its own pool of rules and its own S, T, C, W and depth and its own step. Members of different
// lengths are padded (train/ensemble_trainer.cuh): each writes its own sequences, of its own
// length, into the first rows and positions of its block of the ensemble's [batch, length()],
// and leaves the padding as it is.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/cuda/device_system.cuh>
#include <emergent/tasks/cellular_automaton.hpp>
#include <vector>

namespace emergent::cuda {

class DeviceCellularAutomaton {
 public:
  // tasks[e]: member e's automaton; batch: the ensemble's sequences a step. batches[e]: the
  // sequences member e samples, when the members are padded (then their lengths may differ);
  // empty: every member samples `batch`, and the length is common. length: the ensemble's
  // sequence length, at least every member's (0: the longest member's).
  DeviceCellularAutomaton(const std::vector<const CellularAutomaton*>& tasks, int batch,
                          const std::vector<int>& batches = {}, int length = 0)
      : length_(length), members_(int(tasks.size())), batch_(batch) {
    require(batches.empty() || batches.size() == tasks.size(), "DeviceCellularAutomaton",
            "needs one batch per member");
    std::vector<Member> members;
    std::vector<int> pool;
    for (std::size_t e = 0; e < tasks.size(); ++e) {
      const CellularAutomaton& task = *tasks[e];
      require(!batches.empty() || task.length() == tasks[0]->length(), "DeviceCellularAutomaton",
              "the members' sequence lengths S T - 1 differ: give each member's batch (a padded "
              "ensemble)");
      require(batches.empty() || (batches[e] >= 1 && batches[e] <= batch),
              "DeviceCellularAutomaton", "a member's batch must be 1 to the ensemble's");
      members.push_back({task.state_size(), task.states(), task.colours(), task.window(),
                         task.depth(), task.rules(), task.table_size(), task.length(),
                         batches.empty() ? batch : batches[e], std::int64_t(pool.size())});
      for (const std::vector<int>& table : task.rule_tables())
        pool.insert(pool.end(), table.begin(), table.end());
      require(length == 0 || task.length() <= length, "DeviceCellularAutomaton",
              "a member's sequence is longer than the ensemble's");
      length_ = std::max(length_, task.length());
    }
    copy_to_device<Member>(members, members_device_);
    copy_to_device<int>(pool, pool_);
    scratch_.resize(std::size_t(members_) * batch * kScratchPerToken * (length_ + 1));
  }

  int length() const { return length_; }

  // inputs, targets [E, batch, length()], member e's of step steps[e] (read on the device, so
  // that a captured step samples the steps the host wrote there before replaying it); seeds [E]
  // on the device. members and batch: as constructed.
  void sample(const std::uint64_t* seeds, int members, const std::uint64_t* steps, int batch,
              std::int32_t* inputs, std::int32_t* targets) const {
    require(members == members_ && batch == batch_, "DeviceCellularAutomaton::sample",
            "members and batch must be those it was made for");
    const int T = length_;
    const Member* params = raw(members_device_);
    const int* pool = raw(pool_);
    int* scratch = raw(scratch_);
    for_each_index(std::int64_t(members) * batch, [=] EMERGENT_HD(std::int64_t i) {
      const std::int64_t e = i / batch;
      const Member m = params[e];
      if (i % batch >= m.batch) return;  // a padding row
      const int L = m.length;
      const std::uint64_t seed = seeds[e], step = steps[e], base = std::uint64_t(i % batch) << 30;
      const std::array<std::uint32_t, 2> key{std::uint32_t(seed), std::uint32_t(seed >> 32)};
      const auto below = [&](std::uint64_t index, int n) {
        return int(philox_below(philox4x32_10({std::uint32_t(step), std::uint32_t(step >> 32),
                                               std::uint32_t(index), std::uint32_t(index >> 32)},
                                              key),
                                key, std::uint32_t(n)));
      };
      const int* table = pool + m.pool_offset + std::int64_t(below(base, m.rules)) * m.table_size;
      int* tokens = scratch + i * kScratchPerToken * (T + 1);  // [T, S], then 2 S between states
      for (int c = 0; c < m.state_size; ++c)
        tokens[c] = below(base + 1 + std::uint64_t(c), m.colours);
      CellularAutomaton::record_states(tokens, tokens + L + 1, m.state_size, m.states, table,
                                       m.colours, m.window, m.depth);
      for (int p = 0; p < L; ++p) {
        inputs[i * T + p] = tokens[p];
        targets[i * T + p] = tokens[p + 1];
      }
    });
  }

  // One member's automaton (public: nvcc's device lambdas copy it).
  struct Member {
    int state_size, states, colours, window, depth, rules, table_size;
    int length, batch;         // its own sequences' length and number
    std::int64_t pool_offset;  // its first table in the pool
  };

 private:
  // Scratch per token of a sequence: its S T cells, and 2 S <= 2 S T for the states between.
  static constexpr int kScratchPerToken = 3;
  int length_, members_, batch_;  // length_: the ensemble's
  DeviceVector<Member> members_device_;
  DeviceVector<int> pool_;             // every member's N tables of C^W colours, one after another
  mutable DeviceVector<int> scratch_;  // [E, batch, 3 (length + 1)]
};

}  // namespace emergent::cuda
