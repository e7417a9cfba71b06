// Experiments as data: declared parameters and their checks, configs resolved from flat
// settings, sweep files expanded into runs, run ids, result rows that survive a cut write,
// shards, and the mixer catalog against the mixer types.
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdlib>
#include <emergent/experiment/result_rows.hpp>
#include <emergent/experiment/run_id.hpp>
#include <emergent/experiment/shard.hpp>
#include <emergent/experiment/sweep_file.hpp>
#include <emergent/experiment/sweep_folder.hpp>
#include <emergent/experiment/sweep_plan.hpp>
#include <emergent/experiment/sweep_summary.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/ensemble_members.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/self_pretraining_config.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "error_of.hpp"

namespace {

using emergent::Error;
using nlohmann::json;

}  // namespace

TEST_CASE(
    "a declared value is checked for type, range and finiteness, naming field and allowed values") {
  using emergent::checked_value;
  const emergent::Parameter lr =
      emergent::real("lr", 1e-3, emergent::above(0), "peak learning rate");
  CHECK(checked_value(lr, 0.5, "f").get<double>() == 0.5);
  CHECK(error_of([&] { checked_value(lr, 0.0, "f"); }) ==
        "f: field 'lr' = 0 is not allowed: expected a finite number in (0, inf)");
  CHECK(contains(error_of([&] { checked_value(lr, std::numeric_limits<double>::infinity(), "f"); }),
                 "'lr' = inf"));
  CHECK(contains(error_of([&] { checked_value(lr, "fast", "f"); }), "'lr' = \"fast\""));
  const emergent::Parameter beta = emergent::real("beta1", 0.9, emergent::from_below(0, 1), "");
  CHECK(contains(error_of([&] { checked_value(beta, 1.0, "f"); }),
                 "expected a finite number in [0, 1)"));
  const emergent::Parameter steps = emergent::integer("steps", 10, emergent::at_least(1), "");
  CHECK(checked_value(steps, 2.0, "f").get<std::int64_t>() == 2);  // a TOML float that is whole
  CHECK(contains(error_of([&] { checked_value(steps, 2.5, "f"); }),
                 "expected an integer in [1, inf)"));
  CHECK(contains(error_of([&] { checked_value(steps, 0, "f"); }), "'steps' = 0"));
  const emergent::Parameter schedule =
      emergent::text("schedule", "constant", {"constant", "cosine"}, "");
  CHECK(contains(error_of([&] { checked_value(schedule, "linear", "f"); }),
                 "expected one of constant, cosine"));
  // command-line text
  CHECK(emergent::parse_value(lr, "1e-3", "--lr").get<double>() == 1e-3);
  CHECK(contains(error_of([&] { emergent::parse_value(lr, "inf", "--lr"); }),
                 "'inf' is not allowed for --lr"));
  CHECK(contains(error_of([&] { emergent::parse_value(steps, "12x", "--steps"); }), "'12x'"));
}

TEST_CASE(
    "configs resolve from flat settings: the task's defaults, its own parameters, cross-field "
    "checks") {
  const emergent::TrainConfig linear = emergent::resolve_config(json{{"S", 8}, {"s", 2}}, "t");
  CHECK(linear.task == "linear-map");
  CHECK(linear.task_params == json{{"S", 8}, {"s", 2}, {"task_seed", 0}});
  CHECK(linear.shape.layers == 1);
  CHECK(linear.shape.vocab == 2);
  const emergent::TrainConfig ca =
      emergent::resolve_config(json{{"task", "cellular-automaton"}, {"colours", 5}}, "t");
  CHECK(ca.shape.layers == 4);  // the automaton's default model
  CHECK(ca.shape.vocab == 5);   // the task's vocabulary
  CHECK(emergent::sequence_tokens(ca) == 16 * 16);
  // round trip through config.json's object
  const emergent::TrainConfig again =
      emergent::train_config_from_json(emergent::to_json(linear), "config.json");
  CHECK(emergent::to_json(again) == emergent::to_json(linear));

  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"task", "cellular-automaton"}, {"s", 3}}, "t");
                 }),
                 "field 's' is a parameter of task linear-map, not of cellular-automaton"));
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"lrr", 0.1}}, "t");
                 }),
                 "unknown field 'lrr'"));
  CHECK(contains(
      error_of([&] {
        emergent::resolve_config(json{{"task", "majority"}}, "t");
      }),
      "field 'task' = 'majority' is not allowed: expected one of linear-map, cellular-automaton"));
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"S", 4}, {"s", 5}}, "t");
                 }),
                 "t: task linear-map"));  // s <= S, the task's own check
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"mixer", "mamba"}, {"bias", 5}}, "t");
                 }),
                 "field 'bias' = 5 is not allowed for mixer mamba"));
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"heads", 3}}, "t");
                 }),
                 "must divide d_model = 128"));
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"mixer", "mamba"}, {"heads", 4}}, "t");
                 }),
                 "field 'heads' = 4 is not allowed for mixer mamba: it has no heads"));
  CHECK(
      emergent::resolve_config(json{{"mixer", "gated_deltanet"}, {"heads", 4}}, "t").shape.heads ==
      4);
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"S", 16}, {"max_len", 10}}, "t");
                 }),
                 "need max_len >= 31"));
  CHECK(contains(error_of([&] {
                   emergent::resolve_config(json{{"batch_tokens", 8}}, "t");
                 }),
                 "'batch_tokens' = 8"));
  // config.json must be complete
  json partial = emergent::to_json(linear);
  partial.erase("beta2");
  CHECK(contains(error_of([&] { emergent::train_config_from_json(partial, "config.json"); }),
                 "config.json: missing field 'beta2'"));
}

