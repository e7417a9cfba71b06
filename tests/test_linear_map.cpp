// The linear map task: the matrix (s ones per row, distinct columns, seeded), the sequences
// (x1 = A x0 mod 2, next-token shift, independence from batch size), the attention target and
// loss weights, and input validation.
#include <doctest/doctest.h>

#include <cstdint>
#include <emergent/tasks/linear_map.hpp>
#include <vector>

using emergent::LinearMap;

namespace {

std::vector<std::int32_t> x0_of(const std::vector<std::int32_t>& inputs, int b, int S) {
  const int T = 2 * S - 1;
  return {inputs.begin() + b * T, inputs.begin() + b * T + S};
}

}  // namespace

TEST_CASE("A has exactly s ones per row, and is fixed by task_seed") {
  for (int S : {1, 3, 8, 16, 32}) {
    for (int s : {1, (S + 1) / 2, S}) {
      const LinearMap task(S, s, 2024);
      REQUIRE(task.matrix().size() == static_cast<std::size_t>(S * S));
      for (int i = 0; i < S; ++i) {
        int ones = 0;
        for (int j = 0; j < S; ++j) {
          const std::uint8_t entry = task.matrix()[static_cast<std::size_t>(i * S + j)];
          REQUIRE((entry == 0 || entry == 1));  // 0/1 entries: ones at distinct columns
          ones += entry;
        }
        CHECK(ones == s);
      }
    }
  }
  CHECK(LinearMap(16, 3, 7).matrix() == LinearMap(16, 3, 7).matrix());
  CHECK(LinearMap(16, 3, 7).matrix() != LinearMap(16, 3, 8).matrix());
  const LinearMap task(16, 3, 7);
  CHECK(task.vocab() == 2);
  CHECK(task.state_size() == 16);
  CHECK(task.ones_per_row() == 3);
  CHECK(task.length() == 31);
}

TEST_CASE("column choice is spread over all columns") {
  // With S=8, s=1 over many seeds every column should be drawn for row 0.
  std::vector<int> hits(8, 0);
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    const LinearMap task(8, 1, seed);
    for (int j = 0; j < 8; ++j)
      hits[static_cast<std::size_t>(j)] += task.matrix()[static_cast<std::size_t>(j)];
  }
  for (int count : hits) CHECK(count > 20);  // expected 50
}

TEST_CASE("every sample satisfies x1 = A x0 mod 2 with the next-token shift") {
  const int S = 16, batch = 64;
  const LinearMap task(S, 5, 11);
  const int T = task.length();
  std::vector<std::int32_t> inputs(static_cast<std::size_t>(batch * T)), targets(inputs.size());
  task.sample(/*data_seed=*/3, /*step=*/17, batch, inputs, targets);
  int ones = 0;
  for (int b = 0; b < batch; ++b) {
    const std::vector<std::int32_t> x0 = x0_of(inputs, b, S);
    // Full token sequence: inputs give tokens 0..2S-2, the last target gives token 2S-1.
    std::vector<std::int32_t> tokens(inputs.begin() + b * T, inputs.begin() + (b + 1) * T);
    tokens.push_back(targets[static_cast<std::size_t>((b + 1) * T - 1)]);
    for (int p = 0; p + 1 < T; ++p)
      CHECK(targets[static_cast<std::size_t>(b * T + p)] ==
            inputs[static_cast<std::size_t>(b * T + p + 1)]);
    for (int i = 0; i < S; ++i) {
      int parity = 0;
      for (int j = 0; j < S; ++j)
        parity +=
            task.matrix()[static_cast<std::size_t>(i * S + j)] * x0[static_cast<std::size_t>(j)];
      CHECK(tokens[static_cast<std::size_t>(S + i)] == parity % 2);
      // The query of x1[i] has x1[i] as its target.
      CHECK(targets[static_cast<std::size_t>(b * T + task.x1_query(i))] == parity % 2);
    }
    for (int v : tokens) REQUIRE((v == 0 || v == 1));
    for (int v : x0) ones += v;
  }
  // x0 bits are fair coins: 1024 bits, mean 512, sd 16.
  CHECK(ones > 512 - 96);
  CHECK(ones < 512 + 96);
}

