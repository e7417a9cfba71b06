// Everything needed to rerun a training run, written to <run>/config.json.
//
// Reading a config is strict: an unknown key, a missing key or a value of the wrong type is an
// Error that names the file and the field, because a silently ignored typo in a sweep costs a
// day of compute.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "../core/error.hpp"
#include "../core/shape.hpp"

namespace emergent {

struct TrainConfig {
  // Task: "linear-map" (S, s) or "cellular-automaton" (S, states, colours, window, depth, rules)
  std::string task = "linear-map";
  int state_size = 16;        // S
  int ones_per_row = 3;       // s (linear map)
  int states = 16;            // T recorded states per sequence (cellular automaton)
  int colours = 4;            // C (cellular automaton; the linear map is binary)
  int window = 3;             // W (cellular automaton)
  int depth = 1;              // k: rule applications between recorded states (cellular automaton)
  int rules = 256;            // N: pool of lookup tables, one drawn per sequence (cellular automaton)
  std::uint64_t task_seed = 0;  // draws A or the rule pool; fixed across seeds so that seeds differ
                                // only in init and data
  // Model (must name a registered shape)
  std::string mixer = "dot_attention";
  Shape shape{};
  // Optimisation
  std::uint64_t seed = 0;     // init and data stream
  std::int64_t steps = 10000;
  int batch_tokens = 4096;    // tokens per step: batch = batch_tokens / (2S) sequences
  double lr = 1e-3;
  std::int64_t warmup_steps = 100;
  std::string schedule = "constant";
  double min_lr_ratio = 0.1;
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double max_grad_norm = 1.0;
  // Intervention
  double bias = 0;            // c: add c * (true pattern) to the attention logits
  // Bookkeeping
  std::int64_t log_every = 10;
  std::int64_t analysis_every = 100;    // attention entropy / IoU rows
  std::int64_t checkpoint_every = 1000;
  double stop_below = 0;  // > 0: stop once the smoothed emergence metric (x1 loss for the
                          // linear map, loss for the automaton) is below this
  int threads = 0;            // 0: OpenMP's default