TEST_CASE("no two groups declare one name, and tasks that share a name share its type") {
  std::map<std::string, emergent::ParameterType> types;
  std::set<std::string> common;
  for (const emergent::Parameter& p : emergent::model_parameters())
    CHECK(common.insert(p.name).second);
  for (const emergent::TrainingField& f : emergent::training_fields())
    CHECK(common.insert(f.parameter.name).second);
  for (const emergent::TaskDeclaration& t : emergent::task_registry())
    for (const emergent::Parameter& p : t.parameters) {
      CAPTURE(p.name);
      CHECK(common.count(p.name) == 0);
      if (types.count(p.name)) CHECK(types[p.name] == p.type);
      types[p.name] = p.type;
    }
}

TEST_CASE("the mixer catalog has the five mixers") {
  // Each line is checked against its mixer type by the mixer's own test
  // (tests/test_mixer_<name>.cpp: mixer_suite::check_catalog_line), so that this file includes no
  // mixer.
  std::vector<std::string> names;
  for (const emergent::MixerInfo& info : emergent::mixer_catalog()) names.push_back(info.name);
  CHECK(names ==
        std::vector<std::string>{"dot_attention", "mlp_mixer", "mamba", "gated_deltanet", "rwkv"});
}

TEST_CASE("a sweep expands blocks as cartesian products, zips and seeds, in a fixed order") {
  const json sweep = {
      {"base", {{"steps", 100}}},
      {"grid",
       json::array({json{{"S", {8, 16}}, {"s", {1, 3}}, {"seeds", 2}},
                    json{{"S", 32}, {"zip", {{"d_model", {128, 128}}, {"heads", {32, 1}}}}}})}};
  const std::vector<emergent::SweepRun> runs = emergent::expand_sweep(sweep, "f");
  REQUIRE(runs.size() == 10);
  CHECK(runs[0].settings == json{{"steps", 100}, {"S", 8}, {"s", 1}, {"seed", 0}});
  CHECK(runs[1].settings == json{{"steps", 100}, {"S", 8}, {"s", 1}, {"seed", 1}});
  CHECK(runs[2].settings == json{{"steps", 100}, {"S", 8}, {"s", 3}, {"seed", 0}});
  CHECK(runs[7].settings == json{{"steps", 100}, {"S", 16}, {"s", 3}, {"seed", 1}});
  CHECK(runs[8].settings == json{{"steps", 100}, {"S", 32}, {"d_model", 128}, {"heads", 32}});
  CHECK(runs[9].settings["heads"] == 1);
  CHECK(runs[9].origin == "f: grid block 2");
  CHECK(contains(error_of([&] {
                   emergent::expand_sweep(json{{"grd", json::array()}}, "f");
                 }),
                 "unknown top-level key 'grd'"));
  CHECK(contains(
      error_of([&] {
        emergent::expand_sweep(json{{"grid", {{{"zip", {{"a", {1, 2}}, {"b", {1}}}}}}}}, "f");
      }),
      "zip field 'b' has 1 values"));
  CHECK(emergent::expand_sweep(json{{"base", {{"S", 4}}}}, "f").size() == 1);
}

