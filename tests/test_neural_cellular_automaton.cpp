// The neural cellular automaton ("nca") task: the rule network's step against hand-set weights
// (copy the centre, take the left or upper neighbour with periodic wrap, a majority vote, ties),
// patch tokens worked by hand, the sequences (each transition follows the sequence's accepted
// rule, determinism, independence from batch size, one rule per sequence), the complexity filter
// (accepted rules inside the band, rejected ones outside, an impossible band's Error), the
// attention target, loss weights, analysis ranges, validation and the registry entry.
#include <doctest/doctest.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/neural_cellular_automaton.hpp>
#include <emergent/tasks/registry.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

using emergent::NeuralCellularAutomaton;
using Rule = NeuralCellularAutomaton::Rule;

namespace {

// All weights zero: C colours, H hidden units.
Rule zero_rule(int C, int H) {
  Rule rule;
  rule.colours = C;
  rule.hidden = H;
  rule.w1.assign(static_cast<std::size_t>(H * 9 * C), 0.0);
  rule.b1.assign(static_cast<std::size_t>(H), 0.0);
  rule.w2.assign(static_cast<std::size_t>(C * H), 0.0);
  rule.b2.assign(static_cast<std::size_t>(C), 0.0);
  return rule;
}

// next = colour of neighbour n (n = 3*(dr+1) + (dc+1)): hidden unit k fires (1) when neighbour n
// has colour k, and logit k = h_k.
Rule copy_neighbour(int C, int n) {
  Rule rule = zero_rule(C, C);
  for (int k = 0; k < C; ++k) {
    rule.w1[static_cast<std::size_t>(k * 9 * C + n * C + k)] = 1.0;
    rule.w2[static_cast<std::size_t>(k * C + k)] = 1.0;
  }
  return rule;
}

// C = 2, one hidden unit h = relu(#ones in the 3x3 neighbourhood - 4.5); logits (0.25, h):
// colour 1 iff at least 5 of the 9 cells are 1.
Rule majority() {
  Rule rule = zero_rule(2, 1);
  for (int n = 0; n < 9; ++n) rule.w1[static_cast<std::size_t>(n * 2 + 1)] = 1.0;
  rule.b1[0] = -4.5;
  rule.w2[1] = 1.0;
  rule.b2[0] = 0.25;
  return rule;
}

std::vector<int> sequence_tokens(const std::vector<std::int32_t>& inputs,
                                 const std::vector<std::int32_t>& targets, int b, int L) {
  std::vector<int> tokens(inputs.begin() + b * L, inputs.begin() + (b + 1) * L);
  tokens.push_back(targets[static_cast<std::size_t>((b + 1) * L - 1)]);
  return tokens;
}

std::vector<std::int32_t> batch_of(const NeuralCellularAutomaton& task, std::uint64_t seed,
                                   std::uint64_t step, int batch) {
  const std::size_t n = static_cast<std::size_t>(batch) * static_cast<std::size_t>(task.length());
  std::vector<std::int32_t> inputs(n), targets(n);
  task.sample(seed, step, batch, inputs, targets);
  return inputs;
}

}  // namespace

TEST_CASE("nca: hand-set rules copy the centre, the left and the upper neighbour with wrap") {
  // 4x4, C = 3, row-major.
  const std::vector<int> frame = {0, 1, 2, 0,  //
                                  2, 2, 1, 1,  //
                                  0, 0, 0, 2,  //
                                  1, 0, 2, 2};
  CHECK(NeuralCellularAutomaton::next_frame(frame, 4, copy_neighbour(3, 4)) == frame);
  // Left neighbour (dr = 0, dc = -1: n = 3): next[r][c] = frame[r][c-1], column 0 reads column 3.
  const std::vector<int> left = NeuralCellularAutomaton::next_frame(frame, 4, copy_neighbour(3, 3));
  CHECK(left == std::vector<int>{0, 0, 1, 2,  //
                                 1, 2, 2, 1,  //
                                 2, 0, 0, 0,  //
                                 2, 1, 0, 2});
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      CHECK(left[static_cast<std::size_t>(r * 4 + c)] ==
            frame[static_cast<std::size_t>(r * 4 + (c + 3) % 4)]);
    }
  }
  // Upper neighbour (dr = -1, dc = 0: n = 1): row 0 reads row 3.
  CHECK(NeuralCellularAutomaton::next_frame(frame, 4, copy_neighbour(3, 1)) ==
        std::vector<int>{1, 0, 2, 2,  //
                         0, 1, 2, 0,  //
                         2, 2, 1, 1,  //
                         0, 0, 0, 2});
  // Lower-right neighbour (dr = 1, dc = 1: n = 8): cell (3, 3) reads (0, 0).
  CHECK(NeuralCellularAutomaton::next_frame(frame, 4, copy_neighbour(3, 8)) ==
        std::vector<int>{2, 1, 1, 2,  //
                         0, 0, 2, 0,  //
                         0, 2, 2, 1,  //
                         1, 2, 0, 0});
  // G = 1: every neighbour is the cell itself.
  CHECK(NeuralCellularAutomaton::next_frame({2}, 1, copy_neighbour(3, 0)) == std::vector<int>{2});
}

