// Chained stages (train/warm_start.hpp, train/init_source.hpp, config init_from / init_take): a
// run that starts from another run's checkpoint takes what `init_take` says of the tensors of the
// same name and shape and keeps its fresh init for the rest (the embedding and head when the
// vocabulary changes); it finds its source in a checkpoint, a finished run folder or a sweep
// folder; it records the source in its first metrics row; and it resumes bit for bit.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <emergent/core/parallel.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/model.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/init_source.hpp>
#include <emergent/train/trainer.hpp>
#include <emergent/train/warm_start.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "run_folder_reading.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using emergent::TrainConfig;

constexpr emergent::Shape kDyckShape{
    .vocab = 4, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 16};
constexpr emergent::Shape kMapShape{
    .vocab = 2, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 16};
using DyckNet = emergent::Model<emergent::DotAttention, kDyckShape>;
using MapNet = emergent::Model<emergent::DotAttention, kMapShape>;

TrainConfig common(std::int64_t steps, std::uint64_t seed) {
  TrainConfig c;
  c.seed = seed;
  c.steps = steps;
  c.batch_tokens = 96;
  c.lr = 3e-3;
  c.warmup_steps = 5;
  c.log_every = 5;
  c.analysis_every = 10;
  c.checkpoint_every = 10;
  c.threads = 2;
  return c;
}

TrainConfig dyck_config(std::int64_t steps, std::uint64_t seed = 1) {
  TrainConfig c = common(steps, seed);
  c.task = "dyck";
  c.task_params = {
      {"k", 2}, {"max_depth", 3}, {"open_probability", 0.5}, {"tokens", 12}, {"loss", "closing"}};
  c.shape = kDyckShape;
  return c;
}

TrainConfig map_config(std::int64_t steps, const fs::path& from, const std::string& take,
                       std::uint64_t seed = 1) {
  TrainConfig c = common(steps, seed);
  c.task_params = {{"S", 6}, {"s", 2}, {"task_seed", 5}};
  c.shape = kMapShape;
  c.init_from = from.string();
  c.init_take = take;
  return c;
}

// The parameters a stage-2 model starts from: its init, then the source's tensors as `take` says.
std::vector<float> started(const fs::path& checkpoint, const std::string& take,
                           emergent::WarmStartReport* report = nullptr) {
  std::vector<float> params(MapNet::parameter_count);
  MapNet::init(params, 1);
  const emergent::WarmStartReport r =
      emergent::take_parameters(emergent::SafetensorsFile(checkpoint), MapNet::tensors(),
                                std::span<float>(params), take, "init_take");
  if (report) *report = r;
  return params;
}

}  // namespace

