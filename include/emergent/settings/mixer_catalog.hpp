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
       true},
      {"gated_deltanet",
       {"emergent/mixers/gated_deltanet.hpp"},
       "emergent::GatedDeltaNet",
       "emergent::GeluMlp",
       false,
       true,
       true},
      {"rwkv",
       {"emergent/mixers/rwkv.hpp", "emergent/mixers/rwkv_channel_mix.hpp"},
       "emergent::Rwkv",
       "emergent::RwkvChannelMix",
       false,
       false,
       true},
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