TEST_CASE("nca: relu, biases and ties (majority vote, all-zero rule)") {
  // 3x3 with wrap: every neighbourhood is the whole grid once.
  CHECK(NeuralCellularAutomaton::next_frame({1, 1, 0, 1, 0, 1, 0, 1, 0}, 3, majority()) ==
        std::vector<int>(9, 1));  // 5 ones: 5 - 4.5 = 0.5 > 0.25
  CHECK(NeuralCellularAutomaton::next_frame({1, 1, 0, 1, 0, 1, 0, 0, 0}, 3, majority()) ==
        std::vector<int>(9, 0));  // 4 ones: relu(-0.5) = 0 < 0.25
  // 4x4 by hand: (0,0) sees rows 3,0,1 x columns 3,0,1: 1 + 2 + 2 = 5 ones -> 1; (1,1) sees rows
  // 0..2 x columns 0..2: 2 + 2 + 0 = 4 -> 0; (0,1): rows 3,0,1 x columns 0..2: 1 + 2 + 2 = 5 -> 1;
  // (3,3): rows 2,3,0 x columns 2,3,0: 1 + 2 + 1 = 4 -> 0.
  const std::vector<int> frame = {1, 1, 0, 0,  //
                                  1, 1, 0, 0,  //
                                  0, 0, 0, 1,  //
                                  0, 0, 1, 1};
  const std::vector<int> next = NeuralCellularAutomaton::next_frame(frame, 4, majority());
  CHECK(next[0] == 1);
  CHECK(next[5] == 0);
  CHECK(next[1] == 1);
  CHECK(next[15] == 0);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      int ones = 0;
      for (int dr = -1; dr <= 1; ++dr) {
        for (int dc = -1; dc <= 1; ++dc) {
          ones += frame[static_cast<std::size_t>(((r + dr + 4) % 4) * 4 + (c + dc + 4) % 4)];
        }
      }
      CHECK(next[static_cast<std::size_t>(r * 4 + c)] == (ones >= 5 ? 1 : 0));
    }
  }
  // All logits equal: the lowest colour.
  CHECK(NeuralCellularAutomaton::next_frame({2, 1, 0, 2}, 2, zero_rule(3, 2)) ==
        std::vector<int>{0, 0, 0, 0});
  // A tie between colours 1 and 2 above colour 0: colour 1.
  Rule tie = zero_rule(3, 1);
  tie.b2 = {-1.0, 0.5, 0.5};
  CHECK(NeuralCellularAutomaton::next_frame({2, 1, 0, 2}, 2, tie) == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("nca: patch tokens by hand") {
  const std::vector<int> frame = {0, 1, 2, 0,  //
                                  2, 2, 1, 1,  //
                                  0, 0, 0, 2,  //
                                  1, 0, 2, 2};
  // P = 2, C = 3: token = c(0,0) + 3 c(0,1) + 9 c(1,0) + 27 c(1,1) within the patch.
  //   patch (0,0): 0 1 / 2 2 -> 0 + 3 + 18 + 54 = 75;  patch (0,1): 2 0 / 1 1 -> 2 + 0 + 9 + 27 =
  //   38 patch (1,0): 0 0 / 1 0 -> 9;                      patch (1,1): 0 2 / 2 2 -> 0 + 6 + 18 +
  //   54 = 78
  CHECK(NeuralCellularAutomaton::frame_tokens(frame, 4, 2, 3) == std::vector<int>{75, 38, 9, 78});
  // P = 1: the cells themselves; P = G: one token, base-3 digits of the whole frame.
  CHECK(NeuralCellularAutomaton::frame_tokens(frame, 4, 1, 3) == frame);
  CHECK(NeuralCellularAutomaton::frame_tokens({1, 0, 1, 1}, 2, 2, 2) ==
        std::vector<int>{1 + 4 + 8});
}

TEST_CASE("nca: every frame follows from the previous one by the sequence's accepted rule") {
  const NeuralCellularAutomaton task;  // G = 8, P = 2, C = 2, F = 4, hidden 16
  REQUIRE(task.vocab() == 16);
  REQUIRE(task.length() == 63);
  REQUIRE(task.patches_per_frame() == 16);
  REQUIRE(task.filter_frames() == 16);
  const int L = task.length(), batch = 12;
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(batch * L)), targets(inputs.size());
  task.sample(/*data_seed=*/5, /*step=*/11, batch, inputs, targets);
  for (int b = 0; b < batch; ++b) {
    CAPTURE(b);
    for (int p = 0; p + 1 < L; ++p) {
      CHECK(targets[static_cast<std::size_t>(b * L + p)] ==
            inputs[static_cast<std::size_t>(b * L + p + 1)]);
    }
    const std::vector<int> tokens = sequence_tokens(inputs, targets, b, L);
    const Rule rule = task.candidate_rule(5, 11, b, task.accepted_attempt(5, 11, b));
    std::vector<int> frame = task.initial_frame(5, 11, b);
    for (int f = 0; f < 4; ++f) {
      const std::vector<int> expected = NeuralCellularAutomaton::frame_tokens(frame, 8, 2, 2);
      CHECK(std::vector<int>(tokens.begin() + f * 16, tokens.begin() + (f + 1) * 16) == expected);
      frame = NeuralCellularAutomaton::next_frame(frame, 8, rule);
    }
  }
}