  bool is_cellular_automaton() const { return task == "cellular-automaton"; }
  int sequence_tokens() const { return is_cellular_automaton() ? state_size * states : 2 * state_size; }
  int batch() const { return std::max(1, batch_tokens / sequence_tokens()); }
};

inline nlohmann::json to_json(const TrainConfig& c) {
  return {
      {"task", c.task}, {"S", c.state_size}, {"s", c.ones_per_row}, {"states", c.states},
      {"colours", c.colours}, {"window", c.window}, {"depth", c.depth}, {"rules", c.rules},
      {"task_seed", c.task_seed},
      {"mixer", c.mixer},
      {"shape", {{"vocab", c.shape.vocab}, {"d_model", c.shape.d_model}, {"heads", c.shape.heads},
                 {"layers", c.shape.layers}, {"d_ff", c.shape.d_ff}, {"max_len", c.shape.max_len}}},
      {"seed", c.seed}, {"steps", c.steps}, {"batch_tokens", c.batch_tokens}, {"lr", c.lr},
      {"warmup_steps", c.warmup_steps}, {"schedule", c.schedule}, {"min_lr_ratio", c.min_lr_ratio},
      {"weight_decay", c.weight_decay}, {"beta1", c.beta1}, {"beta2", c.beta2},
      {"max_grad_norm", c.max_grad_norm}, {"bias", c.bias}, {"log_every", c.log_every},
      {"analysis_every", c.analysis_every}, {"checkpoint_every", c.checkpoint_every},
      {"stop_below", c.stop_below}, {"threads", c.threads},
  };
}

namespace config_detail {
template <class T>
void read_field(const nlohmann::json& j, const std::string& where, const char* key, T& out) {
  require(j.contains(key), where, "missing field '" + std::string(key) + "'");
  try {
    out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(where + ": field '" + key + "' has the wrong type (" + e.what() + ")");
  }
}
inline void reject_unknown(const nlohmann::json& j, const std::string& where, const std::set<std::string>& known) {
  for (const auto& [key, value] : j.items())
    require(known.count(key) == 1, where, "unknown field '" + key + "'");
}
}  // namespace config_detail

inline TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& where) {
  using config_detail::read_field;
  require(j.is_object(), where, "expected a JSON object");
  TrainConfig c;
  const nlohmann::json reference = to_json(c);
  std::set<std::string> known;
  for (const auto& [key, value] : reference.items()) known.insert(key);
  config_detail::reject_unknown(j, where, known);
  read_field(j, where, "task", c.task);
  read_field(j, where, "S", c.state_size);
  read_field(j, where, "s", c.ones_per_row);
  read_field(j, where, "states", c.states);
  read_field(j, where, "colours", c.colours);
  read_field(j, where, "window", c.window);
  read_field(j, where, "depth", c.depth);
  read_field(j, where, "rules", c.rules);
  read_field(j, where, "task_seed", c.task_seed);
  read_field(j, where, "mixer", c.mixer);
  require(j.contains("shape") && j["shape"].is_object(), where, "missing object 'shape'");
  const std::string shape_where = where + ": shape";
  config_detail::reject_unknown(j["shape"], shape_where, {"vocab", "d_model", "heads", "layers", "d_ff", "max_len"});
  read_field(j["shape"], shape_where, "vocab", c.shape.vocab);
  read_field(j["shape"], shape_where, "d_model", c.shape.d_model);
  read_field(j["shape"], shape_where, "heads", c.shape.heads);
  read_field(j["shape"], shape_where, "layers", c.shape.layers);
  read_field(j["shape"], shape_where, "d_ff", c.shape.d_ff);
  read_field(j["shape"], shape_where, "max_len", c.shape.max_len);
  read_field(j, where, "seed", c.seed);
  read_field(j, where, "steps", c.steps);
  read_field(j, where, "batch_tokens", c.batch_tokens);
  read_field(j, where, "lr", c.lr);
  read_field(j, where, "warmup_steps", c.warmup_steps);
  read_field(j, where, "schedule", c.schedule);
  read_field(j, where, "min_lr_ratio", c.min_lr_ratio);
  read_field(j, where, "weight_decay", c.weight_decay);
  read_field(j, where, "beta1", c.beta1);
  read_field(j, where, "beta2", c.beta2);
  read_field(j, where, "max_grad_norm", c.max_grad_norm);
  read_field(j, where, "bias", c.bias);
  read_field(j, where, "log_every", c.log_every);
  read_field(j, where, "analysis_every", c.analysis_every);
  read_field(j, where, "checkpoint_every", c.checkpoint_every);
  read_field(j, where, "stop_below", c.stop_below);
  read_field(j, where, "threads", c.threads);
  return c;
}

inline TrainConfig read_train_config(const std::filesystem::path& path) {
  std::ifstream in(path);
  require(in.good(), path.string(), "cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(path.string() + ": not valid JSON (" + e.what() + ")");
  }
  return train_config_from_json(j, path.string());
}

// Checks the values that the trainer relies on; names the field at fault.
inline void validate(const TrainConfig& c) {
  const std::string where = "config";
  require(c.task == "linear-map" || c.is_cellular_automaton(), where,
          "task '" + c.task + "' is not known (expected linear-map or cellular-automaton)");
  require(c.state_size >= 1, where, "S must be >= 1");
  if (!c.is_cellular_automaton())
    require(c.ones_per_row >= 1 && c.ones_per_row <= c.state_size, where, "s must be in [1, S]");
  if (c.is_cellular_automaton())
    require(c.colours <= c.shape.vocab, where,
            "colours = " + std::to_string(c.colours) + " needs a model vocab >= colours, got " + std::to_string(c.shape.vocab));
  require(c.steps >= 0, where, "steps must be >= 0");
  require(c.batch_tokens >= c.sequence_tokens(), where,
          "batch_tokens must hold at least one sequence (" + std::to_string(c.sequence_tokens()) + " tokens)");
  require(c.lr > 0, where, "lr must be > 0");
  require(c.warmup_steps >= 0, where, "warmup_steps must be >= 0");
  require(c.schedule == "constant" || c.schedule == "cosine", where, "schedule must be constant or cosine");
  require(c.log_every >= 1 && c.analysis_every >= 1 && c.checkpoint_every >= 1, where,
          "log_every, analysis_every and checkpoint_every must be >= 1");
  require(c.sequence_tokens() - 1 <= c.shape.max_len, where,
          "sequences of " + std::to_string(c.sequence_tokens()) + " tokens need max_len >= " +
              std::to_string(c.sequence_tokens() - 1) + ", the shape has " + std::to_string(c.shape.max_len));
}

}  // namespace emergent
