// A mixed device ensemble (train/ensemble_trainer.cuh) against the CPU trainer (train/trainer.hpp)
// run by run: members that differ in sparsity, matrix, seed, bias strength, learning rate,
// schedule and steps, one of them resuming from a CPU checkpoint, each write the run folder the
// CPU writes for that run alone: every metrics row with the same columns and (within 1e-4) the
// same values, the attention entropy and IoU, the held-out columns of eval_every, the
// save_attention_at maps and two stages' init_source records included. The trainer's bookkeeping is
// host code, the same under CUDA, so this runs in the OpenMP build only (tests/device/cuda_tests.cu
// leaves it out).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/io/safetensors.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/train/attention_snapshot.hpp>
#include <emergent/train/ensemble_trainer.cuh>
#include <emergent/train/trainer.hpp>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../run_folder_reading.hpp"
#include "../temp_dir.hpp"

namespace device_trainer_shapes {
inline constexpr emergent::Shape kShape{
    .vocab = 2, .d_model = 16, .heads = 2, .layers = 1, .d_ff = 32, .max_len = 11};
// Dyck with k = 2 and the automaton with 4 colours, both 23 positions (the automaton: 6 states of
// S = 4 cells)
inline constexpr emergent::Shape kDyckShape{
    .vocab = 4, .d_model = 16, .heads = 2, .layers = 2, .d_ff = 32, .max_len = 23};
}  // namespace device_trainer_shapes

namespace {

using device_trainer_shapes::kDyckShape;
using device_trainer_shapes::kShape;
using emergent::TrainConfig;
namespace fs = std::filesystem;

// The largest difference between two metrics-row values: numbers, or lists or objects of them
// (the attention entropy per layer and head, a summary's evaluation); anything else must be
// equal.
double json_difference(const nlohmann::json& a, const nlohmann::json& b) {
  if (a.is_number() && b.is_number()) return std::abs(a.get<double>() - b.get<double>());
  if (a.is_array() && b.is_array() && a.size() == b.size()) {
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, json_difference(a[i], b[i]));
    return worst;
  }
  if (a.is_object() && b.is_object() && a.size() == b.size()) {
    double worst = 0;
    for (auto it = a.begin(); it != a.end(); ++it)
      worst =
          std::max(worst, b.contains(it.key()) ? json_difference(it.value(), b[it.key()]) : 1e9);
    return worst;
  }
  return a == b ? 0.0 : 1e9;
}

// The largest difference of a value between the metrics rows of a CPU run and its device twin
// (every CPU column present on the device, the wall time aside); the device rows have one column
// more, changed_on_resume, at step `extended_at` only (-1: nowhere).
double worst_row_difference(const fs::path& cpu_dir, const fs::path& device_dir,
                            std::int64_t extended_at = -1) {
  const std::vector<nlohmann::json> cpu = read_metrics(cpu_dir, false),
                                    device = read_metrics(device_dir, false);
  REQUIRE(cpu.size() == device.size());
  double worst = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i) {
    CAPTURE(cpu[i].dump());
    CAPTURE(device[i].dump());
    for (auto it = cpu[i].begin(); it != cpu[i].end(); ++it) {
      if (it.key() == "wall_s") continue;
      REQUIRE(device[i].contains(it.key()));
      worst = std::max(worst, json_difference(it.value(), device[i][it.key()]));
    }
    const bool extended = cpu[i]["step"] == extended_at;
    CHECK(device[i].contains("changed_on_resume") == extended);
    CHECK(device[i].size() == cpu[i].size() + (extended ? 1 : 0));
  }
  MESSAGE(device_dir.filename().string()
          << ": " << cpu.size() << " rows, worst difference of a value " << worst);
  return worst;
}