TEST_CASE("nca: determinism, batch-size independence and one rule per sequence") {
  const NeuralCellularAutomaton task(6, 3, 2, 3, 8);  // vocab 2^9 = 512, 4 patches per frame
  CHECK(task.vocab() == 512);
  CHECK(task.length() == 11);
  const std::size_t L = static_cast<std::size_t>(task.length());
  const std::vector<std::int32_t> five = batch_of(task, 7, 3, 5);
  CHECK(batch_of(task, 7, 3, 5) == five);
  const std::vector<std::int32_t> one = batch_of(task, 7, 3, 1);
  CHECK(one == std::vector<std::int32_t>(five.begin(), five.begin() + static_cast<long>(L)));
  const std::vector<std::int32_t> eight = batch_of(task, 7, 3, 8);
  CHECK(std::vector<std::int32_t>(eight.begin(), eight.begin() + static_cast<long>(5 * L)) == five);
  CHECK(batch_of(task, 7, 4, 5) != five);
  CHECK(batch_of(task, 8, 3, 5) != five);
  // Each sequence its own rule and its own frame_0; a step or a seed changes them.
  for (int b = 1; b < 5; ++b) {
    CHECK(task.candidate_rule(7, 3, b, 0).w1 != task.candidate_rule(7, 3, 0, 0).w1);
    CHECK(task.initial_frame(7, 3, b) != task.initial_frame(7, 3, 0));
  }
  CHECK(task.candidate_rule(7, 3, 0, 1).w1 != task.candidate_rule(7, 3, 0, 0).w1);
  CHECK(task.candidate_rule(7, 4, 0, 0).w1 != task.candidate_rule(7, 3, 0, 0).w1);
  CHECK(task.candidate_rule(8, 3, 0, 0).w1 != task.candidate_rule(7, 3, 0, 0).w1);
  const Rule rule = task.candidate_rule(7, 3, 2, 0);
  CHECK(rule.w1.size() == 8 * 18);
  CHECK(rule.b1.size() == 8);
  CHECK(rule.w2.size() == 2 * 8);
  CHECK(rule.b2.size() == 2);
}

