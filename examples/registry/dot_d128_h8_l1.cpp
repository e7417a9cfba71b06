// Linear-map transformer of the paper: 1 layer, D = 128, H = 8, MLP 512, up to S = 32.
#include <emergent/mixers/dot_attention.hpp>

#include "registry.hpp"

namespace {
constexpr emergent::Shape kShape{.vocab = 2, .d_model = 128, .heads = 8, .layers = 1, .d_ff = 512, .max_len = 64};
const emergent::cli::RegisterShape registered{emergent::cli::make_entry<emergent::DotAttention, kShape>("dot_attention")};
}  // namespace