// The largest difference between the save_attention_at maps of `step` of a CPU run and its device
// twin (F16 files); -1 when neither has one (having one alone fails).
double worst_snapshot_difference(const fs::path& cpu_dir, const fs::path& device_dir,
                                 std::int64_t step) {
  const fs::path cpu_map = emergent::attention_snapshot_path(cpu_dir, step),
                 device_map = emergent::attention_snapshot_path(device_dir, step);
  REQUIRE(fs::exists(cpu_map) == fs::exists(device_map));
  if (!fs::exists(cpu_map)) return -1;
  const std::vector<float> a = emergent::SafetensorsFile(cpu_map).read_f32("attention"),
                           b = emergent::SafetensorsFile(device_map).read_f32("attention");
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, double(std::abs(a[i] - b[i])));
  return worst;
}

fs::path cpu_dir(const fs::path& root, std::size_t e) {
  return root / ("cpu_" + std::to_string(e));
}
fs::path device_dir(const fs::path& root, std::size_t e) {
  return root / ("device_" + std::to_string(e));
}

// Trains each config alone on the CPU into cpu_dir(root, e), then all of them as one device
// ensemble into device_dir(root, e) (`before_ensemble` may write into those first); returns the
// ensemble's summaries.
template <emergent::Shape S>
std::vector<emergent::RunSummary> train_alone_and_together(
    const std::vector<TrainConfig>& configs, const fs::path& root,
    const std::function<void()>& before_ensemble = {}) {
  std::vector<fs::path> device_dirs;
  for (std::size_t e = 0; e < configs.size(); ++e) {
    device_dirs.push_back(device_dir(root, e));
    emergent::Trainer<emergent::Model<emergent::DotAttention, S, float>>(configs[e],
                                                                         cpu_dir(root, e), false)
        .run();
  }
  if (before_ensemble) before_ensemble();
  return emergent::cuda::EnsembleTrainer<emergent::DotAttention, S>(configs, device_dirs, false)
      .run();
}

TrainConfig linear_map(int s, std::uint64_t seed, std::int64_t steps) {
  TrainConfig c;
  c.task = "linear-map";
  c.task_params = {{"S", 6}, {"s", s}, {"task_seed", int(seed % 2)}};
  c.shape = kShape;
  c.seed = seed;
  c.steps = steps;
  c.batch_tokens = 120;
  c.warmup_steps = 5;
  c.log_every = 5;
  c.checkpoint_every = 10;
  c.threads = 1;
  return c;
}

