// A run of the self-pretraining study (docs/paper-notes.md §7): an Encoder on ListOps, trained
// for `steps` updates in two stages,
//   steps [0, pretrain_steps)      masked reconstruction on the training set's own inputs
//                                  (i.i.d. mask_rate of the real tokens replaced by <mask>, the
//                                  loss on the masked positions only), lr pretrain_lr;
//   steps [pretrain_steps, steps)  label supervision (cross-entropy of the class), lr lr, with
//                                  fresh AdamW moments (Amos et al. fine-tune as a new run),
// so that supervised-only (pretrain_steps = 0) and SPT have the same total budget. Variations:
//   warm_start + take    start from another run's checkpoint: every tensor ("all"), only the
//                        query and key projections ("qk": rows 0..2D of each qkv weight and
//                        bias), or everything else ("all_but_qk"), the rest from `seed`;
//   proximity_bias c     a fixed bias c f(j - i) on every attention score, f(o) = -|o|;
//   learn_slopes         a learned per-head slope on the same profile (starting at 0).
//
// The data are fixed sets: train_examples and test_examples ListOps examples of data_seed (the
// same for every seed); a step's batch is `batch` examples of the training set drawn by
// (seed, step). Every eval_every steps a metrics.jsonl row holds train and test accuracy and
// losses on eval_examples of each set, the reconstruction loss of the test set under a fixed
// mask, the proximity report (analysis/proximity.hpp) of the first 32 test examples, and the
// blindness measurement on the same batch: the derivative of the label loss and of the
// reconstruction loss along adding a f(j - i) to each head's scores, at the current weights
// (d_label_d_proximity, d_reconstruction_d_proximity, [layer][head]).
//
// The run folder is the trainer's: config.json (every setting, flat), metrics.jsonl,
// step_N.safetensors checkpoints (parameters and AdamW moments) and summary.json. A killed run
// resumes from its latest checkpoint; a folder holding another configuration is refused.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <emergent/analysis/proximity.hpp>
#include <emergent/core/error.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/core/philox.hpp>
#include <emergent/io/safetensors.hpp>
#include <emergent/io/text_file.hpp>
#include <emergent/model/encoder.hpp>
#include <emergent/optim/adamw.hpp>
#include <emergent/optim/schedule.hpp>
#include <emergent/settings/parameters.hpp>
#include <emergent/tasks/listops.hpp>
#include <emergent/train/checkpoint.hpp>
#include <emergent/train/config.hpp>
#include <emergent/train/memory_estimate.hpp>
#include <emergent/train/metrics_file.hpp>
#include <emergent/train/run_binding.hpp>
#include <emergent/train/run_lock.hpp>
#include <emergent/train/self_pretraining_config.hpp>
#include <emergent/train/warm_start.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace emergent {

// The proximity profile f(j - i) = -|j - i| as a [T, T] bias pattern.
inline std::vector<float> proximity_pattern(int length) {
  std::vector<float> pattern(static_cast<std::size_t>(length) * length);
  for (int i = 0; i < length; ++i)
    for (int j = 0; j < length; ++j)
      pattern[static_cast<std::size_t>(i) * length + j] = -float(std::abs(i - j));
  return pattern;
}

// A batch of examples padded to its longest, with (optionally) masked tokens.
struct PaddedBatch {
  int batch = 0, length = 0;
  std::vector<std::int32_t> tokens, labels, originals;
  std::vector<int> lengths;
  std::int64_t masked = 0;
};

