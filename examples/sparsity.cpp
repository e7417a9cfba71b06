// Paper Fig. 5a: the 1-layer transformer on the linear map y = A x, where A is S x S with s ones
// per row, for every s of a list and several seeds (sweeps/fig5a-linear-map-*.toml). Sparse maps
// (small s/S) leave the ln 2 plateau of the x1 loss soon; dense ones stay on it for the budget.
//
//   sparsity [RUNS [STEPS [SEEDS [S [s ...]]]]]     defaults: runs/sparsity 5000 2 8 1..S
//
// One run folder per (s, seed) under RUNS (a rerun resumes them). Each run stops once its
// smoothed x1 loss is below 0.01. Prints per run the emergence step (x1 loss below ln 2 - 0.03)
// and the solved step (below 0.05), ">N" when a run never got there in its N steps, the final
// losses, then how many runs of each s solved.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <string>
#include <vector>

#include "arguments.hpp"

namespace {

constexpr emergent::Shape kLinearMap{
    // the linear map's shape, S up to 32
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
using Net = emergent::Model<emergent::DotAttention, kLinearMap>;
const std::string kUsage = "usage: sparsity [RUNS [STEPS [SEEDS [S [s ...]]]]]";

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/sparsity";
  emergent::TrainConfig config;
  config.shape = kLinearMap;
  config.steps = examples::argument<long long>(argc, argv, 2, 5000, kUsage);
  config.stop_below = 0.01;
  const int seeds = examples::argument(argc, argv, 3, 2, kUsage),
            S = examples::argument(argc, argv, 4, 8, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  std::vector<int> sparsities;
  for (int i = 5; i < argc; ++i) sparsities.push_back(examples::argument(argc, argv, i, 0, kUsage));
  if (sparsities.empty())
    for (int s = 1; s <= S; ++s) sparsities.push_back(s);

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%4s %4s %5s %10s %10s %11s %8s\n", "S", "s", "seed", "emergence", "solved",
              "final_loss", "x1_loss");
  int solved_runs = 0;
  for (const int s : sparsities) {
    int solved = 0;
    for (int seed = 0; seed < seeds; ++seed) {
      config.task_params = {{"S", S}, {"s", s}};  // the trainer refuses s > S
      config.seed = seed;
      char run[64];
      std::snprintf(run, sizeof run, "/S%d_s%d_seed%d", S, s, seed);
      const emergent::RunSummary r = emergent::Trainer<Net>(config, runs + run).run();
      solved += r.solved_step.has_value();
      std::printf("%4d %4d %5d %10s %10s %11.4f %8.4f\n", S, s, seed,
                  examples::step_text(r.emergence_step, r.steps_done).c_str(),
                  examples::step_text(r.solved_step, r.steps_done).c_str(), r.final_loss,
                  r.final_metric);
    }
    std::printf("S %d  s %d  s/S %.3f  solved %d of %d\n", S, s, double(s) / S, solved, seeds);
    solved_runs += solved;
  }
  std::printf("solved %d of %d runs\n", solved_runs, seeds * int(sparsities.size()));
} catch (const std::exception& e) {
  std::fprintf(stderr, "sparsity: %s\n", e.what());
  return 1;
}
