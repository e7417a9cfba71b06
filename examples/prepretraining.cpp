// Pre-pretraining: a first stage on Dyck words, then the linear map starting from it, against the
// linear map from scratch, for each seed: the two-stage runs of sweeps/prepretraining-*.toml
// (docs/pre-pretraining.md) written as a researcher's own program. The two stages are two model
// types (Dyck's vocabulary is 2k, the map's 2), so the second takes the tensors of the same name
// and shape (config init_from, init_take = all: the blocks, final norm and positions) and keeps a
// fresh token embedding and head.
//
//   prepretraining [RUNS [DYCK_STEPS [STEPS [SEEDS [S [s]]]]]]   defaults: runs/ppt 1000 5000 2 8 7
//
// One run folder per (stage, seed) under RUNS (a rerun resumes them). Prints per seed the Dyck
// stage's closing-bracket accuracy and the step at which the map is solved (x1 loss below 0.05;
// ">N": not in N steps) from scratch and after Dyck.
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <string>

#include "arguments.hpp"

namespace {

const std::string kUsage = "usage: prepretraining [RUNS [DYCK_STEPS [STEPS [SEEDS [S [s]]]]]]";

// The linear map's 1-layer model; Dyck-4 needs a vocabulary of 8.
constexpr emergent::Shape kMap{
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
constexpr emergent::Shape kDyck{
    .vocab = 8, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
using MapNet = emergent::Model<emergent::DotAttention, kMap>;
using DyckNet = emergent::Model<emergent::DotAttention, kDyck>;

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/ppt";
  emergent::TrainConfig dyck;
  dyck.task = "dyck";
  dyck.task_params = {{"k", 4}, {"max_depth", 8}, {"tokens", 64}};
  dyck.shape = kDyck;
  dyck.steps = examples::argument<long long>(argc, argv, 2, 1000, kUsage);
  emergent::TrainConfig map;
  map.steps = examples::argument<long long>(argc, argv, 3, 5000, kUsage);
  const int seeds = examples::argument(argc, argv, 4, 2, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  map.task_params = {{"S", examples::argument(argc, argv, 5, 8, kUsage)},
                     {"s", examples::argument(argc, argv, 6, 7, kUsage)}};
  if (argc > 7) throw emergent::Error("too many arguments (" + kUsage + ")");
  map.shape = kMap;
  map.stop_below = 0.01;

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%4s %16s %14s %12s\n", "seed", "dyck_closing_acc", "solved_scratch", "solved_dyck");
  for (int seed = 0; seed < seeds; ++seed) {
    const std::string tag = "/seed" + std::to_string(seed);
    dyck.seed = map.seed = seed;
    const emergent::RunSummary first =
        emergent::Trainer<DyckNet>(dyck, runs + "/dyck" + tag, false).run();
    map.init_from = "";
    const emergent::RunSummary scratch =
        emergent::Trainer<MapNet>(map, runs + "/scratch" + tag, false).run();
    map.init_from = runs + "/dyck" + tag;  // the finished Dyck run: its last checkpoint
    const emergent::RunSummary after =
        emergent::Trainer<MapNet>(map, runs + "/after_dyck" + tag, false).run();
    std::printf("%4d %16.3f %14s %12s\n", seed, first.eval.predictable_accuracy,
                examples::step_text(scratch.solved_step, scratch.steps_done).c_str(),
                examples::step_text(after.solved_step, after.steps_done).c_str());
  }
} catch (const std::exception& e) {
  std::fprintf(stderr, "prepretraining: %s\n", e.what());
  return 1;
}