// `indices` of `examples`; with mask_rate > 0, each real token is replaced by <mask> with that
// probability, drawn from (seed, stream, example key, position): the originals are kept.
inline PaddedBatch pad_batch(const std::vector<listops::Example>& examples,
                             std::span<const std::size_t> indices, double mask_rate,
                             const PhiloxStream* mask_stream,
                             std::span<const std::uint64_t> mask_keys) {
  PaddedBatch out;
  out.batch = static_cast<int>(indices.size());
  for (std::size_t i : indices)
    out.length = std::max(out.length, static_cast<int>(examples[i].tokens.size()));
  const std::size_t N = static_cast<std::size_t>(out.batch) * out.length;
  out.tokens.assign(N, listops::pad);
  if (mask_stream) out.originals.assign(N, -1);
  for (int b = 0; b < out.batch; ++b) {
    const listops::Example& e = examples[indices[b]];
    const int n = static_cast<int>(e.tokens.size());
    out.lengths.push_back(n);
    out.labels.push_back(e.label);
    for (int t = 0; t < n; ++t) {
      const std::size_t at = static_cast<std::size_t>(b) * out.length + t;
      out.tokens[at] = e.tokens[t];
      if (mask_stream && mask_stream->uniform((mask_keys[b] << 16) + t) < mask_rate) {
        out.originals[at] = e.tokens[t];
        out.tokens[at] = listops::mask;
        ++out.masked;
      }
    }
  }
  return out;
}

// Positions into `indices` in groups, shortest example first, each group padded to at most
// `max_tokens` tokens (one example alone may exceed it), so that long and short examples do not
// share padding.
inline std::vector<std::vector<std::size_t>> micro_batches(
    const std::vector<listops::Example>& examples, std::span<const std::size_t> indices,
    std::size_t max_tokens) {
  std::vector<std::size_t> order(indices.size());
  std::iota(order.begin(), order.end(), 0);
  auto length = [&](std::size_t slot) { return examples[indices[slot]].tokens.size(); };
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return length(a) < length(b); });
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> current;
  for (std::size_t slot : order) {
    // sorted: the newest is the longest
    if (!current.empty() && (current.size() + 1) * length(slot) > max_tokens) {
      groups.push_back(std::move(current));
      current.clear();
    }
    current.push_back(slot);
  }
  if (!current.empty()) groups.push_back(std::move(current));
  return groups;
}

// The examples and mask keys of one group of positions.
struct BatchSlice {
  std::vector<std::size_t> examples;
  std::vector<std::uint64_t> keys;
};
inline BatchSlice slice(std::span<const std::size_t> indices, std::span<const std::uint64_t> keys,
                        const std::vector<std::size_t>& group) {
  BatchSlice s;
  for (std::size_t slot : group) s.examples.push_back(indices[slot]), s.keys.push_back(keys[slot]);
  return s;
}

template <class Net>
class SelfPretrainingRun {
 public:
  using Real = float;
  static constexpr int L = Net::L, H = Net::H, D = Net::D;
  static constexpr std::size_t kMicroTokens = 8192;
  static constexpr int kAnalysisExamples = 32, kProfileOffsets = 16;

  // Defined below the class, out of it (not inline): a program built with
  // EMERGENT_PREBUILT_MODELS links them from a unit that instantiates them
  // (train/compiled_model.hpp says why; the `emergent spt` encoders of apps/registry/encoder.cpp).
  SelfPretrainingRun(ParameterValues config, std::filesystem::path run_dir, bool progress);

  nlohmann::json run();

  std::span<const Real> parameters() const { return params_; }

