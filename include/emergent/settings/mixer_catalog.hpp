// The token mixers a run can name (config "mixer"), as data: what validation needs to know
// of each (whether it has attention logits for the attention-bias intervention) and what a
// generated translation unit needs to instantiate it (header and C++ names), for shapes compiled
// on demand. Each mixer's test (tests/test_mixer_<name>.cpp: mixer_suite::check_catalog_line)
// checks its line against the mixer type itself.
// To add a mixer: its header, its reference and tests, one line here and a file in
// apps/registry/ for prebuilt shapes (and for the device backend its twin, cuda/mixer.cuh).
#pragma once

#include <emergent/core/error.hpp>
#include <string>
#include <vector>

namespace emergent {

struct MixerInfo {
  std::string name;                   // config "mixer", and the mixer type's `name`
  std::vector<std::string> headers;   // what a translation unit includes to instantiate it
  std::string mixer_template;         // template <Shape, class Real> of the token mixer
  std::string channel_template;       // template <Shape, class Real> of the channel mixer
  bool takes_attention_bias = false;  // has attention logits that `bias` is added to
  bool uses_heads = false;            // reads Shape::heads (the others ignore it)
  bool device_twin = false;           // has a device twin (cuda/mixer.cuh): --backend cuda
  // Its terms of the memory estimate (train/memory_estimate.hpp), floats a token beyond what
  // every mixer keeps, from d_model and heads: in each layer (a scan's states), and once for
  // the model (states recomputed in the backward, scratch the layers share). None: 0.
  double (*state_floats_per_layer)(double d_model, double heads) = nullptr;
  double (*recomputed_floats)(double d_model, double heads) = nullptr;
};

inline const std::vector<MixerInfo>& mixer_catalog() {
  static const std::vector<MixerInfo> mixers = {
      {"dot_attention",
       {"emergent/mixers/dot_attention.hpp"},
       "emergent::DotAttention",
       "emergent::GeluMlp",
       true,
       true,
       true},
      {"mlp_mixer",
       {"emergent/mixers/mlp_mixer.hpp"},
       "emergent::MlpMixer",
       "emergent::GeluMlp",
       false,
       false,
       true},
      {"mamba",
       {"emergent/mixers/mamba.hpp"},
       "emergent::Mamba",
       "emergent::GeluMlp",
       false,
       false,
       true,
       // its scan states, d_inner x d_state = 32 D floats, which the device backend keeps for
       // every token (cuda/mamba.cuh; the CPU keeps one token in 16)
       [](double D, double) { return 32 * D; }},
      {"gated_deltanet",
       {"emergent/mixers/gated_deltanet.hpp"},
       "emergent::GatedDeltaNet",
       "emergent::GeluMlp",
       false,
       true,
       true,
       // its recurrent state at each chunk's start, H heads of d_head x d_head per 16 tokens,
       // D^2 / (16 H); and all the other values its device twin keeps a token (the six
       // projections, gates, q^, k^, v, o and the gated heads: 9 D + 4 H; an over-estimate, as
       // some of them stand in for the 12 D every mixer has)
       [](double D, double H) { return D * D / (16 * H) + 9 * D + 4 * H; },
       // once, not per layer: the states of every token its backward recomputes, D^2 / H, and
       // the chunks' coefficients, 48 H (cuda/gated_deltanet.cuh; the CPU recomputes one chunk
       // at a time)
       [](double D, double H) { return D * D / H + 48 * H; }},
      {"rwkv",
       {"emergent/mixers/rwkv.hpp", "emergent/mixers/rwkv_channel_mix.hpp"},
       "emergent::Rwkv",
       "emergent::RwkvChannelMix",
       false,
       false,
       true,
       // its WKV tape, 6 D floats (lambda, sigma, rho, kappa and the state aa, bb:
       // mixers/rwkv.hpp, cuda/rwkv.cuh)
       [](double D, double) { return 6 * D; }},
  };
  return mixers;
}

inline std::vector<std::string> mixer_names() {
  std::vector<std::string> names;
  for (const MixerInfo& m : mixer_catalog()) names.push_back(m.name);
  return names;
}

inline const MixerInfo& find_mixer(const std::string& name, const std::string& where) {
  for (const MixerInfo& m : mixer_catalog())
    if (m.name == name) return m;
  std::string names;
  for (const MixerInfo& m : mixer_catalog()) names += (names.empty() ? "" : ", ") + m.name;
  throw Error(where + ": field 'mixer' = '" + name + "' is not allowed: expected one of " + names);
}

}  // namespace emergent
