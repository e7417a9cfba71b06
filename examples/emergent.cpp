// The `emergent` command line:
//   emergent train --task linear-map --S 16 --s 3 --steps 10000 --batch-tokens 4096 --lr 1e-3
//                  --seed 0 --bias 0 --out runs/NAME
//   emergent eval --checkpoint runs/NAME/step_010000.safetensors [--batch 256] [--write-batch F]
//   emergent shapes
//   emergent pythia curve | emergence | patch ...   (examples/pythia_commands.hpp)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include <emergent/io/safetensors.hpp>

#include "pythia_commands.hpp"
#include "registry/registry.hpp"

namespace {

using emergent::TrainConfig;
using emergent::cli::find_shape;

std::string optional_step(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string("censored");
}

std::string attention_iou(const emergent::AttentionAnalysis& a) {
  return a.available ? std::to_string(a.iou).substr(0, 5) : std::string("n/a (no attention)");
}

void print_summary(const emergent::RunSummary& s) {
  std::printf("steps %lld  loss %.4f  emergence metric %.4f  emergence_step %s  midpoint_step %s  solved_step %s\n",
              (long long)s.steps_done, s.final_loss, s.final_metric, optional_step(s.emergence_step).c_str(),
              optional_step(s.midpoint_step).c_str(), optional_step(s.solved_step).c_str());
  std::printf("held-out batch: loss %.4f  learnable-part loss %.4f  accuracy %.4f  attention IoU %s\n",
              s.eval.loss, s.eval.predictable_loss, s.eval.predictable_accuracy, attention_iou(s.eval.attention).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"emergent: emergence of sparse attention patterns in tiny sequence models"};
  app.require_subcommand(1);

  TrainConfig c;
  std::string out;
  auto* train = app.add_subcommand("train", "train one run into a run folder (resumes if it has checkpoints)");
  train->add_option("--task", c.task, "task")
      ->check(CLI::IsMember({"linear-map", "cellular-automaton"}))->capture_default_str();
  train->add_option("--S", c.state_size, "state size S")->capture_default_str();
  train->add_option("--s", c.ones_per_row, "linear map: ones per row of A")->capture_default_str();
  train->add_option("--states", c.states, "automaton: recorded states T per sequence")->capture_default_str();
  train->add_option("--colours", c.colours, "automaton: colours C")->capture_default_str();
  train->add_option("--window", c.window, "automaton: window W (odd)")->capture_default_str();
  train->add_option("--depth", c.depth, "automaton: rule applications k between recorded states")->capture_default_str();
  train->add_option("--rules", c.rules, "automaton: pool of N lookup tables, one per sequence")->capture_default_str();
  train->add_option("--task-seed", c.task_seed, "seed of the task (draws A)")->capture_default_str();
  train->add_option("--seed", c.seed, "seed of init and data")->capture_default_str();
  train->add_option("--steps", c.steps, "training steps")->capture_default_str();
  train->add_option("--batch-tokens", c.batch_tokens, "tokens per step (batch = tokens / 2S)")->capture_default_str();
  train->add_option("--lr", c.lr, "peak learning rate")->capture_default_str();
  train->add_option("--warmup", c.warmup_steps, "linear warmup steps")->capture_default_str();
  train->add_option("--schedule", c.schedule, "after warmup: constant or cosine")
      ->check(CLI::IsMember({"constant", "cosine"}))->capture_default_str();
  train->add_option("--min-lr-ratio", c.min_lr_ratio, "cosine floor as a share of lr")->capture_default_str();
  train->add_option("--weight-decay", c.weight_decay, "AdamW decoupled weight decay (matrices only)")->capture_default_str();
  train->add_option("--beta1", c.beta1)->capture_default_str();
  train->add_option("--beta2", c.beta2)->capture_default_str();
  train->add_option("--grad-clip", c.max_grad_norm, "global gradient-norm clip (0: off)")->capture_default_str();
  train->add_option("--bias", c.bias, "attention-bias strength c (0: off)")->capture_default_str();
  train->add_option("--mixer", c.mixer, "token mixer (`emergent shapes` lists the compiled ones)")->capture_default_str();
  train->add_option("--d-model", c.shape.d_model)->capture_default_str();
  train->add_option("--heads", c.shape.heads)->capture_default_str();
  train->add_option("--layers", c.shape.layers)->capture_default_str();
  train->add_option("--d-ff", c.shape.d_ff)->capture_default_str();
  train->add_option("--log-every", c.log_every)->capture_default_str();
  train->add_option("--analysis-every", c.analysis_every, "steps between attention entropy/IoU rows")->capture_default_str();
  train->add_option("--checkpoint-every", c.checkpoint_every)->capture_default_str();
  train->add_option("--stop-below", c.stop_below,
                    "stop when the smoothed emergence metric (x1 loss; automaton: loss) is below this (0: never)")
      ->capture_default_str();
  train->add_option("--threads", c.threads, "OpenMP threads (0: default)")->capture_default_str();
  train->add_option("--out", out, "run folder")->required();
  bool quiet = false;
  train->add_flag("--quiet", quiet, "no progress line");

  std::string checkpoint, write_batch;
  int eval_batch = 256;
  auto* eval = app.add_subcommand("eval", "losses of a checkpoint on a deterministic held-out batch");
  eval->add_option("--checkpoint", checkpoint, "step_NNNNNN.safetensors of a run")->required();
  eval->add_option("--batch", eval_batch, "sequences")->capture_default_str();
  eval->add_option("--write-batch", write_batch, "write the batch (inputs, targets) as JSON to this file");

  app.add_subcommand("shapes", "list the compiled shapes");
  const emergent::cli::PythiaCommands pythia(app);

  CLI11_PARSE(app, argc, argv);
  try {
    if (*train) {
      if (c.is_cellular_automaton() && c.shape == TrainConfig{}.shape)  // no shape flag given: the paper's
        c.shape = {.vocab = c.colours, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 0};
      const auto& entry = find_shape(c.mixer, c.shape, c.sequence_tokens() - 1);
      c.shape = entry.shape;
      print_summary(entry.train(c, out, !quiet));
    } else if (*eval) {
      const emergent::SafetensorsFile file(checkpoint);
      const auto it = file.metadata().find("config");
      emergent::require(it != file.metadata().end(), checkpoint, "metadata field 'config' is missing");
      emergent::cli::EvalRequest request;
      request.checkpoint = checkpoint;
      try {
        request.config = emergent::train_config_from_json(nlohmann::json::parse(it->second), checkpoint + ": config");
      } catch (const nlohmann::json::exception& e) {
        throw emergent::Error(checkpoint + ": metadata field 'config' is not valid JSON");
      }
      request.batch = eval_batch;
      request.write_batch = write_batch;
      const auto& entry = find_shape(request.config.mixer, request.config.shape, request.config.sequence_tokens() - 1);
      const emergent::EvalResult r = entry.eval(request);
      std::printf("loss %.6f  learnable-part loss %.6f  accuracy %.4f  attention IoU %s\n", r.loss,
                  r.predictable_loss, r.predictable_accuracy, attention_iou(r.attention).c_str());
      for (std::size_t l = 0; l < r.attention.entropy.size(); ++l) {
        std::printf("layer %zu head entropy:", l);
        for (double e : r.attention.entropy[l]) std::printf(" %.3f", e);
        std::printf("\n");
      }
    } else if (pythia.selected()) {
      pythia.run();
    } else {
      for (const auto& e : emergent::cli::shape_registry())
        std::printf("%s  (%zu parameters)\n", emergent::cli::describe(e.mixer, e.shape).c_str(), e.parameters);
    }
  } catch (const emergent::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
