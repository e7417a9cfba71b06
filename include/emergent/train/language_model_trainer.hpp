// One language-model run: a GPT-NeoX (neox/training_network.hpp) trained on a token corpus
// (io/token_corpus.hpp) with AdamW and a warmup-cosine schedule, saved as a Pythia-style
// checkpoint suite that `emergent pythia` and transformers read unchanged:
//
//   run/config.json                  the run's settings (train/language_model_config.hpp)
//   run/tokenizer.json               the corpus's tokenizer, copied
//   run/step0/ step1/ step2/ step4/ ... step512/, then every checkpoint_every steps, and the last
//                                    step: Hugging Face folders (config.json, model.safetensors)
//   run/step_NNNNNN.safetensors      the latest training checkpoint (parameters and moments):
//                                    what a killed run resumes from, bit for bit
//   run/metrics.jsonl, run/summary.json
//
// Data: each sequence is context + 1 consecutive tokens of the corpus's first 99% (inputs and
// their next tokens), starting at a position drawn by Philox from data_seed and the sequence's
// index (step * batch + b): the same order for every seed unless data_seed differs, and the
// same after a resume. The validation loss reads eval_sequences fixed windows of the last 1%.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/io/json.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/io/token_corpus.hpp>
#include <emergent/model/parameter_tensors.hpp>
#include <emergent/neox/save_checkpoint.hpp>
#include <emergent/neox/training_network.hpp>
#include <emergent/optim/adamw.hpp>
#include <emergent/optim/schedule.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/language_model_config.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/metrics_file.hpp>
#include <emergent/train/run_binding.hpp>
#include <emergent/train/run_lock.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

// Steps with a suite checkpoint: 0, the powers of two up to 512, every `every` steps, the last.
inline bool is_suite_step(std::int64_t step, std::int64_t every, std::int64_t last) {
  const bool power_of_two = step > 0 && (step & (step - 1)) == 0;
  return step == 0 || (power_of_two && step <= 512) || step % every == 0 || step == last;
}

// "step<N>", as Pythia's revisions are named.
inline std::string suite_folder_name(std::int64_t step) { return "step" + std::to_string(step); }

// The GPT-NeoX config of a run's settings and its corpus's vocabulary.
inline NeoxConfig language_model_config(const ParameterValues& v, int vocab_size) {
  NeoxConfig c;
  c.vocab_size = vocab_size;
  c.hidden_size = int(v.integer("d_model"));
  c.num_attention_heads = int(v.integer("heads"));
  c.num_hidden_layers = int(v.integer("layers"));
  c.intermediate_size = v.integer("d_ff") > 0 ? int(v.integer("d_ff")) : 4 * c.hidden_size;
  c.rotary_pct = v.real("rotary_pct");
  c.max_position_embeddings = std::max<int>(2048, int(v.integer("context")));
  return c;
}

class LanguageModelTrainer {
 public:
  LanguageModelTrainer(const ParameterValues& config, std::filesystem::path run_dir, bool progress)
      : config_(config),
        run_dir_(std::move(run_dir)),
        progress_(progress),
        corpus_(read_token_corpus(config.text("corpus"))),
        neox_(fitting_in_memory(language_model_config(config, corpus_.vocab_size), config)),
        net_(neox_, "run settings"),
        optimizer_({0.9, config.real("beta2"), 1e-8, config.real("weight_decay"),
                    config.real("max_grad_norm")},
                   net_.decay_ranges(), net_.parameters().size()) {
    const std::int64_t T = config.integer("context");
    train_end_ = corpus_.tokens.size() - corpus_.tokens.size() / 100;
    require(
        train_end_ > std::size_t(T) + 1 && corpus_.tokens.size() - train_end_ > std::size_t(T) + 1,
        corpus_.folder.string(),
        "holds " + std::to_string(corpus_.tokens.size()) +
            " tokens: too few for training and validation sequences of context " +
            std::to_string(T) + " + 1");
    for (const neox::TrainingTensor& t : net_.tensors()) {
      ParameterTensor p;
      p.name = t.name;
      p.offset = t.offset;
      p.shape = t.shape;
      p.size = t.size;
      p.weight_decay = t.weight_decay;
      tensors_.push_back(p);
    }
  }

