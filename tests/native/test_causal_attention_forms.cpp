// The two generic forms of causal attention (mixers/causal_attention_direct.hpp,
// causal_attention_blocked.hpp) built for this machine, alone against the reference
// (tests/reference_checks.hpp), in float at d_head 16 and 32: where select_causal_attention takes
// the register kernels or tiles instead, so that nothing else runs them with these flags.
#include <doctest/doctest.h>

#include <emergent/mixers/causal_attention_blocked.hpp>
#include <emergent/mixers/causal_attention_direct.hpp>

#include "../reference_checks.hpp"

using reference_checks::AttentionCase;
using reference_checks::check_attention_form;

TEST_CASE("causal attention forms: direct and blocked in float on this machine's build") {
  for (int T : {1, 17, 64, 65, 129})
    for (bool bias : {false, true}) {
      check_attention_form<emergent::CausalAttentionDirect, float, 16>(
          AttentionCase{T, bias, 0.7, 1.5}, 1e-5);
      check_attention_form<emergent::CausalAttentionDirect, float, 32>(AttentionCase{T, bias},
                                                                       1e-5);
      check_attention_form<emergent::CausalAttentionBlocked, float, 16>(
          AttentionCase{T, bias, 0.7, 1.5}, 1e-5);
      check_attention_form<emergent::CausalAttentionBlocked, float, 32>(AttentionCase{T, bias},
                                                                        1e-5);
    }
}