TEST_CASE("a sweep past the run limit is refused before any run is built (found by fuzzing)") {
  constexpr std::size_t limit = emergent::kMaxSweepRuns;
  const auto refusal = [](const json& sweep) {
    return error_of([&] { emergent::expand_sweep(sweep, "f"); });
  };
  CHECK(contains(refusal(json{{"grid", {{{"seeds", 100000000000}}}}}),
                 "'seeds' = N must be from 1 to 100000"));
  CHECK(emergent::expand_sweep(json{{"grid", {{{"seeds", limit}}}}}, "f").size() == limit);
  // 10^20 runs: a product that overflows 64 bits must not wrap around to a small count
  json axes = json::object();
  for (char name = 'a'; name < 'a' + 20; ++name)
    axes[std::string(1, name)] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  CHECK(contains(refusal(json{{"grid", json::array({axes})}}),
                 "f: grid block 1: the file expands to more than 100000 runs"));
  // the limit is on the whole file: two blocks of 60,000 runs are refused at the second
  const json half = {{"seeds", 60000}};
  CHECK(contains(refusal(json{{"grid", json::array({half, half})}}), "f: grid block 2:"));
  json full_then_plain = json::array({json{{"seeds", limit}}, json::object()});
  CHECK(contains(refusal(json{{"grid", full_then_plain}}), "f: grid block 2:"));
}