  nlohmann::json run() {
    if (config_.integer("threads") > 0) set_thread_count(int(config_.integer("threads")));
    const RunLock lock = open_run_folder(run_dir_);
    const RunBinding binding =
        bind_run_folder(run_dir_, config_.json(), {"threads", "log_every", "eval_sequences"},
                        [](const nlohmann::json& j, const std::string& where) {
                          return resolve_language_model(j, where).json();
                        });
    std::int64_t step = prepare_run_folder();
    const std::int64_t steps = config_.integer("steps");
    // A finished run is left as it is: its summary.json stays what the training wrote.
    if (step >= steps && std::filesystem::exists(run_dir_ / "summary.json")) {
      nlohmann::json summary = read_json_file(run_dir_ / "summary.json");
      if (summary.value("steps_done", std::int64_t(-1)) == step) return summary;
    }
    const std::int64_t every = config_.integer("checkpoint_every"),
                       log_every = config_.integer("log_every");
    const int B = int(config_.integer("batch")), T = int(config_.integer("context"));
    const LrSchedule schedule{config_.real("lr"), config_.integer("warmup_steps"),
                              LrSchedule::Kind::cosine, steps, config_.real("min_lr_ratio")};
    const PhiloxStream order(config_.integer("data_seed"), stream_id_from_name("corpus.batch"));
    std::vector<std::int32_t> inputs(std::size_t(B) * T), targets(inputs.size());
    std::ofstream metrics(run_dir_ / "metrics.jsonl", std::ios::app);
    require(metrics.good(), (run_dir_ / "metrics.jsonl").string(), "cannot open for appending");
    nlohmann::json changed_on_resume = binding.changed_on_resume;
    const auto started = std::chrono::steady_clock::now();
    auto last_progress = started;
    const std::int64_t first = step;
    // Without a step to run (a finish killed before its summary.json), the last row's losses.
    double loss = last_row_.value("loss", 0.0), val_loss = last_row_.value("val_loss", 0.0);
    const std::uint32_t starts = std::uint32_t(train_end_ - std::size_t(T) - 1);
    for (; step < steps; ++step) {
      for (int b = 0; b < B; ++b) {
        const std::size_t at = order.below(std::uint64_t(step) * B + b, starts);
        std::copy_n(corpus_.tokens.begin() + at, T, inputs.begin() + std::size_t(b) * T);
        std::copy_n(corpus_.tokens.begin() + at + 1, T, targets.begin() + std::size_t(b) * T);
      }
      const double lr = schedule.at(step);
      loss = net_.forward_backward(inputs, targets, B, T);
      require(std::isfinite(loss), run_dir_.string(),
              "training stopped at step " + std::to_string(step) + ": the loss is not finite");
      const double grad_norm = optimizer_.step(net_.parameters(), net_.gradients(), lr);
      require(
          std::isfinite(grad_norm), run_dir_.string(),
          "training stopped at step " + std::to_string(step) + ": the gradient norm is not finite");
      const std::int64_t done = step + 1;
      if (done % log_every == 0 || done == steps) {
        val_loss = validation_loss();
        nlohmann::json row = {{"step", done}, {"loss", loss},           {"val_loss", val_loss},
                              {"lr", lr},     {"grad_norm", grad_norm}, {"tokens", done * B * T}};
        if (!changed_on_resume.empty())
          row["changed_on_resume"] = std::exchange(changed_on_resume, nlohmann::json::object());
        metrics << row.dump() << '\n' << std::flush;
        require(metrics.good(), (run_dir_ / "metrics.jsonl").string(),
                "cannot append a metrics row (is the disk full?)");
      }
      if (is_suite_step(done, every, steps)) save(done, binding.config_text);
      if (progress_ && (seconds_since(last_progress) > 1.0 || done == steps)) {
        last_progress = std::chrono::steady_clock::now();
        const double rate = double(done - first) / std::max(seconds_since(started), 1e-9);
        std::fprintf(stderr, "\r%s  step %lld/%lld  loss %.4f  %.2f steps/s  ETA %.0fs   ",
                     run_dir_.filename().string().c_str(), (long long)done, (long long)steps, loss,
                     rate, double(steps - done) / std::max(rate, 1e-9));
      }
    }
    if (progress_) std::fprintf(stderr, "\n");
    std::size_t non_embedding = net_.parameters().size();
    for (const neox::TrainingTensor& t : net_.tensors())
      if (t.name == "gpt_neox.embed_in.weight" || t.name == "embed_out.weight")
        non_embedding -= t.size;
    nlohmann::json summary = {{"steps_done", step},
                              {"final_loss", loss},
                              {"val_loss", val_loss},
                              {"tokens_seen", step * B * T},
                              {"non_embedding_parameters", non_embedding},
                              {"corpus_sha256", corpus_.sha256},
                              {"wall_s", seconds_since(started)}};
    write_text_atomically(run_dir_ / "summary.json", summary.dump(2) + "\n");
    return summary;
  }

