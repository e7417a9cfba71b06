// Which runs can train together as one device ensemble (train/ensemble_trainer.cuh): a mixed
// ensemble holds any runs whose steps have the same shape, whatever else differs.
//
//   per-member: the task and its parameters (S, s, the linear map's matrix seed, a rule set),
//               the seed, the schedule (lr, warmup_steps, schedule, min_lr_ratio, steps), the bias
//               strength, stop_below, and what is recorded (log_every, analysis_every,
//               checkpoint_every, eval_every, eval_batches, save_attention_at), and where it
//               starts from (init_from, init_take)
//   shared:     everything else (the compiled model: mixer and shape; batch_tokens; AdamW's
//               betas, weight decay and clipping; the GEMMs' precision; threads), compared as
//               shared_settings() writes them
// Members whose tasks make different sequence lengths (the linear map's S = 8 and 16), and so
// different sequences per step, are padded to the longest and the most (train/
// ensemble_trainer.cuh): causal models give the real positions the same values either way.
#pragma once

#include <algorithm>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <emergent/tasks/registry.hpp>
#include <emergent/train/config.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace emergent {

// The training settings each member of an ensemble may set for itself (beside the task).
inline const std::vector<std::string>& per_member_settings() {
  static const std::vector<std::string> names = {
      "seed",         "steps",          "lr",
      "warmup_steps", "schedule",       "min_lr_ratio",
      "bias",         "stop_below",     "stop_at",
      "log_every",    "analysis_every", "checkpoint_every",
      "eval_every",   "eval_batches",   "save_attention_at",
      "init_from",    "init_take"};
  return names;
}

// The settings the members of one ensemble share: the config without its task, the task's
// parameters and the per-member settings.
inline nlohmann::json shared_settings(const TrainConfig& c) {
  nlohmann::json j = to_json(c);
  j.erase("task");
  for (const Parameter& p : find_task(c.task, "config").parameters) j.erase(p.name);
  for (const std::string& name : per_member_settings()) j.erase(name);
  return j;
}

// A member as the device ensemble holds each (members of different lengths are padded to the
// longest sequence and the most sequences: train/ensemble_trainer.cuh), for the memory estimate
// (train/memory_estimate.hpp) of the whole ensemble: the longest member's config with
// batch_tokens for the most sequences of that length. Members are added one by one (a sweep
// fills its ensembles so).
class PaddedMember {
 public:
  void add(const TrainConfig& c) {
    const int n = sequence_tokens(c), sequences = sequences_per_step(c);
    if (n > tokens_) tokens_ = n, longest_ = c;
    sequences_ = std::max(sequences_, sequences);
    own_tokens_ += double(sequences) * n;
    ++members_;
  }
  TrainConfig config() const {
    require(tokens_ > 0, "ensemble", "needs a member");
    TrainConfig padded = longest_;
    padded.batch_tokens = sequences_ * tokens_;
    return padded;
  }
  // The tokens the ensemble computes a step over those its members' own batches hold: 1 without
  // padding, 4 for the linear map's S = 8 beside S = 32 (256 sequences of 16 tokens each padded to
  // 256 of 64), more still for attention, whose work grows with the square of the length.
  double padding_waste() const {
    require(members_ > 0, "ensemble", "needs a member");
    return members_ * double(sequences_) * tokens_ / own_tokens_;
  }

 private:
  TrainConfig longest_;
  int tokens_ = 0, sequences_ = 0, members_ = 0;
  double own_tokens_ = 0;
};
inline TrainConfig padded_member(const std::vector<TrainConfig>& members) {
  PaddedMember padded;
  for (const TrainConfig& c : members) padded.add(c);
  return padded.config();
}

// Throws, naming where[i] and the setting, for the first member whose shared settings differ
// from member 0's.
inline void require_one_ensemble(const std::vector<TrainConfig>& members,
                                 const std::vector<std::string>& where) {
  require(!members.empty() && where.size() == members.size(), "ensemble",
          "needs one config per member");
  const nlohmann::json first = shared_settings(members[0]);
  std::string own = "the task, its parameters";
  for (const std::string& name : per_member_settings()) own += ", " + name;
  for (std::size_t i = 1; i < members.size(); ++i) {
    const nlohmann::json other = shared_settings(members[i]);
    for (auto it = first.begin(); it != first.end(); ++it)
      require(other.contains(it.key()) && other.at(it.key()) == it.value(), where[i],
              "field '" + it.key() + "' is " +
                  (other.contains(it.key()) ? other.at(it.key()).dump() : "absent") + ", not " +
                  it.value().dump() + " as in " + where[0] +
                  ": the members of one device ensemble share it (each may have its own " + own +
                  "); train it in another ensemble");
  }
}

}  // namespace emergent
