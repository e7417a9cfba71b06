// The Pythia analysis over prompt sets (analysis/prompt_set.hpp, analysis/prompt_set_patching.hpp):
//   - the sets: deterministic, distinct texts, seeds in order, a skipped seed is a duplicate,
//     too few distinct texts is an error (ioi has 896);
//   - the aggregation (mean p(target), accuracy, the threshold) on hand-made predictions and on
//     the golden GPT-NeoX model, and the emergence search on the aggregated flag;
//   - patching averaged over prompts against transformers' per-prompt patched probabilities
//     (tests/golden/neox/manifest.json holds two prompts for the same pre/post pair), the top-K
//     bookkeeping (K capped, heads named, the recovery formula) and its errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <emergent/analysis/attention_patching.hpp>
#include <emergent/analysis/checkpoint_search.hpp>
#include <emergent/analysis/prompt_set.hpp>
#include <emergent/analysis/prompt_set_patching.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "neox_fixtures.hpp"

namespace {

namespace fs = std::filesystem;
using emergent::CapabilityTokens;
using emergent::NextTokenPrediction;

NextTokenPrediction prediction(double p, bool right) {
  NextTokenPrediction x;
  x.p_target = p;
  x.solved = right;
  x.greedy = right ? 7 : 8;
  return x;
}

// The two prompts of the manifest's patching cases (same pre and post models) and their values.
struct GoldenPatching {
  std::vector<CapabilityTokens> set;
  std::vector<nlohmann::json> cases;
};

GoldenPatching golden_patching() {
  std::ifstream in(kNeoxGolden / "manifest.json");
  const nlohmann::json m = nlohmann::json::parse(in);
  GoldenPatching g;
  for (const auto& p : m["patching"]) {
    REQUIRE(p["pre"] == "parallel_f32");
    REQUIRE(p["post"] == "parallel_legacy_f16");
    for (const auto& c : m["cases"])
      if (c["folder"] == p["pre"])
        g.set.push_back({c["prompts"][p["prompt"].get<std::size_t>()]["tokens"]
                             .get<std::vector<std::int32_t>>(),
                         p["target"].get<std::int32_t>()});
    g.cases.push_back(p);
  }
  REQUIRE(g.set.size() == 2);
  return g;
}

}  // namespace

TEST_CASE("pythia prompt sets: deterministic, distinct texts, seeds in order, duplicates skipped") {
  for (std::string_view kind : emergent::kCapabilityKinds) {
    CAPTURE(std::string(kind));
    const auto a = emergent::make_prompt_set(kind, 40, 4),
               b = emergent::make_prompt_set(kind, 40, 4);
    const auto prefix = emergent::make_prompt_set(kind, 7, 4);
    REQUIRE(a.size() == 40);
    std::set<std::string> texts;
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].seed == b[i].seed);
      CHECK(a[i].prompt.text == b[i].prompt.text);
      if (i < prefix.size()) CHECK(prefix[i].prompt.text == a[i].prompt.text);
      if (i > 0) CHECK(a[i].seed > a[i - 1].seed);
      const auto direct = emergent::make_capability_prompt(kind, a[i].seed, 4);
      CHECK(a[i].prompt.text == direct.text);
      CHECK(a[i].prompt.target == direct.target);
      CHECK(a[i].prompt.kind == std::string(kind));
      texts.insert(a[i].prompt.text);
    }
    CHECK(texts.size() == a.size());
    CHECK(a[0].seed == 0);
    // Every seed left out is a text some earlier seed gave.
    std::set<std::string> earlier;
    std::size_t next = 0;
    for (std::uint64_t seed = 0; seed <= a.back().seed; ++seed) {
      const std::string text = emergent::make_capability_prompt(kind, seed, 4).text;
      if (next < a.size() && a[next].seed == seed) {
        CHECK(earlier.insert(text).second);
        ++next;
      } else {
        CHECK(earlier.count(text) == 1);
      }
    }
  }
  // The repetition set starts with the paper's prompt.
  CHECK(emergent::make_prompt_set("repetition", 3)[0].prompt.text ==
        emergent::paper_repetition_prompt().text);
}

