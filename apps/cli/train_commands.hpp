// `emergent train` and `emergent eval`: one run from flags (or a config.json), one checkpoint's
// held-out losses. The flags are the declared parameters (train/config.hpp), one per name:
//   emergent train --task linear-map --S 16 --s 3 --steps 10000 --lr 1e-3 --out runs/NAME
//   emergent train --config runs/OTHER/config.json --seed 4 --out runs/NAME
//   emergent train ... --seeds 0-15 --out runs/NAME          runs/NAME/seed_<n>, one at a time
//   emergent train ... --seeds 0-15 --backend cuda --out runs/NAME   the same, as one ensemble on
//       the GPU (--backend thrust-omp: the same device code on the CPU's cores), run by the
//       build's emergent_ensemble_<backend> (apps/device/ensemble.cpp)
//   emergent eval --checkpoint runs/NAME/step_010000.safetensors [--batch 256] [--write-batch F]
// A (mixer, shape) that is not in the prebuilt registry is compiled on demand into a cached
// program (cli/shape_compiler.hpp), which then runs the same command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <emergent/io/safetensors.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/ensemble_members.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../registry/registry.hpp"
#include "../registry/run_entry.hpp"
#include "../registry/seed_list.hpp"
#include "device_backend.hpp"
#include "shape_compiler.hpp"

namespace emergent::cli {

// Every declared name, once: the parameters of every task (a name two tasks share must mean the
// same type), the model's and the training settings.
inline std::vector<Parameter> all_declared_parameters() {
  std::vector<Parameter> all = {text("task", "linear-map", {}, "task: " + task_names())};
  for (const TaskDeclaration& t : task_registry())
    for (const Parameter& p : t.parameters)
      if (!find_parameter(all, p.name)) {
        Parameter shown = p;
        shown.help = t.name + ": " + p.help;
        all.push_back(shown);
      }
  for (const Parameter& p : model_parameters()) all.push_back(p);
  for (const Parameter& p : training_parameters()) all.push_back(p);
  return all;
}

// The max_len of a config with max_len 0, as the registry resolves it.
inline void resolve_max_len(TrainConfig& c) {
  if (c.shape.max_len == 0)
    c.shape.max_len = automatic_max_len(c.mixer, c.shape, sequence_tokens(c) - 1);
}

inline std::string optional_step(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("censored");
}

inline std::string attention_iou_text(const AttentionAnalysis& a) {
  if (!a.available) return "n/a (no attention)";
  char text[96];
  std::snprintf(text, sizeof text, "%.3f above chance (best head per row %.3f, chance %.3f)",
                a.iou_above_chance, a.iou, a.iou_chance);
  return text;
}

class TrainCommands {
 public:
  // `compiler_info`: the build's shape_compiler.json (empty: this program cannot compile shapes,
  // as in a program that was itself compiled on demand).
  TrainCommands(CLI::App& app, std::string compiler_info)
      : compiler_info_(std::move(compiler_info)) {
    train_ = app.add_subcommand("train",
                                "train one run into a run folder (resumes if it has checkpoints)");
    train_->add_option("--config", config_file_,
                       "start from this config.json (flags override its fields)");
    for (const Parameter& p : all_declared_parameters()) {
      std::string help = p.help + " (" + allowed_values(p) + ")";
      train_->add_option(p.flag(), written_[p.name], help);
      parameters_.push_back(p);
    }
    train_->add_option("--out", out_, "run folder (with --seeds: the folder of seed_<n> folders)")
        ->required();
    train_->add_flag("--quiet", quiet_, "no progress line");
    train_->add_option("--seeds", seeds_,
                       "train these seeds, each into --out/seed_<n>: 0-15, 1,4,9");
    train_
        ->add_option("--backend", backend_,
                     "cpu (one run at a time), cuda or thrust-omp (the seeds as one ensemble on "
                     "the device code; dot_attention, mlp_mixer, mamba, gated_deltanet and rwkv)")
        ->check(CLI::IsMember(kBackends))
        ->capture_default_str();

    eval_ = app.add_subcommand("eval", "losses of a checkpoint on a deterministic held-out batch");
    eval_->add_option("--checkpoint", checkpoint_, "step_NNNNNN.safetensors of a run")->required();
    eval_->add_option("--batch", eval_batch_, "sequences")
        ->check(CLI::Range(1, 1 << 20))
        ->capture_default_str();
    eval_->add_option("--write-batch", write_batch_,
                      "write the batch (inputs, targets) as JSON to this file");
  }

  bool selected() const { return train_->parsed() || eval_->parsed(); }

