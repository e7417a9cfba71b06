// The causal MLP-Mixer on the device: its twin against the reference, the whole model's step
// against the CPU model's, and 100 training steps against the CPU's (device_mixer_checks.hpp says
// what each checks).
#include <doctest/doctest.h>

#include <emergent/cuda/mlp_mixer.cuh>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/reference/mlp_mixer.hpp>

#include "device_mixer_checks.hpp"

namespace {

using namespace device_mixer_checks;

}  // namespace

TEST_CASE("device twin of MlpMixer: y, dx and every gradient against the reference") {
  const emergent::reference::MlpMixerReference reference;
  check_twin_sizes<emergent::MlpMixer>(reference);
}

TEST_CASE(
    "device ensemble of the causal MLP-Mixer: each member's loss and every gradient equal the CPU "
    "model's") {
  check_ensemble_against_cpu<emergent::MlpMixer, kEnsembleShape>();
}

TEST_CASE(
    "device training of the causal MLP-Mixer: 100 steps of a 2-seed ensemble follow the CPU runs") {
  check_training_against_cpu<emergent::MlpMixer, kTrainingShape>();
}