TEST_CASE(
    "sweep files in TOML and JSON read the same, and TOML's inf stays visible to the checks") {
  const auto dir = std::filesystem::temp_directory_path() / "emergent_test_sweep_file";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.toml") << "[base]\nsteps = 10\nbias = inf\n[[grid]]\nS = [4, 6]\nzip = { "
                                   "d_model = [32, 64], heads = [4, 8] }\n";
  std::ofstream(dir / "a.json")
      << R"({"base": {"steps": 10, "bias": "inf"}, "grid": [{"S": [4, 6], "zip": {"d_model": [32, 64], "heads": [4, 8]}}]})";
  const json toml = emergent::read_sweep_file(dir / "a.toml");
  CHECK(toml == emergent::read_sweep_file(dir / "a.json"));
  CHECK(emergent::expand_sweep(toml, "a").size() == 4);
  std::ofstream(dir / "bad.toml") << "[base\nsteps = 1\n";
  CHECK(contains(error_of([&] { emergent::read_sweep_file(dir / "bad.toml"); }), "bad.toml:1:"));
  // non-ASCII characters: fine in comments and one-line "..." strings (toml++ sees them as '?' and
  // \uXXXX escapes), refused elsewhere (toml++ 3.3 reaches undefined behaviour on some; found by
  // fuzzing)
  const auto refusal = [&](const char* name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return error_of([&] { emergent::read_sweep_file(dir / name); });
  };
  std::ofstream(dir / "comment.toml") << "# caf\xc3\xa9\n[base]\nsteps = 10 # \xcf\x8a\n";
  CHECK(emergent::read_sweep_file(dir / "comment.toml")["base"]["steps"] == 10);
  const std::string text = "caf\xc3\xa9 \xcf\x8a \xe2\x80\x94 \xf0\x9f\x98\x80 \\\" end";
  std::ofstream(dir / "string.toml") << "description = \"" << text << "\"\n[base]\nsteps = 1\n";
  CHECK(emergent::read_sweep_file(dir / "string.toml")["description"] ==
        "caf\xc3\xa9 \xcf\x8a \xe2\x80\x94 \xf0\x9f\x98\x80 \" end");
  CHECK(contains(refusal("outside.toml", "[base]\nsteps = 10\n\xcf\x8a\n"),
                 "outside.toml:3:1: a non-ASCII character outside a comment or a string"));
  CHECK(contains(refusal("multiline.toml", "s = \"\"\"\\\n\xc2\xa7\"\"\"\n"),
                 "multiline.toml:2:1: a non-ASCII character outside a \"...\" string"));
  CHECK(contains(refusal("literal.toml", "s = 'caf\xc3\xa9'\n"), "outside a \"...\" string"));
  CHECK(contains(refusal("latin1.toml", "s = \"caf\xe9\"\n"),
                 "latin1.toml:1:9: a string that is not UTF-8"));
  CHECK(contains(refusal("escape.toml", "s = \"\\\xc3\xa9\"\n"), "a backslash before"));
  // a string after a malformed value: toml++ 3.3 classified its characters (found by fuzzing)
  CHECK(contains(refusal("after.toml", "zip = { d = [[8{\"-1\xc8\x9e\n"), "not valid TOML"));
  // malformed table headers that broke a toml++ 3.3 parser precondition (found by fuzzing)
  for (const char* header : {"[&base]\n", "[[[1]]]\n", "[[=\n"}) {
    std::ofstream(dir / "header.toml") << header;
    CHECK(contains(error_of([&] { emergent::read_sweep_file(dir / "header.toml"); }),
                   "not valid TOML"));
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("run ids are stable, differ with any setting and ignore observations") {
  const auto declared = emergent::declared_parameters("linear-map");
  const auto id = [&](const json& config) { return emergent::run_id(config, declared); };
  const json a = emergent::to_json(emergent::resolve_config(json{{"S", 8}}, "t"));
  json b = a;
  b["seed"] = 1;
  CHECK(id(a) == id(emergent::to_json(emergent::resolve_config(json{{"S", 8}}, "t"))));
  CHECK(id(a) != id(b));
  CHECK(id(a).size() == 12);
  // Attention snapshots change what is recorded, not the run; a config.json written before the
  // field existed has the same id.
  json snapshots = a, older = a;
  snapshots["save_attention_at"] = "100,200";
  older.erase("save_attention_at");
  CHECK(id(snapshots) == id(a));
  CHECK(id(older) == id(a));
}

TEST_CASE("stop_at names the task's threshold: it becomes stop_below, with that number's id") {
  const json automaton{{"task", "cellular-automaton"}};
  const auto resolved = [](json settings) { return emergent::resolve_config(settings, "f.toml"); };
  json emergence = automaton, literal = automaton;
  emergence["stop_at"] = "emergence";
  literal["stop_below"] = 1.3;
  const emergent::TrainConfig c = resolved(emergence);
  CHECK(c.stop_below == 1.3);  // 1.3 / ln 4 * ln C at C = 4
  CHECK(c.stop_at.empty());
  const auto declared = emergent::declared_parameters("cellular-automaton");
  CHECK(emergent::run_id(emergent::to_json(c), declared) ==
        emergent::run_id(emergent::to_json(resolved(literal)), declared));
  emergence["colours"] = 2;
  CHECK(resolved(emergence).stop_below == doctest::Approx(1.3 / std::log(4.0) * std::log(2.0)));
  // The linear map's thresholds are on the x1 loss.
  CHECK(resolved(json{{"stop_at", "solved"}}).stop_below == 0.05);
  CHECK(resolved(json{{"stop_at", "midpoint"}}).stop_below == doctest::Approx(std::log(2.0) / 2));
  // Both given, or a name that is no threshold: one line naming the fields.
  emergence["stop_below"] = 0.5;
  CHECK(error_of([&] { resolved(emergence); }) ==
        "f.toml: field 'stop_at' = 'emergence' and field 'stop_below' = 0.5 are both set: give "
        "one (stop_at names the task's threshold)");
  CHECK(error_of([&] {
          resolved(json{{"stop_at", "plateau"}});
        }) ==
        "f.toml: field 'stop_at' = 'plateau' is not allowed: expected one of \"\", emergence, "
        "midpoint, solved");
}

TEST_CASE("save_attention_at: sorted steps, or one line naming the field") {
  CHECK(emergent::attention_snapshot_steps("1500,1000", "t") ==
        std::vector<std::int64_t>{1000, 1500});
  CHECK(emergent::attention_snapshot_steps("", "t").empty());
  for (const char* bad : {"10,x", "-5", "1,,2", "1.5"})
    CHECK(contains(error_of([&] {
                     emergent::resolve_config(json{{"save_attention_at", bad}}, "f.toml");
                   }),
                   "f.toml: field 'save_attention_at' = \""));
  // An older config.json without the field still loads.
  json older = emergent::to_json(emergent::resolve_config(json::object(), "t"));
  older.erase("save_attention_at");
  CHECK(emergent::train_config_from_json(older, "config.json").save_attention_at.empty());
}

TEST_CASE("result rows: a row cut by a kill is ignored and cut off before the next append") {
  const auto path = std::filesystem::temp_directory_path() / "emergent_test_rows.jsonl";
  std::filesystem::remove(path);
  emergent::append_row(path, json{{"id", "a"}});
  emergent::append_row(path, json{{"id", "b"}});
  { std::ofstream(path, std::ios::app) << R"({"id": "c", "res)"; }
  CHECK(emergent::read_rows(path).size() == 2);
  emergent::append_row(path, json{{"id", "d"}});
  const std::vector<json> rows = emergent::read_rows(path);
  REQUIRE(rows.size() == 3);
  CHECK(rows[2]["id"] == "d");
  { std::ofstream(path, std::ios::app) << "not json\n"; }
  CHECK(contains(error_of([&] { emergent::read_rows(path); }), "line 4 is not a JSON row"));
  std::filesystem::remove(path);
}

TEST_CASE("shards split a sweep deterministically and cover it once") {
  const emergent::Shard s = emergent::parse_shard("1/3", "--shard");
  CHECK(s.owns(1));
  CHECK(s.owns(4));
  CHECK_FALSE(s.owns(3));
  CHECK(s.name() == "shard-1-of-3");
  for (const char* bad : {"3/3", "-1/2", "1", "a/b", "1/0"})
    CHECK(contains(error_of([&] { emergent::parse_shard(bad, "--shard"); }), "is not a shard"));
}

TEST_CASE(
    "a result row that does not fit (a file-size limit, as a full disk) fails cleanly and keeps "
    "every row") {
  const auto path = std::filesystem::temp_directory_path() / "emergent_test_rows_full.jsonl";
  std::filesystem::remove(path);
  emergent::append_row(path, json{{"id", "a"}});
  emergent::append_row(path, json{{"id", "b"}});
  const auto size = std::filesystem::file_size(path);
  struct rlimit old {};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);  // as the programs do
  struct rlimit small = old;
  small.rlim_cur = static_cast<rlim_t>(size + 10);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &small) == 0);
  const std::string message = error_of([&] {
    emergent::append_row(path, json{{"id", std::string(100, 'c')}});
  });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  CAPTURE(message);
  CHECK(contains(message, path.string()));
  CHECK(contains(message, "the earlier rows are intact"));
  CHECK(std::filesystem::file_size(path) == size);
  CHECK(emergent::read_rows(path).size() == 2);
  std::filesystem::remove(path);
}

