// Paper Fig. 6: the number of attention heads at a fixed width D = 128 (heads of size 128 / H) on
// the linear map (sweeps/fig6-heads-*.toml). The head count is part of the model's type, so each
// of the three below is its own compiled model; to try another, add it to the list in main.
//
//   heads [RUNS [STEPS [SEEDS [S [s]]]]]     defaults: runs/heads 5000 1 16 3
//
// One run folder per (H, seed) under RUNS (a rerun resumes them); each stops once its smoothed x1
// loss is below 0.01. Prints per run the emergence step (x1 loss below ln 2 - 0.03), the solved
// step (below 0.05), ">N" when a run never got there in its N steps, and the final losses.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <string>

#include "arguments.hpp"

namespace {

const std::string kUsage = "usage: heads [RUNS [STEPS [SEEDS [S [s]]]]]";

// Trains the linear-map model with H heads for each seed and prints its rows.
template <int H>
void train_heads(emergent::TrainConfig config, const std::string& runs, int seeds) {
  constexpr emergent::Shape shape{
      .vocab = 2, .d_model = 128, .heads = H, .layers = 1, .d_ff = 512, .max_len = 64};
  config.shape = shape;
  for (int seed = 0; seed < seeds; ++seed) {
    config.seed = seed;
    char run[64];
    std::snprintf(run, sizeof run, "/heads%d_seed%d", H, seed);
    const emergent::RunSummary r =
        emergent::Trainer<emergent::Model<emergent::DotAttention, shape>>(config, runs + run).run();
    std::printf("%5d %6d %5d %10s %10s %11.4f %8.4f\n", H, shape.d_head(), seed,
                examples::step_text(r.emergence_step, r.steps_done).c_str(),
                examples::step_text(r.solved_step, r.steps_done).c_str(), r.final_loss,
                r.final_metric);
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/heads";
  emergent::TrainConfig config;
  config.steps = examples::argument<long long>(argc, argv, 2, 5000, kUsage);
  config.stop_below = 0.01;
  const int seeds = examples::argument(argc, argv, 3, 1, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  config.task_params = {{"S", examples::argument(argc, argv, 4, 16, kUsage)},
                        {"s", examples::argument(argc, argv, 5, 3, kUsage)}};
  if (argc > 6) throw emergent::Error("too many arguments (" + kUsage + ")");

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%5s %6s %5s %10s %10s %11s %8s\n", "heads", "d_head", "seed", "emergence", "solved",
              "final_loss", "x1_loss");
  train_heads<1>(config, runs, seeds);
  train_heads<8>(config, runs, seeds);
  train_heads<32>(config, runs, seeds);
} catch (const std::exception& e) {
  std::fprintf(stderr, "heads: %s\n", e.what());
  return 1;
}
