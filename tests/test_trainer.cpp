// The trainer (train/trainer.hpp) end to end on a tiny model: determinism, independence of the
// data stream from the thread count, bit-identical resume (also after a simulated kill),
// config.json protection, checkpoint and config errors, and summary.json.
#include <doctest/doctest.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <emergent/core/parallel.hpp>
#include <emergent/experiment/run_id.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/model/model.hpp>
#include <emergent/tasks/linear_map.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/trainer.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "error_of.hpp"
#include "run_folder_reading.hpp"
#include "temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using emergent::DotAttention;
using emergent::Model;
using emergent::Shape;
using emergent::TrainConfig;

using Net =
    Model<DotAttention,
          Shape{.vocab = 2, .d_model = 16, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 16}>;
using OtherNet =
    Model<DotAttention,
          Shape{.vocab = 2, .d_model = 8, .heads = 4, .layers = 1, .d_ff = 32, .max_len = 16}>;

// A scratch folder removed at the end of the test.

// Restores the OpenMP thread count that Trainer::run and the tests change.

TrainConfig small_config(std::int64_t steps = 40, std::uint64_t seed = 3) {
  TrainConfig c;
  c.task_params = {{"S", 6}, {"s", 2}, {"task_seed", 5}};
  c.shape = Net::shape;
  c.seed = seed;
  c.steps = steps;
  c.batch_tokens = 96;  // 8 sequences of 12 tokens
  c.lr = 3e-3;
  c.warmup_steps = 5;
  c.log_every = 1;
  c.analysis_every = 5;
  c.checkpoint_every = 10;
  c.threads = 2;
  return c;
}

emergent::RunSummary train(const TrainConfig& c, const fs::path& dir) {
  return emergent::Trainer<Net>(c, dir, /*show_progress=*/false).run();
}

std::vector<std::int64_t> steps_of(const std::vector<nlohmann::json>& rows) {
  std::vector<std::int64_t> steps;
  for (const auto& r : rows) steps.push_back(r.at("step").get<std::int64_t>());
  return steps;
}

// Every tensor of two checkpoints (parameters and both moments) bit for bit.
void check_same_tensors(const fs::path& a, const fs::path& b) {
  const emergent::SafetensorsFile fa(a), fb(b);
  REQUIRE(fa.names() == fb.names());
  CHECK(fa.size() == 3 * Net::tensors().size());
  for (const std::string& name : fa.names()) {
    CAPTURE(name);
    const std::vector<float> x = fa.read_f32(name), y = fb.read_f32(name);
    REQUIRE(x.size() == y.size());
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
  }
  CHECK(fa.metadata() == fb.metadata());
}

}  // namespace

TEST_CASE("trainer: same seed gives byte-identical checkpoints and metrics; another seed differs") {
  ThreadCountGuard guard;
  TempDir a("det_a"), b("det_b"), c("det_c");
  train(small_config(), a.path);
  train(small_config(), b.path);
  train(small_config(40, 4), c.path);

  const fs::path last = emergent::checkpoint_path(a.path, 40);
  REQUIRE(fs::exists(last));
  for (std::int64_t step : {10, 20, 30, 40})
    CHECK(fs::exists(emergent::checkpoint_path(a.path, step)));
  CHECK(read_bytes(last) == read_bytes(emergent::checkpoint_path(b.path, 40)));

  const auto rows_a = read_metrics(a.path), rows_b = read_metrics(b.path);
  CHECK(rows_a.size() == 40);
  CHECK(rows_a == rows_b);
  std::vector<std::int64_t> expected_steps(40);
  for (int i = 0; i < 40; ++i) expected_steps[static_cast<std::size_t>(i)] = i;
  CHECK(steps_of(rows_a) == expected_steps);
  for (const auto& row : rows_a) {
    const std::int64_t step = row.at("step").get<std::int64_t>();
    CHECK(row.contains("attention_entropy") == (step % 5 == 0));
    CHECK(row.contains("attention_iou") == (step % 5 == 0));
    CHECK(std::isfinite(row.at("loss").get<double>()));
  }
  // training moved every parameter tensor away from the init of the seed
  {
    std::vector<float> init(Net::parameter_count), trained(Net::parameter_count);
    Net::init(init, 3);
    const emergent::SafetensorsFile f(last);
    emergent::load_parameters<Net>(f, trained);
    for (const auto& t : Net::tensors()) {
      CAPTURE(t.name);
      CHECK_FALSE(std::equal(init.begin() + static_cast<std::ptrdiff_t>(t.offset),
                             init.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size),
                             trained.begin() + static_cast<std::ptrdiff_t>(t.offset)));
    }
  }

  const emergent::SafetensorsFile fa(last), fc(emergent::checkpoint_path(c.path, 40));
  const std::vector<float> pa = fa.read_f32("layers.0.mixer.qkv.weight"),
                           pc = fc.read_f32("layers.0.mixer.qkv.weight");
  REQUIRE(pa.size() == pc.size());
  std::size_t differing = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) differing += pa[i] != pc[i];
  CHECK(differing > pa.size() * 9 / 10);
  CHECK(read_metrics(c.path) != rows_a);

  // summary.json
  std::ifstream in(a.path / "summary.json");
  REQUIRE(in.good());
  const nlohmann::json summary = nlohmann::json::parse(in);
  CHECK(summary.at("steps_done").get<std::int64_t>() == 40);
  CHECK(std::isfinite(summary.at("eval").at("loss").get<double>()));
}

