// emergent_ensemble_thrust_omp (this file, g++, Thrust's OpenMP system) and
// emergent_ensemble_cuda (ensemble.cu, nvcc): the device backend of `emergent train`, which
// runs them for --backend thrust-omp and --backend cuda:
//   emergent_ensemble_<backend> --config CONFIG.json --seeds 0-15 --out DIR [--quiet]
//   emergent_ensemble_<backend> --config CONFIG.json --seeds 3,7 --run-dirs D3,D7 [--quiet]
//   [--precision fp32|tf32]   the GEMMs' precision (tf32: CUDA only, opt-in), written into each
//                             run's config.json; without it, the config's (fp32 by default)
// trains the seeds of the config as one ensemble (train/ensemble_trainer.cuh) into DIR/seed_<n>
// (or the run folders named, one per seed: `emergent sweep --backend`), each a run folder as
// `emergent train` writes one. Compiled here: the linear-map and automaton shapes of the registry
// (apps/registry/registry.hpp) with each mixer that has a device twin (cuda/mixer.cuh).
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
int train(const TrainConfig& config, const std::vector<std::uint64_t>& seeds,
          const std::vector<std::filesystem::path>& dirs, bool quiet) {
  emergent::cuda::EnsembleTrainer<MixerT, S> trainer(config, seeds, dirs, !quiet);
  const std::vector<emergent::RunSummary> summaries = trainer.run();
  for (std::size_t e = 0; e < seeds.size(); ++e)
    std::printf("seed %llu: steps %lld  loss %.4f  emergence metric %.4f  held-out loss %.4f\n",
                (unsigned long long)seeds[e], (long long)summaries[e].steps_done,
                summaries[e].final_loss, summaries[e].final_metric, summaries[e].eval.loss);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"trains the seeds of one config as one ensemble on the device (" +
               std::string(emergent::cuda::kDeviceSystem) + ")"};
  std::string config_file, seed_text, out;
  std::vector<std::string> run_dirs;
  bool quiet = false;
  app.add_option("--config", config_file, "the resolved config.json")->required();
  app.add_option("--seeds", seed_text, "seeds: 0-15, or 1,4,9")->required();
  auto* out_option = app.add_option("--out", out, "folder of the seeds' run folders (seed_<n>)");
  app.add_option("--run-dirs", run_dirs, "the seeds' run folders, one per seed, in order")
      ->delimiter(',')
      ->excludes(out_option);
  app.add_flag("--quiet", quiet, "no progress line");
  std::string precision;
  app.add_option("--precision", precision,
                 "the GEMMs' precision: fp32 or tf32 (CUDA's tensor cores); default: the "
                 "config's, which this sets (config.json records it)");
  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;
  try {
    if (!emergent::cuda::device_available())
      throw emergent::Error(std::string(emergent::cuda::kDeviceSystem) +
                            ": no GPU is visible here; train with --backend cpu or thrust-omp");
    TrainConfig config = emergent::read_train_config(config_file);
    if (!precision.empty()) config.precision = precision;
    emergent::cuda::gemm_precision() = emergent::cuda::parse_precision(config.precision);
    const std::vector<std::uint64_t> seeds = emergent::cli::parse_seed_list(seed_text, "--seeds");
    std::vector<std::filesystem::path> dirs(run_dirs.begin(), run_dirs.end());
    if (run_dirs.empty()) {
      if (out.empty()) throw emergent::Error("--out or --run-dirs is required");
      for (std::uint64_t seed : seeds) dirs.push_back(emergent::cli::seed_run_folder(out, seed));
    }
    if (dirs.size() != seeds.size())
      throw emergent::Error("--run-dirs: " + std::to_string(dirs.size()) + " folders for " +
                            std::to_string(seeds.size()) + " seeds");
    // Before anything is allocated: an ensemble larger than the device is one line, not a
    // std::bad_alloc (or an out-of-memory abort) part-way.
    emergent::require_memory_fits(
        emergent::estimated_training_bytes(config, seeds.size()), device_memory_bytes(),
        EMERGENT_DEVICE_IS_CUDA ? "the GPU's free memory" : "this machine's memory",
        "--seeds " + seed_text,
        std::to_string(seeds.size()) + " seeds, batch_tokens and the shape");
    using emergent::cli::kAutomatonShape, emergent::cli::kLinearMapShape;
    const bool linear_map = config.shape == kLinearMapShape,
               automaton = config.shape == kAutomatonShape;
    if (config.mixer == "dot_attention" && linear_map)
      return train<emergent::DotAttention, kLinearMapShape>(config, seeds, dirs, quiet);
    if (config.mixer == "dot_attention" && automaton)
      return train<emergent::DotAttention, kAutomatonShape>(config, seeds, dirs, quiet);
    if (config.mixer == "mlp_mixer" && linear_map)
      return train<emergent::MlpMixer, kLinearMapShape>(config, seeds, dirs, quiet);
    if (config.mixer == "mlp_mixer" && automaton)
      return train<emergent::MlpMixer, kAutomatonShape>(config, seeds, dirs, quiet);
    if (config.mixer == "mamba" && linear_map)
      return train<emergent::Mamba, kLinearMapShape>(config, seeds, dirs, quiet);
    if (config.mixer == "mamba" && automaton)
      return train<emergent::Mamba, kAutomatonShape>(config, seeds, dirs, quiet);
    throw emergent::Error(
        config_file + ": " + emergent::cli::describe(config.mixer, config.shape) +
        " is not compiled for the device backend (it has dot_attention, mlp_mixer and mamba at " +
        emergent::cli::describe("", kLinearMapShape).substr(1) + " and " +
        emergent::cli::describe("", kAutomatonShape).substr(1) +
        "); add a line to apps/device/ensemble.cpp, or train with --backend cpu");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
