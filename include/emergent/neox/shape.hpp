// The compile-time architecture of a GPT-NeoX model: a structural aggregate used as a template
// argument (NeoxModel<pythia_160m>), so that d_head and every offset are constants.
//
//   constexpr emergent::neox::NeoxShape pythia_160m{.d_model = 768, .heads = 12, .layers = 12,
//                                                   .d_ff = 3072, .rotary_dims = 16};
//
// rotary_dims = int(d_head * rotary_pct) (HF's rotary_ndims). What sweeps over checkpoints of
// one architecture keep the same stays run-time in NeoxConfig: vocab_size, residual kind,
// activation, biases, tying, eps and the rotary base.
#pragma once

#include <emergent/io/hf_config.hpp>
#include <string>

namespace emergent::neox {

struct NeoxShape {
  int d_model = 0;      // hidden_size
  int heads = 0;        // num_attention_heads
  int layers = 0;       // num_hidden_layers
  int d_ff = 0;         // intermediate_size
  int rotary_dims = 0;  // rotated dimensions at the start of each head's q and k (even)

  constexpr int d_head() const { return d_model / heads; }
  constexpr bool valid() const {
    return d_model >= 1 && heads >= 1 && d_model % heads == 0 && layers >= 1 && d_ff >= 1 &&
           rotary_dims >= 0 && rotary_dims <= d_head() && rotary_dims % 2 == 0;
  }
  constexpr bool operator==(const NeoxShape&) const = default;
};

// The Pythia suite (github.com/EleutherAI/pythia models/*.yml; docs/paper-notes.md §8).
inline constexpr NeoxShape pythia_14m{
    .d_model = 128, .heads = 4, .layers = 6, .d_ff = 512, .rotary_dims = 8};
inline constexpr NeoxShape pythia_31m{
    .d_model = 256, .heads = 8, .layers = 6, .d_ff = 1024, .rotary_dims = 8};
inline constexpr NeoxShape pythia_70m{
    .d_model = 512, .heads = 8, .layers = 6, .d_ff = 2048, .rotary_dims = 16};
inline constexpr NeoxShape pythia_160m{
    .d_model = 768, .heads = 12, .layers = 12, .d_ff = 3072, .rotary_dims = 16};
inline constexpr NeoxShape pythia_410m{
    .d_model = 1024, .heads = 16, .layers = 24, .d_ff = 4096, .rotary_dims = 16};

inline NeoxShape shape_of(const NeoxConfig& config) {
  return {.d_model = config.hidden_size,
          .heads = config.num_attention_heads,
          .layers = config.num_hidden_layers,
          .d_ff = config.intermediate_size,
          .rotary_dims = config.rotary_ndims()};
}

// C++ designated-initializer spelling, e.g. "{.d_model = 768, .heads = 12, ...}".
inline std::string to_string(const NeoxShape& s) {
  return "{.d_model = " + std::to_string(s.d_model) + ", .heads = " + std::to_string(s.heads) +
         ", .layers = " + std::to_string(s.layers) + ", .d_ff = " + std::to_string(s.d_ff) +
         ", .rotary_dims = " + std::to_string(s.rotary_dims) + "}";
}

}  // namespace emergent::neox