TEST_CASE("data stream and forward pass do not depend on the thread count") {
  ThreadCountGuard guard;
  const emergent::LinearMap task(6, 2, 5);
  const int B = 8, T = task.length();
  std::vector<std::int32_t> in1(B * T), tg1(B * T), in2(B * T), tg2(B * T);
  emergent::set_thread_count(1);
  task.sample(3, 17, B, in1, tg1);
  emergent::set_thread_count(2);
  task.sample(3, 17, B, in2, tg2);
  CHECK(in1 == in2);
  CHECK(tg1 == tg2);

  std::vector<float> params(Net::parameter_count);
  Net::init(params, 9);
  const std::vector<float> weights = task.full_loss_weights(), pattern = task.attention_target();
  typename Net::Workspace ws1, ws2;
  std::vector<float> g1(Net::parameter_count, 0.0f), g2(Net::parameter_count, 0.0f);
  emergent::set_thread_count(1);
  const double loss1 = Net::forward(params, {B, T, in1, tg1, weights, pattern, 0.5f}, ws1);
  Net::backward(params, g1, ws1);
  emergent::set_thread_count(2);
  const double loss2 = Net::forward(params, {B, T, in1, tg1, weights, pattern, 0.5f}, ws2);
  Net::backward(params, g2, ws2);
  CHECK(std::abs(loss1 - loss2) <= 1e-6 * std::abs(loss1));
  const bool loss_identical = loss1 == loss2;
  const bool grads_identical = std::memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)) == 0;
  MESSAGE("1 vs 2 threads: loss bit-identical = "
          << loss_identical << ", gradients bit-identical = " << grads_identical
          << " (|dloss| = " << std::abs(loss1 - loss2) << ")");
}

