// Everything needed to rerun a training run, written to <run>/config.json: the task and its
// declared parameters (tasks/registry.hpp), the model (mixer and shape) and the training
// settings, each declared once (settings/parameters.hpp). config.json is one flat object whose
// keys are the declared names, the same names the CLI takes as flags and sweeps take as axes:
//   {"task": "linear-map", "S": 16, "s": 3, "task_seed": 0, "mixer": "dot_attention",
//    "vocab": 2, "d_model": 128, ..., "seed": 0, "steps": 10000, "lr": 0.001, ...}
//
// Reading a config is strict: an unknown key, a missing key (in config.json), a value of the
// wrong type, out of range or not finite is an Error that names the file, the field, the value
// and what is allowed, because a silently ignored typo in a sweep costs a day of compute.
#pragma once

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <emergent/core/shape.hpp>
#include <emergent/io/json.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/registry.hpp>
#include <emergent/train/warm_start.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

namespace emergent {

struct TrainConfig {
  std::string task = "linear-map";
  nlohmann::json task_params =
      nlohmann::json::object();  // the task's declared parameters; absent: default
  // Model
  std::string mixer = "dot_attention";
  Shape shape{};
  // Optimisation
  std::uint64_t seed = 0;  // init and data stream
  std::int64_t steps = 10000;
  int batch_tokens = 4096;  // tokens per step: batch = batch_tokens / tokens per sequence
  double lr = 1e-3;
  std::int64_t warmup_steps = 100;
  std::string schedule = "constant";
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double max_grad_norm = 1.0;
  // Intervention
  double bias = 0;  // c: add c * (true pattern) to the attention logits
  // Bookkeeping
  std::int64_t log_every = 10;
  std::int64_t analysis_every = 100;
  std::int64_t checkpoint_every = 1000;
  double stop_below = 0;
  // A threshold of the task named instead of a number ("emergence", "midpoint", "solved"):
  // resolve_config writes its value into stop_below and sets this back to "", so config.json
  // records the number and the run keeps the id of that number written out.
  std::string stop_at;
  // Held-out evaluation on a fixed set of eval_batches batches, every eval_every steps (0: off);
  // when on, the emergence metric, its thresholds and stop_below read it (train/trainer.hpp).
  std::int64_t eval_every = 0;
  int eval_batches = 4;
  int threads = 0;
  // The GEMMs' precision: "fp32", or "tf32" on the CUDA device backend (cuda/gemm.cuh). Part of
  // the run, since it changes its trajectory.
  std::string precision = "fp32";
  // A stage: start from another run's parameters (train/init_source.hpp finds them, "": from
  // scratch), taking all of them, the query-key rows or all but those (train/warm_start.hpp).
  std::string init_from;
  std::string init_take = "all";
  // Observation: steps whose batch-averaged attention maps are saved, "1000,1500" ("": none).
  std::string save_attention_at;
};

// A declared training setting bound to its member; the default is the member's initialiser.
struct TrainingField {
  Parameter parameter;
  std::variant<int TrainConfig::*, std::int64_t TrainConfig::*, std::uint64_t TrainConfig::*,
               double TrainConfig::*, std::string TrainConfig::*>
      member;
};

namespace config_detail {
template <class T>
TrainingField field(T TrainConfig::*member, Parameter p) {
  const TrainConfig defaults;
  p.default_value = defaults.*member;
  return {std::move(p), member};
}
inline std::vector<std::string> stop_at_choices() {
  std::vector<std::string> choices = {""};  // "": stop_below as given
  for (const auto& [name, member] : kNamedThresholds) choices.push_back(name);
  return choices;
}
}  // namespace config_detail

inline const std::vector<TrainingField>& training_fields() {
  using config_detail::field;
  static const std::vector<TrainingField> fields = {
      field(&TrainConfig::seed,
            integer("seed", 0, between(0, limits::kSeed), "seed of init and data")),
      field(&TrainConfig::steps,
            integer("steps", 0, between(1, limits::kSteps), "training steps (the budget)")),
      field(&TrainConfig::batch_tokens,
            integer("batch_tokens", 0, between(1, limits::kBatchTokens),
                    "tokens per step (sequences per step = tokens / sequence tokens)")),
      field(&TrainConfig::lr,
            real("lr", 0, Range{0, limits::kLearningRate, true, false}, "peak learning rate")),
      field(&TrainConfig::warmup_steps,
            integer("warmup_steps", 0, between(0, limits::kSteps), "linear warmup steps")),
      field(&TrainConfig::schedule, text("schedule", "", {"constant", "cosine"}, "after warmup")),
      field(&TrainConfig::min_lr_ratio,
            real("min_lr_ratio", 0, between(0, 1), "cosine floor as a share of lr")),
      field(&TrainConfig::weight_decay, real("weight_decay", 0, between(0, limits::kLearningRate),
                                             "AdamW decoupled weight decay (matrices only)")),
      field(&TrainConfig::beta1, real("beta1", 0, from_below(0, 1), "AdamW first-moment decay")),
      field(&TrainConfig::beta2, real("beta2", 0, from_below(0, 1), "AdamW second-moment decay")),
      field(&TrainConfig::max_grad_norm, real("max_grad_norm", 0, between(0, limits::kMagnitude),
                                              "global gradient-norm clip (0: off)")),
      field(&TrainConfig::bias,
            real("bias", 0, between(-limits::kMagnitude, limits::kMagnitude),
                 "attention-bias strength c added to the logits times the true pattern (0: off)")),
      field(&TrainConfig::log_every,
            integer("log_every", 0, between(1, limits::kSteps), "steps between metrics rows")),
      field(&TrainConfig::analysis_every, integer("analysis_every", 0, between(1, limits::kSteps),
                                                  "steps between attention entropy/IoU rows")),
      field(
          &TrainConfig::checkpoint_every,
          integer("checkpoint_every", 0, between(1, limits::kSteps), "steps between checkpoints")),
      field(&TrainConfig::stop_below, real("stop_below", 0, between(0, limits::kMagnitude),
                                           "stop once the smoothed emergence metric (linear map: "
                                           "x1 loss; automaton: loss) is below this (0: never)")),
      field(&TrainConfig::stop_at,
            added_later(text("stop_at", "", config_detail::stop_at_choices(),
                             "stop at the task's own threshold of that name, which becomes "
                             "stop_below (\"\": stop_below as given)"))),
      field(&TrainConfig::eval_every,
            added_later(integer(
                "eval_every", 0, between(0, limits::kSteps),
                "steps between held-out evaluations on a fixed set, a multiple of log_every; when "
                "on, emergence, plateau and stop_below read the held-out metric (0: off, they "
                "read the training batch)"))),
      field(&TrainConfig::eval_batches,
            added_later(integer("eval_batches", 0, between(1, 1024),
                                "batches in the fixed held-out set of eval_every"))),
      field(&TrainConfig::threads,
            integer("threads", 0, between(0, 1024),
                    "OpenMP threads (0: OpenMP's default, recorded as the count it is)")),
      field(&TrainConfig::precision,
            added_later(text("precision", "", {"fp32", "tf32"},
                             "the GEMMs' precision: fp32, or tf32 (CUDA device backend only, "
                             "opt-in: TF32 tensor cores)"))),
      field(&TrainConfig::init_from,
            added_later(text("init_from", "", {},
                             "start from another run: a checkpoint, a finished run folder or a "
                             "sweep folder (its run of the same seed); \"\": from scratch"))),
      field(&TrainConfig::init_take,
            added_later(text("init_take", "", warm_start_takes(),
                             "what init_from gives: all tensors of the same name and shape, only "
                             "the query-key rows (qk) or all but them (all_but_qk)"))),
      field(&TrainConfig::save_attention_at,
            observation(text("save_attention_at", "", {},
                             "steps whose attention maps are saved to attention/, comma-separated "
                             "(e.g. 1000,1500)"))),
  };
  return fields;
}

inline std::vector<Parameter> training_parameters() {
  std::vector<Parameter> parameters;
  for (const TrainingField& f : training_fields()) parameters.push_back(f.parameter);
  return parameters;
}

// The model: the mixer and the shape's fields. Their defaults are the task's (its
// default_shape); vocab 0 means the task's vocabulary, max_len 0 the smallest that fits (the
// program that dispatches to compiled shapes resolves it before a run starts).
inline const std::vector<Parameter>& model_parameters() {
  static const std::vector<Parameter> parameters = {
      text("mixer", "dot_attention", mixer_names(), "token mixer"),
      integer("vocab", 0, between(0, limits::kPositions), "token vocabulary (0: the task's)"),
      integer("d_model", 128, between(1, limits::kWidth), "residual width D"),
      integer("heads", 8, between(1, limits::kHeads),
              "attention heads H (d_head = d_model / heads)"),
      integer("layers", 1, between(1, limits::kLayers),
              "blocks (default: the task's; the automaton's is 4)"),
      integer("d_ff", 512, between(1, limits::kWidth), "MLP hidden width"),
      integer("max_len", 0, between(0, limits::kPositions),
              "positions of the model (0: the smallest compiled that fits)"),
  };
  return parameters;
}

inline constexpr int Shape::*kShapeFields[] = {&Shape::vocab,  &Shape::d_model, &Shape::heads,
                                               &Shape::layers, &Shape::d_ff,    &Shape::max_len};
inline constexpr const char* kShapeFieldNames[] = {"vocab",  "d_model", "heads",
                                                   "layers", "d_ff",    "max_len"};

// The task of a config, with its metric and thresholds. Errors of the task's own cross-field
// checks (s <= S, W odd, ...) name `where`.
inline TaskSetup make_task(const TrainConfig& c, const std::string& where = "config") {
  const TaskDeclaration& declaration = find_task(c.task, where);
  const ParameterValues values(declaration.parameters, c.task_params, where);
  try {
    return declaration.setup(values);
  } catch (const Error& e) {
    throw Error(where + ": task " + c.task + ": " + e.what());
  }
}

// Tokens per sequence and sequences per step.
inline int sequence_tokens(const TrainConfig& c) { return make_task(c).task->length() + 1; }
inline int sequences_per_step(const TrainConfig& c) {
  return std::max(1, c.batch_tokens / sequence_tokens(c));
}

inline nlohmann::json to_json(const TrainConfig& c) {
  const TaskDeclaration& declaration = find_task(c.task, "config");
  nlohmann::json j = ParameterValues(declaration.parameters, c.task_params, "config").json();
  j["task"] = c.task;
  j["mixer"] = c.mixer;
  for (std::size_t i = 0; i < std::size(kShapeFields); ++i)
    j[kShapeFieldNames[i]] = c.shape.*kShapeFields[i];
  for (const TrainingField& f : training_fields())
    std::visit([&](auto member) { j[f.parameter.name] = c.*member; }, f.member);
  return j;
}

namespace config_detail {
// "field 'colours' is a parameter of task cellular-automaton, not of linear-map" beats "unknown".
inline std::string unknown_field_message(const std::string& key, const std::string& task) {
  for (const TaskDeclaration& t : task_registry())
    if (t.name != task && find_parameter(t.parameters, key))
      return "field '" + key + "' is a parameter of task " + t.name + ", not of " + task;
  return "unknown field '" + key + "'";
}
}  // namespace config_detail

// The steps of save_attention_at ("1000,1500"), sorted; an Error naming `where` and the field
// for anything but comma-separated non-negative integers.
inline std::vector<std::int64_t> attention_snapshot_steps(const std::string& list,
                                                          const std::string& where) {
  std::vector<std::int64_t> steps;
  std::size_t begin = 0;
  while (begin < list.size()) {
    const std::size_t end = std::min(list.find(',', begin), list.size());
    const std::string item = list.substr(begin, end - begin);
    std::int64_t step = -1;
    const auto [rest, error] = std::from_chars(item.data(), item.data() + item.size(), step);
    require(error == std::errc() && rest == item.data() + item.size() && step >= 0, where,
            "field 'save_attention_at' = \"" + list +
                "\" is not allowed: expected steps as comma-separated integers >= 0, as "
                "\"1000,1500\"");
    steps.push_back(step);
    begin = end + 1;
  }
  std::sort(steps.begin(), steps.end());
  const auto twice = std::adjacent_find(steps.begin(), steps.end());
  require(twice == steps.end(), where,
          "field 'save_attention_at' = \"" + list + "\" is not allowed: step " +
              (twice == steps.end() ? std::string() : std::to_string(*twice)) + " is listed twice");
  return steps;
}

// Every name a config of `task` declares, in order: task, its parameters, model, training.
inline std::vector<Parameter> declared_parameters(const std::string& task) {
  std::vector<Parameter> all = {text("task", "linear-map", {}, "task")};
  for (const Parameter& p : find_task(task, "config").parameters) all.push_back(p);
  for (const Parameter& p : model_parameters()) all.push_back(p);
  for (const Parameter& p : training_parameters()) all.push_back(p);
  return all;
}

// A config from a flat object of declared names: what is absent takes its default (unless
// `complete`, as for config.json, where every field must be there), every value is checked, and
// so are the settings that depend on each other. The task comes first: it decides which other
// names exist and the model's defaults.
inline TrainConfig resolve_config(const nlohmann::json& given, const std::string& where,
                                  bool complete = false) {
  require(given.is_object(), where, "expected a JSON object of settings");
  TrainConfig c;
  if (given.contains("task")) {
    require(given["task"].is_string(), where,
            "field 'task' must be a string, one of " + task_names());
    c.task = given["task"].get<std::string>();
  }
  const TaskDeclaration& declaration = find_task(c.task, where);
  const std::vector<Parameter> declared = declared_parameters(c.task);
  for (const auto& [key, value] : given.items())
    require(find_parameter(declared, key) != nullptr, where,
            config_detail::unknown_field_message(key, c.task) + " (" + c.task +
                " takes: " + parameter_names(declared) + ")");
  if (complete)
    for (const Parameter& p : declared)
      require(p.observation || p.added_later || given.contains(p.name), where,
              "missing field '" + p.name + "'");

  c.task_params = ParameterValues(declaration.parameters, given, where).json();
  const TaskSetup setup = make_task(c, where);
  const ParameterValues model(model_parameters(), given, where);
  c.mixer = model.text("mixer");
  for (std::size_t i = 0; i < std::size(kShapeFields); ++i)
    c.shape.*kShapeFields[i] = given.contains(kShapeFieldNames[i])
                                   ? int(model.integer(kShapeFieldNames[i]))
                                   : declaration.default_shape.*kShapeFields[i];
  if (c.shape.vocab == 0) c.shape.vocab = setup.task->vocab();
  const ParameterValues training(training_parameters(), given, where);
  for (const TrainingField& f : training_fields()) {
    const nlohmann::json& v = training.json().at(f.parameter.name);
    std::visit(
        [&](auto member) { c.*member = v.get<std::remove_reference_t<decltype(c.*member)>>(); },
        f.member);
  }

  const std::vector<std::int64_t> snapshots = attention_snapshot_steps(c.save_attention_at, where);
  require(snapshots.empty() || snapshots.back() < c.steps, where,
          "field 'save_attention_at' = \"" + c.save_attention_at + "\" is not allowed: step " +
              (snapshots.empty() ? "" : std::to_string(snapshots.back())) +
              " is past the run's last step (steps = " + std::to_string(c.steps) +
              " runs steps 0 to " + std::to_string(c.steps - 1) + ")");
  require_warmup_within(c.warmup_steps, c.steps, TrainConfig{}.warmup_steps, where);
  if (!c.stop_at.empty()) {
    require(c.stop_below == 0, where,
            "field 'stop_at' = '" + c.stop_at +
                "' and field 'stop_below' = " + parameter_detail::number_text(c.stop_below) +
                " are both set: give one (stop_at names the task's threshold)");
    for (const auto& [name, member] : kNamedThresholds)
      if (c.stop_at == name) c.stop_below = setup.thresholds.*member;
    require(c.stop_below > 0, where,
            "field 'stop_at' = '" + c.stop_at + "' is not allowed: task " + c.task +
                " declares no such threshold");
    c.stop_at.clear();
  }

  // Settings that depend on each other.
  const int tokens = setup.task->length() + 1;
  require(c.shape.vocab >= setup.task->vocab(), where,
          "field 'vocab' = " + std::to_string(c.shape.vocab) + " is not allowed: task " + c.task +
              " needs >= " + std::to_string(setup.task->vocab()));
  require(c.shape.d_model % c.shape.heads == 0 && c.shape.heads <= c.shape.d_model, where,
          "field 'heads' = " + std::to_string(c.shape.heads) +
              " is not allowed: it must divide d_model = " + std::to_string(c.shape.d_model));
  require(c.shape.max_len == 0 || c.shape.max_len >= tokens - 1, where,
          "field 'max_len' = " + std::to_string(c.shape.max_len) +
              " is not allowed: sequences of " + std::to_string(tokens) +
              " tokens need max_len >= " + std::to_string(tokens - 1));
  require(c.batch_tokens >= tokens, where,
          "field 'batch_tokens' = " + std::to_string(c.batch_tokens) +
              " is not allowed: it must hold one sequence (" + std::to_string(tokens) + " tokens)");
  require(c.eval_every % c.log_every == 0, where,
          "field 'eval_every' = " + std::to_string(c.eval_every) +
              " is not allowed: it must be 0 or a multiple of log_every = " +
              std::to_string(c.log_every));
  // A setting that does nothing for the mixer is refused, not recorded: heads for a mixer
  // without heads (any value but the default, which only names the shape).
  require(find_mixer(c.mixer, where).uses_heads || c.shape.heads == declaration.default_shape.heads,
          where,
          "field 'heads' = " + std::to_string(c.shape.heads) + " is not allowed for mixer " +
              c.mixer + ": it has no heads (only the default " +
              std::to_string(declaration.default_shape.heads) + ")");
  require(c.init_take == "all" || !c.init_from.empty(), where,
          "field 'init_take' = '" + c.init_take + "' needs field 'init_from' (a run to take from)");
  require(c.save_attention_at.empty() || !setup.task->weights_per_sequence(), where,
          "field 'save_attention_at' is not allowed for task " + c.task +
              ": its attention target differs per sequence, so a batch-averaged map has none "
              "(leave it empty)");
  require(c.bias == 0 || find_mixer(c.mixer, where).takes_attention_bias, where,
          "field 'bias' = " + parameter_detail::number_text(c.bias) + " is not allowed for mixer " +
              c.mixer +
              ": it has no attention logits to bias (only 0; mixers that take it: dot_attention)");
  return c;
}

inline TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& where) {
  return resolve_config(j, where, /*complete=*/true);
}

inline TrainConfig read_train_config(const std::filesystem::path& path) {
  return train_config_from_json(read_json_file(path), path.string());
}

// Checks every value the trainer relies on; names the field at fault. max_len must be resolved.
inline void validate(const TrainConfig& c) {
  const TrainConfig resolved = resolve_config(to_json(c), "config", true);
  require(resolved.shape.max_len >= 1, "config",
          "field 'max_len' must be resolved (>= 1) before training");
}

}  // namespace emergent
