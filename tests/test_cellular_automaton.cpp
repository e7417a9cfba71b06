// The multi-rule cellular automaton task: the step function against hand-computed examples
// (digit order, periodic wrap at both ends, depth, W=5), the rule pool (seeded, uniform entries,
// table r independent of N), the sequences (every transition follows the sequence's one rule,
// rules vary across sequences, next-token shift, independence from batch size), the attention
// target, loss weights, analysis ranges and input validation.
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <emergent/tasks/cellular_automaton.hpp>
#include <map>
#include <set>
#include <vector>

using emergent::CellularAutomaton;

namespace {

// Wolfram numbering for C=2, W=3: table[n] = bit n of the rule number.
std::vector<int> elementary(int rule_number) {
  std::vector<int> table(8);
  for (int n = 0; n < 8; ++n) table[static_cast<std::size_t>(n)] = (rule_number >> n) & 1;
  return table;
}

// Full token sequence b (S*T tokens): inputs give tokens 0..L-1, the last target gives token L.
std::vector<int> tokens_of(const std::vector<std::int32_t>& inputs,
                           const std::vector<std::int32_t>& targets, int b, int L) {
  std::vector<int> tokens(inputs.begin() + b * L, inputs.begin() + (b + 1) * L);
  tokens.push_back(targets[static_cast<std::size_t>((b + 1) * L - 1)]);
  return tokens;
}

std::vector<int> state_of(const std::vector<int>& tokens, int t, int S) {
  return {tokens.begin() + t * S, tokens.begin() + (t + 1) * S};
}

}  // namespace

TEST_CASE("step_state: hand-computed elementary rules with periodic wrap at both ends") {
  CHECK(elementary(110) == std::vector<int>{0, 1, 1, 1, 0, 1, 1, 0});
  // Rule 240: next[i] = left neighbour s[i-1] (the most significant digit). Cell 0 reads s[4].
  CHECK(CellularAutomaton::step_state({0, 0, 0, 0, 1}, elementary(240), 2, 3) ==
        std::vector<int>{1, 0, 0, 0, 0});
  CHECK(CellularAutomaton::step_state({1, 1, 0, 1, 0}, elementary(240), 2, 3) ==
        std::vector<int>{0, 1, 1, 0, 1});
  // Rule 170: next[i] = right neighbour s[i+1] (the least significant digit). Cell 4 reads s[0].
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, elementary(170), 2, 3) ==
        std::vector<int>{0, 0, 0, 0, 1});
  // Rule 110 on 10000: cell 0 sees (s4,s0,s1) = 010 -> 1, cell 1 sees 100 -> 0, cell 4 sees
  // (s3,s4,s0) = 001 -> 1.
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, elementary(110), 2, 3) ==
        std::vector<int>{1, 0, 0, 0, 1});
  // Rule 110 on 01101: windows 101 011 110 101 010 -> 1 1 1 1 1.
  CHECK(CellularAutomaton::step_state({0, 1, 1, 0, 1}, elementary(110), 2, 3) ==
        std::vector<int>{1, 1, 1, 1, 1});
  // Rule 30 on 10000: windows 010 100 000 000 001 -> 1 1 0 0 1.
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, elementary(30), 2, 3) ==
        std::vector<int>{1, 1, 0, 0, 1});
  // Rule 30 on 11001: windows 111 110 100 001 011 -> 0 0 1 1 1.
  CHECK(CellularAutomaton::step_state({1, 1, 0, 0, 1}, elementary(30), 2, 3) ==
        std::vector<int>{0, 0, 1, 1, 1});
  // S=1: the window is the single cell three times (index 0 or 7).
  CHECK(CellularAutomaton::step_state({1}, elementary(110), 2, 3) == std::vector<int>{0});
  CHECK(CellularAutomaton::step_state({0}, elementary(1), 2, 3) == std::vector<int>{1});
}

