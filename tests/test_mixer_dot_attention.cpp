// DotAttention through the generic mixer suite (tests/mixer_suite.hpp), the same checks the
// other mixers pass. Its reference is the qkv Linear, reference::dot_attention and the out
// Linear (tests/dot_attention_checks.hpp). test_model_reference.cpp also checks it inside whole
// models, with the bias. This build is portable: beyond T = 64 it runs the Eigen blocked path;
// tests/native/test_long_causal_attention.cpp runs the same checks on the AVX-512 kernels.
#include <doctest/doctest.h>

#include "dot_attention_checks.hpp"

namespace {

using dot_attention_checks::DotAttentionReference;

constexpr emergent::Shape kShape{
    .vocab = 5, .d_model = 12, .heads = 3, .layers = 2, .d_ff = 16, .max_len = 80};
constexpr emergent::Shape kHead16{
    .vocab = 5, .d_model = 32, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 260};

}  // namespace

TEST_CASE("mixer suite: DotAttention") {
  // T = 70 crosses from the direct path (T <= 64) to the blocked one.
  mixer_suite::run_all<emergent::DotAttention, kShape>(DotAttentionReference{kShape.heads},
                                                       {1, 5, 17, 70});
}

TEST_CASE(
    "DotAttention with the attention bias on long sequences: reference, att, row sums, "
    "determinism") {
  dot_attention_checks::check_mixer_with_bias<kShape>(2, 70, 0.7);
  for (int T : {65, 129, 200}) dot_attention_checks::check_mixer_with_bias<kHead16>(2, T, 0.7);
}
