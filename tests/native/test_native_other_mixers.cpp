// The other mixers in fp32 on this machine's kernels against the same models in double
// (float_against_double.hpp). Their Linear layers run on nn/gemm.hpp, the scans on their own
// plain code. Not in the AVX2 build (emergent_native_avx2_tests): what differs there is the GEMM,
// which test_gemm.cpp checks in both builds, and compiling these four models twice cost a minute
// of every cold build.
#include <doctest/doctest.h>

#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/mixers/mamba.hpp>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>

#include "float_against_double.hpp"

namespace {

using emergent::Shape;
using native_checks::check_float_against_double;

constexpr Shape kOtherMixers{
    .vocab = 3, .d_model = 32, .heads = 2, .layers = 2, .d_ff = 48, .max_len = 40};

}  // namespace

TEST_CASE("fp32 models of the other mixers on this machine's kernels match their double models") {
  // Their Linear layers run on nn/gemm.hpp here; the scans and the rest on their own code.
  for (int length : {1, 17, 40}) {
    check_float_against_double<kOtherMixers, emergent::MlpMixer>(3, length, false);
    check_float_against_double<kOtherMixers, emergent::Mamba>(3, length, false);
    check_float_against_double<kOtherMixers, emergent::GatedDeltaNet>(3, length, false);
    check_float_against_double<kOtherMixers, emergent::Rwkv, emergent::RwkvChannelMix>(3, length,
                                                                                       false);
  }
}