TEST_CASE("trainer: resume continues bit-identically, also after a kill between checkpoints") {
  ThreadCountGuard guard;
  TempDir a("resume_a"), b("resume_b"), k("resume_kill");
  train(small_config(40), a.path);
  const auto rows_a = read_metrics(a.path);
  REQUIRE(rows_a.size() == 40);

  {  // stop at 20, rerun the folder with steps = 40
    const emergent::RunSummary first = train(small_config(20), b.path);
    CHECK(first.steps_done == 20);
    CHECK(fs::exists(emergent::checkpoint_path(b.path, 20)));
    CHECK_FALSE(fs::exists(emergent::checkpoint_path(b.path, 30)));
    CHECK(read_metrics(b.path).size() == 20);
    const emergent::RunSummary second = train(small_config(40), b.path);
    CHECK(second.steps_done == 40);
    check_same_tensors(emergent::checkpoint_path(a.path, 40),
                       emergent::checkpoint_path(b.path, 40));
    CHECK(read_bytes(emergent::checkpoint_path(a.path, 40)) ==
          read_bytes(emergent::checkpoint_path(b.path, 40)));
    auto rows_b = read_metrics(b.path);
    // The extension is recorded in the first row after the resume, and only there.
    REQUIRE(rows_b.size() == 40);
    CHECK(rows_b[20].at("changed_on_resume") ==
          nlohmann::json{{"steps", {{"from", 20}, {"to", 40}}}});
    rows_b[20].erase("changed_on_resume");
    CHECK(steps_of(rows_b) == steps_of(rows_a));
    CHECK(rows_b == rows_a);
    // wall_s keeps growing across the resume
    const auto raw = read_metrics(b.path, false);
    for (std::size_t i = 1; i < raw.size(); ++i)
      CHECK(raw[i].at("wall_s").get<double>() >= raw[i - 1].at("wall_s").get<double>());
    // rerunning a finished run does nothing and keeps the rows
    const auto before_rerun = read_metrics(b.path);
    const emergent::RunSummary third = train(small_config(40), b.path);
    CHECK(third.steps_done == 40);
    CHECK(read_metrics(b.path) == before_rerun);
    check_same_tensors(emergent::checkpoint_path(a.path, 40),
                       emergent::checkpoint_path(b.path, 40));
  }

  {  // killed after step 30 was logged but before its checkpoint, mid-way through a metrics row
    train(small_config(30), k.path);
    REQUIRE(fs::exists(emergent::checkpoint_path(k.path, 30)));
    fs::remove(emergent::checkpoint_path(k.path, 30));
    {
      std::ofstream out(k.path / "metrics.jsonl", std::ios::app);
      out << R"({"step":30,"loss":0.69,"x1_lo)";  // no newline: the kill cut the write
    }
    train(small_config(40), k.path);
    check_same_tensors(emergent::checkpoint_path(a.path, 40),
                       emergent::checkpoint_path(k.path, 40));
    auto rows_k = read_metrics(k.path);
    REQUIRE(rows_k.size() == 40);  // resumed from step 20's checkpoint, of the 30-step run
    CHECK(rows_k[20].at("changed_on_resume") ==
          nlohmann::json{{"steps", {{"from", 30}, {"to", 40}}}});
    rows_k[20].erase("changed_on_resume");
    CHECK(steps_of(rows_k) == steps_of(rows_a));
    CHECK(rows_k == rows_a);
  }
}

TEST_CASE("trainer: a changed config in an existing run folder is refused") {
  ThreadCountGuard guard;
  TempDir a("config_change");
  train(small_config(10), a.path);
  const std::string before = read_bytes(a.path / "config.json");
  TrainConfig changed = small_config(20);
  changed.lr = 1e-2;
  changed.beta1 = 0.8;
  const std::string message = error_of([&] { train(changed, a.path); });
  CAPTURE(message);
  // every differing field, with the checkpoint's, config.json's and the given value
  CHECK(
      contains(message, "lr: 0.003 (step_000010.safetensors), 0.003 (config.json), 0.01 (given)"));
  CHECK(contains(message, "beta1: 0.9 (step_000010.safetensors), 0.9 (config.json), 0.8 (given)"));
  CHECK(read_bytes(a.path / "config.json") == before);  // the folder's config is kept
  CHECK_FALSE(fs::exists(emergent::checkpoint_path(a.path, 20)));
  // steps and threads may change on resume, and the next row says so
  TrainConfig more = small_config(20);
  more.threads = 1;
  CHECK(train(more, a.path).steps_done == 20);
  CHECK(
      read_metrics(a.path).at(10).at("changed_on_resume") ==
      nlohmann::json{{"steps", {{"from", 10}, {"to", 20}}}, {"threads", {{"from", 2}, {"to", 1}}}});
}

TEST_CASE("trainer: the checkpoint, not an edited config.json, says what a resumed run is") {
  ThreadCountGuard guard;
  TempDir a("edited_config");
  train(small_config(10), a.path);
  // config.json edited by hand, then the run resumed from it: refused, naming all three values
  nlohmann::json edited = nlohmann::json::parse(read_bytes(a.path / "config.json"));
  edited["lr"] = 0.01;
  edited["S"] = 5;
  { std::ofstream(a.path / "config.json") << edited.dump(2); }
  TrainConfig from_file = emergent::train_config_from_json(edited, "config.json");
  from_file.steps = 20;
  const std::string message = error_of([&] { train(from_file, a.path); });
  CAPTURE(message);
  CHECK(contains(message, "lr: 0.003 (step_000010.safetensors), 0.01 (config.json), 0.01 (given)"));
  CHECK(contains(message, "S: 6 (step_000010.safetensors), 5 (config.json), 5 (given)"));
  CHECK_FALSE(fs::exists(emergent::checkpoint_path(a.path, 20)));
  // the original settings with config.json still edited: refused too (config.json differs)
  const std::string second = error_of([&] { train(small_config(20), a.path); });
  CHECK(contains(second, "lr: 0.003 (step_000010.safetensors), 0.01 (config.json), 0.003 (given)"));
  // config.json restored: the run extends
  { std::ofstream(a.path / "config.json") << emergent::to_json(small_config(10)).dump(2); }
  CHECK(train(small_config(20), a.path).steps_done == 20);
  // a cosine schedule takes its shape from steps: more steps change the run
  TempDir c("cosine_extend");
  TrainConfig cosine = small_config(10);
  cosine.schedule = "cosine";
  train(cosine, c.path);
  cosine.steps = 20;
  CHECK(contains(error_of([&] { train(cosine, c.path); }),
                 "steps: 10 (step_000010.safetensors), 10 (config.json), 20 (given)"));
}

