// Attention entropy, best-head IoU and emergence-time detection on hand-made inputs whose
// answers are known in closed form.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/analysis/attention_entropy.hpp>
#include <emergent/analysis/attention_iou.hpp>
#include <emergent/analysis/emergence.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <limits>
#include <vector>

namespace {

// [heads, T, T] with every row of head h set by row_of(h, query) over keys.
template <class RowFunction>
std::vector<double> make_pattern(int heads, int T, RowFunction row_of) {
  std::vector<double> pattern(static_cast<std::size_t>(heads * T * T), 0.0);
  for (int h = 0; h < heads; ++h)
    for (int q = 0; q < T; ++q)
      for (int k = 0; k < T; ++k)
        pattern[static_cast<std::size_t>((h * T + q) * T + k)] = row_of(h, q, k);
  return pattern;
}

}  // namespace

TEST_CASE("batch_averaged_pattern averages over the batch") {
  const int batch = 2, heads = 1, T = 2;
  const std::vector<float> att = {1, 0, 0.5f,  0.5f,  //
                                  1, 0, 0.25f, 0.75f};
  const std::vector<double> pattern = emergent::batch_averaged_pattern(att, batch, heads, T);
  CHECK(pattern == std::vector<double>{1, 0, 0.375, 0.625});
  CHECK_THROWS_AS(emergent::batch_averaged_pattern(att, 3, heads, T), emergent::Error);
}

TEST_CASE("entropy: uniform row is ln k, one-hot row is 0, renormalised over the key range") {
  const int heads = 3, T = 6;
  const int key_begin = 0, key_end = 4;  // k = 4 keys
  // Head 0: uniform over keys 0..3, with extra mass outside the range (renormalisation removes it).
  // Head 1: one-hot on key 2. Head 2: half on key 0, half on key 1.
  const std::vector<double> pattern = make_pattern(heads, T, [](int h, int, int k) {
    if (h == 0) return k < 4 ? 0.1 : 0.3;
    if (h == 1) return k == 2 ? 1.0 : 0.0;
    return k < 2 ? 0.5 : 0.0;
  });
  const std::vector<int> queries = {3, 4, 5};
  const std::vector<double> entropy =
      emergent::head_entropy(pattern, heads, T, queries, key_begin, key_end);
  REQUIRE(entropy.size() == 3);
  CHECK(entropy[0] == doctest::Approx(std::log(4.0)));
  CHECK(entropy[1] == doctest::Approx(0.0));
  CHECK(entropy[2] == doctest::Approx(std::log(2.0)));
  // A row with no mass in range counts as uniform.
  const std::vector<double> outside =
      make_pattern(1, T, [](int, int, int k) { return k == 5 ? 1.0 : 0.0; });
  CHECK(emergent::head_entropy(outside, 1, T, queries, 0, 4)[0] == doctest::Approx(std::log(4.0)));
  CHECK_THROWS_AS(emergent::head_entropy(pattern, heads, T, queries, 3, 3), emergent::Error);
  CHECK_THROWS_AS(emergent::head_entropy(pattern, heads, T, std::vector<int>{T}, 0, 4),
                  emergent::Error);
}

TEST_CASE("IoU: perfect head 1, disjoint head 0, best head chosen per row, ties documented") {
  const int S = 8;
  const emergent::LinearMap task(S, 3, 5);
  const int T = task.length();
  const std::vector<float> target = task.attention_target();
  auto target_at = [&](int q, int k) {
    return static_cast<double>(target[static_cast<std::size_t>(q * T + k)]);
  };

  // Head 0 is the target itself (normalised); head 1 puts its mass only on keys off the support.
  const std::vector<double> pattern = make_pattern(2, T, [&](int h, int q, int k) {
    if (k >= S) return 0.0;
    if (h == 0) return target_at(q, k) / 3.0;
    return target_at(q, k) > 0 ? 0.0 : 0.2;
  });
  const emergent::RowIou rows = emergent::best_head_row_ious(pattern, 2, T, target, 0, S);
  REQUIRE(rows.queries.size() == static_cast<std::size_t>(S));
  for (int i = 0; i < S; ++i) {
    CHECK(rows.queries[static_cast<std::size_t>(i)] == task.x1_query(i));
    CHECK(rows.iou[static_cast<std::size_t>(i)] == doctest::Approx(1.0));
    CHECK(rows.best_head[static_cast<std::size_t>(i)] == 0);
  }
  CHECK(emergent::best_head_row_iou(pattern, 2, T, target, 0, S) == doctest::Approx(1.0));

  // Only the disjoint head: IoU 0.
  const std::vector<double> disjoint(pattern.begin() + T * T, pattern.end());
  CHECK(emergent::best_head_row_iou(disjoint, 1, T, target, 0, S) == doctest::Approx(0.0));

  // Two heads that split the rows: head 0 right on even rows, head 1 right on odd rows.
  const std::vector<double> split = make_pattern(2, T, [&](int h, int q, int k) {
    if (k >= S || q < S - 1) return 0.0;
    const bool own_row = (q - (S - 1)) % 2 == h;
    return own_row ? target_at(q, k) : (target_at(q, k) > 0 ? 0.0 : 0.2);
  });
  const emergent::RowIou split_rows = emergent::best_head_row_ious(split, 2, T, target, 0, S);
  for (int i = 0; i < S; ++i) {
    CHECK(split_rows.iou[static_cast<std::size_t>(i)] == doctest::Approx(1.0));
    CHECK(split_rows.best_head[static_cast<std::size_t>(i)] == i % 2);
  }

  // Ties: a flat row picks the lowest keys; equal IoUs pick the lowest head.
  std::vector<float> small_target(9, 0.0f);
  small_target[2 * 3 + 0] = 1.0f;  // query 2 -> key 0
  small_target[2 * 3 + 2] = 1.0f;  // query 2 -> key 2
  const std::vector<double> flat(2 * 9, 1.0 / 3.0);
  const emergent::RowIou tie = emergent::best_head_row_ious(flat, 2, 3, small_target, 0, 3);
  REQUIRE(tie.iou.size() == 1);
  CHECK(tie.iou[0] == doctest::Approx(1.0 / 3.0));  // top-2 = {0, 1} vs {0, 2}: 1 / 3
  CHECK(tie.best_head[0] == 0);
  CHECK_THROWS_AS(emergent::best_head_row_iou(flat, 2, 3, std::vector<float>(9, 0.0f), 0, 3),
                  emergent::Error);
}