TEST_CASE("step_state: C=3 digit order and W=1") {
  // W=1: a colour map applied cell by cell.
  CHECK(CellularAutomaton::step_state({0, 1, 2, 2}, {2, 0, 1}, 3, 1) ==
        std::vector<int>{2, 0, 1, 1});
  // C=3, W=3: index = 9*s[i-1] + 3*s[i] + s[i+1].
  std::vector<int> left(27), right(27), mixed(27);
  for (int n = 0; n < 27; ++n) {
    left[static_cast<std::size_t>(n)] = n / 9;
    right[static_cast<std::size_t>(n)] = n % 3;
    mixed[static_cast<std::size_t>(n)] = (n * 7 + 1) % 3;
  }
  CHECK(CellularAutomaton::step_state({2, 0, 1, 0}, left, 3, 3) == std::vector<int>{0, 2, 0, 1});
  CHECK(CellularAutomaton::step_state({2, 0, 1, 0}, right, 3, 3) == std::vector<int>{0, 1, 0, 2});
  // State 2 0 1: windows (s2,s0,s1) = 1 2 0 -> 15, (2,0,1) -> 19, (0,1,2) -> 5; (7n+1) mod 3:
  // 106 -> 1, 134 -> 2, 36 -> 0.
  CHECK(CellularAutomaton::step_state({2, 0, 1}, mixed, 3, 3) == std::vector<int>{1, 2, 0});
}

TEST_CASE("evolve: depth k applies the step k times") {
  // Rule 110: 01101 -> 11111 -> 00000.
  CHECK(CellularAutomaton::evolve({0, 1, 1, 0, 1}, elementary(110), 2, 3, 2) ==
        std::vector<int>{0, 0, 0, 0, 0});
  // Rule 30: 10000 -> 11001 -> 00111.
  CHECK(CellularAutomaton::evolve({1, 0, 0, 0, 0}, elementary(30), 2, 3, 2) ==
        std::vector<int>{0, 0, 1, 1, 1});
  // Rule 240 shifts right: three steps move the 1 from cell 3 to cell 1 (through the wrap).
  CHECK(CellularAutomaton::evolve({0, 0, 0, 1, 0}, elementary(240), 2, 3, 3) ==
        std::vector<int>{0, 1, 0, 0, 0});
  CHECK(CellularAutomaton::evolve({0, 1, 1, 0, 1}, elementary(110), 2, 3, 0) ==
        std::vector<int>{0, 1, 1, 0, 1});
}

TEST_CASE("step_state: W=5") {
  std::vector<int> leftmost(32), rightmost(32), parity(32);
  for (int n = 0; n < 32; ++n) {
    leftmost[static_cast<std::size_t>(n)] = n >> 4;  // s[i-2]
    rightmost[static_cast<std::size_t>(n)] = n & 1;  // s[i+2]
    parity[static_cast<std::size_t>(n)] = std::popcount(static_cast<unsigned>(n)) & 1;
  }
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, leftmost, 2, 5) ==
        std::vector<int>{0, 0, 1, 0, 0});
  CHECK(CellularAutomaton::step_state({0, 0, 0, 1, 0}, leftmost, 2, 5) ==
        std::vector<int>{1, 0, 0, 0, 0});
  CHECK(CellularAutomaton::step_state({0, 0, 0, 0, 1}, leftmost, 2, 5) ==
        std::vector<int>{0, 1, 0, 0, 0});
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, rightmost, 2, 5) ==
        std::vector<int>{0, 0, 0, 1, 0});
  CHECK(CellularAutomaton::step_state({0, 1, 0, 0, 0}, rightmost, 2, 5) ==
        std::vector<int>{0, 0, 0, 0, 1});
  // S=5, W=5: every window is the whole ring.
  CHECK(CellularAutomaton::step_state({1, 1, 0, 0, 0}, parity, 2, 5) ==
        std::vector<int>{0, 0, 0, 0, 0});
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0}, parity, 2, 5) ==
        std::vector<int>{1, 1, 1, 1, 1});
  // S=7: parity of cells i-2..i+2. State 1000000: cells 5, 6, 0, 1, 2 see the 1.
  CHECK(CellularAutomaton::step_state({1, 0, 0, 0, 0, 0, 0}, parity, 2, 5) ==
        std::vector<int>{1, 1, 1, 0, 0, 1, 1});
  // S=3 < W: the window wraps more than once; s[i-2] = s[i+1].
  CHECK(CellularAutomaton::step_state({1, 0, 0}, leftmost, 2, 5) == std::vector<int>{0, 0, 1});
}