TEST_CASE(
    "trainer: a folder without a checkpoint is not a run yet, so a failed start never blocks") {
  ThreadCountGuard guard;
  TempDir a("failed_start");
  TrainConfig other = small_config(10);
  other.lr = 0.5;
  { std::ofstream(a.path / "config.json") << emergent::to_json(other).dump(2); }
  CHECK(train(small_config(10), a.path).steps_done == 10);
  CHECK(emergent::read_train_config(a.path / "config.json").lr == 3e-3);
}

TEST_CASE("trainer: each checkpoint is written once, the last one included") {
  ThreadCountGuard guard;
  TempDir a("written_once");
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  REQUIRE(watch >= 0);
  REQUIRE(inotify_add_watch(watch, a.path.c_str(), IN_MOVED_TO) >= 0);
  train(small_config(20), a.path);  // checkpoint_every 10: steps 10 and 20, 20 also the last
  std::map<std::string, int> renamed_to;
  alignas(inotify_event) char buffer[1 << 16];
  for (ssize_t n; (n = ::read(watch, buffer, sizeof buffer)) > 0;)
    for (char* at = buffer; at < buffer + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(at);
      if (event->len > 0) ++renamed_to[event->name];
      at += sizeof(inotify_event) + event->len;
    }
  ::close(watch);
  CHECK(renamed_to["step_000010.safetensors"] == 1);
  CHECK(renamed_to["step_000020.safetensors"] == 1);
}

TEST_CASE("trainer: attention snapshots at the steps asked for, each map a distribution") {
  ThreadCountGuard guard;
  TempDir dir("snapshots");
  TrainConfig c = small_config(20);
  c.save_attention_at = "12,3,40";  // 40 is past the budget: refused, nothing trained
  CHECK(error_of([&] {
          train(c, dir.path);
        }).find("step 40 is past the run's last step (steps = 20 runs steps 0 to 19)") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(emergent::attention_snapshot_path(dir.path, 3)));
  c.save_attention_at = "12,3";
  train(c, dir.path);
  CHECK(fs::exists(emergent::attention_snapshot_path(dir.path, 3)));
  CHECK(fs::exists(emergent::attention_snapshot_path(dir.path, 12)));
  CHECK_FALSE(fs::exists(emergent::attention_snapshot_path(dir.path, 40)));
  const emergent::SafetensorsFile file(emergent::attention_snapshot_path(dir.path, 12));
  const int L = Net::shape.layers, H = Net::shape.heads;
  const emergent::TaskSetup setup = emergent::make_task(c);
  const int T = setup.task->length();
  CHECK(file.info("attention").shape == std::vector<std::int64_t>{L, H, T, T});
  CHECK(file.metadata().at("step") == "12");
  const std::vector<float> attention = file.read_f32("attention"), target = file.read_f32("target");
  CHECK(target == setup.task->attention_target());  // 0 and 1, exact in F16
  for (int lh = 0; lh < L * H; ++lh)
    for (int q = 0; q < T; ++q) {
      double sum = 0;
      for (int k = 0; k < T; ++k) {
        const float a = attention[(std::size_t(lh) * T + q) * T + k];
        CHECK(a >= 0);
        if (k > q) CHECK(a == 0);  // causal
        sum += a;
      }
      CHECK(sum == doctest::Approx(1).epsilon(3e-3));  // F16 rounding of T values
    }
  // Asking for snapshots on a resume is not a change of the run.
  TrainConfig more = small_config(30);
  more.save_attention_at = "25";
  CHECK(train(more, dir.path).steps_done == 30);
  CHECK(fs::exists(emergent::attention_snapshot_path(dir.path, 25)));
}