TEST_CASE("stages: what each init_take takes, by name and shape; the rest stays fresh") {
  ThreadCountGuard guard;
  TempDir dir("take");
  emergent::Trainer<DyckNet>(dyck_config(20), dir.path / "dyck", false).run();
  const fs::path checkpoint = emergent::checkpoint_path(dir.path / "dyck", 20);
  const emergent::SafetensorsFile source(checkpoint);
  std::vector<float> fresh(MapNet::parameter_count);
  MapNet::init(fresh, 1);

  emergent::WarmStartReport all_report, qk_report, rest_report;
  const std::vector<float> all = started(checkpoint, "all", &all_report),
                           qk = started(checkpoint, "qk", &qk_report),
                           rest = started(checkpoint, "all_but_qk", &rest_report);
  const std::size_t D = kMapShape.d_model;
  for (const emergent::ParameterTensor& t : MapNet::tensors()) {
    CAPTURE(t.name);
    const bool vocab_sized = t.shape.front() == 2 || (t.shape.size() == 2 && t.shape[1] == 2);
    const bool fused = t.name.ends_with("qkv.weight") || t.name.ends_with("qkv.bias");
    const std::size_t qk_end = fused ? (t.name.ends_with("weight") ? 2 * D * D : 2 * D) : 0;
    std::vector<float> theirs(t.size, 0.0f);
    if (!vocab_sized) theirs = source.read_f32(t.name);
    for (std::size_t i = 0; i < t.size; ++i) {
      const float mine = fresh[t.offset + i];
      const bool is_qk = i < qk_end;
      REQUIRE(all[t.offset + i] == (vocab_sized ? mine : theirs[i]));
      REQUIRE(qk[t.offset + i] == (!vocab_sized && is_qk ? theirs[i] : mine));
      REQUIRE(rest[t.offset + i] == (!vocab_sized && !is_qk ? theirs[i] : mine));
    }
  }
  // the token embedding and the head are another shape (vocab 4 -> 2): fresh in every take
  for (const auto* r : {&all_report, &qk_report, &rest_report}) {
    CHECK(std::find(r->fresh.begin(), r->fresh.end(), "embed.token.weight") != r->fresh.end());
    CHECK(std::find(r->taken.begin(), r->taken.end(), "embed.token.weight") == r->taken.end());
  }
  CHECK(qk_report.taken ==
        std::vector<std::string>{"layers.0.mixer.qkv.weight", "layers.0.mixer.qkv.bias"});
  CHECK(std::find(rest_report.taken.begin(), rest_report.taken.end(),
                  "layers.0.mixer.qkv.weight") != rest_report.taken.end());  // its V rows

  // a model without a fused qkv projection (the MLP-Mixer, Mamba, ...) cannot take qk: here the
  // map model's tensors without its qkv
  std::vector<emergent::ParameterTensor> without_qkv;
  for (const emergent::ParameterTensor& t : MapNet::tensors())
    if (t.name.find(".qkv.") == std::string::npos) without_qkv.push_back(t);
  std::vector<float> other_model(MapNet::parameter_count);
  CHECK(error_of([&] {
          emergent::take_parameters(source, without_qkv, std::span<float>(other_model), "qk",
                                    "config: field 'init_take'");
        }).find("config: field 'init_take': 'qk' is not allowed for this model") !=
        std::string::npos);
  CHECK(error_of([&] {
          emergent::take_parameters(source, MapNet::tensors(), std::span<float>(other_model),
                                    "some", "init_take");
        }).find("expected all, qk or all_but_qk") != std::string::npos);
  // a checkpoint that shares no tensor of the same name and shape gives nothing: refused
  const std::vector<float> other(4 * 8, 0.5f);
  emergent::write_safetensors(dir.path / "other.safetensors",
                              {{"layers.7.mixer.qkv.weight", {4, 8}, other}});
  std::vector<float> params(MapNet::parameter_count);
  CHECK(
      error_of([&] {
        emergent::take_parameters(emergent::SafetensorsFile(dir.path / "other.safetensors"),
                                  MapNet::tensors(), std::span<float>(params), "all", "init_take");
      }).find("shares no tensor of the same name and shape with this model") != std::string::npos);
  // a checkpoint of another width (d_model 32 for 16) is refused, not taken where a shape
  // happens to agree (before: its one coincidental tensor was taken, the rest left fresh)
  const std::vector<float> wide(96 * 32, 0.5f), bias(32, 0.5f);
  emergent::write_safetensors(
      dir.path / "wide.safetensors",
      {{"layers.0.mixer.qkv.weight", {96, 32}, wide}, {"layers.0.mlp.fc.bias", {32}, bias}});
  CHECK(
      error_of([&] {
        emergent::take_parameters(emergent::SafetensorsFile(dir.path / "wide.safetensors"),
                                  MapNet::tensors(), std::span<float>(params), "all", "init_take");
      })
          .find("tensor 'layers.0.mixer.qkv.weight' is [96, 32] there and [48, 16] in this model: "
                "a checkpoint of another width") != std::string::npos);
}

TEST_CASE("stages: a two-stage run records its source, and resumes bit for bit in either stage") {
  ThreadCountGuard guard;
  TempDir dir("resume");
  const fs::path s1 = dir.path / "dyck", s1b = dir.path / "dyck_resumed";
  emergent::Trainer<DyckNet>(dyck_config(30), s1, false).run();
  // stage 1 stopped at 20 and resumed to 30: the same checkpoint, so stage 2 takes the same
  emergent::Trainer<DyckNet>(dyck_config(20), s1b, false).run();
  emergent::Trainer<DyckNet>(dyck_config(30), s1b, false).run();
  CHECK(read_bytes(emergent::checkpoint_path(s1, 30)) ==
        read_bytes(emergent::checkpoint_path(s1b, 30)));

  const fs::path a = dir.path / "map_a", b = dir.path / "map_b";
  emergent::Trainer<MapNet>(map_config(40, s1, "qk"), a, false).run();
  emergent::Trainer<MapNet>(map_config(20, s1, "qk"), b, false).run();
  fs::remove(emergent::checkpoint_path(b, 20));  // killed after step 19, before its checkpoint
  emergent::Trainer<MapNet>(map_config(40, s1, "qk"), b, false).run();
  CHECK(read_bytes(emergent::checkpoint_path(a, 40)) ==
        read_bytes(emergent::checkpoint_path(b, 40)));
  std::vector<nlohmann::json> rows_a = read_metrics(a), rows_b = read_metrics(b);
  REQUIRE(rows_a.size() == 8);
  REQUIRE(rows_b.size() == 8);
  rows_b[2].erase("changed_on_resume");  // resumed from step 10's checkpoint of a 20-step run
  CHECK(rows_a == rows_b);

  const nlohmann::json source = rows_a[0].at("init_source");
  CHECK(source.at("checkpoint") == emergent::checkpoint_path(s1, 30).string());
  CHECK(source.at("step") == 30);
  CHECK(source.at("task") == "dyck");
  CHECK(source.at("sha256").get<std::string>().size() == 64);
  CHECK(source.at("taken") ==
        nlohmann::json{"layers.0.mixer.qkv.weight", "layers.0.mixer.qkv.bias"});
  for (std::size_t i = 1; i < rows_a.size(); ++i) CHECK_FALSE(rows_a[i].contains("init_source"));
  // summary.json, so the sweep's row, names the checkpoint and the step the stage took
  const nlohmann::json summary = nlohmann::json::parse(read_bytes(a / "summary.json"));
  CHECK(summary.at("init_source") == nlohmann::json{{"checkpoint", source.at("checkpoint")},
                                                    {"step", 30},
                                                    {"task", "dyck"},
                                                    {"sha256", source.at("sha256")}});
  CHECK(nlohmann::json::parse(read_bytes(b / "summary.json")).at("init_source") ==
        summary.at("init_source"));  // b resumed: its record comes from its first row
  const nlohmann::json config = nlohmann::json::parse(read_bytes(a / "config.json"));
  CHECK(config.at("init_from") == s1.string());
  CHECK(config.at("init_take") == "qk");

  // the stage changes the run: from scratch differs
  const fs::path scratch = dir.path / "scratch";
  emergent::Trainer<MapNet>(map_config(40, "", "all"), scratch, false).run();
  CHECK(read_bytes(emergent::checkpoint_path(a, 40)) !=
        read_bytes(emergent::checkpoint_path(scratch, 40)));
  CHECK_FALSE(read_metrics(scratch)[0].contains("init_source"));
}