template <emergent::Shape S>
void check_mixed_ensemble() {
  using Net = emergent::Model<emergent::DotAttention, S, float>;
  const TempDir tmp("mixed");
  const fs::path& root = tmp.path;
  std::vector<TrainConfig> configs = {linear_map(1, 1, 20), linear_map(2, 2, 30),
                                      linear_map(2, 3, 25), linear_map(4, 4, 25)};
  configs[0].lr = 3e-3;
  configs[1].schedule = "cosine";
  configs[1].bias = 1.5;
  configs[2].lr = 2e-3;
  configs[3].bias = 3;
  // fires at step 10 (the trailing mean of x1_loss, 0.786 < 0.79): the member is summarised
  // there, the others run on
  configs[3].stop_below = 0.79;
  configs[0].eval_every = 5;   // emergence reads the held-out x1_loss
  configs[1].eval_every = 5;   // held out with the bias on
  configs[2].eval_every = 10;  // and with a held-out set of its own size
  configs[2].eval_batches = 1;
  configs[1].analysis_every = 5;
  configs[1].save_attention_at = "10,21";
  // Two stages (init_from): member 0 takes all but the query-key rows of a finished run, member 1
  // only those rows from one of its checkpoints; the first row records the same source.
  const fs::path source = root / "source";
  emergent::Trainer<Net>(linear_map(3, 7, 10), source, false).run();
  configs[0].init_from = source.string();
  configs[0].init_take = "all_but_qk";
  configs[1].init_from = emergent::checkpoint_path(source, 10).string();
  configs[1].init_take = "qk";
  // Member 2 has trained its first 10 steps on the CPU: it resumes from that checkpoint while the
  // others start at step 0.
  const std::vector<emergent::RunSummary> summaries =
      train_alone_and_together<S>(configs, root, [&] {
        TrainConfig first_part = configs[2];
        first_part.steps = 10;
        emergent::Trainer<Net>(first_part, device_dir(root, 2), false).run();
      });
  for (std::size_t e = 0; e < configs.size(); ++e) {
    CAPTURE(e);
    // the one extra column: member 2's resume extended its steps (10 to 25)
    CHECK(worst_row_difference(cpu_dir(root, e), device_dir(root, e), e == 2 ? 10 : -1) < 1e-4);
    const nlohmann::json cpu_summary = emergent::read_json_file(cpu_dir(root, e) / "summary.json"),
                         device_summary =
                             emergent::read_json_file(device_dir(root, e) / "summary.json");
    CHECK(device_summary["steps_done"] == cpu_summary["steps_done"]);
    CHECK(summaries[e].steps_done == cpu_summary["steps_done"].get<std::int64_t>());
    CHECK(fs::exists(emergent::checkpoint_path(device_dir(root, e), summaries[e].steps_done)));
    CHECK(device_summary["metric"] == cpu_summary["metric"]);
    for (std::int64_t step : {10, 21})  // F16 files: one rounding step of values below 1
      CHECK(worst_snapshot_difference(cpu_dir(root, e), device_dir(root, e), step) <= 1e-3);
  }
  CHECK(fs::exists(emergent::attention_snapshot_path(device_dir(root, 1), 21)));
  for (int e : {0, 1}) {
    const nlohmann::json first = read_metrics(device_dir(root, e), false).front();
    REQUIRE(first.contains("init_source"));
    CHECK(first["init_source"]["step"] == 10);
    CHECK(!first["init_source"]["taken"].empty());
  }
  CHECK(emergent::read_json_file(device_dir(root, 0) / "summary.json")["metric"] == "eval_x1_loss");
  CHECK(summaries[3].steps_done == 11);  // the early stop fired
  CHECK(summaries[0].steps_done == 20);
  CHECK(summaries[1].steps_done == 30);
}

TEST_CASE("mixed device ensemble: each member's run folder is the CPU's run of it alone") {
  check_mixed_ensemble<kShape>();
}

// Members of different lengths and batches in one ensemble (the linear map's S = 4, 6 and 5: 7,
// 11 and 9 positions, 15, 10 and 12 sequences of 120 tokens), padded to the longest and the most:
// each member's rows, analysis, snapshots and held-out columns are those of its CPU run.
TEST_CASE("mixed device ensemble of different lengths: padded, each member as the CPU's") {
  const TempDir tmp("padded");
  const fs::path& root = tmp.path;
  std::vector<TrainConfig> configs = {linear_map(2, 1, 20), linear_map(2, 2, 20),
                                      linear_map(1, 3, 15)};
  configs[0].task_params["S"] = 4;  // the short member: biased, analysed, evaluated, snapshot
  configs[0].bias = 1.5;
  configs[0].analysis_every = 5;
  configs[0].eval_every = 5;
  configs[0].save_attention_at = "10";
  configs[1].analysis_every = 5;  // a long one analysed beside it
  configs[2].task_params["S"] = 5;
  configs[2].eval_every = 5;
  REQUIRE(emergent::sequences_per_step(configs[0]) == 15);
  REQUIRE(emergent::sequences_per_step(configs[1]) == 10);
  REQUIRE(emergent::sequences_per_step(configs[2]) == 12);
  const std::vector<emergent::RunSummary> summaries =
      train_alone_and_together<kShape>(configs, root);
  for (std::size_t e = 0; e < configs.size(); ++e) {
    CAPTURE(e);
    CHECK(worst_row_difference(cpu_dir(root, e), device_dir(root, e)) < 1e-4);
    CHECK(summaries[e].steps_done == configs[e].steps);
    // the summary's evaluation (on the host, at the member's own batch) is the CPU run's
    const nlohmann::json cpu_summary = emergent::read_json_file(cpu_dir(root, e) / "summary.json"),
                         device_summary =
                             emergent::read_json_file(device_dir(root, e) / "summary.json");
    for (const char* key : {"final_loss", "final_metric", "eval"}) {
      CAPTURE(key);
      REQUIRE(cpu_summary.contains(key));
      CHECK(json_difference(cpu_summary[key], device_summary[key]) < 1e-4);
    }
  }
  CHECK(read_metrics(device_dir(root, 0), false).back().contains("attention_iou"));
  REQUIRE(fs::exists(emergent::attention_snapshot_path(cpu_dir(root, 0), 10)));
  CHECK(worst_snapshot_difference(cpu_dir(root, 0), device_dir(root, 0), 10) <= 1e-3);
}

