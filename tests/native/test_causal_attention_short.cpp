// The register kernels of mixers/causal_attention_short.hpp (CausalAttentionShort: one head,
// T <= 64), alone against the reference (tests/reference_checks.hpp): probabilities (zero above
// the diagonal), outputs, and the three input gradients, with and without the bias pattern, for
// every number of key vectors (T = 1..64), d_head 16, 32, 48, 64 (and 8 on AVX2). (Inside
// DotAttention they are also covered by the mixer suite's reference and finite-difference
// checks.)
#include <doctest/doctest.h>

#include <emergent/mixers/causal_attention_short.hpp>

#include "../reference_checks.hpp"

#if EMERGENT_SIMD_LANES > 0

namespace {

using emergent::CausalAttentionShort;
using reference_checks::AttentionCase;
using reference_checks::check_attention_form;

}  // namespace

TEST_CASE("causal attention form: short (register kernels), alone against the reference") {
  for (int T : {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 47, 48, 49, 56, 63, 64})
    for (bool bias : {false, true}) {
      check_attention_form<CausalAttentionShort, float, 16>(AttentionCase{T, bias}, 1e-5);
      check_attention_form<CausalAttentionShort, float, 32>(AttentionCase{T, bias}, 1e-5);
      if constexpr (CausalAttentionShort<float, 8>::available)
        check_attention_form<CausalAttentionShort, float, 8>(AttentionCase{T, bias}, 1e-5);
    }
  for (int T : {5, 33, 64}) {
    check_attention_form<CausalAttentionShort, float, 48>(AttentionCase{T, true}, 1e-5);
    check_attention_form<CausalAttentionShort, float, 64>(AttentionCase{T, true}, 1e-5);
  }
}

#endif
