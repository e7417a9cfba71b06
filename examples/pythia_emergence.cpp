// The paper's Pythia analysis (Fig. 1): when, during training, does a language model first
// complete a capability prompt? SUITE is a folder of GPT-NeoX checkpoints in the Hugging Face
// format named by training step, as Pythia's revisions are (SUITE/step0/ ... SUITE/step143000/,
// each with config.json and model.safetensors; tokenizer.json in SUITE or in its first
// checkpoint; docs/pythia.md). A prompt is solved when the greedy next token is its target.
// Assuming a capability once there stays, a binary search loads about log2(count) checkpoints
// (10 of Pythia's 154) to find the last failing and the first solving one; the point of
// emergence is their midpoint.
//
//   pythia_emergence SUITE [KIND [PROMPT_SEED [LENGTH]]]
//
// KIND: repetition (the default; seed 0 and length 8 is the paper's prompt), induction, pattern
// or ioi (analysis/capability_prompts.hpp). Prints each checkpoint evaluated, in search order,
// then the outcome.
#include <cstdio>
#include <emergent/analysis/capability_prompts.hpp>
#include <emergent/analysis/checkpoint_search.hpp>
#include <emergent/analysis/next_token.hpp>
#include <emergent/io/tokenizer.hpp>
#include <emergent/neox/load_checkpoint.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "arguments.hpp"

namespace {

const std::string kUsage = "usage: pythia_emergence SUITE [KIND [PROMPT_SEED [LENGTH]]]";

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2 || argc > 5) throw emergent::Error("expected 1 to 4 arguments (" + kUsage + ")");
  const std::filesystem::path suite = argv[1];
  const std::vector<emergent::SuiteCheckpoint> checkpoints = emergent::list_suite(suite);
  const emergent::BpeTokenizer tokenizer(emergent::suite_tokenizer(suite, checkpoints));
  const long long prompt_seed = examples::argument(argc, argv, 3, 0LL, kUsage);
  if (prompt_seed < 0) throw emergent::Error("PROMPT_SEED must be >= 0 (" + kUsage + ")");
  const emergent::CapabilityPrompt prompt = emergent::make_capability_prompt(
      argc > 2 ? argv[2] : "repetition", prompt_seed, examples::argument(argc, argv, 4, 8, kUsage));
  const emergent::CapabilityTokens tokens = emergent::capability_tokens(tokenizer, prompt);
  std::printf("prompt \"%s\" -> \"%s\" (token %d)\n%zu checkpoints, steps %lld .. %lld\n",
              prompt.text.c_str(), prompt.target.c_str(), tokens.target, checkpoints.size(),
              (long long)checkpoints.front().step, (long long)checkpoints.back().step);

  std::printf("%10s %10s %8s %6s\n", "step", "p_target", "greedy", "solved");
  const emergent::EmergenceSearch search =
      emergent::find_emergence(checkpoints, [&](std::size_t i) {
        const emergent::neox::LoadedCheckpoint c =
            emergent::neox::load_checkpoint(checkpoints[i].folder);
        const emergent::NextTokenPrediction p =
            emergent::predict_next(*c.network, tokens.prompt, tokens.target);
        std::printf("%10lld %10.4f %8d %6s\n", (long long)checkpoints[i].step, p.p_target, p.greedy,
                    p.solved ? "yes" : "no");
        std::fflush(stdout);
        return emergent::CheckpointEvaluation{checkpoints[i].step, c.sha256, p.p_target, p.greedy,
                                              p.solved};
      });
  std::printf("%s after %zu of %zu checkpoints", search.outcome.c_str(), search.evaluations.size(),
              checkpoints.size());
  if (search.emergence_step)
    std::printf(": last failing step %lld, first solving step %lld, emergence at step %.1f",
                (long long)*search.last_failing_step, (long long)*search.first_solving_step,
                *search.emergence_step);
  std::printf("\n");
} catch (const std::exception& e) {
  std::fprintf(stderr, "pythia_emergence: %s\n", e.what());
  return 1;
}
