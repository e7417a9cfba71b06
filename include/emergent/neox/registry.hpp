// The GPT-NeoX shapes compiled into programs that pick a checkpoint at run time, and the
// dispatch from a config to the NeoxModel<Shape> that runs it.
//
//   std::unique_ptr<Network> net = make_network(config, "pythia-160m/config.json");
//
// A config whose shape is not in kCompiledNeoxShapes is refused with the list of compiled
// shapes and the one line that adds it. Each entry instantiates one NeoxModel (a few seconds of
// compile time); vocab_size, residual kind, activation, biases, tying, eps and the rotary base
// are run-time and need no entry.
#pragma once

#include <array>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <emergent/io/hf_config.hpp>
#include <emergent/neox/model.hpp>
#include <emergent/neox/network.hpp>
#include <emergent/neox/shape.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace emergent::neox {

struct NamedNeoxShape {
  std::string_view name;
  NeoxShape shape;
};

inline constexpr std::array kCompiledNeoxShapes{
    NamedNeoxShape{"pythia-14m", pythia_14m},
    NamedNeoxShape{"pythia-31m", pythia_31m},
    NamedNeoxShape{"pythia-70m", pythia_70m},
    NamedNeoxShape{"pythia-160m", pythia_160m},
    NamedNeoxShape{"pythia-410m", pythia_410m},
    // The suite trained here (sweeps/mini-suite-small.toml, docs/mini-suite.md); its smallest size,
    // 2 x 64, is golden-parallel's shape.
    NamedNeoxShape{"mini-4x128",
                   {.d_model = 128, .heads = 4, .layers = 4, .d_ff = 512, .rotary_dims = 8}},
    NamedNeoxShape{"mini-6x192",
                   {.d_model = 192, .heads = 6, .layers = 6, .d_ff = 768, .rotary_dims = 8}},
    // The tiny models of tests/golden/neox (tests/golden/make_neox_golden.py).
    NamedNeoxShape{"golden-parallel",
                   {.d_model = 64, .heads = 4, .layers = 2, .d_ff = 256, .rotary_dims = 4}},
    NamedNeoxShape{"golden-sequential",
                   {.d_model = 32, .heads = 2, .layers = 2, .d_ff = 96, .rotary_dims = 8}},
    NamedNeoxShape{"golden-tied",
                   {.d_model = 32, .heads = 4, .layers = 1, .d_ff = 64, .rotary_dims = 8}},
};

namespace registry_detail {

template <std::size_t... I>
std::unique_ptr<Network> make_compiled(const NeoxConfig& config, const NeoxShape& shape,
                                       std::index_sequence<I...>) {
  std::unique_ptr<Network> network;
  ((network == nullptr && shape == kCompiledNeoxShapes[I].shape
        ? (network = std::make_unique<NeoxModel<kCompiledNeoxShapes[I].shape>>(config), 0)
        : 0),
   ...);
  return network;
}

}  // namespace registry_detail

// The compiled shape's name for a config, or "" if none matches.
inline std::string_view compiled_shape_name(const NeoxShape& shape) {
  for (const NamedNeoxShape& s : kCompiledNeoxShapes)
    if (s.shape == shape) return s.name;
  return {};
}

// A zero-initialised network for `config`; `where` (the config file) prefixes the error.
//
// A template for the build's sake alone, as train/trainer.hpp's BasicRunTrainer is: every
// NeoxModel of kCompiledNeoxShapes is compiled in each unit that calls it, as a header-only
// library's code is, unless the unit is built with EMERGENT_COMPILED_NEOX, which declares the
// instantiation extern: then src/neox_networks.cpp compiles them once, for the CLI and the
// examples/pythia_emergence.cpp program (CMakeLists.txt: emergent_compiled_neox).
template <class Unused = void>
std::unique_ptr<Network> make_compiled_network(const NeoxConfig& config, const std::string& where) {
  const NeoxShape shape = shape_of(config);
  auto network = registry_detail::make_compiled(
      config, shape, std::make_index_sequence<kCompiledNeoxShapes.size()>{});
  if (network != nullptr) return network;
  std::string message =
      where + ": no compiled GPT-NeoX shape matches this config, " + to_string(shape) +
      " (hidden_size, num_attention_heads, num_hidden_layers, intermediate_size, " +
      "int(d_head * rotary_pct)). Compiled shapes:";
  for (const NamedNeoxShape& s : kCompiledNeoxShapes)
    message += "\n  " + std::string(s.name) + " " + to_string(s.shape);
  message +=
      "\nTo add it, add this line to kCompiledNeoxShapes in include/emergent/neox/registry.hpp and "
      "rebuild:\n"
      "    NamedNeoxShape{\"my-model\", " +
      to_string(shape) + "},";
  throw Error(message);
}

#ifdef EMERGENT_COMPILED_NEOX
extern template std::unique_ptr<Network> make_compiled_network<void>(const NeoxConfig&,
                                                                     const std::string&);
#endif

inline std::unique_ptr<Network> make_network(const NeoxConfig& config, const std::string& where) {
  return make_compiled_network<>(config, where);
}

}  // namespace emergent::neox
