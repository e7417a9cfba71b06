// The settings of a self-pretraining run (train/self_pretraining.hpp), declared once, and their
// checks: what the command line and the sweep runner need without the model behind them.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/listops.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

// Every setting of a self-pretraining run, declared once: config.json keys, CLI flags, sweep
// axes. The ListOps bounds default to a CPU-sized task (lengths 100-500; LRA's are 500-2,000).
inline const std::vector<Parameter>& self_pretraining_parameters() {
  static const std::vector<Parameter> parameters = [] {
    std::vector<Parameter> p = {
        text("task", "listops", {"listops"}, "the task (self-pretraining runs are on ListOps)")};
    for (const Parameter& q : ListOps::parameters()) p.push_back(q);
    for (Parameter& q : p) {
      if (q.name == "min_length") q.default_value = 100;
      if (q.name == "max_length") q.default_value = 500;
    }
    const std::vector<Parameter> rest = {
        integer("data_seed", 0, between(0, limits::kSeed),
                "draws the train and test sets (the same for every seed)"),
        integer("train_examples", 10000, between(1, limits::kExamples), "size of the training set"),
        integer("test_examples", 1000, between(1, limits::kExamples), "size of the test set"),
        integer("eval_examples", 500, between(1, limits::kExamples),
                "examples of each set evaluated per metrics row"),
        integer("d_model", 64, between(1, limits::kWidth), "residual width D"),
        integer("heads", 4, between(1, limits::kHeads), "attention heads"),
        integer("layers", 2, between(1, limits::kLayers), "encoder layers"),
        integer("d_ff", 128, between(1, limits::kWidth), "MLP hidden width"),
        integer("max_len", 512, between(1, limits::kPositions),
                "positions of the model (> max_length - 1)"),
        text("positions", "sinusoidal", {"sinusoidal", "learned"},
             "absolute positions: fixed sinusoids or a learned table"),
        integer("seed", 0, between(0, limits::kSeed), "init, batches and masks"),
        integer("steps", 4000, between(1, limits::kSteps), "total updates (both stages)"),
        integer("pretrain_steps", 0, between(0, limits::kSteps),
                "updates of masked reconstruction first (0: supervised only)"),
        integer("batch", 32, between(1, limits::kExamples), "sequences per update"),
        real("pretrain_lr", 1e-3, Range{0, limits::kLearningRate, true, false},
             "peak lr of the reconstruction stage"),
        real("lr", 5e-4, Range{0, limits::kLearningRate, true, false},
             "peak lr of the label stage"),
        integer("warmup_steps", 100, between(0, limits::kSteps),
                "linear warmup at the start of each stage"),
        real("weight_decay", 0.01, between(0, limits::kLearningRate),
             "AdamW decoupled weight decay (matrices)"),
        real("max_grad_norm", 1.0, between(0, limits::kMagnitude),
             "global gradient-norm clip (0: off)"),
        real("mask_rate", 0.1, between(0, 1), "share of real tokens masked (Amos et al.: 10%)"),
        text("warm_start", "", {}, "checkpoint (.safetensors) to start from (\"\": none)"),
        text("take", "all", {"all", "qk", "all_but_qk"},
             "tensors taken from warm_start: all, the query-key projections, or all but them"),
        real("proximity_bias", 0, between(-limits::kMagnitude, limits::kMagnitude),
             "fixed bias c f(j - i) on every score, f(o) = -|o|"),
        integer("learn_slopes", 0, between(0, 1), "1: a learned per-head slope on f (from 0)"),
        integer("eval_every", 100, between(1, limits::kSteps), "steps between metrics rows"),
        integer("checkpoint_every", 500, between(1, limits::kSteps), "steps between checkpoints"),
        integer("threads", 0, between(0, 1024), "OpenMP threads (0: OpenMP's default)"),
    };
    p.insert(p.end(), rest.begin(), rest.end());
    return p;
  }();
  return parameters;
}

// Runs of the self-pretraining study name task "listops" and run as `emergent spt`.
inline bool is_self_pretraining(const nlohmann::json& settings) {
  return settings.contains("task") && settings["task"] == "listops";
}

// A config from a flat object of declared names, checked (names the field at fault).
inline ParameterValues resolve_self_pretraining(const nlohmann::json& given,
                                                const std::string& where) {
  const ParameterValues v =
      ParameterValues::whole(self_pretraining_parameters(), given, where, "self-pretraining");
  ListOps(int(v.integer("min_length")), int(v.integer("max_length")), int(v.integer("max_depth")),
          int(v.integer("max_args")));  // checks the bounds
  require(v.integer("max_len") >= v.integer("max_length") - 1, where,
          "field 'max_len' = " + std::to_string(v.integer("max_len")) +
              " is not allowed: sequences up to max_length - 1 = " +
              std::to_string(v.integer("max_length") - 1) + " tokens need max_len >= that");
  require(v.integer("pretrain_steps") <= v.integer("steps"), where,
          "field 'pretrain_steps' = " + std::to_string(v.integer("pretrain_steps")) +
              " is not allowed: at most steps = " + std::to_string(v.integer("steps")));
  require(v.real("mask_rate") > 0 || v.integer("pretrain_steps") == 0, where,
          "field 'mask_rate' = 0 is not allowed with pretrain_steps = " +
              std::to_string(v.integer("pretrain_steps")) +
              ": the reconstruction stage would mask no token, so learn nothing and report a "
              "loss over none; give mask_rate in (0, 1] or pretrain_steps = 0");
  require(v.integer("d_model") % v.integer("heads") == 0, where,
          "field 'heads' = " + std::to_string(v.integer("heads")) +
              " is not allowed: it must divide d_model = " + std::to_string(v.integer("d_model")));
  require(v.text("take") == "all" || !v.text("warm_start").empty(), where,
          "field 'take' = \"" + v.text("take") + "\" needs a warm_start checkpoint");
  return v;
}

}  // namespace emergent