TEST_CASE("trainer: eval_every logs a fixed held-out set, and emergence and stop_below read it") {
  ThreadCountGuard guard;
  TempDir dir("held_out"), resumed("held_out_resumed");
  TrainConfig c = small_config(30);
  c.eval_every = 3;  // log_every 1
  c.eval_batches = 3;
  const emergent::RunSummary summary = train(c, dir.path);
  const auto rows = read_metrics(dir.path);
  REQUIRE(rows.size() == 30);
  for (const auto& row : rows) {
    const bool held_out = row.at("step").get<std::int64_t>() % 3 == 0;
    CHECK(row.contains("eval_loss") == held_out);
    CHECK(row.contains("eval_x1_loss") == held_out);
    CHECK(row.contains("eval_x1_accuracy") == held_out);
  }
  // Step 9's held-out values are those of the parameters after its update (the checkpoint of
  // step 10) on the fixed set of 3 batches.
  const emergent::TaskSetup setup = emergent::make_task(c);
  std::vector<float> params(Net::parameter_count), m1(params.size()), m2(params.size());
  emergent::load_checkpoint(emergent::checkpoint_path(dir.path, 10), Net::tensors(), params, m1,
                            m2);
  Net::Workspace ws;
  const int batch = c.batch_tokens / (setup.task->length() + 1);
  const emergent::EvalResult at_9 =
      emergent::held_out_losses<Net>(params, *setup.task, c.seed, batch, 3, 0.0f, ws);
  CHECK(rows[9].at("eval_loss").get<double>() == doctest::Approx(at_9.loss).epsilon(1e-9));
  CHECK(rows[9].at("eval_x1_loss").get<double>() ==
        doctest::Approx(at_9.predictable_loss).epsilon(1e-9));
  // The same set every time: the same parameters give the same value, bit for bit.
  CHECK(emergent::held_out_losses<Net>(params, *setup.task, c.seed, batch, 3, 0.0f, ws).loss ==
        at_9.loss);
  // Emergence reads the held-out metric, named so in summary.json.
  const nlohmann::json written = nlohmann::json::parse(read_bytes(dir.path / "summary.json"));
  CHECK(written.at("metric") == "eval_x1_loss");
  CHECK(summary.steps_done == 30);
  // A resume between checkpoints recomputes the same held-out rows.
  TrainConfig first = c;
  first.steps = 20;  // its last checkpoint is 20, its last held-out row 18
  train(first, resumed.path);
  train(c, resumed.path);
  auto resumed_rows = read_metrics(resumed.path);
  REQUIRE(resumed_rows.size() == 30);
  CHECK(resumed_rows[20].at("changed_on_resume").contains("steps"));
  resumed_rows[20].erase("changed_on_resume");
  CHECK(resumed_rows == rows);
  // stop_below reads the held-out metric: a threshold above its first values stops at once.
  TempDir stop("held_out_stop");
  TrainConfig stopping = c;
  stopping.stop_below = 10;
  const emergent::RunSummary stopped = train(stopping, stop.path);
  CHECK(stopped.steps_done == 1);  // step 0's row has the held-out metric
}

TEST_CASE(
    "eval_every: a multiple of log_every, or one line naming the field; absent in older "
    "configs and run ids") {
  using nlohmann::json;
  CHECK(contains(error_of([] {
                   emergent::resolve_config(json{{"log_every", 10}, {"eval_every", 15}}, "f.toml");
                 }),
                 "f.toml: field 'eval_every' = 15 is not allowed: it must be 0 or a multiple of "
                 "log_every = 10"));
  json older = emergent::to_json(emergent::resolve_config(json::object(), "t"));
  const auto declared = emergent::declared_parameters("linear-map");
  const std::string id = emergent::run_id(older, declared);
  older.erase("eval_every");
  older.erase("eval_batches");
  CHECK(emergent::train_config_from_json(older, "config.json").eval_every == 0);
  CHECK(emergent::run_id(older, declared) == id);  // ids of runs made before the fields existed
  json on = emergent::to_json(emergent::resolve_config(json{{"eval_every", 10}}, "t"));
  CHECK(emergent::run_id(on, declared) != id);
}

