// Cellular-automaton transformer of the paper: 4 layers, D = 128, H = 8, MLP 512, C = 4 colours,
// sequences up to 1024 tokens (S up to 64 at T = 16 states).
#include <emergent/mixers/dot_attention.hpp>

#include "registry.hpp"

namespace {
constexpr emergent::Shape kShape{.vocab = 4, .d_model = 128, .heads = 8, .layers = 4, .d_ff = 512, .max_len = 1024};
const emergent::cli::RegisterShape registered{emergent::cli::make_entry<emergent::DotAttention, kShape>("dot_attention")};
}  // namespace