 private:
  AdamWConfig adamw_config() const {
    return {0.9, 0.999, 1e-8, config_.real("weight_decay"), config_.real("max_grad_norm")};
  }
  static std::vector<DecayRange> decay_ranges() {
    std::vector<DecayRange> ranges;
    for (const auto& t : Net::tensors()) ranges.push_back({t.offset, t.size, t.weight_decay});
    return ranges;
  }
  static double seconds_since(std::chrono::steady_clock::time_point a) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count();
  }

  EncoderBatch view(const PaddedBatch& b, double label_weight, double reconstruction_weight,
                    std::span<const float> pattern, bool labels, bool reconstruction) const {
    return {b.batch,
            b.length,
            b.tokens,
            b.lengths,
            labels ? std::span<const std::int32_t>(b.labels) : std::span<const std::int32_t>(),
            reconstruction && !b.originals.empty() ? std::span<const std::int32_t>(b.originals)
                                                   : std::span<const std::int32_t>(),
            label_weight,
            reconstruction_weight,
            pattern,
            float(config_.real("proximity_bias"))};
  }

  void make_data() {
    const std::uint64_t data_seed = static_cast<std::uint64_t>(config_.integer("data_seed"));
    train_.resize(static_cast<std::size_t>(config_.integer("train_examples")));
    test_.resize(static_cast<std::size_t>(config_.integer("test_examples")));
    parallel_for(static_cast<std::int64_t>(train_.size()), [&](std::int64_t i) {
      train_[i] = task_.example(data_seed, ListOps::Split::train, static_cast<std::uint64_t>(i));
    });
    parallel_for(static_cast<std::int64_t>(test_.size()), [&](std::int64_t i) {
      test_[i] = task_.example(data_seed, ListOps::Split::test, static_cast<std::uint64_t>(i));
    });
  }

  // Accuracy and losses on the first eval_examples of a set; the reconstruction loss under a
  // mask fixed per example (the same every row).
  struct SetScores {
    double accuracy = 0, label_loss = 0, reconstruction_loss = 0, reconstruction_accuracy = 0;
    std::int64_t masked = 0;  // tokens the reconstruction scores are over
  };
  // A reconstruction score over no masked token is no score: null.
  static nlohmann::json reconstruction_score(const SetScores& s, double value) {
    return s.masked > 0 ? nlohmann::json(value) : nlohmann::json(nullptr);
  }
  SetScores score(const std::vector<listops::Example>& set, bool reconstruction) {
    const std::size_t n = std::min<std::size_t>(set.size(), config_.integer("eval_examples"));
    std::vector<std::size_t> indices(n);
    std::iota(indices.begin(), indices.end(), 0);
    const PhiloxStream eval_mask(seed_, stream_id_from_name("spt.eval_mask"));
    SetScores s;
    std::int64_t masked = 0;
    const std::vector<std::uint64_t> keys(indices.begin(), indices.end());
    for (const std::vector<std::size_t>& group : micro_batches(set, indices, kMicroTokens)) {
      const BatchSlice slot = slice(indices, keys, group);
      const PaddedBatch part = pad_batch(set, slot.examples, config_.real("mask_rate"),
                                         reconstruction ? &eval_mask : nullptr, slot.keys);
      const std::vector<float> pattern =
          slopes_or_bias() ? proximity_pattern(part.length) : std::vector<float>();
      const EncoderLosses l =
          Net::forward(params_, view(part, 1.0, 1.0, pattern, true, reconstruction), ws_);
      s.accuracy += l.label_accuracy * part.batch;
      s.label_loss += l.label_loss * part.batch;
      s.reconstruction_loss += l.reconstruction_loss * double(l.masked);
      s.reconstruction_accuracy += l.reconstruction_accuracy * double(l.masked);
      masked += l.masked;
    }
    s.accuracy /= double(n);
    s.label_loss /= double(n);
    if (masked > 0)
      s.reconstruction_loss /= double(masked), s.reconstruction_accuracy /= double(masked);
    s.masked = masked;
    return s;
  }

  bool slopes_or_bias() const {
    return config_.integer("learn_slopes") == 1 || config_.real("proximity_bias") != 0;
  }

  nlohmann::json evaluate(std::int64_t step) {
    const SetScores train = score(train_, false), test = score(test_, true);
    nlohmann::json row = {
        {"step", step},
        {"train_accuracy", train.accuracy},
        {"test_accuracy", test.accuracy},
        {"train_label_loss", train.label_loss},
        {"test_label_loss", test.label_loss},
        {"test_reconstruction_loss", reconstruction_score(test, test.reconstruction_loss)},
        {"test_reconstruction_accuracy", reconstruction_score(test, test.reconstruction_accuracy)}};
    // The fixed analysis batch: its proximity report, then the two directional derivatives
    // (the slopes' gradients of each loss alone, the pattern present at the current c).
    const std::size_t n = std::min<std::size_t>(kAnalysisExamples, test_.size());
    std::vector<std::size_t> indices(n);
    std::iota(indices.begin(), indices.end(), 0);
    const std::vector<std::uint64_t> keys(indices.begin(), indices.end());
    const PhiloxStream eval_mask(seed_, stream_id_from_name("spt.eval_mask"));
    const PaddedBatch part = pad_batch(test_, indices, config_.real("mask_rate"), &eval_mask, keys);
    const std::vector<float> pattern = proximity_pattern(part.length);
    std::vector<Real> probe(Net::parameter_count);
    for (const char* loss : {"label", "reconstruction"}) {
      const bool label = std::string(loss) == "label";
      Net::forward(params_, view(part, label ? 1.0 : 0.0, label ? 0.0 : 1.0, pattern, true, true),
                   ws_);
      if (label) add_proximity_columns(row, proximity_report<Net>(params_, ws_, kProfileOffsets));
      std::fill(probe.begin(), probe.end(), 0.0f);
      Net::backward(params_, probe, ws_, true);
      nlohmann::json derivative, slopes;
      for (int l = 0; l < L; ++l) {
        derivative.push_back(std::vector<double>(probe.begin() + Net::slope_offset(l),
                                                 probe.begin() + Net::slope_offset(l) + H));
        slopes.push_back(std::vector<double>(params_.begin() + Net::slope_offset(l),
                                             params_.begin() + Net::slope_offset(l) + H));
      }
      row[std::string("d_") + loss + "_d_proximity"] = derivative;
      row["slopes"] = slopes;
    }
    return row;
  }

  // A new run's initial parameters, or the latest checkpoint's state; returns the first step.
  std::int64_t prepare_run_folder() {
    const auto checkpoint = latest_checkpoint(run_dir_);
    if (!checkpoint) {
      Net::init(params_, seed_,
                config_.text("positions") == "learned" ? PositionEncoding::learned
                                                       : PositionEncoding::sinusoidal);
      if (!config_.text("warm_start").empty()) warm_start();
      std::filesystem::remove(run_dir_ / "metrics.jsonl");
      return 0;
    }
    const CheckpointState state =
        load_checkpoint(*checkpoint, Net::tensors(), params_, optimizer_.first_moment(),
                        optimizer_.second_moment());
    optimizer_.set_steps(state.optimizer_steps);
    truncate_metrics(state.step);
    if (progress_)
      std::fprintf(stderr, "resuming %s from step %lld\n", run_dir_.string().c_str(),
                   (long long)state.step);
    return state.step;
  }

  // The warm_start checkpoint, opened before the folder is made (an Error naming it if it
  // cannot be read).
  void read_warm_start() {
    warm_source_.emplace(std::filesystem::path(config_.text("warm_start")));
  }

  // Tensors of another run's checkpoint: all, the query-key rows of every qkv projection, or
  // everything but those rows (train/warm_start.hpp).
  void warm_start() {
    if (!warm_source_) read_warm_start();
    const WarmStartReport report =
        take_parameters(*warm_source_, Net::tensors(), std::span<Real>(params_),
                        config_.text("take"), "field 'take'");
    require(report.mismatched.empty(), warm_source_->path().string(),
            "tensor '" + (report.mismatched.empty() ? "" : report.mismatched.front()) +
                "' is missing or of another shape (is this a checkpoint of another encoder?)");
  }

  void truncate_metrics(std::int64_t step) {
    for (const nlohmann::json& row : keep_metrics_before(run_dir_ / "metrics.jsonl", step)) {
      wall_offset_ = row.at("wall_s").get<double>();
      last_row_ = row;
    }
  }

  // Writes the checkpoint of `step`; returns the step.
  std::int64_t save(std::int64_t step, const std::string& config_text) {
    save_checkpoint(checkpoint_path(run_dir_, step), Net::tensors(), params_,
                    optimizer_.first_moment(), optimizer_.second_moment(),
                    {step, optimizer_.steps(), config_text});
    return step;
  }

  ParameterValues config_;
  std::filesystem::path run_dir_;
  bool progress_;
  ListOps task_;
  std::uint64_t seed_;
  std::vector<listops::Example> train_, test_;
  std::vector<Real> params_, grads_;
  std::optional<SafetensorsFile> warm_source_;  // warm_start's checkpoint, opened early
  AdamW<Real> optimizer_;
  typename Net::Workspace ws_;
  nlohmann::json last_row_ = nlohmann::json::object();
  double wall_offset_ = 0;
};

