// The Pythia analysis on real GPT-NeoX checkpoints (tests/golden/neox, made by transformers):
//   - patch_attention_heads reproduces transformers' patched probabilities head by head;
//   - a self-made suite whose answer flips at a known step: the fixture model saved at
//     Pythia-like steps with the target's output row scaled so that the greedy answer becomes
//     the target exactly from one step on; find_emergence finds that step with the expected
//     number of checkpoint loads, and every loaded checkpoint's sha256 is that of its file;
//   - the same kind of suite with two prompts flipping at two steps: the prompt-set search finds
//     the first step at threshold 0.5 and the second at threshold 1.
#include <doctest/doctest.h>

#include <cmath>
#include <emergent/analysis/attention_patching.hpp>
#include <emergent/analysis/checkpoint_search.hpp>
#include <emergent/analysis/next_token.hpp>
#include <emergent/analysis/prompt_set.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/io/sha256.hpp>
#include <emergent/neox/checkpoint_tensors.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "neox_fixtures.hpp"

namespace {

namespace fs = std::filesystem;

std::vector<std::int32_t> prompt_tokens(const nlohmann::json& m, const std::string& folder,
                                        std::size_t index) {
  for (const auto& c : m["cases"])
    if (c["folder"] == folder)
      return c["prompts"][index]["tokens"].get<std::vector<std::int32_t>>();
  FAIL("no case for folder " << folder);
  return {};
}

// A target whose output row is f times the greedy token's row has f times its (positive) logit:
// it wins exactly when f > 1. Each flip makes `target` win from `step` on (f = 1.05 + 1e-4 step)
// and lose before it (f = 0.5 + 1e-4 step).
struct Flip {
  std::int32_t target = 0, greedy = 0;
  std::int64_t step = 0;
};

// The fixture model saved once per step in suite/step<N>, with every flip's row written.
void write_flip_suite(const fs::path& source, const fs::path& suite,
                      const std::vector<std::int64_t>& steps, const std::vector<Flip>& flips) {
  fs::remove_all(suite);
  for (std::int64_t step : steps) {
    auto loaded = emergent::neox::load_checkpoint(source);
    const emergent::NeoxConfig& config = loaded.network->config();
    const int D = config.hidden_size;
    std::span<float> head = loaded.network->parameter("embed_out.weight");
    for (const Flip& flip : flips) {
      const double f = step >= flip.step ? 1.05 + 1e-4 * double(step) : 0.5 + 1e-4 * double(step);
      for (int d = 0; d < D; ++d)
        head[static_cast<std::size_t>(flip.target) * D + d] =
            float(f) * head[static_cast<std::size_t>(flip.greedy) * D + d];
    }
    const fs::path folder = suite / ("step" + std::to_string(step));
    fs::create_directories(folder);
    fs::copy_file(source / "config.json", folder / "config.json");
    std::vector<emergent::TensorToWrite> tensors;
    for (const auto& t : emergent::neox::checkpoint_tensors(config))
      tensors.push_back({t.name, t.shape, std::as_const(*loaded.network).parameter(t.name), "F32"});
    emergent::write_safetensors(folder / "model.safetensors", tensors);
  }
}

const std::vector<std::int64_t> kFlipSteps = {0,   1,   2,   4,    8,    16,   32,   64,
                                              128, 256, 512, 1000, 2000, 3000, 4000, 5000};

}  // namespace

TEST_CASE(
    "patch_attention_heads: per-head patched probabilities match transformers; top K recovers its "
    "share") {
  const nlohmann::json m = neox_manifest();
  REQUIRE(!m["patching"].empty());
  for (const auto& p : m["patching"]) {
    const auto pre = emergent::neox::load_checkpoint(kNeoxGolden / p["pre"].get<std::string>());
    const auto post = emergent::neox::load_checkpoint(kNeoxGolden / p["post"].get<std::string>());
    const auto tokens = prompt_tokens(m, p["pre"], p["prompt"].get<std::size_t>());
    const std::int32_t target = p["target"];
    const int H = pre.network->heads();
    for (int k : {1, 3}) {
      const emergent::PatchingResult r =
          emergent::patch_attention_heads(*pre.network, *post.network, tokens, target, k);
      CHECK(r.p_pre == doctest::Approx(p["p_pre"].get<double>()).epsilon(1e-4));
      CHECK(r.p_post == doctest::Approx(p["p_post"].get<double>()).epsilon(1e-4));
      REQUIRE(r.heads.size() == static_cast<std::size_t>(pre.network->layers() * H));
      for (std::size_t i = 0; i < r.heads.size(); ++i) {
        const auto& h = r.heads[i];
        CAPTURE(h.layer);
        CAPTURE(h.head);
        CHECK(h.p_patched ==
              doctest::Approx(p["p_patched"][h.layer][h.head].get<double>()).epsilon(1e-4));
        CHECK(h.delta_p == doctest::Approx(h.p_patched - r.p_pre));
        if (i > 0) CHECK(r.heads[i - 1].delta_p >= h.delta_p);
      }
      if (k == 1) CHECK(r.p_top_k == doctest::Approx(r.heads[0].p_patched));
      CHECK(r.recovered_share == doctest::Approx((r.p_top_k - r.p_pre) / (r.p_post - r.p_pre)));
    }
    // Patching a model with itself moves nothing.
    const auto same =
        emergent::patch_attention_heads(*pre.network, *pre.network, tokens, target, 2);
    for (const auto& h : same.heads) CHECK(std::abs(h.delta_p) < 1e-6);
    CHECK(same.recovered_share == 0.0);
  }
}

