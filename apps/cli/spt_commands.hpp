// `emergent spt`: one run of the self-pretraining study (train/self_pretraining.hpp) from flags
// or a config.json, one flag per declared setting:
//   emergent spt --pretrain-steps 2000 --steps 4000 --seed 1 --out runs/spt-1
//   emergent spt --config runs/spt-1/config.json --take qk --out runs/qk-1
//                --warm-start runs/spt-1/step_002000.safetensors
// `emergent listops`: examples of a ListOps split as LRA's TSV (Source, Target).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/tasks/listops.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/self_pretraining_config.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../registry/encoder.hpp"

namespace emergent::cli {

class SelfPretrainingCommands {
 public:
  explicit SelfPretrainingCommands(CLI::App& app) {
    spt_ = app.add_subcommand(
        "spt", "a self-pretraining run: an encoder on ListOps (resumes if it has checkpoints)");
    spt_->add_option("--config", config_file_,
                     "start from this config.json (flags override its fields)");
    for (const Parameter& p : self_pretraining_parameters())
      spt_->add_option(p.flag(), written_[p.name], p.help + " (" + allowed_values(p) + ")");
    spt_->add_option("--out", out_, "run folder")->required();
    spt_->add_flag("--quiet", quiet_, "no progress line");

    listops_ = app.add_subcommand("listops", "write ListOps examples as LRA's TSV to stdout");
    for (const Parameter& p : ListOps::parameters())
      listops_->add_option(p.flag(), written_[p.name], p.help + " (" + allowed_values(p) + ")");
    listops_->add_option("--data-seed", data_seed_, "seed of the examples")
        ->check(CLI::Range(std::int64_t(0), std::int64_t(limits::kSeed)))
        ->capture_default_str();
    listops_->add_option("--split", split_, "train or test")
        ->check(CLI::IsMember({"train", "test"}))
        ->capture_default_str();
    listops_->add_option("--count", count_, "examples")
        ->check(CLI::Range(std::int64_t(1), std::int64_t(limits::kExamples)))
        ->capture_default_str();
  }

  bool selected() const { return spt_->parsed() || listops_->parsed(); }

  void run() const {
    if (spt_->parsed()) {
      const ParameterValues config = resolve_self_pretraining(given(), "command line");
      const nlohmann::json summary = run_self_pretraining(config, out_, !quiet_);
      std::printf("%s\n", summary.dump().c_str());
      return;
    }
    nlohmann::json bounds = nlohmann::json::object();
    for (const Parameter& p : ListOps::parameters())
      if (listops_->get_option(p.flag())->count() > 0)
        bounds[p.name] = parse_value(p, written_.at(p.name), p.flag());
    const ParameterValues v(ListOps::parameters(), bounds, "command line");
    const ListOps task(int(v.integer("min_length")), int(v.integer("max_length")),
                       int(v.integer("max_depth")), int(v.integer("max_args")));
    std::printf("Source\tTarget\n");
    for (std::int64_t i = 0; i < count_; ++i) {
      const listops::Example e =
          task.example(static_cast<std::uint64_t>(data_seed_),
                       split_ == "train" ? ListOps::Split::train : ListOps::Split::test,
                       static_cast<std::uint64_t>(i));
      std::printf("%s\t%d\n", listops::to_lra_source(e.tokens).c_str(), e.label);
    }
  }

 private:
  nlohmann::json given() const {
    nlohmann::json j =
        config_file_.empty() ? nlohmann::json::object() : read_json_file(config_file_);
    require(j.is_object(), config_file_, "expected a JSON object of settings");
    for (const Parameter& p : self_pretraining_parameters())
      if (spt_->get_option(p.flag())->count() > 0)
        j[p.name] = parse_value(p, written_.at(p.name), p.flag());
    return j;
  }

  CLI::App* spt_ = nullptr;
  CLI::App* listops_ = nullptr;
  std::map<std::string, std::string> written_;
  std::string config_file_, out_, split_ = "train";
  bool quiet_ = false;
  std::int64_t data_seed_ = 0;
  std::int64_t count_ = 10;
};

}  // namespace emergent::cli