TEST_CASE("the rule pool is fixed by task_seed, uniform, and table r does not depend on N") {
  const CellularAutomaton task(16, 16, 4, 3, 1, 256, 2024);
  CHECK(task.vocab() == 4);
  CHECK(task.state_size() == 16);
  CHECK(task.states() == 16);
  CHECK(task.colours() == 4);
  CHECK(task.window() == 3);
  CHECK(task.depth() == 1);
  CHECK(task.rules() == 256);
  CHECK(task.table_size() == 64);
  CHECK(task.length() == 255);
  CHECK(task.dependency_radius() == 1);
  REQUIRE(task.rule_tables().size() == 256);
  std::vector<int> counts(4, 0);
  for (const std::vector<int>& table : task.rule_tables()) {
    REQUIRE(table.size() == 64);
    for (int entry : table) {
      REQUIRE((entry >= 0 && entry < 4));
      ++counts[static_cast<std::size_t>(entry)];
    }
  }
  // 16384 entries, 4096 expected per colour, sd ~55.
  for (int count : counts) CHECK(std::abs(count - 4096) < 350);
  // Distinct tables (a collision among 4^64 is impossible in practice).
  CHECK(std::set<std::vector<int>>(task.rule_tables().begin(), task.rule_tables().end()).size() ==
        256);

  CHECK(CellularAutomaton(16, 16, 4, 3, 1, 256, 2024).rule_tables() == task.rule_tables());
  CHECK(CellularAutomaton(16, 16, 4, 3, 1, 256, 2025).rule_tables() != task.rule_tables());
  // The pool does not depend on S, T or k, and table r not on N.
  CHECK(CellularAutomaton(5, 3, 4, 3, 2, 256, 2024).rule_tables() == task.rule_tables());
  const CellularAutomaton fewer(16, 16, 4, 3, 1, 10, 2024);
  for (std::size_t r = 0; r < 10; ++r) CHECK(fewer.rule_tables()[r] == task.rule_tables()[r]);
  // Defaults are the paper's CA settings.
  const CellularAutomaton defaults(16);
  CHECK(defaults.states() == 16);
  CHECK(defaults.colours() == 4);
  CHECK(defaults.window() == 3);
  CHECK(defaults.depth() == 1);
  CHECK(defaults.rules() == 256);
}

TEST_CASE("every recorded state follows from the previous one by the sequence's rule, k times") {
  struct Case {
    int S, T, C, W, k, N;
  };
  for (const Case c :
       {Case{5, 4, 2, 3, 1, 8}, Case{5, 4, 2, 3, 2, 8}, Case{7, 5, 2, 5, 1, 4},
        Case{16, 16, 4, 3, 1, 256}, Case{9, 6, 3, 3, 3, 16}, Case{1, 3, 4, 3, 1, 4}}) {
    CAPTURE(c.S);
    CAPTURE(c.W);
    CAPTURE(c.k);
    const CellularAutomaton task(c.S, c.T, c.C, c.W, c.k, c.N, 77);
    const int L = task.length(), batch = 24;
    REQUIRE(L == c.S * c.T - 1);
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(batch * L)), targets(inputs.size());
    task.sample(/*data_seed=*/3, /*step=*/17, batch, inputs, targets);
    for (int b = 0; b < batch; ++b) {
      for (int p = 0; p + 1 < L; ++p) {
        CHECK(targets[static_cast<std::size_t>(b * L + p)] ==
              inputs[static_cast<std::size_t>(b * L + p + 1)]);
      }
      const std::vector<int> tokens = tokens_of(inputs, targets, b, L);
      for (int v : tokens) REQUIRE((v >= 0 && v < c.C));
      const int rule = task.rule_of_sequence(3, 17, b);
      REQUIRE((rule >= 0 && rule < c.N));
      const std::vector<int>& table = task.rule_tables()[static_cast<std::size_t>(rule)];
      for (int t = 1; t < c.T; ++t) {
        CHECK(state_of(tokens, t, c.S) ==
              CellularAutomaton::evolve(state_of(tokens, t - 1, c.S), table, c.C, c.W, c.k));
      }
    }
  }
}

