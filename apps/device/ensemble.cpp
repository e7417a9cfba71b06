// emergent_ensemble_thrust_omp (this file, g++, Thrust's OpenMP system) and
// emergent_ensemble_cuda (ensemble.cu, nvcc): the device backend of `emergent train`, which
// runs them for --backend thrust-omp and --backend cuda:
//   emergent_ensemble_<backend> --config CONFIG.json --seeds 0-15 --out DIR [--quiet]
//   emergent_ensemble_<backend> --config CONFIG.json --seeds 3,7 --run-dirs D3,D7 [--quiet]
//   emergent_ensemble_<backend> --configs C1.json,C2.json --run-dirs D1,D2 [--quiet]
//   emergent_ensemble_<backend> --memory
//   [--precision fp32|tf32]   the GEMMs' precision (tf32: CUDA only, opt-in), written into each
//                             run's config.json; without it, the config's (fp32 by default)
// trains the seeds of the config as one ensemble (train/ensemble_trainer.cuh) into DIR/seed_<n>
// (or the run folders named, one per seed), each a run folder as `emergent train` writes one;
// or, with --configs, a mixed ensemble of one run per config (train/ensemble_members.hpp says
// what they may differ in), as `emergent sweep --backend` packs a sweep's runs. --memory prints
// the bytes an ensemble may take here (the sweep sizes its ensembles by it). Compiled here: the
// linear-map and automaton shapes of the registry (apps/registry/registry.hpp) with each mixer
// that has a device twin (cuda/mixer.cuh); rwkv with its channel mixing (RwkvChannelMix), as
// apps/registry/rwkv.cpp registers it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/gated_deltanet.cuh>
#include <emergent/cuda/mamba.cuh>
#include <emergent/cuda/mlp_mixer.cuh>
#include <emergent/cuda/rwkv.cuh>
#include <emergent/cuda/rwkv_channel_mix.cuh>
#include <emergent/settings/mixer_catalog.hpp>
#include <emergent/train/ensemble_trainer.cuh>
#include <emergent/train/memory_estimate.hpp>
#include <optional>
#include <string>
#include <vector>

#include "../cli/parse_command_line.hpp"
#include "../registry/registry.hpp"
#include "../registry/seed_list.hpp"