TEST_CASE("a device ensemble of different lengths is sized as its padded members") {
  auto linear_map = [](int S) {
    emergent::TrainConfig c;
    c.task = "linear-map";
    c.task_params = {{"S", S}};
    c.batch_tokens = 120;
    return c;
  };
  // S = 4: 15 sequences of 8 tokens; S = 6: 10 of 12. Padded: 15 sequences of 12 tokens.
  const emergent::TrainConfig padded = emergent::padded_member({linear_map(4), linear_map(6)});
  CHECK(padded.task_params.at("S") == 6);
  CHECK(padded.batch_tokens == 180);
  CHECK(emergent::estimated_training_bytes(padded) >
        emergent::estimated_training_bytes(linear_map(6)));
  CHECK(emergent::padded_member({linear_map(6)}).batch_tokens == 120);
}

TEST_CASE("a sweep packs runs of different lengths into one ensemble only where little is padded") {
  auto linear_map = [](int S, int seed, int batch_tokens) {
    emergent::TrainConfig c;
    c.task = "linear-map";
    c.task_params = {{"S", S}};
    c.seed = seed;
    c.batch_tokens = batch_tokens;
    return emergent::PlannedRun{"S" + std::to_string(S) + "_" + std::to_string(seed), "",
                                emergent::to_json(c)};
  };
  auto labels = [](const std::vector<std::vector<const emergent::PlannedRun*>>& groups) {
    std::vector<std::vector<std::string>> ids;
    for (const auto& group : groups) {
      ids.emplace_back();
      for (const emergent::PlannedRun* r : group) ids.back().push_back(r->id);
    }
    return ids;
  };
  auto at_most = [](std::size_t n) { return [n](const emergent::TrainConfig&) { return n; }; };
  // Fig. 5a's S = 8, 16 and 32 at 4,096 tokens, interleaved: each S alone (padded together, an
  // S = 8 run would compute 256 sequences of 64 tokens where its own are 256 of 16).
  std::vector<emergent::PlannedRun> runs;
  for (int seed = 0; seed < 2; ++seed)
    for (int S : {8, 16, 32}) runs.push_back(linear_map(S, seed, 4096));
  std::vector<const emergent::PlannedRun*> todo;
  for (const emergent::PlannedRun& r : runs) todo.push_back(&r);
  using Ids = std::vector<std::vector<std::string>>;
  CHECK(labels(emergent::ensemble_groups(todo, at_most(100))) ==
        Ids{{"S8_0", "S8_1"}, {"S16_0", "S16_1"}, {"S32_0", "S32_1"}});
  CHECK(labels(emergent::ensemble_groups(todo, at_most(1))).size() == 6);
  // S = 5 and 6 at 1,024 tokens: 102 sequences of 10 tokens and 85 of 12, padded to 102 of 12,
  // 1.2 times their own tokens: one ensemble, as many as max_members allows.
  runs = {linear_map(5, 0, 1024), linear_map(6, 0, 1024), linear_map(5, 1, 1024),
          linear_map(6, 1, 1024)};
  todo.clear();
  for (const emergent::PlannedRun& r : runs) todo.push_back(&r);
  CHECK(labels(emergent::ensemble_groups(todo, at_most(100))) ==
        Ids{{"S5_0", "S6_0", "S5_1", "S6_1"}});
  CHECK(labels(emergent::ensemble_groups(todo, at_most(3))) ==
        Ids{{"S5_0", "S6_0", "S5_1"}, {"S6_1"}});
  emergent::PaddedMember padded;
  padded.add(emergent::train_config_from_json(runs[0].config, "S5"));
  CHECK(padded.padding_waste() == 1.0);
  padded.add(emergent::train_config_from_json(runs[1].config, "S6"));
  CHECK(padded.padding_waste() == doctest::Approx(2.0 * 102 * 12 / (102 * 10 + 85 * 12)));
  CHECK(padded.padding_waste() <= emergent::kMaxPaddingWaste);
}