#ifndef EMERGENT_PREBUILT_MODELS
template <class Net>
SelfPretrainingRun<Net>::SelfPretrainingRun(ParameterValues config, std::filesystem::path run_dir,
                                            bool progress)
    : config_(std::move(config)),
      run_dir_(std::move(run_dir)),
      progress_(progress),
      task_(int(config_.integer("min_length")), int(config_.integer("max_length")),
            int(config_.integer("max_depth")), int(config_.integer("max_args"))),
      seed_(static_cast<std::uint64_t>(config_.integer("seed"))),
      params_(Net::parameter_count),
      grads_(Net::parameter_count),
      optimizer_(adamw_config(), decay_ranges(), Net::parameter_count) {
  require(Net::shape.max_len >= config_.integer("max_length") - 1, "config",
          "the compiled model's max_len is too small for max_length");
  // The data sets are held in memory: up to max_length tokens per example.
  require_memory_fits(double(config_.integer("train_examples") + config_.integer("test_examples")) *
                          double(config_.integer("max_length")) * sizeof(int),
                      machine_memory_bytes(), "this machine's memory", "config",
                      "train_examples + test_examples and max_length");
}

template <class Net>
nlohmann::json SelfPretrainingRun<Net>::run() {
  if (config_.integer("threads") > 0) set_thread_count(int(config_.integer("threads")));
  // A new run's warm start is read before anything is created: a wrong path leaves no folder.
  if (!latest_checkpoint(run_dir_) && !config_.text("warm_start").empty()) read_warm_start();
  const RunLock lock = open_run_folder(run_dir_);
  const RunBinding binding =
      bind_run_folder(run_dir_, config_.json(), {"steps", "threads", "eval_examples"},
                      [](const nlohmann::json& j, const std::string& where) {
                        return resolve_self_pretraining(j, where).json();
                      });
  const std::string& config_text = binding.config_text;
  nlohmann::json changed_on_resume = binding.changed_on_resume;
  make_data();
  std::int64_t step = prepare_run_folder();

  const std::int64_t steps = config_.integer("steps"), pretrain = config_.integer("pretrain_steps"),
                     eval_every = config_.integer("eval_every"),
                     checkpoint_every = config_.integer("checkpoint_every");
  const int B = int(config_.integer("batch"));
  const bool learn_slopes = config_.integer("learn_slopes") == 1;
  const bool biased = learn_slopes || config_.real("proximity_bias") != 0;
  const bool train_positions = config_.text("positions") == "learned";
  const PhiloxStream batch_stream(seed_, stream_id_from_name("spt.batch"));
  const PhiloxStream mask_stream(seed_, stream_id_from_name("spt.mask"));
  std::ofstream metrics(run_dir_ / "metrics.jsonl", std::ios::app);
  require(metrics.good(), (run_dir_ / "metrics.jsonl").string(), "cannot open for appending");
  const auto started = std::chrono::steady_clock::now();
  auto last_progress = started;
  const std::int64_t first = step;
  std::int64_t saved_step = -1;  // the step of the checkpoint this process wrote last
  double loss = 0;
  for (; step < steps; ++step) {
    const bool reconstruct = step < pretrain;
    if (step == pretrain && pretrain > 0) {  // the label stage starts with fresh moments
      std::fill(optimizer_.first_moment().begin(), optimizer_.first_moment().end(), 0.0f);
      std::fill(optimizer_.second_moment().begin(), optimizer_.second_moment().end(), 0.0f);
      optimizer_.set_steps(0);
    }
    const LrSchedule schedule{reconstruct ? config_.real("pretrain_lr") : config_.real("lr"),
                              config_.integer("warmup_steps"), LrSchedule::Kind::constant, 0, 1.0};
    const double lr = schedule.at(reconstruct ? step : step - pretrain);

    std::vector<std::size_t> indices(B);
    std::vector<std::uint64_t> keys(B);
    for (int b = 0; b < B; ++b) {
      const std::uint64_t draw = static_cast<std::uint64_t>(step) * B + b;
      indices[b] = batch_stream.u32(draw) % train_.size();
      keys[b] = draw;
    }
    std::fill(grads_.begin(), grads_.end(), 0.0f);
    // Masks first, so that the reconstruction loss is the mean over the whole batch's masks.
    std::vector<PaddedBatch> parts;
    std::int64_t masked = 0;
    for (const std::vector<std::size_t>& group : micro_batches(train_, indices, kMicroTokens)) {
      const BatchSlice part = slice(indices, keys, group);
      parts.push_back(pad_batch(train_, part.examples,
                                reconstruct ? config_.real("mask_rate") : 0.0,
                                reconstruct ? &mask_stream : nullptr, part.keys));
      masked += parts.back().masked;
    }
    loss = 0;
    for (const PaddedBatch& part : parts) {
      const std::vector<float> pattern =
          biased ? proximity_pattern(part.length) : std::vector<float>();
      const EncoderBatch in = view(part, reconstruct ? 0.0 : 1.0, reconstruct ? 1.0 : 0.0, pattern,
                                   !reconstruct, reconstruct);
      const EncoderLosses l = Net::forward(params_, in, ws_);
      const double share =
          reconstruct ? (masked ? double(part.masked) / masked : 0.0) : double(part.batch) / B;
      loss += share * l.total;
      if (share > 0) Net::backward(params_, grads_, ws_, train_positions, Real(share));
    }
    if (!learn_slopes)
      for (int l = 0; l < L; ++l) std::fill_n(grads_.begin() + Net::slope_offset(l), H, 0.0f);
    require(std::isfinite(loss), run_dir_.string(),
            "training stopped at step " + std::to_string(step) + ": the loss is not finite");
    const double grad_norm = optimizer_.step(params_, grads_, lr);
    require(
        std::isfinite(grad_norm), run_dir_.string(),
        "training stopped at step " + std::to_string(step) + ": the gradient norm is not finite");

    if (step % eval_every == 0 || step + 1 == steps) {
      nlohmann::json row = evaluate(step);
      row["stage"] = reconstruct ? "reconstruction" : "label";
      row["loss"] = loss;
      row["lr"] = lr;
      row["grad_norm"] = grad_norm;
      row["wall_s"] = seconds_since(started) + wall_offset_;
      if (!changed_on_resume.empty())  // the first row after a resume that extended the run
        row["changed_on_resume"] = std::exchange(changed_on_resume, nlohmann::json::object());
      metrics << row.dump() << '\n' << std::flush;
      require(metrics.good(), (run_dir_ / "metrics.jsonl").string(),
              "cannot append a metrics row (is the disk full?)");
      last_row_ = row;
    }
    if ((step + 1) % checkpoint_every == 0 || step + 1 == pretrain)
      saved_step = save(step + 1, config_text);
    if (progress_ && seconds_since(last_progress) > 1.0) {
      last_progress = std::chrono::steady_clock::now();
      const double rate = double(step + 1 - first) / std::max(seconds_since(started), 1e-9);
      std::fprintf(stderr, "\r%s  step %lld/%lld  %s loss %.4f  %.1f steps/s  ETA %.0fs   ",
                   run_dir_.filename().string().c_str(), (long long)(step + 1), (long long)steps,
                   reconstruct ? "reconstruction" : "label", loss, rate,
                   double(steps - step - 1) / std::max(rate, 1e-9));
    }
  }
  if (progress_) std::fprintf(stderr, "\n");
  // The last step's checkpoint, unless the loop just wrote it (each is written once).
  if (saved_step != step && (step > first || !latest_checkpoint(run_dir_))) save(step, config_text);
  nlohmann::json summary = {{"steps_done", step},
                            {"wall_s", seconds_since(started) + wall_offset_}};
  for (const char* key : {"train_accuracy", "test_accuracy", "train_label_loss", "test_label_loss",
                          "test_reconstruction_loss", "test_reconstruction_accuracy"})
    if (last_row_.contains(key)) summary[key] = last_row_[key];
  write_text_atomically(run_dir_ / "summary.json", summary.dump(2) + "\n");
  return summary;
}
#endif  // EMERGENT_PREBUILT_MODELS

}  // namespace emergent