TEST_CASE("nca: accepted rules lie inside the complexity band, rejected ones outside") {
  // Noise scores about 1 and a frozen trajectory a little above 1/K.
  const NeuralCellularAutomaton task;
  CHECK(task.reference_size() > 100.0);
  // The identity rule: frame_0 repeated K times (0.204 here), far below the default band.
  const double identity = task.complexity(copy_neighbour(2, 4), task.initial_frame(0, 0, 0));
  CHECK(identity < 0.3);
  CHECK(identity > 1.0 / 16);

  for (const auto& [low, high] : {std::pair{0.5, 1.0}, std::pair{0.6, 0.75}}) {
    CAPTURE(low);
    const NeuralCellularAutomaton band(8, 2, 2, 4, 16, low, high);
    int rejected = 0;
    for (int b = 0; b < 24; ++b) {
      CAPTURE(b);
      const int accepted = band.accepted_attempt(1, 2, b);
      const std::vector<int> initial = band.initial_frame(1, 2, b);
      const double c = band.complexity(band.candidate_rule(1, 2, b, accepted), initial);
      CHECK(c >= low);
      CHECK(c <= high);
      for (int a = 0; a < accepted; ++a) {
        const double r = band.complexity(band.candidate_rule(1, 2, b, a), initial);
        CHECK((r < low || r > high));
        ++rejected;
      }
    }
    CHECK(rejected > 0);
  }
}

TEST_CASE("nca: a band that accepts too few rules is a clear Error") {
  // Rule trajectories score below 1 (their frames are not independent noise): none of 256
  // candidates reaches [1.1, 2].
  const NeuralCellularAutomaton task(8, 2, 2, 4, 16, 1.1, 2.0);
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(task.length())), targets(inputs.size());
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 1, inputs, targets),
                       doctest::Contains("min_complexity, max_complexity"), emergent::Error);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 1, inputs, targets),
                       doctest::Contains("the bounds accept too few rules"), emergent::Error);
  CHECK_THROWS_AS(task.accepted_attempt(0, 0, 0), emergent::Error);
}

TEST_CASE("nca: attention target, loss weights and analysis ranges") {
  const NeuralCellularAutomaton task;  // 4x4 patches per frame, N = 16
  const std::size_t L = static_cast<std::size_t>(task.length());
  const std::vector<float> target = task.attention_target();
  REQUIRE(target.size() == L * L);
  const auto row = [&](int query) {
    std::vector<int> keys;
    for (std::size_t k = 0; k < L; ++k)
      if (target[static_cast<std::size_t>(query) * L + k] != 0.0f) keys.push_back(int(k));
    return keys;
  };
  // Queries 0 .. 14 predict frame_0: no target.
  for (int q = 0; q < 15; ++q) CHECK(row(q).empty());
  // Query 20 predicts token 21 = frame 1, patch 5 = (1, 1): patches (0..2, 0..2) of frame 0.
  CHECK(row(20) == std::vector<int>{0, 1, 2, 4, 5, 6, 8, 9, 10});
  // Query 31 predicts token 32 = frame 2, patch 0 = (0, 0): patch rows and columns {3, 0, 1}
  // of frame 1 (positions 16 ..).
  CHECK(row(31) == std::vector<int>{16, 17, 19, 20, 21, 23, 28, 29, 31});
  // Query 15 predicts frame 1 patch 0; its last key is position 15 itself (patch (3, 3)).
  CHECK(row(15) == std::vector<int>{0, 1, 3, 4, 5, 7, 12, 13, 15});
  CHECK(task.target_keys(20) == row(20));
  // Fewer than 3 patches a side: every patch of the previous frame.
  const NeuralCellularAutomaton small(4, 2, 2, 3, 4);
  CHECK(small.target_keys(3) == std::vector<int>{0, 1, 2, 3});
  CHECK(small.target_keys(10) == std::vector<int>{4, 5, 6, 7});
  // P = 1: the 3x3 cells themselves (5x5 grid, cell 0 of frame 1 at token 25).
  const NeuralCellularAutomaton cells(5, 1, 2, 2, 4);
  CHECK(cells.target_keys(24) == std::vector<int>{0, 1, 4, 5, 6, 9, 20, 21, 24});

  const std::vector<float> full = task.full_loss_weights();
  const std::vector<float> predictable = task.predictable_loss_weights();
  REQUIRE(full.size() == L);
  REQUIRE(predictable.size() == L);
  for (std::size_t p = 0; p < L; ++p) {
    CHECK(full[p] == 1.0f);
    CHECK(predictable[p] == (p >= 15 ? 1.0f : 0.0f));
  }
  const std::vector<int> queries = task.analysis_queries();
  REQUIRE(queries.size() == 48);
  CHECK(queries.front() == 15);
  CHECK(queries.back() == 62);
  CHECK(task.analysis_key_range(15) == std::pair<int, int>{0, 16});
  CHECK(task.analysis_key_range(20) == std::pair<int, int>{0, 16});
  CHECK(task.analysis_key_range(31) == std::pair<int, int>{16, 32});
  CHECK(task.analysis_key_range(62) == std::pair<int, int>{32, 48});
  CHECK_THROWS_WITH_AS(task.analysis_key_range(14), doctest::Contains("query"), emergent::Error);
  CHECK_THROWS_WITH_AS(task.target_keys(63), doctest::Contains("query"), emergent::Error);
}

