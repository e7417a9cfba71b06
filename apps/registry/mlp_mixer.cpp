// The causal MLP-Mixer (a learned lower-triangular T x T matrix) at the linear-map and automaton
// shapes (registry.hpp).
#include <emergent/mixers/mlp_mixer.hpp>

#include "registry.hpp"

namespace {
using emergent::cli::make_entry;
using emergent::cli::RegisterShape;
const RegisterShape linear_map{make_entry<emergent::MlpMixer, emergent::cli::kLinearMapShape>()};
const RegisterShape automaton{make_entry<emergent::MlpMixer, emergent::cli::kAutomatonShape>()};
}  // namespace