TEST_CASE("trailing_mean uses only the past") {
  const std::vector<double> values = {4, 2, 0, 6};
  CHECK(emergent::trailing_mean(values, 2) == std::vector<double>{4, 3, 1, 3});
  CHECK(emergent::trailing_mean(values, 1) == values);
  CHECK(emergent::trailing_mean(values, 10) == std::vector<double>{4, 3, 2, 3});
}

TEST_CASE("first_step_below on a synthetic step curve, and the censored case") {
  // Plateau at ln 2 until step 500, then a drop to 0.01.
  std::vector<std::int64_t> steps;
  std::vector<double> loss;
  for (int i = 0; i < 100; ++i) {
    steps.push_back(i * 10);
    loss.push_back(i < 50 ? std::log(2.0) : 0.01);
  }
  CHECK(emergent::first_step_below(steps, loss, 0.5, 1) == std::optional<std::int64_t>(500));
  // Window 4: the mean crosses 0.5 once at least 2 of 4 points are low: (2*ln2 + 0.02)/4 < 0.5.
  CHECK(emergent::first_step_below(steps, loss, 0.5, 4) == std::optional<std::int64_t>(510));
  CHECK_FALSE(emergent::first_step_below(steps, loss, 0.001, 4).has_value());
  // A single noisy dip does not count once smoothed.
  std::vector<double> noisy(loss.begin(), loss.begin() + 50);
  noisy[20] = 0.4;
  const std::vector<std::int64_t> noisy_steps(steps.begin(), steps.begin() + 50);
  CHECK(emergent::first_step_below(noisy_steps, noisy, 0.6, 1) == std::optional<std::int64_t>(200));
  CHECK_FALSE(emergent::first_step_below(noisy_steps, noisy, 0.6, 5).has_value());
  CHECK_THROWS_AS(emergent::first_step_below(noisy_steps, loss, 0.5, 1), emergent::Error);

  const emergent::EmergenceThresholds thresholds{"x1_loss", std::log(2.0) - 0.05, std::log(2.0) / 2,
                                                 0.05};
  const emergent::EmergenceSummary solved =
      emergent::summarize_emergence(steps, loss, thresholds, 1);
  CHECK(solved.emergence_step == std::optional<std::int64_t>(500));
  CHECK(solved.midpoint_step == std::optional<std::int64_t>(500));
  CHECK(solved.solved_step == std::optional<std::int64_t>(500));
  CHECK(solved.final_value == doctest::Approx(0.01));
  const emergent::EmergenceSummary censored = emergent::summarize_emergence(
      noisy_steps, std::vector<double>(50, std::log(2.0)), thresholds, 3);
  CHECK_FALSE(censored.emergence_step.has_value());
  CHECK_FALSE(censored.midpoint_step.has_value());
  CHECK_FALSE(censored.solved_step.has_value());
  CHECK(censored.final_value == doctest::Approx(std::log(2.0)));
}

TEST_CASE("chance IoU: hand-worked cases and a simulation of random heads") {
  // 3 target keys of 4: one random head meets 3 of them with probability 1/4 (IoU 1), else 2
  // (IoU 2/4); the best of M heads misses only if all M do.
  CHECK(emergent::chance_row_iou(4, 3, 1) == doctest::Approx(0.25 * 1.0 + 0.75 * 0.5));
  CHECK(emergent::chance_row_iou(4, 3, 32) == doctest::Approx(1.0 - 0.5 * std::pow(0.75, 32)));
  CHECK(emergent::chance_row_iou(5, 5, 3) == doctest::Approx(1.0));  // every key is a target
  CHECK(emergent::chance_row_iou(16, 1, 1) == doctest::Approx(1.0 / 16));
  CHECK_THROWS_AS(emergent::chance_row_iou(4, 5, 1), emergent::Error);
  // Simulation: M heads each choosing k random keys of n, the best IoU per row, averaged.
  const int n = 16, k = 3, M = 8, samples = 20000;
  std::uint64_t state = 12345;
  const auto next = [&state] {  // a small LCG: independent of the code under test
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  double total = 0;
  for (int s = 0; s < samples; ++s) {
    double best = 0;
    for (int h = 0; h < M; ++h) {
      std::vector<int> keys(n);
      for (int i = 0; i < n; ++i) keys[i] = i;
      for (int i = 0; i < k; ++i) std::swap(keys[i], keys[i + next() % (n - i)]);
      int hits = 0;
      for (int i = 0; i < k; ++i) hits += keys[i] < k ? 1 : 0;  // the targets are keys 0..k-1
      best = std::max(best, double(hits) / double(2 * k - hits));
    }
    total += best;
  }
  CHECK(total / samples == doctest::Approx(emergent::chance_row_iou(n, k, M)).epsilon(0.01));
}