TEST_CASE("every numeric setting has a finite range, so a typo cannot ask for the machine") {
  std::vector<emergent::Parameter> all = emergent::model_parameters();
  for (const emergent::Parameter& p : emergent::training_parameters()) all.push_back(p);
  for (const emergent::Parameter& p : emergent::self_pretraining_parameters()) all.push_back(p);
  for (const emergent::TaskDeclaration& t : emergent::task_registry())
    for (const emergent::Parameter& p : t.parameters) all.push_back(p);
  for (const emergent::Parameter& p : all) {
    if (p.type == emergent::ParameterType::text) continue;
    CAPTURE(p.name);
    CHECK(std::isfinite(p.range.low));
    CHECK(std::isfinite(p.range.high));
  }
  CHECK(contains(error_of([] {
                   emergent::resolve_config(json{{"batch_tokens", 99999999999}}, "f");
                 }),
                 "f: field 'batch_tokens' = 99999999999 is not allowed: expected an integer in "
                 "[1, 16777216]"));
  // Within the bounds, a run larger than the memory it is given is refused with the numbers.
  const emergent::TrainConfig big =
      emergent::resolve_config(json{{"batch_tokens", 16777216}, {"max_len", 31}}, "f");
  const double bytes = emergent::estimated_training_bytes(big);
  CHECK(bytes > 100e9);
  CHECK(emergent::estimated_training_bytes(big, 16) == doctest::Approx(16 * bytes));
  CHECK(contains(error_of([&] {
                   emergent::require_memory_fits(bytes, 24e9, "this machine's memory", "f",
                                                 "batch_tokens");
                 }),
                 "(estimated from batch_tokens), more than this machine's memory (22.4 GiB)"));
  const emergent::TrainConfig usual = emergent::resolve_config(json{{"max_len", 31}}, "f");
  CHECK(emergent::estimated_training_bytes(usual) < 100e6);  // the paper's linear map, 4,096 tokens
  // A mixer's own terms come from its catalog line: these are the numbers of the formula that
  // train/memory_estimate.hpp wrote out by mixer name before the terms moved there.
  const std::vector<std::pair<std::string, double>> per_mixer = {{"dot_attention", 57774080},
                                                                 {"mlp_mixer", 57774080},
                                                                 {"mamba", 124882944},
                                                                 {"gated_deltanet", 119115776},
                                                                 {"rwkv", 70356992}};
  CHECK(per_mixer.size() == emergent::mixer_catalog().size());
  for (const auto& [mixer, bytes_of_mixer] : per_mixer) {
    CAPTURE(mixer);
    CHECK(emergent::estimated_training_bytes(emergent::resolve_config(
              json{{"max_len", 31}, {"mixer", mixer}}, "f")) == bytes_of_mixer);
  }
}

