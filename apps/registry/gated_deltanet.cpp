// Gated DeltaNet (gated delta rule) at the linear-map and automaton shapes (registry.hpp).
#include <emergent/mixers/gated_deltanet.hpp>

#include "registry.hpp"

namespace {
using emergent::cli::make_entry;
using emergent::cli::RegisterShape;
const RegisterShape linear_map{
    make_entry<emergent::GatedDeltaNet, emergent::cli::kLinearMapShape>()};
const RegisterShape automaton{
    make_entry<emergent::GatedDeltaNet, emergent::cli::kAutomatonShape>()};
}  // namespace