  // argv is what the program was started with: a shape compiled on demand reruns it.
  void run(int argc, char** argv) const {
    if (train_->parsed()) {
      require(seeds_.empty() || train_->get_option("--seed")->count() == 0, "--seed",
              "and --seeds are both given: --seeds trains each seed it lists; give one of them");
      TrainConfig c = resolve_config(given(), "command line");
      resolve_max_len(c);
      require(c.precision == "fp32" || backend_ == "cuda", "--precision " + c.precision,
              "is the CUDA device backend's (--backend cuda); --backend " + backend_ +
                  " trains in fp32");
      if (backend_ != "cpu") run_on_device(c);
      // Before a shape is compiled for it: a run larger than this machine is refused here.
      require_memory_fits(estimated_training_bytes(c), machine_memory_bytes(),
                          "this machine's memory", "command line", "--batch-tokens and the shape");
      const ShapeEntry* entry = find_compiled(c.mixer, c.shape);
      if (!entry) run_compiled_shape(c.mixer, c.shape, argc, argv);
      if (seeds_.empty()) return print_summary(train_entry(*entry, c, out_, !quiet_));
      for (std::uint64_t seed : parse_seed_list(seeds_, "--seeds")) {
        c.seed = seed;
        std::printf("seed %llu: ", (unsigned long long)seed);
        print_summary(train_entry(*entry, c, seed_run_folder(out_, seed), !quiet_));
      }
    } else {
      const SafetensorsFile file(checkpoint_);
      const auto it = file.metadata().find("config");
      require(it != file.metadata().end(), checkpoint_, "metadata field 'config' is missing");
      EvalRequest request;
      request.checkpoint = checkpoint_;
      try {
        request.config =
            train_config_from_json(nlohmann::json::parse(it->second), checkpoint_ + ": config");
      } catch (const nlohmann::json::exception& e) {
        throw Error(checkpoint_ + ": metadata field 'config' is not valid JSON");
      }
      request.batch = eval_batch_;
      request.write_batch = write_batch_;
      const ShapeEntry* entry = find_compiled(request.config.mixer, request.config.shape);
      if (!entry) run_compiled_shape(request.config.mixer, request.config.shape, argc, argv);
      const EvalResult r = eval_entry(*entry, request);
      std::printf("loss %.6f  learnable-part loss %.6f  accuracy %.4f  attention IoU %s\n", r.loss,
                  r.predictable_loss, r.predictable_accuracy,
                  attention_iou_text(r.attention).c_str());
      for (std::size_t l = 0; l < r.attention.entropy.size(); ++l) {
        std::printf("layer %zu head entropy:", l);
        for (double e : r.attention.entropy[l]) std::printf(" %.3f", e);
        std::printf("\n");
      }
    }
  }

 private:
  // The flat settings given: --config's fields, then each flag given.
  nlohmann::json given() const {
    nlohmann::json j =
        config_file_.empty() ? nlohmann::json::object() : read_json_file(config_file_);
    require(j.is_object(), config_file_, "expected a JSON object of settings");
    for (const Parameter& p : parameters_) {
      const std::string& value = written_.at(p.name);
      if (train_->get_option(p.flag())->count() > 0) j[p.name] = parse_value(p, value, p.flag());
    }
    return j;
  }

  // Not in this program's registry: compile it (or take it from the cache) and run the same
  // command there. Does not return.
  [[noreturn]] void run_compiled_shape(const std::string& mixer, const Shape& shape, int argc,
                                       char** argv) const {
    require(!compiler_info_.empty(), describe(mixer, shape),
            "is not compiled into this program, which cannot compile shapes itself");
    const std::filesystem::path program = compiled_shape_program(compiler_info_, mixer, shape);
    exec_program(program, argc, argv);
  }

  // The seeds as one ensemble on the device backend: the build's emergent_ensemble_<backend>,
  // beside this program, with the resolved config in --out. Does not return.
  [[noreturn]] void run_on_device(const TrainConfig& c) const {
    require(!seeds_.empty(), "--backend " + backend_,
            "trains the seeds of a config as one ensemble: give --seeds (e.g. 0-15)");
    const std::size_t members = parse_seed_list(seeds_, "--seeds").size();  // checked first
    if (backend_ == "thrust-omp")  // the ensemble in this machine's memory (cuda: the GPU checks)
      require_memory_fits(estimated_training_bytes(c, members), machine_memory_bytes(),
                          "this machine's memory", "--seeds " + seeds_,
                          std::to_string(members) + " seeds, batch_tokens and the shape");
    const std::filesystem::path program =
        device_program(backend_, c.mixer, c.shape, compiler_info_);
    std::filesystem::create_directories(out_);
    const std::filesystem::path config = std::filesystem::path(out_) / "ensemble-config.json";
    write_text_atomically(config, to_json(c).dump(2) + "\n");
    std::vector<std::string> args = {
        program.string(), "--config", config.string(), "--seeds", seeds_, "--out", out_};
    if (quiet_) args.push_back("--quiet");
    std::vector<char*> raw;
    for (std::string& a : args) raw.push_back(a.data());
    exec_program(program, int(raw.size()), raw.data());
  }

  static void print_summary(const RunSummary& s) {
    std::printf(
        "steps %lld  loss %.4f  emergence metric %.4f  emergence_step %s  midpoint_step %s  "
        "solved_step %s\n",
        (long long)s.steps_done, s.final_loss, s.final_metric,
        optional_step(s.emergence_step).c_str(), optional_step(s.midpoint_step).c_str(),
        optional_step(s.solved_step).c_str());
    std::printf(
        "held-out batch: loss %.4f  learnable-part loss %.4f  accuracy %.4f  attention IoU %s\n",
        s.eval.loss, s.eval.predictable_loss, s.eval.predictable_accuracy,
        attention_iou_text(s.eval.attention).c_str());
  }

  std::string compiler_info_;
  CLI::App* train_ = nullptr;
  CLI::App* eval_ = nullptr;
  std::vector<Parameter> parameters_;
  std::map<std::string, std::string> written_;
  std::string config_file_, out_, checkpoint_, write_batch_, seeds_, backend_ = "cpu";
  bool quiet_ = false;
  int eval_batch_ = 256;
};

}  // namespace emergent::cli