TEST_CASE("a sweep file is refused when it would be silently reinterpreted") {
  // seeds = 2.0 is not a count of seeds (it was one run with seed 2.0)
  CHECK(contains(error_of([] {
                   emergent::expand_sweep(json{{"grid", {{{"seeds", 2.0}}}}}, "f");
                 }),
                 "f: grid block 1: 'seeds' = 2.0 is not allowed: expected a count N"));
  CHECK(emergent::expand_sweep(json{{"grid", {{{"seeds", {0, 5}}}}}}, "f").size() == 2);
  // seeds in the base is every block's axis, unless the block sets seeds or seed
  const std::vector<emergent::SweepRun> based = emergent::expand_sweep(
      json{{"base", {{"seeds", 2}}}, {"grid", {{{"S", 4}}, {{"S", 8}, {"seed", 7}}}}}, "f");
  REQUIRE(based.size() == 3);
  CHECK(based[1].settings == json{{"S", 4}, {"seed", 1}});
  CHECK(based[2].settings == json{{"S", 8}, {"seed", 7}});
  CHECK(emergent::expand_sweep(json{{"base", {{"seeds", 3}, {"S", 4}}}}, "f").size() == 3);
  // an empty file is not one run of every default
  CHECK(contains(error_of([] { emergent::expand_sweep(json::object(), "f"); }),
                 "f: the sweep has no settings"));
  // a key written twice in JSON (TOML refuses it itself)
  CHECK(contains(error_of([] { emergent::parse_json_text(R"({"base": {"S": 4, "S": 8}})", "f"); }),
                 "f: key 'S' is written twice in one object"));
  CHECK(contains(error_of([] {
                   emergent::parse_json_text(R"({"grid": [{"S": 4}, {"S": 8, "s": 1, "s": 2}]})",
                                             "f");
                 }),
                 "key 's' is written twice"));
  CHECK(emergent::parse_json_text(R"({"a": {"S": 4}, "b": {"S": 4}})", "f")["b"]["S"] == 4);
  // a Slurm variable that is not a number does not fall back to shard 0
  ::setenv("SLURM_ARRAY_TASK_ID", "x", 1);
  ::setenv("SLURM_ARRAY_TASK_COUNT", "2", 1);
  CHECK(contains(error_of([] { emergent::shard_from_environment(); }),
                 "SLURM_ARRAY_TASK_ID: = 'x' is not a whole number"));
  ::setenv("SLURM_ARRAY_TASK_ID", "1", 1);
  CHECK(emergent::shard_from_environment().index == 1);
  ::unsetenv("SLURM_ARRAY_TASK_ID");
  ::unsetenv("SLURM_ARRAY_TASK_COUNT");
}

TEST_CASE("sweep summarize names what a run without emergence steps is") {
  const auto row = [](const char* task) {
    return json{{"id", "x"}, {"config", {{"task", task}}}, {"result", {{"steps_done", 5}}}};
  };
  // before: a language-model run was called "a self-pretraining run"
  CHECK(contains(error_of([&] { emergent::summarize_rows({row("corpus")}, {}, "d"); }),
                 "has no emergence steps to summarize (a language-model run"));
  CHECK(contains(error_of([&] { emergent::summarize_rows({row("listops")}, {}, "d"); }),
                 "(a self-pretraining run: plot.py spt prints its table)"));
}

TEST_CASE("a Slurm array task's shard: steps and lists mapped by position, or refused") {
  struct Array {
    const char *id, *count, *min, *max, *step;
  };
  const auto shard_of = [](const Array& a) {
    const std::pair<const char*, const char*> variables[] = {{"SLURM_ARRAY_TASK_ID", a.id},
                                                             {"SLURM_ARRAY_TASK_COUNT", a.count},
                                                             {"SLURM_ARRAY_TASK_MIN", a.min},
                                                             {"SLURM_ARRAY_TASK_MAX", a.max},
                                                             {"SLURM_ARRAY_TASK_STEP", a.step}};
    for (const auto& [name, value] : variables) value ? ::setenv(name, value, 1) : ::unsetenv(name);
    std::string result;
    try {
      const emergent::Shard s = emergent::shard_from_environment();
      result = std::to_string(s.index) + "/" + std::to_string(s.count);
    } catch (const emergent::Error& e) {
      result = e.what();
    }
    for (const auto& [name, value] : variables) ::unsetenv(name);
    return result;
  };
  // --array=0-6:2 (ids 0 2 4 6): before, 4 was '4/4' is not a shard and shards 1 and 3 never ran
  for (const auto& [id, shard] : std::vector<std::pair<const char*, const char*>>{
           {"0", "0/4"}, {"2", "1/4"}, {"4", "2/4"}, {"6", "3/4"}})
    CHECK(shard_of({id, "4", "0", "6", "2"}) == shard);
  CHECK(shard_of({"7", "4", "1", "7", "2"}) == "3/4");              // --array=1-7:2
  CHECK(shard_of({"12", "3", "10", "12", "1"}) == "2/3");           // --array=10-12
  CHECK(shard_of({"1", "2", nullptr, nullptr, nullptr}) == "1/2");  // only the two of old
  // ids not evenly spaced (--array=1,2,5): no id says its shard
  CHECK(contains(shard_of({"5", "3", "1", "5", "1"}), "ids are not evenly spaced"));
  CHECK(contains(shard_of({"5", "3", "1", "5", "1"}), "--shard I/N"));
  // an id that is not one of the array's
  CHECK(contains(shard_of({"3", "4", "0", "6", "2"}), "is not one of this array's ids"));
  // an id without a count: before, the whole sweep ran in every task
  CHECK(contains(shard_of({"1", nullptr, nullptr, nullptr, nullptr}),
                 "SLURM_ARRAY_TASK_COUNT is not"));
  CHECK(shard_of({nullptr, nullptr, nullptr, nullptr, nullptr}) == "0/1");
}