// 20 steps of a task of kDyckShape's 23 positions, logged and analysed every 5.
TrainConfig short_run(const char* task, const nlohmann::json& params, std::uint64_t seed) {
  TrainConfig c;
  c.task = task;
  c.task_params = params;
  c.shape = kDyckShape;
  c.seed = seed;
  c.steps = 20;
  c.lr = 3e-3;
  c.batch_tokens = 96;
  c.warmup_steps = 5;
  c.log_every = 5;
  c.analysis_every = 5;
  c.checkpoint_every = 10;
  c.threads = 1;
  return c;
}

// An ensemble of automata only, whose batches the device makes (cuda/cellular_automaton.cuh):
// two rule pools of one length (S x T = 4 x 6 and 8 x 3, the second with a window of 5 and two
// applications between recorded states), one biased; each member as its CPU run.
TEST_CASE("device ensemble of automata: sampled on the device, each member as the CPU's") {
  const TempDir tmp("automata");
  const fs::path& root = tmp.path;
  const nlohmann::json automaton = {{"S", 4}, {"states", 6}, {"colours", 4}, {"rules", 4}};
  std::vector<TrainConfig> configs = {short_run("cellular-automaton", automaton, 1),
                                      short_run("cellular-automaton", automaton, 2)};
  configs[0].bias = 1.5;
  configs[0].eval_every = 5;
  configs[1].task_params = {{"S", 8},     {"states", 3}, {"colours", 3},  {"window", 5},
                            {"depth", 2}, {"rules", 8},  {"task_seed", 4}};
  train_alone_and_together<kDyckShape>(configs, root);
  for (std::size_t e = 0; e < configs.size(); ++e) {
    CAPTURE(e);
    CHECK(worst_row_difference(cpu_dir(root, e), device_dir(root, e)) < 1e-4);
  }
}

// A task whose weights and target move with the sequence (Dyck) on the device: its loss weights,
// held-out part and bias patterns per sequence, its analysis sequence by sequence, beside a task
// with fixed ones (the automaton, biased too) in one ensemble.
TEST_CASE("mixed device ensemble with Dyck: weights, bias and analysis per sequence as the CPU's") {
  const TempDir tmp("dyck");
  const fs::path& root = tmp.path;
  const nlohmann::json dyck = {{"k", 2}, {"max_depth", 4}, {"tokens", 24}};
  std::vector<TrainConfig> configs = {short_run("dyck", dyck, 1), short_run("dyck", dyck, 2),
                                      short_run("dyck", dyck, 3)};
  configs[0].bias = 2;  // per-sequence patterns, held out with the bias on
  configs[0].eval_every = 5;
  configs[1].task_params = {
      {"k", 2}, {"max_depth", 3}, {"tokens", 24}, {"open_probability", 0.4}, {"loss", "all"}};
  configs[1].eval_every = 10;
  configs[1].eval_batches = 3;
  configs[2].task = "cellular-automaton";  // fixed weights and target, repeated per sequence
  configs[2].task_params = {{"S", 4}, {"states", 6}, {"colours", 4}, {"rules", 4}};
  configs[2].bias = 1;
  configs[2].eval_every = 5;
  REQUIRE(emergent::make_task(configs[2]).task->length() == kDyckShape.max_len);
  const std::vector<emergent::RunSummary> summaries =
      train_alone_and_together<kDyckShape>(configs, root);
  for (std::size_t e = 0; e < configs.size(); ++e) {
    CAPTURE(e);
    CHECK(worst_row_difference(cpu_dir(root, e), device_dir(root, e)) < 1e-4);
    const std::vector<nlohmann::json> rows = read_metrics(device_dir(root, e), false);
    CHECK(rows.back().contains("attention_iou"));  // the analysis is there (and matched above)
    CHECK(rows[2].contains(e < 2 ? "eval_closing_loss" : "eval_next_state_loss"));  // step 10
    CHECK(summaries[e].steps_done == 20);
  }
}

}  // namespace

