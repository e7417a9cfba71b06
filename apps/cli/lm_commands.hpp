// `emergent lm`: one language-model run (train/language_model_trainer.hpp), a GPT-NeoX trained
// on a token corpus into a Pythia-style checkpoint suite, from flags or a config.json, one flag
// per declared setting:
//   emergent lm --corpus runs/corpus --d-model 64 --layers 2 --steps 2000 --seed 3 --out runs/lm-3
//   emergent lm --config runs/lm-3/config.json --seed 4 --out runs/lm-4
// The folder is then what `emergent pythia curve | emergence | patch --suite` reads.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/io/json.hpp>
#include <emergent/train/language_model_trainer.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace emergent::cli {

class LanguageModelCommands {
 public:
  explicit LanguageModelCommands(CLI::App& app) {
    lm_ = app.add_subcommand(
        "lm",
        "train a GPT-NeoX language model on a token corpus into a checkpoint suite "
        "(resumes if it has checkpoints)");
    lm_->add_option("--config", config_file_,
                    "start from this config.json (flags override its fields)");
    for (const Parameter& p : language_model_parameters())
      lm_->add_option(p.flag(), written_[p.name], p.help + " (" + allowed_values(p) + ")");
    lm_->add_option("--out", out_, "run folder (the checkpoint suite)")->required();
    lm_->add_flag("--quiet", quiet_, "no progress line");
  }

  bool selected() const { return lm_->parsed(); }

  void run() const {
    nlohmann::json given =
        config_file_.empty() ? nlohmann::json::object() : read_json_file(config_file_);
    require(given.is_object(), config_file_, "expected a JSON object of settings");
    for (const Parameter& p : language_model_parameters())
      if (lm_->get_option(p.flag())->count() > 0)
        given[p.name] = parse_value(p, written_.at(p.name), p.flag());
    const ParameterValues config = resolve_language_model(
        given, config_file_.empty() ? std::string("command line") : config_file_);
    LanguageModelTrainer trainer(config, out_, !quiet_);
    std::printf("%s\n", trainer.run().dump().c_str());
  }

 private:
  CLI::App* lm_ = nullptr;
  std::map<std::string, std::string> written_;
  std::string config_file_, out_;
  bool quiet_ = false;
};

}  // namespace emergent::cli