TEST_CASE("a sweep folder is bound to its runs: another file is refused, --extend only adds") {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("emergent_test_sweep_folder_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "rows");
  const auto plan = [](std::vector<std::pair<std::string, int>> runs) {
    json p = {{"sweep_file", "s.toml"}, {"runs", json::array()}};
    for (const auto& [id, steps] : runs)
      p["runs"].push_back({{"id", id},
                           {"label", "steps=" + std::to_string(steps)},
                           {"config", {{"steps", steps}}}});
    return p;
  };
  emergent::bind_sweep_folder(dir, plan({{"a", 60}, {"b", 60}}), false);
  emergent::bind_sweep_folder(dir, plan({{"a", 60}, {"b", 60}}), false);  // the same: accepted
  const std::string edited = error_of([&] {
    emergent::bind_sweep_folder(dir, plan({{"a", 60}, {"c", 80}}), false);
  });
  CHECK(contains(edited, "sweep.json: this folder holds the sweep of s.toml (2 runs)"));
  CHECK(contains(edited, "without 1 run: b {steps=60}, with 1 run: c {steps=80} not in it"));
  CHECK(contains(edited, "steps: 60 (sweep.json), 80 (s.toml)"));
  CHECK(contains(edited, "--extend to add runs"));
  CHECK(contains(error_of([&] {
                   emergent::bind_sweep_folder(dir, plan({{"a", 60}, {"c", 80}}), true);
                 }),
                 "--extend only adds runs"));
  CHECK(emergent::read_sweep_plan(dir)["runs"].size() == 2);  // nothing was replaced
  emergent::bind_sweep_folder(dir, plan({{"a", 60}, {"b", 60}, {"c", 80}}), true);
  CHECK(emergent::read_sweep_plan(dir)["runs"].size() == 3);
  CHECK(emergent::read_sweep_plan(dir)["runs_hash"] ==
        emergent::sweep_runs_hash(plan({{"a", 60}, {"b", 60}, {"c", 80}})["runs"]));

  // Rows count only for the sweep's own runs; others are counted as ignored.
  const auto rows = dir / "rows" / "shard-0-of-1.jsonl";
  for (const auto& [id, steps] :
       std::vector<std::pair<const char*, int>>{{"a", 60}, {"zz", 1}, {"c", 80}})
    emergent::append_row(
        rows,
        {{"id", id}, {"label", ""}, {"config", {{"steps", steps}}}, {"result", json::object()}});
  const emergent::CollectedRows collected =
      emergent::collected_rows(dir, emergent::read_sweep_plan(dir)["runs"]);
  REQUIRE(collected.rows.size() == 2);
  CHECK(collected.rows[0]["id"] == "a");
  CHECK(collected.rows[1]["id"] == "c");
  CHECK(collected.ignored == 1);
  CHECK(collected.ignored_text() == " (1 row ignored: not runs of this sweep)");
  // A row whose config is not its id's run's (an edited or foreign row) is refused: before, it
  // counted other settings' results under the run's id.
  const auto lone = dir / "rows" / "shard-0-of-2.jsonl";
  emergent::append_row(
      lone, {{"id", "b"}, {"label", ""}, {"config", {{"steps", 99}}}, {"result", json::object()}});
  CHECK(contains(
      error_of([&] { emergent::collected_rows(dir, emergent::read_sweep_plan(dir)["runs"]); }),
      "shard-0-of-2.jsonl: row 1 has the id of run b but another config: steps: 60 "
      "(sweep.json), 99 (row)"));
  std::filesystem::remove(lone);
  // A row without its result names the file, not a library exception.
  emergent::append_row(rows, {{"id", "b"}, {"config", json::object()}});
  CHECK(contains(
      error_of([&] { emergent::collected_rows(dir, emergent::read_sweep_plan(dir)["runs"]); }),
      "shard-0-of-1.jsonl: row 4 is not a result row (it needs 'id', 'config' and "
      "'result')"));
  std::filesystem::remove_all(dir);
}