TEST_CASE("one rule per sequence, read off the tokens alone; rules vary across sequences") {
  // k=1: every (window of s_{t-1}, cell of s_t) pair is one table entry. Within a sequence the
  // observed entries never conflict and agree with the pool table of the sequence's rule.
  const int S = 16, T = 16, C = 4, batch = 64;
  const CellularAutomaton task(S, T, C, 3, 1, 256, 5);
  const int L = task.length();
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(batch * L)), targets(inputs.size());
  task.sample(8, 2, batch, inputs, targets);
  std::set<int> rules;
  std::vector<int> colour_counts(C, 0);
  for (int b = 0; b < batch; ++b) {
    const std::vector<int> tokens = tokens_of(inputs, targets, b, L);
    std::map<int, int> observed;  // window index -> next colour
    bool consistent = true;
    for (int t = 1; t < T; ++t) {
      for (int i = 0; i < S; ++i) {
        const int left = tokens[static_cast<std::size_t>((t - 1) * S + (i + S - 1) % S)];
        const int centre = tokens[static_cast<std::size_t>((t - 1) * S + i)];
        const int right = tokens[static_cast<std::size_t>((t - 1) * S + (i + 1) % S)];
        const int index = left * C * C + centre * C + right;
        const int next = tokens[static_cast<std::size_t>(t * S + i)];
        const auto [it, inserted] = observed.emplace(index, next);
        if (!inserted && it->second != next) consistent = false;
      }
    }
    CHECK(consistent);
    const int rule = task.rule_of_sequence(8, 2, b);
    const std::vector<int>& table = task.rule_tables()[static_cast<std::size_t>(rule)];
    for (const auto& [index, next] : observed)
      CHECK(table[static_cast<std::size_t>(index)] == next);
    rules.insert(rule);
    for (int i = 0; i < S; ++i)
      ++colour_counts[static_cast<std::size_t>(tokens[static_cast<std::size_t>(i)])];
  }
  // 64 draws from 256 rules: ~57 distinct expected.
  CHECK(rules.size() >= 20);
  // s_0 is uniform: 1024 cells, 256 per colour expected, sd ~14.
  for (int count : colour_counts) CHECK(std::abs(count - 256) < 90);
  // Over 4096 sequences every rule of the pool is used (16 expected per rule).
  std::vector<int> uses(256, 0);
  for (int b = 0; b < 4096; ++b) ++uses[static_cast<std::size_t>(task.rule_of_sequence(8, 2, b))];
  for (int count : uses) CHECK(count > 0);
}

TEST_CASE("sequence b depends only on (data_seed, step, b)") {
  const CellularAutomaton task(12, 6, 4, 3, 2, 64, 5);
  const std::size_t L = static_cast<std::size_t>(task.length());
  std::vector<std::int32_t> small_in(4 * L), small_tg(4 * L), big_in(300 * L), big_tg(300 * L);
  task.sample(9, 100, 4, small_in, small_tg);
  task.sample(9, 100, 300, big_in, big_tg);
  CHECK(std::vector<std::int32_t>(big_in.begin(), big_in.begin() + 4 * L) == small_in);
  CHECK(std::vector<std::int32_t>(big_tg.begin(), big_tg.begin() + 4 * L) == small_tg);
  std::vector<std::int32_t> other_in(4 * L), other_tg(4 * L);
  task.sample(9, 101, 4, other_in, other_tg);
  CHECK(other_in != small_in);
  task.sample(10, 100, 4, other_in, other_tg);
  CHECK(other_in != small_in);
  CHECK(std::vector<std::int32_t>(small_in.begin(), small_in.begin() + L) !=
        std::vector<std::int32_t>(small_in.begin() + L, small_in.begin() + 2 * L));
  // The data stream does not depend on task_seed (only the pool does).
  const CellularAutomaton other_pool(12, 6, 4, 3, 2, 64, 6);
  CHECK(other_pool.rule_of_sequence(9, 100, 3) == task.rule_of_sequence(9, 100, 3));
  std::vector<std::int32_t> none_in, none_tg;
  CHECK_NOTHROW(task.sample(9, 100, 0, none_in, none_tg));
}

