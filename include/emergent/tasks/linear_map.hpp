// The linear map task of "Emergent Capabilities Arise Randomly from Learning Sparse Attention
// Patterns": x1 = A x0 mod 2 for a fixed sparse binary S x S matrix A with exactly s ones per
// row. Each bit of x1 is the parity of s bits of x0, so the ideal attention of the query that
// predicts x1[i] is row i of A: the task's attention target is known exactly, which is what
// makes it a probe of how sparse attention patterns are learned (docs/paper-notes.md
// §1).
//
// Sequence layout (C = 2 colours, T = 2 states, no separators, no BOS):
//   tokens   = x0[0..S-1], x1[0..S-1]                               2S tokens in {0, 1}
//   inputs   = tokens[0 .. 2S-2],  targets = tokens[1 .. 2S-1]      length() = 2S-1
// Position p predicts token p+1, so the query at position S-1+i predicts x1[i] and should
// attend to the keys j < S (which hold x0[j]) where A[i][j] = 1.
//
// A is drawn once from task_seed and fixed for the run (the task is learned into the weights,
// not inferred in context). Data is fresh every step: sample b of step t is a pure function of
// (data_seed, t, b), never of batch size, thread count or backend.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/task.hpp>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

class LinearMap {
 public:
  LinearMap(int state_size, int ones_per_row, std::uint64_t task_seed)
      : state_size_(state_size), ones_per_row_(ones_per_row) {
    require(state_size >= 1, "LinearMap S",
            "state size S must be >= 1, got " + std::to_string(state_size));
    require(ones_per_row >= 1 && ones_per_row <= state_size, "LinearMap s",
            "ones per row s must be in [1, S=" + std::to_string(state_size) + "], got " +
                std::to_string(ones_per_row));
    draw_matrix(task_seed);
  }

  // The declaration (tasks/task.hpp). Emergence is read off the x1 loss (chance ln 2):
  // emergence < ln 2 - 0.03 (the first rows of A are being learned), midpoint < ln 2 / 2 (about
  // half the rows), solved < 0.05.
  static constexpr const char* task_name = "linear-map";
  static std::vector<Parameter> parameters() {
    return {integer("S", 16, between(1, 16384), "state size S: x0 and x1 have S bits each"),
            integer("s", 3, between(1, 16384), "ones per row of A, 1 <= s <= S"),
            integer("task_seed", 0, between(0, limits::kSeed),
                    "draws A; fixed across seeds, so that seeds differ only in init and data")};
  }
  static Shape default_shape() {
    return {.vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 0};
  }
  static TaskSetup setup(const ParameterValues& v) {
    const double ln2 = std::log(2.0);
    return {std::make_unique<TaskAdapter<LinearMap>>(LinearMap(
                int(v.integer("S")), int(v.integer("s")), std::uint64_t(v.integer("task_seed")))),
            "x1",
            {"x1_loss", ln2 - 0.03, ln2 / 2, 0.05}};
  }

  int vocab() const { return 2; }
  int state_size() const { return state_size_; }
  int ones_per_row() const { return ones_per_row_; }
  int length() const { return 2 * state_size_ - 1; }
  // A, S x S row-major, entries 0/1.
  const std::vector<std::uint8_t>& matrix() const { return matrix_; }

  // The position whose next-token prediction is x1[i].
  int x1_query(int i) const { return state_size_ - 1 + i; }

