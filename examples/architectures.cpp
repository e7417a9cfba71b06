// Token mixers compared at matched width (paper Fig. 7 / App. B.6, arXiv 2606.25010): the
// transformer, the causal MLP-Mixer, Mamba, Gated DeltaNet and RWKV-4, each at D = 128 with the
// same embeddings, LayerNorms, MLP (RWKV: its own channel mixing) and optimiser, trained on the
// linear map (S = 16, s in {3, 5, 7}) and on the cellular automaton (S = 16, C = 4, 16 states),
// several seeds each. Prints final loss and emergence step per architecture, with parameter
// counts; the shapes are examples/registry/registry.hpp's kLinearMapShape and kAutomatonShape.
//
//   architectures --seeds 0 1 2 --steps 10000 --out runs/architectures
//
// One row per run is appended to <out>/results.jsonl; a rerun skips runs that have a row and
// resumes unfinished ones from their checkpoints. "final loss" is the full-sequence loss (what
// the paper plots), smoothed over the last 5 logged rows; the emergence step is the trainer's
// (linear map: smoothed x1 loss below ln 2 - 0.03; automaton: smoothed loss below 1.3), ">N"
// when a run never got there in its N steps.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/train/trainer.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/parse_command_line.hpp"
#include "registry/run_entry.hpp"