TEST_CASE("hand-written S=3, T=2, W=1 attention target") {
  // Query 2 predicts s_1[0] and attends to s_0[0] (key 0), query 3 -> key 1, query 4 -> key 2.
  const CellularAutomaton task(3, 2, 2, 1, 1, 4, 0);
  REQUIRE(task.length() == 5);
  const std::vector<float> expected = {
      0, 0, 0, 0, 0,  //
      0, 0, 0, 0, 0,  //
      1, 0, 0, 0, 0,  //
      0, 1, 0, 0, 0,  //
      0, 0, 1, 0, 0,  //
  };
  CHECK(task.attention_target() == expected);
  // With W=3 the three-cell window covers the ring of 3: every target row is all of s_0.
  const std::vector<float> ring = {
      0, 0, 0, 0, 0,  //
      0, 0, 0, 0, 0,  //
      1, 1, 1, 0, 0,  //
      1, 1, 1, 0, 0,  //
      1, 1, 1, 0, 0,  //
  };
  CHECK(CellularAutomaton(3, 2, 2, 3, 1, 4, 0).attention_target() == ring);
}

TEST_CASE("attention target rows: the periodic dependency window of the previous state") {
  struct Case {
    int S, T, W, k;
  };
  for (const Case c : {Case{8, 4, 3, 1}, Case{16, 3, 3, 2}, Case{16, 3, 5, 2}, Case{8, 3, 5, 2},
                       Case{2, 4, 3, 1}, Case{1, 4, 3, 1}, Case{11, 3, 7, 1}}) {
    CAPTURE(c.S);
    CAPTURE(c.W);
    CAPTURE(c.k);
    const CellularAutomaton task(c.S, c.T, 2, c.W, c.k, 2, 1);
    const int L = task.length(), S = c.S;
    const int r = c.k * (c.W - 1) / 2;
    const int span = std::min(2 * r + 1, S);
    const std::vector<float> target = task.attention_target();
    REQUIRE(target.size() == static_cast<std::size_t>(L * L));
    for (int q = 0; q < L; ++q) {
      std::set<int> expected;
      if (q >= S - 1) {
        const int t = (q + 1) / S, i = (q + 1) % S;
        for (int d = -r; d <= r; ++d) expected.insert((t - 1) * S + ((i + d) % S + S) % S);
        CHECK(static_cast<int>(expected.size()) == span);
      }
      int ones = 0;
      for (int key = 0; key < L; ++key) {
        const float value = target[static_cast<std::size_t>(q * L + key)];
        CHECK(value == (expected.count(key) != 0 ? 1.0f : 0.0f));
        if (key > q) CHECK(value == 0.0f);  // causal
        ones += value != 0.0f;
      }
      CHECK(ones == (q >= S - 1 ? span : 0));
      const std::vector<int> keys = task.target_keys(q);
      CHECK(std::set<int>(keys.begin(), keys.end()) == expected);
      CHECK(keys.size() == expected.size());
    }
  }
  // A spot check by hand: S=8, W=3, k=1; query 8 predicts token 9 = s_1[1], keys s_0[0..2];
  // query 7 predicts s_1[0], keys s_0[7], s_0[0], s_0[1] (left wrap); query 14 predicts s_1[7],
  // keys s_0[6], s_0[7], s_0[0] (right wrap); query 15 predicts s_2[0], keys 15, 8, 9.
  const CellularAutomaton task(8, 4, 2, 3, 1, 2, 1);
  CHECK(task.target_keys(8) == std::vector<int>{0, 1, 2});
  CHECK(task.target_keys(7) == std::vector<int>{0, 1, 7});
  CHECK(task.target_keys(14) == std::vector<int>{0, 6, 7});
  CHECK(task.target_keys(15) == std::vector<int>{8, 9, 15});
  CHECK(task.target_keys(6).empty());
}

