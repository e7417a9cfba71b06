// The paper's transformer: the linear-map and automaton shapes (registry.hpp), and the
// automaton at up to 1024 positions (S up to 64 at 16 states) for the context-length sweeps.
#include <emergent/mixers/dot_attention.hpp>

#include "registry.hpp"

namespace {
using emergent::DotAttention;
using emergent::cli::make_entry;
using emergent::cli::RegisterShape;
constexpr emergent::Shape kLongAutomaton{
    .vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 1024};
const RegisterShape linear_map{make_entry<DotAttention, emergent::cli::kLinearMapShape>()};
const RegisterShape automaton{make_entry<DotAttention, emergent::cli::kAutomatonShape>()};
const RegisterShape long_automaton{make_entry<DotAttention, kLongAutomaton>()};
}  // namespace
