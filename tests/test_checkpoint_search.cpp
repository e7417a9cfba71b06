// The checkpoint-suite search (analysis/checkpoint_search.hpp) and the capability prompts
// (analysis/capability_prompts.hpp), without models: the search is run over Pythia's 154-step
// schedule with an answer that flips at every possible checkpoint.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/analysis/capability_prompts.hpp>
#include <emergent/analysis/checkpoint_search.hpp>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using emergent::CheckpointEvaluation;
using emergent::SuiteCheckpoint;

// Pythia's revisions: step0, 1, 2, 4, ..., 512, then 1000, 2000, ..., 143000 (154 in all).
std::vector<SuiteCheckpoint> pythia_schedule() {
  std::vector<SuiteCheckpoint> out{{0, "step0"}};
  for (std::int64_t s = 1; s <= 512; s *= 2) out.push_back({s, "step" + std::to_string(s)});
  for (std::int64_t s = 1000; s <= 143000; s += 1000)
    out.push_back({s, "step" + std::to_string(s)});
  return out;
}

}  // namespace

TEST_CASE(
    "find_emergence: first solving checkpoint of a monotone suite, in about log2(count) "
    "evaluations") {
  const std::vector<SuiteCheckpoint> suite = pythia_schedule();
  REQUIRE(suite.size() == 154);
  for (std::size_t flip = 1; flip < suite.size(); ++flip) {
    CAPTURE(flip);
    std::set<std::size_t> seen;
    const emergent::EmergenceSearch r = emergent::find_emergence(suite, [&](std::size_t i) {
      CHECK(seen.insert(i).second);  // no checkpoint is evaluated twice
      return CheckpointEvaluation{suite[i].step, "", i >= flip ? 0.9 : 0.1, 0, i >= flip};
    });
    CHECK(r.outcome == "emerged");
    CHECK(*r.first_solving_step == suite[flip].step);
    CHECK(*r.last_failing_step == suite[flip - 1].step);
    CHECK(*r.emergence_step ==
          doctest::Approx(0.5 * double(suite[flip].step + suite[flip - 1].step)));
    // Last and first, then a bisection of the 153 gaps: ceil(log2 153) = 8 more at most.
    CHECK(r.evaluations.size() <= 10);
    CHECK(r.evaluations.size() >= 9);
  }
}

TEST_CASE("find_emergence: never solved and solved from the start are reported, not guessed") {
  const std::vector<SuiteCheckpoint> suite = pythia_schedule();
  const auto never = emergent::find_emergence(suite, [&](std::size_t i) {
    return CheckpointEvaluation{suite[i].step, "", 0.0, 0, false};
  });
  CHECK(never.outcome == "never solved");
  CHECK(never.evaluations.size() == 1);
  CHECK(!never.emergence_step);
  CHECK(*never.last_failing_step == 143000);
  const auto always = emergent::find_emergence(suite, [&](std::size_t i) {
    return CheckpointEvaluation{suite[i].step, "", 1.0, 0, true};
  });
  CHECK(always.outcome == "solved at the first checkpoint");
  CHECK(always.evaluations.size() == 2);
  CHECK(*always.first_solving_step == 0);
  CHECK(!always.emergence_step);
}

TEST_CASE("list_suite: step<N> folders by step; other entries ignored; clear errors") {
  TempDir dir;
  for (const char* name : {"step1000", "step0", "step2", "step512", "notes", "stepX", "step-1"})
    fs::create_directories(dir.path / name);
  std::ofstream(dir.path / "step7") << "a file, not a folder";
  const auto suite = emergent::list_suite(dir.path);
  REQUIRE(suite.size() == 4);
  CHECK(suite[0].step == 0);
  CHECK(suite[1].step == 2);
  CHECK(suite[2].step == 512);
  CHECK(suite[3].step == 1000);
  CHECK(suite[3].folder == dir.path / "step1000");

  fs::create_directories(dir.path / "step02");
  CHECK_THROWS_WITH_AS(emergent::list_suite(dir.path), doctest::Contains("two folders name step 2"),
                       emergent::Error);

  TempDir empty;
  CHECK_THROWS_WITH_AS(emergent::list_suite(empty.path), doctest::Contains("no checkpoint folders"),
                       emergent::Error);
  CHECK_THROWS_WITH_AS(emergent::list_suite(empty.path / "missing"),
                       doctest::Contains("is not a folder"), emergent::Error);
  CHECK_THROWS_WITH_AS(emergent::suite_tokenizer(dir.path, suite),
                       doctest::Contains("no tokenizer.json"), emergent::Error);
}

TEST_CASE(
    "capability prompts: the paper's repetition prompt, deterministic draws, one-token targets") {
  const emergent::CapabilityPrompt paper = emergent::make_capability_prompt("repetition", 0, 8);
  CHECK(paper.text == "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2");
  CHECK(paper.target == " 3");

  for (std::string_view kind : emergent::kCapabilityKinds) {
    CAPTURE(std::string(kind));
    const auto a = emergent::make_capability_prompt(kind, 5, 6),
               b = emergent::make_capability_prompt(kind, 5, 6);
    const auto c = emergent::make_capability_prompt(kind, 6, 6);
    CHECK(a.text == b.text);
    CHECK(a.target == b.target);
    CHECK((a.text != c.text || a.target != c.target));
    CHECK(a.target.size() >= 2);
    CHECK(a.target[0] == ' ');
  }
  // Repetition and induction: the target continues the repeated block.
  const auto rep = emergent::make_capability_prompt("repetition", 3, 5);
  CHECK(rep.text.substr(0, 7) == rep.text.substr(10, 7));  // "a b c d e a b c d" -> " e"
  CHECK(rep.target == " " + rep.text.substr(8, 1));
  const auto ioi = emergent::make_capability_prompt("ioi", 1);
  CHECK(ioi.text.find(ioi.target.substr(1)) !=
        std::string::npos);  // the indirect object is named once
  CHECK_THROWS_AS(emergent::make_capability_prompt("poetry", 0), emergent::Error);
  CHECK_THROWS_AS(emergent::make_capability_prompt("repetition", 0, 1), emergent::Error);
}

TEST_CASE(
    "capability prompts: encoded with a byte-level BPE; a target of several tokens is refused") {
  const emergent::BpeTokenizer tokenizer(std::string(EMERGENT_SOURCE_DIR) +
                                         "/tests/golden/tokenizer/tokenizer.json");
  const emergent::CapabilityTokens t =
      emergent::capability_tokens(tokenizer, emergent::paper_repetition_prompt());
  CHECK(!t.prompt.empty());
  const std::int32_t target[] = {t.target};
  CHECK(tokenizer.decode(target) == " 3");
  CHECK(tokenizer.decode(t.prompt) == "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2");
  const emergent::CapabilityPrompt long_target{"custom", "a b", " incomprehensibilities"};
  CHECK_THROWS_WITH_AS(emergent::capability_tokens(tokenizer, long_target),
                       doctest::Contains("must be exactly one"), emergent::Error);
}
