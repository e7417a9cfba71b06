// The second paper (Towards Understanding Self-Pretraining for Sequence Classification) on a
// CPU-sized ListOps (sweeps/self-pretraining-small.toml): a 2-layer bidirectional encoder
// classifies ListOps expressions (lengths 50 to 200, 10 classes), trained either on the labels
// alone for STEPS updates, or self-pretrained (SPT) first: STEPS / 2 updates of masked
// reconstruction of the training set's own inputs, then STEPS / 2 on the labels, the same budget.
//
//   self_pretraining [RUNS [STEPS [SEEDS [TRAIN_EXAMPLES]]]]   defaults: runs/self_pretraining
//                                                              2000 1 10000
//
// The test set has TRAIN_EXAMPLES / 10 examples (at least 10). One run folder per (condition,
// seed) under RUNS (a rerun resumes them). Prints per run the accuracy on the training and test
// sets and the test label loss at the end (on up to 500 examples of each).
#include <algorithm>
#include <cstdio>
#include <emergent/mixers/bidirectional_attention.hpp>
#include <emergent/model/encoder.hpp>
#include <emergent/tasks/listops.hpp>
#include <emergent/train/self_pretraining.hpp>
#include <string>

#include "arguments.hpp"

namespace {

constexpr emergent::Shape kEncoder{.vocab = emergent::listops::kVocab,
                                   .d_model = 64,
                                   .heads = 4,
                                   .layers = 2,
                                   .d_ff = 128,
                                   .max_len = 512};
using Net =
    emergent::Encoder<emergent::BidirectionalAttention, kEncoder, emergent::listops::kClasses>;
const std::string kUsage = "usage: self_pretraining [RUNS [STEPS [SEEDS [TRAIN_EXAMPLES]]]]";

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/self_pretraining";
  const long long steps = examples::argument(argc, argv, 2, 2000LL, kUsage),
                  examples = examples::argument(argc, argv, 4, 10000LL, kUsage);
  const int seeds = examples::argument(argc, argv, 3, 1, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  if (argc > 5) throw emergent::Error("too many arguments (" + kUsage + ")");
  // The run's settings by their declared names (train/self_pretraining_config.hpp), the model's
  // from its compiled shape; resolve_self_pretraining checks every value.
  nlohmann::json settings = {{"min_length", 50},
                             {"max_length", 200},
                             {"train_examples", examples},
                             {"test_examples", std::max(examples / 10, 10LL)},
                             {"steps", steps},
                             {"batch", 32},
                             {"eval_every", 100},  // and the last step
                             {"d_model", kEncoder.d_model},
                             {"heads", kEncoder.heads},
                             {"layers", kEncoder.layers},
                             {"d_ff", kEncoder.d_ff},
                             {"max_len", kEncoder.max_len}};

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%-11s %5s %15s %9s %9s %15s\n", "condition", "seed", "pretrain_steps", "train_acc",
              "test_acc", "test_label_loss");
  for (int seed = 0; seed < seeds; ++seed)
    for (const bool spt : {false, true}) {
      settings["seed"] = seed;
      settings["pretrain_steps"] = spt ? steps / 2 : 0;
      const std::string condition = spt ? "spt" : "supervised";
      const nlohmann::json summary =
          emergent::SelfPretrainingRun<Net>(
              emergent::resolve_self_pretraining(settings, "command line"),
              runs + "/" + condition + "_seed" + std::to_string(seed), true)
              .run();
      std::printf("%-11s %5d %15lld %9.4f %9.4f %15.4f\n", condition.c_str(), seed,
                  spt ? steps / 2 : 0LL, summary.at("train_accuracy").get<double>(),
                  summary.at("test_accuracy").get<double>(),
                  summary.at("test_label_loss").get<double>());
    }
} catch (const std::exception& e) {
  std::fprintf(stderr, "self_pretraining: %s\n", e.what());
  return 1;
}
