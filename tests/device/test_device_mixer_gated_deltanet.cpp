// Gated DeltaNet on the device: its twin against the reference, the whole model's step against the
// CPU model's, and 100 training steps against the CPU's (device_mixer_checks.hpp says what each
// checks).
#include <doctest/doctest.h>

#include <emergent/cuda/gated_deltanet.cuh>
#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/reference/gated_deltanet.hpp>

#include "device_mixer_checks.hpp"

namespace {

using namespace device_mixer_checks;

}  // namespace

TEST_CASE("device twin of GatedDeltaNet: y, dx and every gradient against the reference") {
  const emergent::reference::GatedDeltaNetReference reference{kMixerShape.heads};
  check_twin_sizes<emergent::GatedDeltaNet>(reference);
  // With the suite's parameters a head's decay is about 0.5 a token, so the state a chunk of 16
  // hands to the next is below rounding; with A_log = -5 it is about 0.99 a token, and the state
  // carried across three chunks counts in y and every gradient.
  using Cpu = emergent::GatedDeltaNet<kMixerShape, float>;
  check_twin<emergent::GatedDeltaNet>(reference, 2, 40, [](std::span<float> p) {
    std::fill_n(p.begin() + Cpu::a_log, kMixerShape.heads, -5.0f);
  });
}

TEST_CASE(
    "device ensemble of Gated DeltaNet: each member's loss and every gradient equal the CPU "
    "model's") {
  check_ensemble_against_cpu<emergent::GatedDeltaNet, kEnsembleShape>();
}

TEST_CASE("device training of Gated DeltaNet: 100 steps of a 2-seed ensemble follow the CPU runs") {
  check_training_against_cpu<emergent::GatedDeltaNet, kTrainingShape>();
}
