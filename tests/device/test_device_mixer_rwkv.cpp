// RWKV-4 on the device (its time and channel mixing): the twins against the references, the
// whole model's step against the CPU model's, and 100 training steps against the CPU's
// (device_mixer_checks.hpp says what each checks).
#include <doctest/doctest.h>

#include <emergent/cuda/rwkv.cuh>
#include <emergent/cuda/rwkv_channel_mix.cuh>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>
#include <emergent/reference/rwkv.hpp>

#include "device_mixer_checks.hpp"

namespace {

using namespace device_mixer_checks;

}  // namespace

TEST_CASE("device twin of RWKV's time mixing: y, dx and every gradient against the reference") {
  const emergent::reference::RwkvReference reference;
  check_twin_sizes<emergent::Rwkv>(reference);
}

TEST_CASE("device twin of RWKV's channel mixing: y, dx and every gradient against the reference") {
  const emergent::reference::RwkvChannelMixReference reference;
  check_twin_sizes<emergent::RwkvChannelMix>(reference);
}

TEST_CASE(
    "device ensemble of RWKV-4: each member's loss and every gradient equal the CPU model's") {
  check_ensemble_against_cpu<emergent::Rwkv, kEnsembleShape, emergent::RwkvChannelMix>(1e-5, 1e-4,
                                                                                       0.1);
}

TEST_CASE("device training of RWKV-4: 100 steps of a 2-seed ensemble follow the CPU runs") {
  check_training_against_cpu<emergent::Rwkv, kTrainingShape, emergent::RwkvChannelMix>();
}