namespace {

struct Experiment {
  std::string task;  // "linear-map" or "cellular-automaton"
  int s = 0;         // ones per row (linear map); 0 for the automaton
  std::string label() const {
    return task == "linear-map" ? "linmap_s" + std::to_string(s) : std::string("ca");
  }
};

// The paper's final losses at 10k steps read off its blog Fig. 6 (docs/paper-notes.md §3).
const std::map<std::string, std::string> kPaperLinearMap = {
    {"linmap_s3", "mixer 0.335 vs transformer 0.342"},
    {"linmap_s5", "mixer 0.395 vs transformer 0.59"},
    {"linmap_s7", "mixer 0.46 vs transformer 0.59"},
    {"ca", "transformer best of all architectures"}};

std::string run_name(const Experiment& e, const std::string& mixer, int seed) {
  return e.label() + "_" + mixer + "_seed" + std::to_string(seed);
}

std::string step_or_censored(const nlohmann::json& row) {
  return row["emergence_step"].is_null() ? ">" + std::to_string(row["steps_done"].get<long long>())
                                         : std::to_string(row["emergence_step"].get<long long>());
}

std::map<std::string, nlohmann::json> read_results(const std::filesystem::path& path) {
  std::map<std::string, nlohmann::json> done;
  std::ifstream in(path);
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty()) continue;
    try {
      const nlohmann::json row = nlohmann::json::parse(line);
      done[row.at("run").get<std::string>()] = row;
    } catch (const nlohmann::json::exception& e) {
      throw emergent::Error(path.string() + ": line " + std::to_string(number) + ": " + e.what());
    }
  }
  return done;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Every token mixer at matched width on the linear map and the cellular automaton"};
  std::vector<std::string> mixers{"dot_attention", "mlp_mixer", "mamba", "gated_deltanet", "rwkv"};
  std::vector<int> sparsities{3, 5, 7};
  std::vector<int> seeds{0, 1};
  std::vector<std::string> tasks{"linear-map", "cellular-automaton"};
  std::string out = "runs/architectures";
  emergent::TrainConfig base;
  base.steps = 10000;
  std::int64_t automaton_steps = 3000;
  app.add_option("--mixers", mixers)->capture_default_str();
  app.add_option("--tasks", tasks)
      ->check(CLI::IsMember({"linear-map", "cellular-automaton"}))
      ->capture_default_str();
  app.add_option("--sparsities", sparsities, "linear map: ones per row s")->capture_default_str();
  app.add_option("--seeds", seeds)->capture_default_str();
  app.add_option("--steps", base.steps, "step budget per linear-map run")->capture_default_str();
  app.add_option("--automaton-steps", automaton_steps, "step budget per automaton run")
      ->capture_default_str();
  app.add_option("--batch-tokens", base.batch_tokens, "tokens per step")->capture_default_str();
  app.add_option("--lr", base.lr)->capture_default_str();
  app.add_option("--threads", base.threads, "0: all cores")->capture_default_str();
  app.add_option("--out", out)->capture_default_str();
  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;

  try {
    std::vector<Experiment> experiments;
    for (const std::string& task : tasks) {
      if (task == "linear-map")
        for (int s : sparsities) experiments.push_back({task, s});
      else
        experiments.push_back({task, 0});
    }
    std::filesystem::create_directories(out);
    const std::filesystem::path results_path = std::filesystem::path(out) / "results.jsonl";
    std::map<std::string, nlohmann::json> done = read_results(results_path);

    for (const Experiment& e : experiments)
      for (const std::string& mixer : mixers)
        for (int seed : seeds) {
          const std::string name = run_name(e, mixer, seed);
          if (done.count(name)) continue;
          emergent::TrainConfig config = base;
          config.task = e.task;
          config.mixer = mixer;
          config.seed = static_cast<std::uint64_t>(seed);
          if (e.task == "linear-map") {
            config.task_params = {{"S", 16}, {"s", e.s}};
            config.shape = emergent::cli::kLinearMapShape;
          } else {
            config.steps = automaton_steps;
            config.shape = emergent::cli::kAutomatonShape;
          }
          const emergent::cli::ShapeEntry& entry =
              emergent::cli::find_shape(mixer, config.shape, emergent::sequence_tokens(config) - 1);
          config.shape = entry.shape;
          std::fprintf(stderr, "== %s (%zu parameters, %d sequences of %d tokens per step)\n",
                       name.c_str(), entry.parameters, emergent::sequences_per_step(config),
                       emergent::sequence_tokens(config));
          const emergent::RunSummary summary =
              emergent::cli::train_entry(entry, config, std::filesystem::path(out) / name, true);
          const nlohmann::json row = {
              {"run", name},
              {"task", e.task},
              {"S", 16},
              {"s", e.s},
              {"mixer", mixer},
              {"seed", seed},
              {"parameters", entry.parameters},
              {"steps", config.steps},
              {"steps_done", summary.steps_done},
              {"final_loss", summary.final_loss},
              {"final_metric", summary.final_metric},
              {"emergence_step", emergent::json_or_null(summary.emergence_step)},
              {"solved_step", emergent::json_or_null(summary.solved_step)},
              {"wall_s", summary.wall_seconds}};
          std::ofstream(results_path, std::ios::app) << row.dump() << "\n";
          done[name] = row;
        }

    for (const Experiment& e : experiments) {
      std::printf("\n%s  S=16%s   paper: %s\n", e.task.c_str(),
                  e.s ? (" s=" + std::to_string(e.s)).c_str() : "",
                  kPaperLinearMap.at(e.label()).c_str());
      std::printf("%-16s %10s  %-24s %7s  %s\n", "mixer", "parameters", "final loss per seed",
                  "mean", "emergence step per seed");
      for (const std::string& mixer : mixers) {
        std::string losses, steps;
        double sum = 0;
        std::size_t parameters = 0;
        for (int seed : seeds) {
          const nlohmann::json& row = done.at(run_name(e, mixer, seed));
          char value[16];
          std::snprintf(value, sizeof value, "%.3f ", row["final_loss"].get<double>());
          losses += value;
          sum += row["final_loss"].get<double>();
          steps += step_or_censored(row) + " ";
          parameters = row["parameters"].get<std::size_t>();
        }
        std::printf("%-16s %10zu  %-24s %7.3f  %s\n", mixer.c_str(), parameters, losses.c_str(),
                    sum / double(seeds.size()), steps.c_str());
      }
    }
  } catch (const std::exception& e) {  // emergent::Error and anything else: one line, exit 1
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
