// Depth: 1 against 2 transformer layers on the multi-rule cellular automaton (C = 4 colours,
// T = 16 recorded states, 256 rules), the automaton half of sweeps/depth-*.toml. The depth is
// part of the model's type, so each is its own compiled model; to try 4 layers (the paper's
// automaton model), add train_depth<4> in main.
//
//   depth [RUNS [STEPS [SEEDS [S]]]]     defaults: runs/depth 1500 2 4
//
// S * 16 must fit the model's 128 positions (S <= 8). One run folder per (layers, seed) under
// RUNS (a rerun resumes them). Prints per run the final loss (smoothed over the last logged rows;
// the automaton's first state is noise, so it cannot reach 0), the loss on the states after the
// first on a held-out batch (next_state_loss, which can), the step the loss leaves the ln 4 plateau
// (below 1.3; ">N": never in N steps), and the mean final loss of each depth.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <string>

#include "arguments.hpp"

namespace {

const std::string kUsage = "usage: depth [RUNS [STEPS [SEEDS [S]]]]";

// Trains the automaton model with L layers for each seed, prints its rows and their mean.
template <int L>
void train_depth(emergent::TrainConfig config, const std::string& runs, int seeds) {
  constexpr emergent::Shape shape{
      .vocab = 4, .d_model = 128, .heads = 8, .layers = L, .d_ff = 512, .max_len = 128};
  config.shape = shape;
  double sum = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    config.seed = seed;
    char run[64];
    std::snprintf(run, sizeof run, "/layers%d_seed%d", L, seed);
    const emergent::RunSummary r =
        emergent::Trainer<emergent::Model<emergent::DotAttention, shape>>(config, runs + run).run();
    std::printf("%6d %5d %11.4f %15.4f %9s\n", L, seed, r.final_loss, r.eval.predictable_loss,
                examples::step_text(r.emergence_step, r.steps_done).c_str());
    sum += r.final_loss;
  }
  std::printf("layers %d  mean final loss %.4f over %d seeds\n", L, sum / seeds, seeds);
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/depth";
  emergent::TrainConfig config;  // 4,096 tokens a step: 64 sequences at S = 4
  config.task = "cellular-automaton";
  config.steps = examples::argument<long long>(argc, argv, 2, 1500, kUsage);
  const int seeds = examples::argument(argc, argv, 3, 2, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  config.task_params = {
      {"S", examples::argument(argc, argv, 4, 4, kUsage)}};  // states 16, colours 4, rules 256
  if (argc > 5) throw emergent::Error("too many arguments (" + kUsage + ")");

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%6s %5s %11s %15s %9s\n", "layers", "seed", "final_loss", "next_state_loss",
              "plateau");
  train_depth<1>(config, runs, seeds);
  train_depth<2>(config, runs, seeds);
} catch (const std::exception& e) {
  std::fprintf(stderr, "depth: %s\n", e.what());
  return 1;
}