TEST_CASE("nca: bad parameters are one-line Errors naming the field") {
  const auto message = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const emergent::Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string patch = message([] { NeuralCellularAutomaton(8, 3); });
  CHECK(patch.find("NeuralCellularAutomaton patch") != std::string::npos);
  CHECK(patch.find("divide") != std::string::npos);
  CHECK(patch.find('\n') == std::string::npos);
  // 9^4 = 6561 > 4096.
  const std::string vocab = message([] { NeuralCellularAutomaton(8, 2, 9); });
  CHECK(vocab.find("NeuralCellularAutomaton colours") != std::string::npos);
  CHECK(vocab.find("4096") != std::string::npos);
  CHECK(vocab.find('\n') == std::string::npos);
  CHECK(NeuralCellularAutomaton(8, 2, 8).vocab() == 4096);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton(8, 4), doctest::Contains("colours"),
                       emergent::Error);  // 2^16
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton(8, 2, 2, 1), doctest::Contains("frames"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton(8, 2, 2, 4, 0), doctest::Contains("hidden"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton(8, 2, 2, 4, 16, 0.8, 0.7),
                       doctest::Contains("min_complexity"), emergent::Error);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton(0), doctest::Contains("grid"), emergent::Error);
  // The step and tokens refuse malformed input.
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton::next_frame({0, 1, 0}, 2, majority()),
                       doctest::Contains("frame"), emergent::Error);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton::next_frame({0, 1, 0, 2}, 2, majority()),
                       doctest::Contains("colour"), emergent::Error);
  Rule short_rule = majority();
  short_rule.w2.pop_back();
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton::next_frame({0, 1, 0, 1}, 2, short_rule),
                       doctest::Contains("rule"), emergent::Error);
  CHECK_THROWS_WITH_AS(NeuralCellularAutomaton::frame_tokens({0, 1, 0, 1}, 2, 3, 2),
                       doctest::Contains("patch"), emergent::Error);
}

TEST_CASE("nca: through the registry") {
  const emergent::TaskDeclaration& declaration = emergent::find_task("nca", "test");
  CHECK(declaration.default_shape.vocab == 0);
  CHECK(declaration.default_shape.max_len == 0);
  const emergent::TaskSetup setup = declaration.setup(
      emergent::ParameterValues(declaration.parameters, nlohmann::json::object(), "test"));
  CHECK(setup.task->vocab() == 16);
  CHECK(setup.task->length() == 63);
  CHECK(setup.predictable_name == "next_frame");
  CHECK(setup.thresholds.metric == "next_frame_loss");
  CHECK(setup.thresholds.emergence_below < std::log(16.0));
  CHECK(setup.thresholds.midpoint_below < setup.thresholds.emergence_below);
  CHECK(setup.thresholds.solved_below < setup.thresholds.midpoint_below);
  std::vector<std::int32_t> inputs(2 * 63), targets(inputs.size());
  setup.task->sample(0, 0, 2, inputs, targets);
  for (std::int32_t t : targets) CHECK((t >= 0 && t < 16));
  // Declared bounds and cross-field checks, as a config gives them.
  CHECK_THROWS_WITH_AS(declaration.setup(emergent::ParameterValues(
                           declaration.parameters, {{"grid", 8}, {"patch", 3}}, "test")),
                       doctest::Contains("patch"), emergent::Error);
  CHECK_THROWS_WITH_AS(
      emergent::ParameterValues(declaration.parameters, {{"colours", 300}}, "config"),
      doctest::Contains("colours"), emergent::Error);
  const emergent::TaskSetup wider = declaration.setup(emergent::ParameterValues(
      declaration.parameters, {{"grid", 12}, {"colours", 3}, {"frames", 3}}, "test"));
  CHECK(wider.task->vocab() == 81);
  CHECK(wider.task->length() == 3 * 36 - 1);
}
