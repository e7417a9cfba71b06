// The settings of a language-model run (train/language_model_trainer.hpp: a GPT-NeoX trained
// on a token corpus and saved as a Pythia-style checkpoint suite), declared once, and their
// checks: what the command line and the sweep runner need without the model behind them.
#pragma once

#include <emergent/core/error.hpp>
#include <emergent/settings/parameters.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

// Every setting of a language-model run: config.json keys, CLI flags, sweep axes. The defaults
// are the smallest model of docs/mini-suite.md's suite; AdamW's beta2 and the rotary share are
// Pythia's.
inline const std::vector<Parameter>& language_model_parameters() {
  static const std::vector<Parameter> parameters = {
      text("task", "corpus", {"corpus"}, "the task (language models learn a token corpus)"),
      text("corpus", "runs/corpus", {},
           "corpus folder: train.tokens, tokenizer.json, corpus.json (scripts/make_corpus.py)"),
      integer("d_model", 64, between(1, limits::kWidth), "hidden_size"),
      integer("heads", 4, between(1, limits::kHeads), "num_attention_heads"),
      integer("layers", 2, between(1, limits::kLayers), "num_hidden_layers"),
      integer("d_ff", 0, between(0, limits::kWidth), "intermediate_size (0: 4 d_model)"),
      real("rotary_pct", 0.25, between(0, 1), "share of each head's dimensions rotated"),
      integer("context", 128, between(2, limits::kPositions), "tokens per training sequence"),
      integer("seed", 0, between(0, limits::kSeed), "initialisation"),
      integer("data_seed", 0, between(0, limits::kSeed),
              "order of the training sequences (the same for every seed by default, as Pythia's)"),
      integer("steps", 2000, between(1, limits::kSteps), "updates"),
      integer("batch", 16, between(1, limits::kExamples), "sequences per update"),
      real("lr", 1e-3, Range{0, limits::kLearningRate, true, false}, "peak learning rate"),
      integer("warmup_steps", 100, between(0, limits::kSteps), "linear warmup"),
      real("min_lr_ratio", 0.1, between(0, 1), "cosine decay to min_lr_ratio * lr at the end"),
      real("weight_decay", 0.01, between(0, limits::kLearningRate),
           "AdamW decoupled weight decay (matrices and embeddings)"),
      real("beta2", 0.95, Range{0, 1, false, true}, "AdamW second-moment decay"),
      real("max_grad_norm", 1.0, between(0, limits::kMagnitude),
           "global gradient-norm clip (0: off)"),
      integer("log_every", 50, between(1, limits::kSteps), "steps between metrics rows"),
      integer("checkpoint_every", 250, between(1, limits::kSteps),
              "steps between suite checkpoints after the log-spaced ones (0, 1, 2, 4 ... 512)"),
      integer("eval_sequences", 16, between(1, limits::kExamples),
              "held-out sequences of the validation loss"),
      integer("threads", 0, between(0, 1024), "OpenMP threads (0: OpenMP's default)"),
  };
  return parameters;
}

// Language-model runs name task "corpus" and run as `emergent lm`.
inline bool is_language_model(const nlohmann::json& settings) {
  return settings.contains("task") && settings["task"] == "corpus";
}

// A config from a flat object of declared names, checked (names the field at fault).
inline ParameterValues resolve_language_model(const nlohmann::json& given,
                                              const std::string& where) {
  const ParameterValues v =
      ParameterValues::whole(language_model_parameters(), given, where, "a language-model run");
  require_warmup_within(v.integer("warmup_steps"), v.integer("steps"),
                        find_parameter(language_model_parameters(), "warmup_steps")
                            ->default_value.get<std::int64_t>(),
                        where);
  const std::int64_t d = v.integer("d_model"), h = v.integer("heads");
  require(d % h == 0, where,
          "field 'heads' = " + std::to_string(h) +
              " is not allowed: it must divide d_model = " + std::to_string(d));
  const int rotary = static_cast<int>(static_cast<double>(d / h) * v.real("rotary_pct"));
  require(rotary % 2 == 0, where,
          "field 'rotary_pct' = " + parameter_detail::number_text(v.real("rotary_pct")) +
              " is not allowed: int(d_model / heads * rotary_pct) = " + std::to_string(rotary) +
              " must be even");
  return v;
}

}  // namespace emergent