TEST_CASE("pythia prompt sets: ioi has 896 distinct prompts; asking for more is an error") {
  const auto ioi = emergent::make_prompt_set("ioi", 896);
  CHECK(ioi.back().seed > 895);  // duplicates were skipped on the way
  std::set<std::string> texts;
  for (const auto& p : ioi) texts.insert(p.prompt.text);
  CHECK(texts.size() == 896);
  CHECK_THROWS_WITH_AS(emergent::make_prompt_set("ioi", 897),
                       doctest::Contains("only 896 distinct ioi prompts"), emergent::Error);
  // Repetition of 2 digits has 10^2 texts.
  CHECK(emergent::make_prompt_set("repetition", 100, 2).size() == 100);
  CHECK_THROWS_WITH_AS(emergent::make_prompt_set("repetition", 101, 2),
                       doctest::Contains("only 100 distinct repetition prompts of length 2"),
                       emergent::Error);
  CHECK_THROWS_AS(emergent::make_prompt_set("ioi", 0), emergent::Error);
  CHECK_THROWS_AS(emergent::make_prompt_set("ioi", emergent::kMaxPromptSetCount + 1),
                  emergent::Error);
  CHECK_THROWS_AS(emergent::make_prompt_set("poetry", 2), emergent::Error);
}

TEST_CASE("pythia prompt sets: a target of several tokens is one error naming the prompt") {
  const emergent::BpeTokenizer tokenizer(std::string(EMERGENT_SOURCE_DIR) +
                                         "/tests/golden/tokenizer/tokenizer.json");
  // The golden tokenizer has " 3" but no " John" token (nor any other name of the ioi prompts).
  const auto ioi = emergent::make_prompt_set("ioi", 3);
  const std::string label = emergent::prompt_set_label(ioi[0]);
  CHECK(label ==
        "ioi prompt (seed 0) \"" + ioi[0].prompt.text + "\" -> \"" + ioi[0].prompt.target + "\"");
  try {
    (void)emergent::prompt_set_tokens(tokenizer, ioi);
    FAIL("no error");
  } catch (const emergent::Error& e) {
    const std::string what = e.what();
    CHECK(what.rfind(label + ": the target '" + ioi[0].prompt.target + "' is ", 0) == 0);
    CHECK(what.find("must be exactly one") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
  const std::vector<emergent::SeededPrompt> paper = {{0, emergent::paper_repetition_prompt()}};
  const auto tokens = emergent::prompt_set_tokens(tokenizer, paper);
  REQUIRE(tokens.size() == 1);
  CHECK(tokens[0].prompt == emergent::capability_tokens(tokenizer, paper[0].prompt).prompt);
}

TEST_CASE("pythia prompt sets: mean p(target), accuracy and the threshold, by hand") {
  const std::vector<NextTokenPrediction> four = {prediction(0.9, true), prediction(0.2, false),
                                                 prediction(0.6, true), prediction(0.1, false)};
  const emergent::PromptSetScore s = emergent::score_prompt_set(four, 0.5);
  CHECK(s.mean_p_target == doctest::Approx(0.45));  // (0.9 + 0.2 + 0.6 + 0.1) / 4
  CHECK(s.accuracy == 0.5);                         // 2 of 4
  CHECK(s.solved);
  REQUIRE(s.prompts.size() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(s.prompts[i].p_target == four[i].p_target);
    CHECK(s.prompts[i].greedy == four[i].greedy);
  }
  CHECK(!emergent::score_prompt_set(four, 0.51).solved);
  CHECK(emergent::score_prompt_set(four, 0.0).solved);
  CHECK(!emergent::score_prompt_set(four, 1.0).solved);
  const emergent::PromptSetScore three = emergent::score_prompt_set(
      {prediction(0.3, true), prediction(0.5, true), prediction(0.7, false)}, 0.5);
  CHECK(three.mean_p_target == doctest::Approx(0.5));
  CHECK(three.accuracy == doctest::Approx(2.0 / 3.0));
  CHECK_THROWS_WITH_AS(emergent::score_prompt_set({}, 0.5), doctest::Contains("empty"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(emergent::score_prompt_set(four, 1.5), doctest::Contains("[0, 1]"),
                       emergent::Error);
  CHECK_THROWS_AS(emergent::score_prompt_set(four, std::nan("")), emergent::Error);
}

TEST_CASE(
    "pythia prompt sets: a checkpoint's evaluation is the per-prompt prediction, aggregated") {
  const auto model = emergent::neox::load_checkpoint(kNeoxGolden / "parallel_f32");
  const std::vector<CapabilityTokens> set = {
      {{5, 17, 42, 9, 5, 17, 42}, 9}, {{83, 38, 53, 76, 116, 24}, 21}, {{47}, 113}, {{3, 4, 3}, 0}};
  // Make one prompt right: its target is the model's greedy token.
  std::vector<CapabilityTokens> with_right = set;
  with_right[1].target = emergent::predict_next(*model.network, set[1].prompt, 0).greedy;
  const emergent::PromptSetScore s =
      emergent::evaluate_prompt_set(*model.network, with_right, 0.25);
  REQUIRE(s.prompts.size() == 4);
  double sum = 0;
  int right = 0;
  for (std::size_t i = 0; i < 4; ++i) {
    const auto p =
        emergent::predict_next(*model.network, with_right[i].prompt, with_right[i].target);
    CHECK(s.prompts[i].p_target == p.p_target);
    CHECK(s.prompts[i].greedy == p.greedy);
    CHECK(s.prompts[i].solved == p.solved);
    sum += p.p_target;
    right += p.solved;
  }
  CHECK(s.prompts[1].solved);
  CHECK(s.mean_p_target == doctest::Approx(sum / 4));
  CHECK(s.accuracy == doctest::Approx(right / 4.0));
  CHECK(s.solved == (right >= 1));
}

TEST_CASE("pythia prompt sets: the emergence search runs on the aggregated solved flag") {
  // Pythia's 154 checkpoints; 4 prompts, prompt j right from checkpoint flips[j] on. With
  // threshold q the set is solved once ceil(4 q) prompts are right.
  std::vector<emergent::SuiteCheckpoint> suite{{0, "step0"}};
  for (std::int64_t s = 1; s <= 512; s *= 2) suite.push_back({s, "step" + std::to_string(s)});
  for (std::int64_t s = 1000; s <= 143000; s += 1000)
    suite.push_back({s, "step" + std::to_string(s)});
  const std::vector<std::size_t> flips = {12, 40, 41, 150};
  auto at = [&](std::size_t i, double threshold) {
    std::vector<NextTokenPrediction> p;
    for (std::size_t f : flips) p.push_back(prediction(i >= f ? 0.8 : 0.05, i >= f));
    return emergent::CheckpointSetEvaluation{suite[i].step, "",
                                             emergent::score_prompt_set(p, threshold)};
  };
  const std::vector<std::pair<double, std::size_t>> expected = {
      {0.25, 12}, {0.5, 40}, {0.75, 41}, {1.0, 150}};
  for (const auto& [threshold, flip] : expected) {
    CAPTURE(threshold);
    const auto r = emergent::search_emergence<emergent::CheckpointSetEvaluation>(
        suite, [&](std::size_t i) { return at(i, threshold); });
    CHECK(r.outcome == "emerged");
    CHECK(*r.first_solving_step == suite[flip].step);
    CHECK(*r.last_failing_step == suite[flip - 1].step);
    CHECK(*r.emergence_step ==
          doctest::Approx(0.5 * double(suite[flip].step + suite[flip - 1].step)));
    CHECK(r.evaluations.size() <= 10);
    for (const auto& e : r.evaluations) {
      CHECK(e.score.prompts.size() == 4);
      CHECK(emergent::is_solved(e) == (e.score.accuracy >= threshold));
    }
    // The whole curve gives the same boundary.
    std::vector<std::int64_t> steps;
    std::vector<bool> solved;
    for (std::size_t i = 0; i < suite.size(); ++i) {
      steps.push_back(suite[i].step);
      solved.push_back(at(i, threshold).score.solved);
    }
    const emergent::CurveEmergence c = emergent::emergence_in_curve(steps, solved);
    CHECK(c.outcome == "emerged");
    CHECK(c.monotone);
    CHECK(*c.first_solving_step == *r.first_solving_step);
    CHECK(*c.emergence_step == *r.emergence_step);
  }
  // At step 11 (index 11) one prompt is right at best: the 0.5 set is never solved before 40.
  CHECK(at(39, 0.5).score.accuracy == 0.25);
  CHECK(at(39, 0.5).score.mean_p_target == doctest::Approx((0.8 + 3 * 0.05) / 4));
}

TEST_CASE("pythia prompt sets: emergence_in_curve reports censoring and relapses") {
  const std::vector<std::int64_t> steps = {0, 10, 20, 30, 40};
  const auto never = emergent::emergence_in_curve(steps, {false, false, false, false, false});
  CHECK(never.outcome == "never solved");
  CHECK(*never.last_failing_step == 40);
  CHECK(!never.emergence_step);
  const auto always = emergent::emergence_in_curve(steps, {true, true, true, true, true});
  CHECK(always.outcome == "solved at the first checkpoint");
  CHECK(*always.first_solving_step == 0);
  CHECK(!always.emergence_step);
  const auto relapse = emergent::emergence_in_curve(steps, {false, true, false, true, true});
  CHECK(relapse.outcome == "emerged");
  CHECK(!relapse.monotone);
  CHECK(*relapse.last_failing_step == 0);
  CHECK(*relapse.first_solving_step == 10);
  CHECK(*relapse.emergence_step == 5.0);
  CHECK_THROWS_AS(emergent::emergence_in_curve(steps, {true}), emergent::Error);
}

TEST_CASE("pythia prompt sets: top K capped at the number of heads, each K once; heads named") {
  const std::vector<int> ks(emergent::kPatchingTopKs.begin(), emergent::kPatchingTopKs.end());
  CHECK(emergent::capped_top_ks(ks, 144) == std::vector<int>{1, 2, 4, 8, 16});
  CHECK(emergent::capped_top_ks(ks, 16) == std::vector<int>{1, 2, 4, 8, 16});
  CHECK(emergent::capped_top_ks(ks, 8) == std::vector<int>{1, 2, 4, 8});
  CHECK(emergent::capped_top_ks(ks, 6) == std::vector<int>{1, 2, 4, 6});
  CHECK(emergent::capped_top_ks(ks, 1) == std::vector<int>{1});
  CHECK_THROWS_AS(emergent::capped_top_ks(std::vector<int>{2, 1}, 8), emergent::Error);
  CHECK_THROWS_AS(emergent::capped_top_ks(std::vector<int>{0, 1}, 8), emergent::Error);
  CHECK(emergent::head_name(0, 1) == "L0H1");
  CHECK(emergent::head_name(5, 14) == "L5H14");
  CHECK(emergent::recovered_share(0.5, 0.25, 0.75) == 0.5);
  CHECK(!emergent::recovered_share(0.5, 0.25, 0.25));
}

TEST_CASE(
    "pythia prompt sets: patching averaged over prompts matches transformers' per-prompt values") {
  const GoldenPatching g = golden_patching();
  const auto pre = emergent::neox::load_checkpoint(kNeoxGolden / "parallel_f32");
  const auto post = emergent::neox::load_checkpoint(kNeoxGolden / "parallel_legacy_f16");
  const emergent::SetPatchingResult r =
      emergent::patch_heads_over_prompt_set(*pre.network, *post.network, g.set);
  const double mean_pre =
      0.5 * (g.cases[0]["p_pre"].get<double>() + g.cases[1]["p_pre"].get<double>());
  const double mean_post =
      0.5 * (g.cases[0]["p_post"].get<double>() + g.cases[1]["p_post"].get<double>());
  CHECK(r.mean_p_pre == doctest::Approx(mean_pre).epsilon(1e-4));
  CHECK(r.mean_p_post == doctest::Approx(mean_post).epsilon(1e-4));
  REQUIRE(r.p_pre.size() == 2);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(r.p_pre[i] == doctest::Approx(g.cases[i]["p_pre"].get<double>()).epsilon(1e-4));
    CHECK(r.p_post[i] == doctest::Approx(g.cases[i]["p_post"].get<double>()).epsilon(1e-4));
  }
  // 2 layers x 4 heads, every head once, ranked by the mean over both prompts.
  REQUIRE(r.heads.size() == 8);
  std::set<std::string> names;
  for (std::size_t i = 0; i < r.heads.size(); ++i) {
    const auto& h = r.heads[i];
    CAPTURE(h.name());
    CHECK(h.name() == "L" + std::to_string(h.layer) + "H" + std::to_string(h.head));
    names.insert(h.name());
    REQUIRE(h.p_patched.size() == 2);
    double by_hand = 0;
    for (std::size_t p = 0; p < 2; ++p) {
      const double golden = g.cases[p]["p_patched"][h.layer][h.head].get<double>();
      CHECK(h.p_patched[p] == doctest::Approx(golden).epsilon(1e-4));
      by_hand += golden / 2;
    }
    CHECK(h.mean_p_patched == doctest::Approx(by_hand).epsilon(1e-4));
    CHECK(h.delta_mean_p == doctest::Approx(h.mean_p_patched - r.mean_p_pre));
    if (i > 0) CHECK(r.heads[i - 1].delta_mean_p >= h.delta_mean_p);
  }
  CHECK(names.size() == 8);
  // K = 1, 2, 4, 8: 16 is capped at the 8 heads and not listed twice.
  REQUIRE(r.top_k.size() == 4);
  const int ks[] = {1, 2, 4, 8};
  for (std::size_t t = 0; t < r.top_k.size(); ++t) {
    const auto& top = r.top_k[t];
    CAPTURE(top.k);
    CHECK(top.k == ks[t]);
    REQUIRE(top.heads.size() == static_cast<std::size_t>(top.k));
    for (int i = 0; i < top.k; ++i) CHECK(top.heads[i] == r.heads[i].name());
    REQUIRE(top.p_patched.size() == 2);
    CHECK(top.mean_p_patched == doctest::Approx(0.5 * (top.p_patched[0] + top.p_patched[1])));
    REQUIRE(top.recovery);
    CHECK(*top.recovery ==
          doctest::Approx((top.mean_p_patched - r.mean_p_pre) / (r.mean_p_post - r.mean_p_pre)));
  }
  // K = 1 is the best head alone, prompt by prompt.
  CHECK(r.top_k[0].p_patched[0] == doctest::Approx(r.heads[0].p_patched[0]));
  CHECK(r.top_k[0].p_patched[1] == doctest::Approx(r.heads[0].p_patched[1]));
}

TEST_CASE("pythia prompt sets: one prompt gives the single-prompt patching; no gap, no recovery") {
  const GoldenPatching g = golden_patching();
  const auto pre = emergent::neox::load_checkpoint(kNeoxGolden / "parallel_f32");
  const auto post = emergent::neox::load_checkpoint(kNeoxGolden / "parallel_legacy_f16");
  const std::vector<CapabilityTokens> one = {g.set[1]};
  const auto set = emergent::patch_heads_over_prompt_set(*pre.network, *post.network, one);
  const auto single =
      emergent::patch_attention_heads(*pre.network, *post.network, one[0].prompt, one[0].target, 2);
  CHECK(set.mean_p_pre == single.p_pre);
  CHECK(set.mean_p_post == single.p_post);
  for (std::size_t i = 0; i < single.heads.size(); ++i) {
    CHECK(set.heads[i].layer == single.heads[i].layer);
    CHECK(set.heads[i].head == single.heads[i].head);
    CHECK(set.heads[i].delta_mean_p == single.heads[i].delta_p);
  }
  CHECK(set.top_k[1].k == 2);
  CHECK(set.top_k[1].mean_p_patched == single.p_top_k);
  CHECK(*set.top_k[1].recovery == doctest::Approx(single.recovered_share));
  // Other K lists.
  const std::vector<int> three = {3};
  const auto k3 = emergent::patch_heads_over_prompt_set(*pre.network, *post.network, one, three);
  REQUIRE(k3.top_k.size() == 1);
  CHECK(k3.top_k[0].heads.size() == 3);

  // A model patched with itself: nothing moves, and there is no gap to recover.
  const auto same = emergent::patch_heads_over_prompt_set(*pre.network, *pre.network, g.set);
  for (const auto& h : same.heads) CHECK(std::abs(h.delta_mean_p) < 1e-6);
  for (const auto& top : same.top_k) CHECK(!top.recovery);

  const auto other = emergent::neox::load_checkpoint(kNeoxGolden / "sequential_f32");
  CHECK_THROWS_WITH_AS(emergent::patch_heads_over_prompt_set(*pre.network, *other.network, g.set),
                       doctest::Contains("different architectures"), emergent::Error);
  CHECK_THROWS_WITH_AS(emergent::patch_heads_over_prompt_set(*pre.network, *post.network, {}),
                       doctest::Contains("empty"), emergent::Error);
}
