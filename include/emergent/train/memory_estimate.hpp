// What a training run needs in memory, estimated from its config before anything large is
// allocated, so that a run that cannot fit is refused in one line with the numbers, instead of
// growing until the machine swaps or the allocator aborts (std::bad_alloc, no field named).
//
//   estimated_training_bytes(config, members): for each member of an ensemble (1 for a CPU run)
//     4 copies of the parameters (parameters, gradients, both AdamW moments) and the activations
//     a step keeps for its backward, for every token of the step: per layer 12 D + 3 d_ff
//     values (projections, residuals, normalisations, the MLP) and H T attention probabilities,
//     floats. A step that analyses attention keeps every slice's activations at once
//     (model/data_parallel.hpp), so this is its peak.
//   The parameter count is the dot-attention model's (the other mixers' are of the same order).
//   A mixer that keeps more a token (a scan's states, a tape) adds its own terms, which its line
//   of settings/mixer_catalog.hpp gives and explains.
//   estimated_language_model_bytes(neox config, batch, context): the same for `emergent lm`.
// It is an estimate of the large buffers, not a bound: for the automaton at T = 1,024 (4 layers,
// D = 128, 4,096 tokens) it says 738 MB where the trainer keeping every slice's workspace
// measured 779 MiB resident (docs/performance.md, the shared-workspace table). Runs are refused
// only past the machine's memory.
#pragma once

#include <cstdint>
#include <cstdio>
#include <emergent/core/error.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/settings/mixer_catalog.hpp>
#include <emergent/train/config.hpp>
#include <fstream>
#include <string>

namespace emergent {

inline double estimated_training_bytes(const TrainConfig& c, std::uint64_t members = 1) {
  const double V = c.shape.vocab, D = c.shape.d_model, F = c.shape.d_ff, H = c.shape.heads,
               L = c.shape.layers, positions = c.shape.max_len;
  const double T = sequence_tokens(c) - 1;
  const double parameters =
      V * D + positions * D + L * (4 * D * D + 2 * D * F + F + 9 * D) + 2 * D + D * V;
  const MixerInfo& mixer = find_mixer(c.mixer, "the memory estimate");
  const double states = mixer.state_floats_per_layer ? mixer.state_floats_per_layer(D, H) : 0;
  const double recomputed = mixer.recomputed_floats ? mixer.recomputed_floats(D, H) : 0;
  const double per_token = L * (12 * D + 3 * F + H * T + states) + recomputed + 2 * V + 4;
  return double(members) * 4.0 * (4 * parameters + double(c.batch_tokens) * per_token);
}

// The same for a language-model run (train/language_model_trainer.hpp): a GPT-NeoX of `c` on
// `batch` sequences of `context` tokens. 4 copies of the parameters (the embedding and the
// untied unembedding, per layer the fused QKV, the attention output, the MLP and two
// LayerNorms), and for every token of the step what neox/training_network.hpp keeps: per layer
// 9 D + 2 d_ff values and H T attention probabilities; the logits and their probabilities (2 V);
// and the backward's largest transients (the logits' gradient V, one layer's 10 D + d_ff and its
// H T), floats.
inline double estimated_language_model_bytes(const NeoxConfig& c, std::int64_t batch,
                                             std::int64_t context) {
  const double V = c.vocab_size, D = c.hidden_size, F = c.intermediate_size,
               H = c.num_attention_heads, L = c.num_hidden_layers, T = double(context);
  const double parameters = 2 * V * D + L * (4 * D * D + 2 * D * F + F + 9 * D) + 2 * D;
  const double per_token = L * (9 * D + 2 * F + H * T + 4) + (D + 2 + 3 * V) + (10 * D + F + H * T);
  return 4.0 * (4 * parameters + double(batch) * T * per_token);
}

// This machine's memory for a process: the physical memory, or the cgroup's limit if lower
// (0 if neither can be read).
inline double machine_memory_bytes() {
  double bytes = 0;
  std::ifstream meminfo("/proc/meminfo");
  for (std::string key; meminfo >> key;) {
    double kib = 0;
    meminfo >> kib;
    if (key == "MemTotal:") bytes = kib * 1024;
    meminfo.ignore(1 << 10, '\n');
  }
  std::ifstream limit("/sys/fs/cgroup/memory.max");
  double cgroup = 0;
  if (limit >> cgroup && cgroup > 0 && (bytes == 0 || cgroup < bytes)) bytes = cgroup;
  return bytes;
}

inline std::string gib_text(double bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}

// An Error naming `where` if the estimate exceeds `available` bytes (of `what`: "this machine's
// memory", "the GPU's free memory"); `fields` names the settings that set the size.
inline void require_memory_fits(double estimate, double available, const std::string& what,
                                const std::string& where, const std::string& fields) {
  require(available <= 0 || estimate <= available, where,
          "needs about " + gib_text(estimate) + " (estimated from " + fields + "), more than " +
              what + " (" + gib_text(available) + ")");
}

}  // namespace emergent