namespace {

using emergent::Shape;
using emergent::TrainConfig;

// The memory an ensemble may take: the GPU's free memory under CUDA, this machine's under
// OpenMP (0 if it cannot be read: then nothing is refused).
double device_memory_bytes() {
#if EMERGENT_DEVICE_IS_CUDA
  std::size_t free = 0, total = 0;
  return cudaMemGetInfo(&free, &total) == cudaSuccess ? double(free) : 0.0;
#else
  return emergent::machine_memory_bytes();
#endif
}

template <template <Shape, class> class MixerT, Shape S,
          template <Shape, class> class ChannelT = emergent::GeluMlp>
int train(const std::vector<TrainConfig>& configs, const std::vector<std::filesystem::path>& dirs,
          bool quiet) {
  emergent::cuda::EnsembleTrainer<MixerT, S, ChannelT> trainer(configs, dirs, !quiet);
  const std::vector<emergent::RunSummary> summaries = trainer.run();
  for (std::size_t e = 0; e < configs.size(); ++e)
    std::printf(
        "%s (seed %llu): steps %lld  loss %.4f  emergence metric %.4f  held-out loss "
        "%.4f\n",
        dirs[e].c_str(), (unsigned long long)configs[e].seed, (long long)summaries[e].steps_done,
        summaries[e].final_loss, summaries[e].final_metric, summaries[e].eval.loss);
  return 0;
}

// The mixers with a device twin (cuda/mixer.cuh) at shape S, by their config name; nullopt when
// the configs ask for another shape or mixer.
template <Shape S>
std::optional<int> train_at(const std::vector<TrainConfig>& configs,
                            const std::vector<std::filesystem::path>& dirs, bool quiet) {
  const TrainConfig& c = configs.front();
  if (!(c.shape == S)) return std::nullopt;
#ifdef EMERGENT_DEVICE_MIXER
  if (c.mixer == EMERGENT_DEVICE_MIXER<S, float>::name)
    return train<EMERGENT_DEVICE_MIXER, S, EMERGENT_DEVICE_CHANNEL>(configs, dirs, quiet);
#else
  using emergent::DotAttention, emergent::MlpMixer, emergent::Mamba, emergent::GatedDeltaNet,
      emergent::Rwkv;
  // Each mixer by the name its type gives itself (`name`, as the catalog's line says it).
  if (c.mixer == DotAttention<S, float>::name) return train<DotAttention, S>(configs, dirs, quiet);
  if (c.mixer == MlpMixer<S, float>::name) return train<MlpMixer, S>(configs, dirs, quiet);
  if (c.mixer == Mamba<S, float>::name) return train<Mamba, S>(configs, dirs, quiet);
  if (c.mixer == GatedDeltaNet<S, float>::name)
    return train<GatedDeltaNet, S>(configs, dirs, quiet);
  if (c.mixer == Rwkv<S, float>::name)
    return train<Rwkv, S, emergent::RwkvChannelMix>(configs, dirs, quiet);
#endif
  return std::nullopt;
}

// What this program has: a program compiled on demand for one shape and mixer
// (apps/cli/shape_compiler.hpp's compiled_device_program defines EMERGENT_DEVICE_SHAPE, _MIXER
// and _CHANNEL), or the prebuilt
// program with the registry's two shapes and every mixer that has a device twin.
#ifdef EMERGENT_DEVICE_SHAPE
constexpr Shape kCompiledShape = EMERGENT_DEVICE_SHAPE;
const std::string kCompiledText =
    "a program compiled for " +
    emergent::cli::describe(std::string(EMERGENT_DEVICE_MIXER<kCompiledShape, float>::name),
                            kCompiledShape) +
    " only";
#else
const std::string kCompiledText = "dot_attention, mlp_mixer, mamba, gated_deltanet and rwkv at" +
                                  emergent::cli::describe("", emergent::cli::kLinearMapShape) +
                                  " and at" +
                                  emergent::cli::describe("", emergent::cli::kAutomatonShape);
#endif

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trains the seeds of one config as one ensemble on the device (" +
               std::string(emergent::cuda::kDeviceSystem) + ")"};
  std::string config_file, seed_text, out;
  std::vector<std::string> config_files, run_dirs;
  bool quiet = false, memory = false;
  auto* config_option = app.add_option("--config", config_file, "the resolved config.json");
  auto* configs_option =
      app.add_option("--configs", config_files,
                     "a mixed ensemble: the members' resolved config.json files (with --run-dirs)")
          ->delimiter(',')
          ->excludes(config_option);
  auto* seeds_option = app.add_option("--seeds", seed_text, "seeds: 0-15, or 1,4,9")
                           ->needs(config_option)
                           ->excludes(configs_option);
  auto* out_option = app.add_option("--out", out, "folder of the seeds' run folders (seed_<n>)")
                         ->excludes(configs_option);
  app.add_option("--run-dirs", run_dirs, "the members' run folders, one per seed or config")
      ->delimiter(',')
      ->excludes(out_option);
  app.add_flag("--quiet", quiet, "no progress line");
  app.add_flag("--memory", memory, "print the bytes an ensemble may take here, and exit")
      ->excludes(config_option, configs_option, seeds_option);
  std::string precision;
  app.add_option("--precision", precision,
                 "the GEMMs' precision: fp32 or tf32 (CUDA's tensor cores); default: the "
                 "config's, which this sets (config.json records it)");
  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;
  try {
    if (!emergent::cuda::device_available())
      throw emergent::Error(std::string(emergent::cuda::kDeviceSystem) +
                            ": no GPU is visible here; train with --backend cpu or thrust-omp");
    if (memory) {
      std::printf("%.0f\n", device_memory_bytes());
      return 0;
    }
    std::vector<TrainConfig> configs;
    std::vector<std::filesystem::path> dirs(run_dirs.begin(), run_dirs.end());
    if (!config_files.empty()) {  // a mixed ensemble
      for (const std::string& file : config_files)
        configs.push_back(emergent::read_train_config(file));
      if (dirs.size() != configs.size())
        throw emergent::Error("--run-dirs: " + std::to_string(dirs.size()) + " folders for " +
                              std::to_string(configs.size()) + " configs");
    } else {
      if (config_file.empty() || seed_text.empty())
        throw emergent::Error("--config with --seeds, or --configs, is required");
      const TrainConfig config = emergent::read_train_config(config_file);
      for (std::uint64_t seed : emergent::cli::parse_seed_list(seed_text, "--seeds")) {
        configs.push_back(config);
        configs.back().seed = seed;
        if (run_dirs.empty()) {
          if (out.empty()) throw emergent::Error("--out or --run-dirs is required");
          dirs.push_back(emergent::cli::seed_run_folder(out, seed));
        }
      }
      if (dirs.size() != configs.size())
        throw emergent::Error("--run-dirs: " + std::to_string(dirs.size()) + " folders for " +
                              std::to_string(configs.size()) + " seeds");
    }
    for (TrainConfig& c : configs)
      if (!precision.empty()) c.precision = precision;
    const TrainConfig& config = configs.front();
    const std::string first = config_files.empty() ? config_file : config_files.front();
    emergent::cuda::gemm_precision() = emergent::cuda::parse_precision(config.precision);
    // Before anything is allocated: an ensemble larger than the device is one line, not a
    // std::bad_alloc (or an out-of-memory abort) part-way. (The members share the shape and
    // batch_tokens, train/ensemble_members.hpp, and are padded to the longest sequence and the
    // most sequences: padded_member.)
    emergent::require_memory_fits(
        emergent::estimated_training_bytes(emergent::padded_member(configs), configs.size()),
        device_memory_bytes(),
        EMERGENT_DEVICE_IS_CUDA ? "the GPU's free memory" : "this machine's memory",
        "an ensemble of " + std::to_string(configs.size()) + " runs",
        std::to_string(configs.size()) + " members, batch_tokens and the shape");
#ifdef EMERGENT_DEVICE_SHAPE
    if (const auto rc = train_at<kCompiledShape>(configs, dirs, quiet)) return *rc;
#else
    using emergent::cli::kAutomatonShape, emergent::cli::kLinearMapShape;
    if (const auto rc = train_at<kLinearMapShape>(configs, dirs, quiet)) return *rc;
    if (const auto rc = train_at<kAutomatonShape>(configs, dirs, quiet)) return *rc;
#endif
    throw emergent::Error(first + ": " + emergent::cli::describe(config.mixer, config.shape) +
                          " is not compiled into this program (" + kCompiledText +
                          "): `emergent train` and `emergent sweep` compile a device program for "
                          "it on demand; or train with --backend cpu");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
