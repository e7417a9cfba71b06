// Mamba-1 (selective scan) at the linear-map and automaton shapes (registry.hpp).
#include <emergent/mixers/mamba.hpp>

#include "registry.hpp"

namespace {
using emergent::cli::make_entry;
using emergent::cli::RegisterShape;
const RegisterShape linear_map{make_entry<emergent::Mamba, emergent::cli::kLinearMapShape>()};
const RegisterShape automaton{make_entry<emergent::Mamba, emergent::cli::kAutomatonShape>()};
}  // namespace
