// RWKV-4 (time mixing with RWKV's channel mixing in place of the MLP) at the linear-map and
// automaton shapes (registry.hpp).
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>

#include "registry.hpp"

namespace {
using emergent::Rwkv;
using emergent::RwkvChannelMix;
using emergent::cli::make_entry;
using emergent::cli::RegisterShape;
const RegisterShape linear_map{make_entry<Rwkv, emergent::cli::kLinearMapShape, RwkvChannelMix>()};
const RegisterShape automaton{make_entry<Rwkv, emergent::cli::kAutomatonShape, RwkvChannelMix>()};
}  // namespace