// Finished members leave the device ensemble (EnsembleTrainer::compact: once they are a quarter of
// it): the members still training keep their numbers to the bit, as if the finished ones had
// stayed frozen in it (EMERGENT_DEVICE_COMPACT=0). Padded, with the bias, held-out evaluation and
// analysis on members that outlive two compactions, and the summaries in the configs' order.
TEST_CASE("device ensemble without its finished members: the same bits as with them") {
  const TempDir tmp("compact");
  std::vector<TrainConfig> configs = {linear_map(1, 1, 40), linear_map(2, 2, 10),
                                      linear_map(2, 3, 30), linear_map(3, 4, 20)};
  configs[0].task_params["S"] = 4;  // padded: 60 sequences of 7 positions beside 40 of 11
  configs[0].bias = 1.5;
  configs[0].eval_every = 5;
  configs[0].analysis_every = 5;
  configs[2].eval_every = 10;
  configs[2].bias = 2;
  configs[3].save_attention_at = "15";
  for (TrainConfig& c : configs) {  // GEMMs that Eigen would share among 2 threads if let
    c.threads = 2;
    c.batch_tokens = 480;
  }
  auto train = [&](const char* compact, const std::string& name) {
    REQUIRE(setenv("EMERGENT_DEVICE_COMPACT", compact, 1) == 0);
    std::vector<fs::path> dirs;
    for (std::size_t e = 0; e < configs.size(); ++e)
      dirs.push_back(tmp.path / (name + std::to_string(e)));
    const std::vector<emergent::RunSummary> summaries =
        emergent::cuda::EnsembleTrainer<emergent::DotAttention, kShape>(configs, dirs, false).run();
    REQUIRE(unsetenv("EMERGENT_DEVICE_COMPACT") == 0);
    return summaries;
  };
  const std::vector<emergent::RunSummary> kept = train("0", "kept_"),
                                          dropped = train("1", "dropped_");
  for (std::size_t e = 0; e < configs.size(); ++e) {
    CAPTURE(e);
    const fs::path a = tmp.path / ("kept_" + std::to_string(e)),
                   b = tmp.path / ("dropped_" + std::to_string(e));
    CHECK(read_metrics(a) == read_metrics(b));
    CHECK(dropped[e].steps_done == configs[e].steps);
    CHECK(kept[e].final_loss == dropped[e].final_loss);
    CHECK(kept[e].eval.loss == dropped[e].eval.loss);
    for (std::int64_t step = 10; step <= configs[e].steps; step += 10)
      CHECK(read_bytes(emergent::checkpoint_path(a, step)) ==
            read_bytes(emergent::checkpoint_path(b, step)));
  }
  CHECK(read_bytes(emergent::attention_snapshot_path(tmp.path / "kept_3", 15)) ==
        read_bytes(emergent::attention_snapshot_path(tmp.path / "dropped_3", 15)));
}
