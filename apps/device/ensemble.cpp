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
// that has a device twin (cuda/mixer.cuh).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/train/ensemble_trainer.cuh>
#include <emergent/train/memory_estimate.hpp>
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

template <template <Shape, class> class MixerT, Shape S>
int train(const std::vector<TrainConfig>& configs, const std::vector<std::filesystem::path>& dirs,
          bool quiet) {
  emergent::cuda::EnsembleTrainer<MixerT, S> trainer(configs, dirs, !quiet);
  const std::vector<emergent::RunSummary> summaries = trainer.run();
  for (std::size_t e = 0; e < configs.size(); ++e)
    std::printf(
        "%s (seed %llu): steps %lld  loss %.4f  emergence metric %.4f  held-out loss "
        "%.4f\n",
        dirs[e].c_str(), (unsigned long long)configs[e].seed, (long long)summaries[e].steps_done,
        summaries[e].final_loss, summaries[e].final_metric, summaries[e].eval.loss);
  return 0;
}

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
    // batch_tokens: train/ensemble_members.hpp.)
    emergent::require_memory_fits(
        emergent::estimated_training_bytes(config, configs.size()), device_memory_bytes(),
        EMERGENT_DEVICE_IS_CUDA ? "the GPU's free memory" : "this machine's memory",
        "an ensemble of " + std::to_string(configs.size()) + " runs",
        std::to_string(configs.size()) + " members, batch_tokens and the shape");
    using emergent::cli::kAutomatonShape, emergent::cli::kLinearMapShape;
    const bool linear_map = config.shape == kLinearMapShape,
               automaton = config.shape == kAutomatonShape;
    if (config.mixer == "dot_attention" && linear_map)
      return train<emergent::DotAttention, kLinearMapShape>(configs, dirs, quiet);
    if (config.mixer == "dot_attention" && automaton)
      return train<emergent::DotAttention, kAutomatonShape>(configs, dirs, quiet);
    if (config.mixer == "mlp_mixer" && linear_map)
      return train<emergent::MlpMixer, kLinearMapShape>(configs, dirs, quiet);
    if (config.mixer == "mlp_mixer" && automaton)
      return train<emergent::MlpMixer, kAutomatonShape>(configs, dirs, quiet);
    if (config.mixer == "mamba" && linear_map)
      return train<emergent::Mamba, kLinearMapShape>(configs, dirs, quiet);
    if (config.mixer == "mamba" && automaton)
      return train<emergent::Mamba, kAutomatonShape>(configs, dirs, quiet);
    if (config.mixer == "gated_deltanet" && linear_map)
      return train<emergent::GatedDeltaNet, kLinearMapShape>(configs, dirs, quiet);
    if (config.mixer == "gated_deltanet" && automaton)
      return train<emergent::GatedDeltaNet, kAutomatonShape>(configs, dirs, quiet);
    throw emergent::Error(
        first + ": " + emergent::cli::describe(config.mixer, config.shape) +
        " is not compiled for the device backend (it has dot_attention, mlp_mixer, mamba and "
        "gated_deltanet at " +
        emergent::cli::describe("", kLinearMapShape).substr(1) + " and " +
        emergent::cli::describe("", kAutomatonShape).substr(1) +
        "); add a line to apps/device/ensemble.cpp, or train with --backend cpu");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