TEST_CASE("loss weights, analysis queries and key ranges, loss floor") {
  const int S = 6, T = 4;
  const CellularAutomaton task(S, T, 4, 3, 1, 8, 0);
  const int L = task.length();
  REQUIRE(L == 23);
  const std::vector<float> full = task.full_loss_weights();
  const std::vector<float> predictable = task.predictable_loss_weights();
  REQUIRE(full.size() == static_cast<std::size_t>(L));
  REQUIRE(predictable.size() == static_cast<std::size_t>(L));
  for (int p = 0; p < L; ++p) {
    CHECK(full[static_cast<std::size_t>(p)] == 1.0f);
    CHECK(predictable[static_cast<std::size_t>(p)] == (p >= S - 1 ? 1.0f : 0.0f));
  }
  const std::vector<int> queries = task.analysis_queries();
  REQUIRE(queries.size() == static_cast<std::size_t>(L - (S - 1)));
  for (std::size_t n = 0; n < queries.size(); ++n) CHECK(queries[n] == S - 1 + static_cast<int>(n));
  // Query 5 predicts s_1[0]: keys [0, 6). Query 10 predicts s_1[5]. Query 11 predicts s_2[0].
  CHECK(task.analysis_key_range(5) == std::pair<int, int>{0, 6});
  CHECK(task.analysis_key_range(10) == std::pair<int, int>{0, 6});
  CHECK(task.analysis_key_range(11) == std::pair<int, int>{6, 12});
  CHECK(task.analysis_key_range(22) == std::pair<int, int>{12, 18});
  for (int q : queries) {
    const auto [begin, end] = task.analysis_key_range(q);
    for (int key : task.target_keys(q)) {
      CHECK(key >= begin);
      CHECK(key < end);
    }
    CHECK(end - 1 <= q);
  }
  CHECK_THROWS_WITH_AS(task.analysis_key_range(4), doctest::Contains("query"), emergent::Error);
  CHECK_THROWS_WITH_AS(task.analysis_key_range(23), doctest::Contains("query"), emergent::Error);
  // Floor: (S-1)/(S*T-1) ln C; at the paper's S=16, T=16, C=4 it is 15/255 ln 4.
  CHECK(task.loss_floor() == doctest::Approx(5.0 / 23.0 * std::log(4.0)));
  CHECK(CellularAutomaton(16).loss_floor() == doctest::Approx(15.0 / 255.0 * std::log(4.0)));
  CHECK(CellularAutomaton(16).loss_floor() < 1.3);
}

TEST_CASE("invalid parameters and spans are rejected with the field named") {
  CHECK_THROWS_WITH_AS(CellularAutomaton(0), doctest::Contains("CellularAutomaton S"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 1), doctest::Contains("CellularAutomaton T"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 1), doctest::Contains("CellularAutomaton C"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 2), doctest::Contains("CellularAutomaton W"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 0), doctest::Contains("CellularAutomaton W"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 11), doctest::Contains("CellularAutomaton C^W"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 2, 21), doctest::Contains("CellularAutomaton C^W"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 2000000, 1),
                       doctest::Contains("CellularAutomaton C^W"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 3, 0), doctest::Contains("CellularAutomaton k"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 3, 1, 0),
                       doctest::Contains("CellularAutomaton N"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(4, 16, 4, 9, 1, 2048),
                       doctest::Contains("CellularAutomaton N"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton(1 << 30, 16), doctest::Contains("CellularAutomaton S*T"),
                       emergent::Error);
  CHECK_NOTHROW(CellularAutomaton(4, 2, 4, 9, 1, 1));  // C^W = 2^18 fits

  const CellularAutomaton task(4, 2, 4, 3, 1, 4, 0);
  std::vector<std::int32_t> right(2 * 7), also_right(2 * 7), wrong(2 * 7 + 1);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 2, wrong, right), doctest::Contains("inputs"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 2, right, wrong), doctest::Contains("targets"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, -1, right, also_right), doctest::Contains("batch"),
                       emergent::Error);
  CHECK_NOTHROW(task.sample(0, 0, 2, right, also_right));
  CHECK_THROWS_WITH_AS(task.rule_of_sequence(0, 0, -1), doctest::Contains("rule_of_sequence b"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(task.target_keys(7), doctest::Contains("query"), emergent::Error);

  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({0, 1}, {0, 1, 1}, 2, 3),
                       doctest::Contains("table"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({0, 2}, elementary(110), 2, 3),
                       doctest::Contains("state"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({}, elementary(110), 2, 3),
                       doctest::Contains("state"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({0, 1}, elementary(110), 2, 2),
                       doctest::Contains("W"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({0, 1}, elementary(110), 1, 3),
                       doctest::Contains("C"), emergent::Error);
  CHECK_THROWS_WITH_AS(CellularAutomaton::step_state({0, 1}, {0, 1, 1, 1, 0, 1, 1, 2}, 2, 3),
                       doctest::Contains("table"), emergent::Error);
}
