// DotAttention in fp32 on this machine's kernels against the same model in double
// (float_against_double.hpp): d_head 16 and 32, lengths on both sides of the short-attention
// limit (64), with and without the bias pattern. Also built with AVX-512 off
// (emergent_native_avx2_tests), so the AVX2 attention kernels are checked inside a whole model.
#include <doctest/doctest.h>

#include <emergent/mixers/dot_attention.hpp>

#include "float_against_double.hpp"

namespace {

using emergent::DotAttention;
using emergent::Shape;
using native_checks::check_float_against_double;

constexpr Shape kModelHead16{
    .vocab = 3, .d_model = 32, .heads = 2, .layers = 2, .d_ff = 48, .max_len = 200};
constexpr Shape kModelHead32{
    .vocab = 2, .d_model = 64, .heads = 2, .layers = 1, .d_ff = 64, .max_len = 70};
}  // namespace

TEST_CASE(
    "fp32 model on this machine's kernels matches the double model: loss, attention, gradients") {
  for (int length : {1, 17, 31, 33, 64, 65, 130, 200})
    for (bool bias : {false, true})
      check_float_against_double<kModelHead16, DotAttention>(3, length, bias);
  for (int length : {5, 48, 70})
    for (bool bias : {false, true})
      check_float_against_double<kModelHead32, DotAttention>(2, length, bias);
}