  // Fills inputs and targets, each [batch, length()] row-major, with fresh samples of step `step`.
  // x0 of sample b: bit k is bit (k % 32) of word (b << 32) + k / 32 of the Philox stream
  // (key = data_seed, stream id = step). The word index depends only on b and k, hence sample b
  // is the same for every batch size and thread count.
  void sample(std::uint64_t data_seed, std::uint64_t step, int batch,
              std::span<std::int32_t> inputs, std::span<std::int32_t> targets) const {
    require(batch >= 0, "LinearMap::sample batch", "must be >= 0, got " + std::to_string(batch));
    const std::size_t T = static_cast<std::size_t>(length());
    const std::size_t expected = static_cast<std::size_t>(batch) * T;
    require(inputs.size() == expected, "LinearMap::sample inputs",
            "size " + std::to_string(inputs.size()) +
                ", expected batch*length = " + std::to_string(expected));
    require(targets.size() == expected, "LinearMap::sample targets",
            "size " + std::to_string(targets.size()) +
                ", expected batch*length = " + std::to_string(expected));

    const std::size_t S = static_cast<std::size_t>(state_size_);
    const PhiloxStream stream(data_seed, step);
    std::vector<std::int32_t> tokens(2 * S);
    for (int b = 0; b < batch; ++b) {
      const std::uint64_t sample_base = static_cast<std::uint64_t>(b) << 32;
      for (std::size_t k = 0; k < S; ++k) {
        tokens[k] = static_cast<std::int32_t>((stream.u32(sample_base + k / 32) >> (k % 32)) & 1u);
      }
      for (std::size_t i = 0; i < S; ++i) {
        std::int32_t parity = 0;
        for (std::size_t j = 0; j < S; ++j) parity ^= matrix_[i * S + j] & tokens[j];
        tokens[S + i] = parity;
      }
      const std::size_t row = static_cast<std::size_t>(b) * T;
      for (std::size_t p = 0; p < T; ++p) {
        inputs[row + p] = tokens[p];
        targets[row + p] = tokens[p + 1];
      }
    }
  }

  // [length, length] (query x key): 1 at (x1_query(i), j) where A[i][j] = 1, else 0. Rows of
  // the queries inside x0 are all zero: those predictions carry no learnable signal.
  std::vector<float> attention_target() const {
    const std::size_t T = static_cast<std::size_t>(length());
    const std::size_t S = static_cast<std::size_t>(state_size_);
    std::vector<float> target(T * T, 0.0f);
    for (std::size_t i = 0; i < S; ++i) {
      const std::size_t query = S - 1 + i;
      for (std::size_t j = 0; j < S; ++j) {
        if (matrix_[i * S + j] != 0) target[query * T + j] = 1.0f;
      }
    }
    return target;
  }

  // All positions weighted 1: the loss the paper plots. Its floor is (S-1)/(2S-1) ln 2, because
  // the S-1 predictions inside x0 are coin flips.
  std::vector<float> full_loss_weights() const {
    return std::vector<float>(static_cast<std::size_t>(length()), 1.0f);
  }

  // 1 at positions S-1 .. 2S-2 (the predictions of x1), else 0: the learnable part, which starts
  // at ln 2 and falls to 0 when the task is solved.
  std::vector<float> x1_loss_weights() const {
    std::vector<float> weights(static_cast<std::size_t>(length()), 0.0f);
    for (int i = 0; i < state_size_; ++i) weights[static_cast<std::size_t>(x1_query(i))] = 1.0f;
    return weights;
  }

  // The SequenceTask view (tasks/task.hpp): the learnable predictions are those of x1; attention
  // analysis looks at the queries that predict x1 and the keys of x0.
  std::vector<float> predictable_loss_weights() const { return x1_loss_weights(); }
  std::vector<int> analysis_queries() const {
    std::vector<int> queries(static_cast<std::size_t>(state_size_));
    for (int i = 0; i < state_size_; ++i) queries[static_cast<std::size_t>(i)] = x1_query(i);
    return queries;
  }
  std::pair<int, int> analysis_key_range(int /*query*/) const { return {0, state_size_}; }

 private:
  // Row i: a partial Fisher-Yates shuffle of 0..S-1 picks s distinct columns uniformly. Draw k of
  // row i is below(i*S + k, S-k) on stream "matrix" of task_seed, so row i never depends on how
  // many draws other rows used.
  void draw_matrix(std::uint64_t task_seed) {
    const std::size_t S = static_cast<std::size_t>(state_size_);
    const PhiloxStream stream(task_seed, stream_id_from_name("matrix"));
    matrix_.assign(S * S, 0);
    std::vector<std::uint32_t> columns(S);
    for (std::size_t i = 0; i < S; ++i) {
      std::iota(columns.begin(), columns.end(), 0u);
      for (std::size_t k = 0; k < static_cast<std::size_t>(ones_per_row_); ++k) {
        const std::size_t pick = k + stream.below(i * S + k, static_cast<std::uint32_t>(S - k));
        std::swap(columns[k], columns[pick]);
        matrix_[i * S + columns[k]] = 1;
      }
    }
  }

  int state_size_;
  int ones_per_row_;
  std::vector<std::uint8_t> matrix_;
};

}  // namespace emergent
