// Paper Fig. 5b and 5c: the multi-rule cellular automaton (C = 4 colours, T = 16 recorded states,
// a pool of 256 rules) against its state size S, with the paper's 4-layer transformer, with and
// without the attention bias c (sweeps/fig5bc-automaton-context-*.toml). The loss sits on a
// plateau near ln 4 until the model finds the dependency window of each cell; the plateau's
// length against S is Fig. 5c, and the bias, which hands the model the true pattern, shortens it.
//
//   automaton_context [RUNS [STEPS [C [SEEDS [S ...]]]]]   defaults: runs/automaton_context
//                                                          1500 5 1  4 8 16 32
//
// C = 0 trains without the bias only; otherwise every S runs with bias 0 and with C. S * 16 must
// fit the model's 512 positions (S <= 32). One run folder per (S, bias, seed) under RUNS (a rerun
// resumes them). Prints per run the plateau length (the step at which the smoothed loss falls
// below 1.3, ">N" when it never did in N steps), the step it falls below ln 4 / 2, the final
// loss and the next-state accuracy on a held-out batch.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <string>
#include <vector>

#include "arguments.hpp"

namespace {

constexpr emergent::Shape kAutomaton{
    // the paper's automaton model, up to 512 positions
    .vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 512};
using Net = emergent::Model<emergent::DotAttention, kAutomaton>;
const std::string kUsage = "usage: automaton_context [RUNS [STEPS [C [SEEDS [S ...]]]]]";

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/automaton_context";
  emergent::TrainConfig config;  // 4,096 tokens a step: 16 sequences at S = 16
  config.task = "cellular-automaton";
  config.shape = kAutomaton;
  config.steps = examples::argument<long long>(argc, argv, 2, 1500, kUsage);
  const double c = examples::argument(argc, argv, 3, 5.0, kUsage);
  const int seeds = examples::argument(argc, argv, 4, 1, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  std::vector<int> sizes;
  for (int i = 5; i < argc; ++i) sizes.push_back(examples::argument(argc, argv, i, 0, kUsage));
  if (sizes.empty()) sizes = {4, 8, 16, 32};
  std::vector<double> biases = {0.0};
  if (c != 0) biases.push_back(c);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%4s %5s %5s %9s %9s %11s %15s\n", "S", "bias", "seed", "plateau", "midpoint",
              "final_loss", "next_state_acc");
  for (const int S : sizes)
    for (const double bias : biases)
      for (int seed = 0; seed < seeds; ++seed) {
        config.task_params = {{"S", S}};  // states 16, colours 4, rules 256: the defaults
        config.bias = bias;
        config.seed = seed;
        char run[96];
        std::snprintf(run, sizeof run, "/S%d_bias%g_seed%d", S, bias, seed);
        const emergent::RunSummary r = emergent::Trainer<Net>(config, runs + run).run();
        std::printf("%4d %5g %5d %9s %9s %11.4f %15.4f\n", S, bias, seed,
                    examples::step_text(r.emergence_step, r.steps_done).c_str(),
                    examples::step_text(r.midpoint_step, r.steps_done).c_str(), r.final_loss,
                    r.eval.predictable_accuracy);
      }
} catch (const std::exception& e) {
  std::fprintf(stderr, "automaton_context: %s\n", e.what());
  return 1;
}