TEST_CASE("sample b depends only on (data_seed, step, b)") {
  const LinearMap task(40, 3, 5);  // S > 32: x0 spans two Philox words
  const std::size_t T = static_cast<std::size_t>(task.length());
  std::vector<std::int32_t> small_in(4 * T), small_tg(4 * T), big_in(400 * T), big_tg(400 * T);
  task.sample(9, 100, 4, small_in, small_tg);
  task.sample(9, 100, 400, big_in, big_tg);
  CHECK(std::vector<std::int32_t>(big_in.begin(), big_in.begin() + 4 * T) == small_in);
  CHECK(std::vector<std::int32_t>(big_tg.begin(), big_tg.begin() + 4 * T) == small_tg);
  // Other steps, other data seeds and other samples differ.
  std::vector<std::int32_t> other_in(4 * T), other_tg(4 * T);
  task.sample(9, 101, 4, other_in, other_tg);
  CHECK(other_in != small_in);
  task.sample(10, 100, 4, other_in, other_tg);
  CHECK(other_in != small_in);
  CHECK(std::vector<std::int32_t>(small_in.begin(), small_in.begin() + T) !=
        std::vector<std::int32_t>(small_in.begin() + T, small_in.begin() + 2 * T));
}

TEST_CASE("attention target and loss weights") {
  const int S = 8;
  const LinearMap task(S, 3, 1);
  const int T = task.length();
  const std::vector<float> target = task.attention_target();
  REQUIRE(target.size() == static_cast<std::size_t>(T * T));
  for (int q = 0; q < T; ++q) {
    for (int k = 0; k < T; ++k) {
      float expected = 0.0f;
      if (q >= S - 1 && k < S)
        expected = task.matrix()[static_cast<std::size_t>((q - (S - 1)) * S + k)];
      CHECK(target[static_cast<std::size_t>(q * T + k)] == expected);
      if (k > q) CHECK(target[static_cast<std::size_t>(q * T + k)] == 0.0f);  // causal
    }
  }
  const std::vector<float> full = task.full_loss_weights();
  const std::vector<float> x1 = task.x1_loss_weights();
  REQUIRE(full.size() == static_cast<std::size_t>(T));
  REQUIRE(x1.size() == static_cast<std::size_t>(T));
  for (int p = 0; p < T; ++p) {
    CHECK(full[static_cast<std::size_t>(p)] == 1.0f);
    CHECK(x1[static_cast<std::size_t>(p)] == (p >= S - 1 ? 1.0f : 0.0f));
  }
  CHECK(task.x1_query(0) == S - 1);
  CHECK(task.x1_query(S - 1) == 2 * S - 2);
}

TEST_CASE("hand-written S=3, s=3 case: every x1 bit is the parity of x0") {
  // With s = S the matrix is all ones whatever the seed, so the expansion is known by hand:
  // x0 = (a, b, c) -> tokens a b c p p p with p = a^b^c; inputs a b c p p, targets b c p p p.
  const LinearMap task(3, 3, 42);
  CHECK(task.matrix() == std::vector<std::uint8_t>(9, 1));
  CHECK(task.length() == 5);
  std::vector<std::int32_t> inputs(5 * 32), targets(5 * 32);
  task.sample(0, 0, 32, inputs, targets);
  for (int b = 0; b < 32; ++b) {
    const std::int32_t* in = inputs.data() + b * 5;
    const std::int32_t* tg = targets.data() + b * 5;
    const std::int32_t p = in[0] ^ in[1] ^ in[2];
    const std::vector<std::int32_t> expected_in = {in[0], in[1], in[2], p, p};
    const std::vector<std::int32_t> expected_tg = {in[1], in[2], p, p, p};
    CHECK(std::vector<std::int32_t>(in, in + 5) == expected_in);
    CHECK(std::vector<std::int32_t>(tg, tg + 5) == expected_tg);
  }
  const std::vector<float> expected_target = {
      0, 0, 0, 0, 0,  //
      0, 0, 0, 0, 0,  //
      1, 1, 1, 0, 0,  // query 2 predicts x1[0]
      1, 1, 1, 0, 0,  // query 3 predicts x1[1]
      1, 1, 1, 0, 0,  // query 4 predicts x1[2]
  };
  CHECK(task.attention_target() == expected_target);
}

TEST_CASE("invalid parameters and spans are rejected with the field named") {
  CHECK_THROWS_WITH_AS(LinearMap(0, 1, 0), doctest::Contains("S"), emergent::Error);
  CHECK_THROWS_WITH_AS(LinearMap(4, 0, 0), doctest::Contains("LinearMap s"), emergent::Error);
  CHECK_THROWS_WITH_AS(LinearMap(4, 5, 0), doctest::Contains("LinearMap s"), emergent::Error);
  const LinearMap task(4, 2, 0);
  std::vector<std::int32_t> right(2 * 7), also_right(2 * 7), wrong(2 * 7 + 1);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 2, wrong, right), doctest::Contains("inputs"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(task.sample(0, 0, 2, right, wrong), doctest::Contains("targets"),
                       emergent::Error);
  CHECK_NOTHROW(task.sample(0, 0, 2, right, also_right));
}