TEST_CASE("find_emergence on a self-made checkpoint suite whose answer flips at a known step") {
  const fs::path source = kNeoxGolden / "parallel_f32";
  const auto base = emergent::neox::load_checkpoint(source);
  const emergent::NeoxConfig& config = base.network->config();
  const std::vector<std::int32_t> prompt = {5, 17, 42, 9, 5, 17, 42};
  const emergent::NextTokenPrediction before = emergent::predict_next(*base.network, prompt, 0);
  // A target that is not the greedy token now; scaling its output row to a multiple f of the
  // greedy token's row makes its logit f times the greedy one's (positive here, checked), so it
  // wins exactly when f > 1.
  const std::int32_t greedy = before.greedy, target = greedy == 3 ? 4 : 3;
  const std::vector<float> logits = base.network->forward(prompt);
  const int V = config.vocab_size;
  REQUIRE(logits[static_cast<std::size_t>(prompt.size() - 1) * V + greedy] > 0.5f);

  const std::vector<std::int64_t>& steps = kFlipSteps;
  const std::int64_t flip_step = 2000;
  const fs::path suite = fs::temp_directory_path() / "emergent_flip_suite";
  write_flip_suite(source, suite, steps, {{target, greedy, flip_step}});

  const std::vector<emergent::SuiteCheckpoint> checkpoints = emergent::list_suite(suite);
  REQUIRE(checkpoints.size() == steps.size());
  int loads = 0;
  const emergent::EmergenceSearch r = emergent::find_emergence(checkpoints, [&](std::size_t i) {
    ++loads;
    const auto c = emergent::neox::load_checkpoint(checkpoints[i].folder);
    std::ifstream file(checkpoints[i].folder / "model.safetensors", std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(file)),
                            std::istreambuf_iterator<char>());
    CHECK(c.sha256 == emergent::sha256_hex(std::string_view(bytes)));
    const emergent::NextTokenPrediction p = emergent::predict_next(*c.network, prompt, target);
    return emergent::CheckpointEvaluation{checkpoints[i].step, c.sha256, p.p_target, p.greedy,
                                          p.solved};
  });
  CHECK(r.outcome == "emerged");
  CHECK(*r.first_solving_step == flip_step);
  CHECK(*r.last_failing_step == 1000);
  CHECK(*r.emergence_step == doctest::Approx(1500.0));
  // Last, first, then bisecting 15 gaps: 2 + ceil(log2 15) = 6 loads at most.
  CHECK(loads == static_cast<int>(r.evaluations.size()));
  CHECK(loads <= 6);
  for (const auto& e : r.evaluations) CHECK(e.solved == (e.step >= flip_step));
  fs::remove_all(suite);
}

TEST_CASE("pythia prompt sets: the search over a suite on disk follows the accuracy threshold") {
  const fs::path source = kNeoxGolden / "parallel_f32";
  const auto base = emergent::neox::load_checkpoint(source);
  // Two prompts whose greedy tokens differ; each gets a target row that wins from its own step.
  std::vector<emergent::CapabilityTokens> set = {{{5, 17, 42, 9, 5, 17, 42}, 0},
                                                 {{83, 38, 53, 76, 116, 24}, 0}};
  const std::int32_t greedy0 = emergent::predict_next(*base.network, set[0].prompt, 0).greedy;
  const std::int32_t greedy1 = emergent::predict_next(*base.network, set[1].prompt, 0).greedy;
  REQUIRE(greedy0 != greedy1);
  set[0].target = 100;
  set[1].target = 101;
  REQUIRE(greedy0 < 100);
  REQUIRE(greedy1 < 100);
  const fs::path suite = fs::temp_directory_path() / "emergent_flip_set_suite";
  write_flip_suite(source, suite, kFlipSteps, {{100, greedy0, 512}, {101, greedy1, 3000}});
  const std::vector<emergent::SuiteCheckpoint> checkpoints = emergent::list_suite(suite);

  // Every checkpoint, by hand: prompt 0 is right from 512 on, prompt 1 from 3000 on.
  for (const auto& c : checkpoints) {
    CAPTURE(c.step);
    const auto loaded = emergent::neox::load_checkpoint(c.folder);
    const emergent::PromptSetScore s = emergent::evaluate_prompt_set(*loaded.network, set, 0.5);
    REQUIRE(s.prompts[0].solved == (c.step >= 512));
    REQUIRE(s.prompts[1].solved == (c.step >= 3000));
    CHECK(s.accuracy == 0.5 * (int(c.step >= 512) + int(c.step >= 3000)));
    CHECK(s.mean_p_target ==
          doctest::Approx(0.5 * (s.prompts[0].p_target + s.prompts[1].p_target)));
  }
  for (const auto& [threshold, last_failing, first_solving] :
       std::vector<std::tuple<double, std::int64_t, std::int64_t>>{{0.5, 256, 512},
                                                                   {1.0, 2000, 3000}}) {
    CAPTURE(threshold);
    const auto r = emergent::search_emergence<emergent::CheckpointSetEvaluation>(
        checkpoints, [&](std::size_t i) {
          const auto loaded = emergent::neox::load_checkpoint(checkpoints[i].folder);
          return emergent::CheckpointSetEvaluation{
              checkpoints[i].step, loaded.sha256,
              emergent::evaluate_prompt_set(*loaded.network, set, threshold)};
        });
    CHECK(r.outcome == "emerged");
    CHECK(*r.last_failing_step == last_failing);
    CHECK(*r.first_solving_step == first_solving);
    CHECK(*r.emergence_step == doctest::Approx(0.5 * double(last_failing + first_solving)));
    CHECK(r.evaluations.size() <= 6);
  }
  fs::remove_all(suite);
}
