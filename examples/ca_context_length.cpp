// Plateau length against context length on the multi-rule cellular automaton (paper Fig. 4
// middle/right, arXiv 2606.25010): for each state size S, with and without the attention bias,
// several seeds, train the paper's 4-layer transformer at a fixed token batch (so sequences per
// step fall as S grows) and record the first step at which the smoothed loss falls below 1.3.
//
//   ca_context_length --sizes 4 8 16 32 --seeds 0 1 --bias 5 --steps 3000 --out
//   runs/ca_context_length
//
// One row per run is appended to <out>/results.jsonl; a rerun skips runs that have a row and
// resumes unfinished ones from their checkpoints. A run that never falls below 1.3 within
// --steps is reported as censored (">steps"), never dropped.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/trainer.hpp>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/parse_command_line.hpp"

namespace {

constexpr emergent::Shape kShape{
    .vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 1024};
using Net = emergent::Model<emergent::DotAttention, kShape>;

// The paper's plateau lengths read off its Fig. 5c (blog Fig. 4 right; docs/paper-notes.md §3).
const std::map<int, std::string> kPaperNoBias = {{4, "~61"},     {8, "~377"},   {16, "~400"},
                                                 {32, "~650"},   {64, "~1390"}, {128, "~3300"},
                                                 {256, "~8600"}, {512, "never"}};

std::string run_name(int S, double bias, int seed) {
  char name[96];
  std::snprintf(name, sizeof name, "S%d_c%g_seed%d", S, bias, seed);
  return name;
}

std::string step_or_censored(const nlohmann::json& row) {
  return row["plateau_length"].is_null() ? ">" + std::to_string(row["steps_done"].get<long long>())
                                         : std::to_string(row["plateau_length"].get<long long>());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Plateau length against CA state size, with and without the attention bias"};
  std::vector<int> sizes{4, 8, 16, 32};
  std::vector<int> seeds{0, 1};
  double bias = 5;
  std::string out = "runs/ca_context_length";
  emergent::TrainConfig base;
  base.task = "cellular-automaton";
  base.shape = kShape;
  base.steps = 3000;
  base.stop_below = 0;
  int states = 16, rules = 256, depth = 1;
  bool run_past_plateau = false;
  app.add_option("--sizes", sizes, "state sizes S (S * states <= 1024)")->capture_default_str();
  app.add_option("--seeds", seeds)->capture_default_str();
  app.add_option("--bias", bias, "attention-bias strength c of the biased runs")
      ->capture_default_str();
  app.add_option("--steps", base.steps, "step budget per run")->capture_default_str();
  app.add_option("--batch-tokens", base.batch_tokens, "fixed token batch")->capture_default_str();
  app.add_option("--lr", base.lr)->capture_default_str();
  app.add_option("--states", states)->capture_default_str();
  app.add_option("--rules", rules)->capture_default_str();
  app.add_option("--depth", depth)->capture_default_str();
  app.add_option("--threads", base.threads, "0: all cores")->capture_default_str();
  app.add_option("--out", out)->capture_default_str();
  app.add_flag("--run-past-plateau", run_past_plateau,
               "train the full budget instead of stopping at the plateau end");
  if (const auto stop = emergent::cli::parse_command_line(app, argc, argv)) return *stop;

  try {
    std::filesystem::create_directories(out);
    const std::filesystem::path results_path = std::filesystem::path(out) / "results.jsonl";
    std::map<std::string, nlohmann::json> done;
    if (std::ifstream in(results_path); in) {
      std::string line;
      while (std::getline(in, line))
        if (!line.empty()) {
          const nlohmann::json row = nlohmann::json::parse(line);
          done[row["run"].get<std::string>()] = row;
        }
    }
    for (int S : sizes)
      for (double c : {0.0, bias})
        for (int seed : seeds) {
          const std::string name = run_name(S, c, seed);
          if (done.count(name)) continue;
          emergent::TrainConfig config = base;
          config.task_params = {{"S", S}, {"states", states}, {"rules", rules}, {"depth", depth}};
          config.bias = c;
          config.seed = static_cast<std::uint64_t>(seed);
          // Stop once the smoothed loss is below the plateau threshold: that step is the result.
          const emergent::TaskSetup setup = emergent::make_task(config);
          if (!run_past_plateau) config.stop_below = setup.thresholds.emergence_below;
          std::fprintf(stderr, "== %s (%d sequences of %d tokens per step)\n", name.c_str(),
                       emergent::sequences_per_step(config), emergent::sequence_tokens(config));
          emergent::Trainer<Net> trainer(config, std::filesystem::path(out) / name, true);
          const emergent::RunSummary summary = trainer.run();
          nlohmann::json row = {
              {"run", name},
              {"S", S},
              {"bias", c},
              {"seed", seed},
              {"sequences_per_step", emergent::sequences_per_step(config)},
              {"plateau_length", summary.emergence_step ? nlohmann::json(*summary.emergence_step)
                                                        : nlohmann::json(nullptr)},
              {"steps_done", summary.steps_done},
              {"final_loss", summary.final_loss},
              {"attention_iou", summary.eval.attention.iou},
              {"wall_s", summary.wall_seconds}};
          std::ofstream(results_path, std::ios::app) << row.dump() << "\n";
          done[name] = row;
        }

    std::printf(
        "plateau length (first step with smoothed loss < 1.3; '>N' = censored at N steps)\n");
    std::printf("%6s  %-28s  %-28s  %s\n", "S", "no bias (per seed)", "bias c (per seed)",
                "paper, no bias / bias");
    std::set<int> shown;
    for (int S : sizes) {
      if (!shown.insert(S).second) continue;
      std::string plain, biased;
      for (int seed : seeds) {
        plain += step_or_censored(done[run_name(S, 0.0, seed)]) + " ";
        biased += step_or_censored(done[run_name(S, bias, seed)]) + " ";
      }
      const auto paper = kPaperNoBias.find(S);
      std::printf("%6d  %-28s  %-28s  %s / %s\n", S, plain.c_str(), biased.c_str(),
                  paper == kPaperNoBias.end() ? "?" : paper->second.c_str(),
                  S == 4 ? "~61" : "~160-200");
    }
  } catch (const std::exception& e) {  // emergent::Error and anything else: one line, exit 1
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