TEST_CASE(
    "stages: the source is a checkpoint, a finished run or a sweep folder's run of the seed") {
  ThreadCountGuard guard;
  TempDir dir("source");
  const fs::path sweep = dir.path / "sweep";
  nlohmann::json plan = {{"runs", nlohmann::json::array()}};
  for (std::uint64_t seed : {1, 2}) {
    const std::string id = "run" + std::to_string(seed);
    emergent::Trainer<DyckNet>(dyck_config(10, seed), sweep / "runs" / id, false).run();
    plan["runs"].push_back({{"id", id}, {"config", {{"task", "dyck"}, {"seed", seed}}}});
  }
  std::ofstream(sweep / "sweep.json") << plan.dump();

  const emergent::InitSource of_seed_2 = emergent::find_init_source(sweep.string(), 2, "f");
  CHECK(of_seed_2.checkpoint == emergent::checkpoint_path(sweep / "runs" / "run2", 10));
  CHECK(emergent::find_init_source((sweep / "runs" / "run1").string(), 7, "f").checkpoint ==
        emergent::checkpoint_path(sweep / "runs" / "run1", 10));
  CHECK(emergent::find_init_source(emergent::checkpoint_path(sweep / "runs" / "run1", 10).string(),
                                   7, "f")
            .step == 10);
  CHECK(error_of([&] {
          emergent::find_init_source(sweep.string(), 3, "config: field 'init_from'");
        }).find("holds 0 runs with seed 3") != std::string::npos);
  CHECK(error_of([&] {
          emergent::find_init_source((dir.path / "nothing").string(), 1, "f");
        }).find("does not exist") != std::string::npos);
  // a run extended (10 -> 20 steps) and killed: its summary.json is its earlier end's, its
  // latest checkpoint a later step (before: that checkpoint was taken as the finished run's)
  const fs::path run1 = sweep / "runs" / "run1";
  const std::string ended_at_10 = read_bytes(run1 / "summary.json");
  emergent::Trainer<DyckNet>(dyck_config(20, 1), run1, false).run();
  std::ofstream(run1 / "summary.json") << ended_at_10;
  CHECK(error_of([&] { emergent::find_init_source(run1.string(), 1, "f"); })
            .find("is not finished: its latest checkpoint is step 20 but its summary.json says it "
                  "ended at step 10") != std::string::npos);
  fs::remove(emergent::checkpoint_path(run1, 20));
  {  // a run that a process is training now
    const emergent::RunLock training(run1);
    CHECK(error_of([&] {
            emergent::find_init_source(run1.string(), 1, "f");
          }).find("is being trained now") != std::string::npos);
  }
  CHECK(emergent::find_init_source(run1.string(), 1, "f").step == 10);
  fs::remove(sweep / "runs" / "run1" / "summary.json");  // as if it were still training
  CHECK(error_of([&] {
          emergent::find_init_source(sweep.string(), 1, "f");
        }).find("is not finished (no summary.json)") != std::string::npos);
  // init_take other than all needs a source
  nlohmann::json given = emergent::to_json(map_config(10, "", "qk"));
  CHECK(error_of([&] {
          emergent::resolve_config(given, "sweep.toml");
        }).find("field 'init_take' = 'qk' needs field 'init_from'") != std::string::npos);
}