 private:
  // `c`, after the check that its training fits this machine's memory (before anything large is
  // allocated or the run folder is made).
  static NeoxConfig fitting_in_memory(NeoxConfig c, const ParameterValues& v) {
    require_memory_fits(estimated_language_model_bytes(c, v.integer("batch"), v.integer("context")),
                        machine_memory_bytes(), "this machine's memory", "config",
                        "batch = " + std::to_string(v.integer("batch")) +
                            ", context = " + std::to_string(v.integer("context")) +
                            ", the shape and the corpus's vocabulary of " +
                            std::to_string(c.vocab_size));
    return c;
  }

  static double seconds_since(std::chrono::steady_clock::time_point a) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  }

  // The mean next-token loss over eval_sequences windows spread over the held-out tail.
  double validation_loss() {
    const int T = int(config_.integer("context")), n = int(config_.integer("eval_sequences"));
    const std::size_t span = corpus_.tokens.size() - train_end_ - std::size_t(T) - 1;
    std::vector<std::int32_t> inputs(static_cast<std::size_t>(T)), targets(inputs.size());
    double total = 0;
    for (int i = 0; i < n; ++i) {
      const std::size_t at = train_end_ + span * std::size_t(i) / std::size_t(n);
      std::copy_n(corpus_.tokens.begin() + at, T, inputs.begin());
      std::copy_n(corpus_.tokens.begin() + at + 1, T, targets.begin());
      total += net_.forward(inputs, targets, 1, T);
    }
    return total / n;
  }

  // Fresh: initialise, write step0 and the tokenizer. Resumed: the latest training checkpoint.
  std::int64_t prepare_run_folder() {
    const auto checkpoint = latest_checkpoint(run_dir_);
    if (!checkpoint) {
      net_.initialize(std::uint64_t(config_.integer("seed")));
      std::filesystem::remove(run_dir_ / "metrics.jsonl");
      std::filesystem::copy_file(corpus_.folder / "tokenizer.json", run_dir_ / "tokenizer.json",
                                 std::filesystem::copy_options::overwrite_existing);
      write_suite_folder(0);
      return 0;
    }
    const SafetensorsFile file(*checkpoint);
    const auto recorded = file.metadata().find("corpus_sha256");
    require(recorded != file.metadata().end() && recorded->second == corpus_.sha256,
            checkpoint->string(),
            "was trained on another corpus (metadata corpus_sha256 differs from " + corpus_.sha256 +
                ", the corpus in " + corpus_.folder.string() +
                "); rebuild that corpus or train into a new folder");
    const CheckpointState state =
        load_checkpoint(*checkpoint, tensors_, net_.parameters(), optimizer_.first_moment(),
                        optimizer_.second_moment());
    optimizer_.set_steps(state.optimizer_steps);
    for (nlohmann::json& row : keep_metrics_before(run_dir_ / "metrics.jsonl", state.step + 1))
      last_row_ = std::move(row);
    if (progress_)
      std::fprintf(stderr, "resuming %s from step %lld\n", run_dir_.string().c_str(),
                   (long long)state.step);
    return state.step;
  }

  void write_suite_folder(std::int64_t step) {
    neox::save_checkpoint(
        run_dir_ / suite_folder_name(step), neox_,
        [&](std::string_view name) { return std::span<const float>(net_.parameter(name)); },
        {{"step", std::to_string(step)}, {"corpus_sha256", corpus_.sha256}});
  }

  // The suite folder of `step`, then the training checkpoint; older training checkpoints are
  // removed after it (all of them, also one that a kill left between the write and a removal).
  void save(std::int64_t step, const std::string& config_text) {
    write_suite_folder(step);
    const std::filesystem::path path = checkpoint_path(run_dir_, step);
    save_checkpoint(path, tensors_, net_.parameters(), optimizer_.first_moment(),
                    optimizer_.second_moment(), {step, optimizer_.steps(), config_text},
                    {{"corpus_sha256", corpus_.sha256}});
    for (const auto& entry : std::filesystem::directory_iterator(run_dir_)) {
      const auto older = checkpoint_step(entry.path().filename().string());
      if (older && *older != step) std::filesystem::remove(entry.path());
    }
  }

  ParameterValues config_;
  std::filesystem::path run_dir_;
  bool progress_;
  TokenCorpus corpus_;
  NeoxConfig neox_;
  neox::NeoxTrainingNetwork<float> net_;
  AdamW<float> optimizer_;
  std::vector<ParameterTensor> tensors_;
  std::size_t train_end_ = 0;
  nlohmann::json last_row_ = nlohmann::json::object();  // the last metrics row kept on resume
};

}  // namespace emergent
