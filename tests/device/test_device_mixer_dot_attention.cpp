// Dot attention on the device: its twin against the reference, the whole model's step against the
// CPU model's, and 100 training steps against the CPU's (device_mixer_checks.hpp says what each
// checks).
#include <doctest/doctest.h>

#include <emergent/cuda/dot_attention.cuh>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/reference/dot_attention.hpp>

#include "device_mixer_checks.hpp"

namespace {

using namespace device_mixer_checks;

}  // namespace

TEST_CASE("device twin of DotAttention: y, dx and every gradient against the reference") {
  const emergent::reference::DotAttentionReference reference{kMixerShape.heads};
  check_twin_sizes<emergent::DotAttention>(reference);
}

TEST_CASE(
    "device ensemble of dot attention: each member's loss and every gradient equal the CPU "
    "model's") {
  check_ensemble_against_cpu<emergent::DotAttention, kEnsembleShape>();
}

TEST_CASE("device training of dot attention: 100 steps of a 2-seed ensemble follow the CPU runs") {
  check_training_against_cpu<emergent::DotAttention, kTrainingShape>();
}
