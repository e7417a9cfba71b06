// Paper Fig. 7 (App. B.6): the token mixers at matched width on the linear map
// (sweeps/fig7-mixers-*.toml): dot attention, the causal MLP-Mixer, Mamba, Gated DeltaNet and
// RWKV-4 (with its own channel mixing in place of the MLP), each in the same 1-layer model of
// width 128 with the same embeddings, LayerNorms and optimiser. A mixer is a template argument of
// the model, so each is its own compiled model.
//
//   mixers [RUNS [STEPS [SEEDS [S [s]]]]]     defaults: runs/mixers 3000 1 16 3
//
// One run folder per (mixer, seed) under RUNS (a rerun resumes them). Prints per run the
// trainable parameters, the final loss (full sequence, what the paper plots) and x1 loss, both
// smoothed over the last logged rows, and the emergence step (">N": never in N steps).
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/mixers/mamba.hpp>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>
#include <emergent/train/trainer.hpp>
#include <string>

#include "arguments.hpp"

namespace {

constexpr emergent::Shape kLinearMap{
    // the linear map's shape, S up to 32
    .vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
const std::string kUsage = "usage: mixers [RUNS [STEPS [SEEDS [S [s]]]]]";

// Trains Model<Mixer, kLinearMap, float, Channel> for each seed and prints its rows.
template <template <emergent::Shape, class> class Mixer,
          template <emergent::Shape, class> class Channel = emergent::GeluMlp>
void train_mixer(emergent::TrainConfig config, const std::string& runs, int seeds) {
  using Net = emergent::Model<Mixer, kLinearMap, float, Channel>;
  config.mixer = std::string(Net::Mixer::name);  // config.json records it; the trainer checks it
  for (int seed = 0; seed < seeds; ++seed) {
    config.seed = seed;
    char run[64];
    std::snprintf(run, sizeof run, "/%s_seed%d", config.mixer.c_str(), seed);
    const emergent::RunSummary r = emergent::Trainer<Net>(config, runs + run).run();
    std::printf("%-15s %5d %10zu %11.4f %8.4f %10s\n", config.mixer.c_str(), seed,
                Net::trainable_parameters, r.final_loss, r.final_metric,
                examples::step_text(r.emergence_step, r.steps_done).c_str());
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const std::string runs = argc > 1 ? argv[1] : "runs/mixers";
  emergent::TrainConfig config;
  config.shape = kLinearMap;
  config.steps = examples::argument<long long>(argc, argv, 2, 3000, kUsage);
  const int seeds = examples::argument(argc, argv, 3, 1, kUsage);
  if (seeds < 1) throw emergent::Error("SEEDS must be at least 1 (" + kUsage + ")");
  config.task_params = {{"S", examples::argument(argc, argv, 4, 16, kUsage)},
                        {"s", examples::argument(argc, argv, 5, 3, kUsage)}};
  if (argc > 6) throw emergent::Error("too many arguments (" + kUsage + ")");

  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // rows as they come, also into a pipe
  std::printf("%-15s %5s %10s %11s %8s %10s\n", "mixer", "seed", "parameters", "final_loss",
              "x1_loss", "emergence");
  train_mixer<emergent::DotAttention>(config, runs, seeds);
  train_mixer<emergent::MlpMixer>(config, runs, seeds);
  train_mixer<emergent::Mamba>(config, runs, seeds);
  train_mixer<emergent::GatedDeltaNet>(config, runs, seeds);
  train_mixer<emergent::Rwkv, emergent::RwkvChannelMix>(config, runs, seeds);
} catch (const std::exception& e) {
  std::fprintf(stderr, "mixers: %s\n", e.what());
  return 1;
}