TEST_CASE("checkpoint and config errors name the file and the field") {
  ThreadCountGuard guard;
  TempDir dir("errors");
  std::vector<float> params(Net::parameter_count), m(Net::parameter_count, 0.0f),
      v(Net::parameter_count, 0.0f);
  Net::init(params, 1);
  const fs::path good = dir.path / "good.safetensors";
  emergent::save_checkpoint<Net>(good, params, m, v, {7, 7, "{}"});

  // round trip
  std::vector<float> p2(Net::parameter_count), m2(Net::parameter_count), v2(Net::parameter_count);
  const emergent::CheckpointState state = emergent::load_checkpoint<Net>(good, p2, m2, v2);
  CHECK(state.step == 7);
  CHECK(state.optimizer_steps == 7);
  CHECK(p2 == params);

  // truncated: the first half of the file
  const std::string bytes = read_bytes(good);
  const fs::path truncated = dir.path / "truncated.safetensors";
  {
    std::ofstream out(truncated, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  const std::string truncated_message =
      error_of([&] { emergent::load_checkpoint<Net>(truncated, p2, m2, v2); });
  CAPTURE(truncated_message);
  CHECK(contains(truncated_message, truncated.string()));

  // the trainer refuses to resume from a truncated latest checkpoint, naming it
  {
    TempDir run("truncated_run");
    train(small_config(10), run.path);
    const fs::path last = emergent::checkpoint_path(run.path, 10);
    fs::resize_file(last, fs::file_size(last) / 2);
    const std::string resume_message = error_of([&] { train(small_config(20), run.path); });
    CAPTURE(resume_message);
    CHECK(contains(resume_message, last.string()));
  }

  // another shape: d_model 8 instead of 16
  std::vector<float> other(OtherNet::parameter_count), om(OtherNet::parameter_count),
      ov(OtherNet::parameter_count);
  const std::string shape_message =
      error_of([&] { emergent::load_checkpoint<OtherNet>(good, other, om, ov); });
  CAPTURE(shape_message);
  CHECK(contains(shape_message, good.string()));
  CHECK(contains(shape_message, "embed.token.weight"));

  // config.json with an unknown key, a missing key, a missing shape key
  const nlohmann::json config = emergent::to_json(small_config());
  auto write_json = [&](const std::string& name, const nlohmann::json& j) {
    const fs::path p = dir.path / name;
    std::ofstream(p) << j.dump(2);
    return p;
  };
  CHECK(emergent::read_train_config(write_json("ok.json", config)).lr == 3e-3);

  nlohmann::json typo = config;
  typo["lrr"] = 0.1;
  const fs::path typo_path = write_json("typo.json", typo);
  const std::string typo_message = error_of([&] { emergent::read_train_config(typo_path); });
  CAPTURE(typo_message);
  CHECK(contains(typo_message, typo_path.string()));
  CHECK(contains(typo_message, "'lrr'"));

  nlohmann::json missing = config;
  missing.erase("beta2");
  const fs::path missing_path = write_json("missing.json", missing);
  const std::string missing_message = error_of([&] { emergent::read_train_config(missing_path); });
  CAPTURE(missing_message);
  CHECK(contains(missing_message, missing_path.string()));
  CHECK(contains(missing_message, "beta2"));

  nlohmann::json missing_shape = config;
  missing_shape.erase("d_ff");
  const fs::path shape_path = write_json("missing_shape.json", missing_shape);
  const std::string shape_field_message =
      error_of([&] { emergent::read_train_config(shape_path); });
  CAPTURE(shape_field_message);
  CHECK(contains(shape_field_message, shape_path.string()));
  CHECK(contains(shape_field_message, "d_ff"));

  nlohmann::json wrong_type = config;
  wrong_type["steps"] = "many";
  const fs::path type_path = write_json("wrong_type.json", wrong_type);
  const std::string type_message = error_of([&] { emergent::read_train_config(type_path); });
  CAPTURE(type_message);
  CHECK(contains(type_message, type_path.string()));
  CHECK(contains(type_message, "steps"));
}

TEST_CASE(
    "trainer runs the cellular automaton with a 4-layer model, the bias and its own metrics") {
  using CaNet =
      Model<DotAttention,
            Shape{.vocab = 4, .d_model = 16, .heads = 2, .layers = 4, .d_ff = 16, .max_len = 40}>;
  TempDir dir("ca");
  emergent::TrainConfig c;
  c.task = "cellular-automaton";
  c.task_params = {{"S", 5}, {"states", 8}, {"rules", 16}};  // 40 tokens, 39 positions
  c.shape = CaNet::shape;
  c.batch_tokens = 160;  // 4 sequences
  c.steps = 30;
  c.log_every = 5;
  c.analysis_every = 10;
  c.checkpoint_every = 10;
  c.bias = 5;
  c.threads = 2;
  const emergent::RunSummary summary = emergent::Trainer<CaNet>(c, dir.path / "run", false).run();
  CHECK(summary.steps_done == 30);
  std::ifstream in(dir.path / "run" / "metrics.jsonl");
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    const nlohmann::json row = nlohmann::json::parse(line);
    CHECK(row.contains("next_state_loss"));
    CHECK(row.contains("next_state_accuracy"));
    CHECK(std::isfinite(row["loss"].get<double>()));
    if (row["step"].get<int>() % 10 == 0) {
      REQUIRE(row.contains("attention_entropy"));
      CHECK(row["attention_entropy"].size() == 4);  // one row of heads per layer
      CHECK(row["attention_iou"].get<double>() >= 0.0);
    }
    ++rows;
  }
  CHECK(rows == 6);
  const nlohmann::json s = nlohmann::json::parse(std::ifstream(dir.path / "run" / "summary.json"));
  CHECK(s["metric"] == "loss");
  CHECK(s["eval"].contains("next_state_loss"));
  // With c = 5 on the target window in every head, the attention of the analysed queries
  // concentrates on that window: the best head matches every target row.
  CHECK(summary.eval.attention.iou == doctest::Approx(1.0));
  // and above chance: 3 target keys of 5, 8 heads: the best random head scores 0.785
  CHECK(summary.eval.attention.iou_chance == doctest::Approx(0.785).epsilon(1e-3));
  CHECK(summary.eval.attention.iou_above_chance == doctest::Approx(1.0));
  CHECK(s["eval"]["attention_head_iou"].size() == 4);
  CHECK(s["eval"]["attention_head_iou"][0].size() == 2);
}

TEST_CASE("an untrained model's attention IoU is about chance, and reported as such") {
  using LinearNet =
      Model<DotAttention,
            Shape{.vocab = 2, .d_model = 32, .heads = 8, .layers = 1, .d_ff = 32, .max_len = 32}>;
  const emergent::LinearMap task(16, 3, 0);
  const emergent::TaskAdapter<emergent::LinearMap> adapter(task);
  std::vector<float> params(LinearNet::parameter_count);
  LinearNet::init(params, 7);
  const emergent::EvalResult r = emergent::evaluate<LinearNet>(params, adapter, 7, 64, 0.0f);
  CAPTURE(r.attention.iou);
  CAPTURE(r.attention.iou_chance);
  CHECK(r.attention.iou > 0.2);  // the best of 8 heads per row, by chance alone
  CHECK(r.attention.iou_chance == doctest::Approx(emergent::chance_row_iou(16, 3, 8)));
  CHECK(std::abs(r.attention.iou_above_chance) < 0.2);
  // one head attending to random keys: E[i / (6 - i)], i ~ hypergeometric(16, 3, 3)
  CHECK(r.attention.head_iou_chance == doctest::Approx(emergent::chance_row_iou(16, 3, 1)));
}

TEST_CASE("checkpoint file names: only step_<digits>.safetensors counts, .tmp leftovers never do") {
  using emergent::checkpoint_step;
  CHECK(checkpoint_step("step_000100.safetensors") == std::optional<long long>(100));
  CHECK(checkpoint_step("step_7.safetensors") == std::optional<long long>(7));
  CHECK_FALSE(checkpoint_step("step_000100.safetensors.tmp").has_value());
  CHECK_FALSE(checkpoint_step("step_.safetensors").has_value());
  CHECK_FALSE(checkpoint_step("step_12a.safetensors").has_value());
  CHECK_FALSE(checkpoint_step("model.safetensors").has_value());
  CHECK_FALSE(checkpoint_step("step_1234567890123456789012.safetensors").has_value());
}

// CompiledModel<Net> whose gradient of one tensor turns NaN at one step, as a diverging run's.
class PoisonedGradient final : public emergent::TrainableModel {
 public:
  PoisonedGradient(std::int64_t bad_step, std::string tensor)
      : bad_step_(bad_step), tensor_(std::move(tensor)) {}
  std::string mixer() const override { return model_.mixer(); }
  Shape shape() const override { return model_.shape(); }
  bool takes_attention_bias() const override { return model_.takes_attention_bias(); }
  std::size_t parameter_count() const override { return model_.parameter_count(); }
  std::vector<emergent::ParameterTensor> tensors() const override { return model_.tensors(); }
  void init(std::span<float> params, std::uint64_t seed) const override {
    model_.init(params, seed);
  }
  double step(std::span<const float> params, std::span<float> grads,
              const emergent::ForwardInput& in, int threads, bool analysed) override {
    const double loss = model_.step(params, grads, in, threads, analysed);
    if (steps_++ == bad_step_)
      for (const auto& t : model_.tensors())
        if (t.name == tensor_) grads[t.offset + 1] = std::numeric_limits<float>::quiet_NaN();
    return loss;
  }
  double weighted_mean(std::span<const float> w) const override { return model_.weighted_mean(w); }
  double weighted_accuracy(std::span<const float> w) const override {
    return model_.weighted_accuracy(w);
  }
  emergent::AttentionAnalysis analyse_last_step(const emergent::SequenceTask& task,
                                                std::span<const float> target) const override {
    return model_.analyse_last_step(task, target);
  }
  std::vector<float> last_step_attention() const override { return model_.last_step_attention(); }
  emergent::EvalResult evaluate(std::span<const float> params, const emergent::SequenceTask& task,
                                std::uint64_t seed, int batch, float bias,
                                std::vector<std::int32_t>* inputs,
                                std::vector<std::int32_t>* targets) const override {
    return model_.evaluate(params, task, seed, batch, bias, inputs, targets);
  }
  emergent::EvalResult held_out(std::span<const float> params, const emergent::SequenceTask& task,
                                std::uint64_t seed, int batch, int batches, float bias) override {
    return model_.held_out(params, task, seed, batch, batches, bias);
  }

 private:
  emergent::CompiledModel<Net> model_;
  std::int64_t bad_step_, steps_ = 0;
  std::string tensor_;
};

TEST_CASE(
    "trainer: a non-finite gradient stops the run at that step, naming the tensor; checkpoints "
    "stay good") {
  ThreadCountGuard guard;
  TempDir dir("not_finite");
  emergent::RunTrainer trainer(small_config(40), dir.path,
                               std::make_unique<PoisonedGradient>(15, "layers.0.mlp.fc.weight"),
                               false);
  const std::string message = error_of([&] { trainer.run(); });
  CAPTURE(message);
  CHECK(contains(message, "training stopped at step 15: the gradient norm is nan"));
  CHECK(contains(message,
                 "the first tensor whose gradient is not finite is 'layers.0.mlp.fc.weight'"));
  CHECK(contains(message, "The last good checkpoint is step_000010.safetensors"));
  CHECK(fs::exists(emergent::checkpoint_path(dir.path, 10)));
  CHECK_FALSE(fs::exists(emergent::checkpoint_path(dir.path, 20)));
  const nlohmann::json summary = nlohmann::json::parse(read_bytes(dir.path / "summary.json"));
  CHECK(contains(summary["stopped"].get<std::string>(), "step 15"));
  CHECK(summary["last_checkpoint"] == "step_000010.safetensors");
  // the checkpoint before it is intact: the run resumes from it and finishes
  CHECK(train(small_config(40), dir.path).steps_done == 40);
}

TEST_CASE("a checkpoint holding a non-finite parameter is refused, naming the tensor") {
  TempDir dir("non_finite");
  std::vector<float> params(Net::parameter_count), zeros(Net::parameter_count, 0.0f);
  Net::init(params, 1);
  const emergent::ParameterTensor damaged = Net::tensors().at(1);
  params[damaged.offset + 3] = std::numeric_limits<float>::quiet_NaN();
  const fs::path path = dir.path / "step_000007.safetensors";
  emergent::save_checkpoint<Net>(path, params, zeros, zeros, {7, 7, "{}"});
  std::vector<float> loaded(Net::parameter_count);
  const std::string message =
      error_of([&] { emergent::load_parameters<Net>(emergent::SafetensorsFile(path), loaded); });
  CAPTURE(message);
  CHECK(contains(message, "step_000007.safetensors: tensor '" + damaged.name +
                              "' holds a non-finite value (nan at index 3)"));
}
