// Mamba on the device: its twin against the reference, the whole model's step against the
// CPU model's, and 100 training steps against the CPU's (device_mixer_checks.hpp says what each
// checks).
#include <doctest/doctest.h>

#include <emergent/cuda/mamba.cuh>
#include <emergent/mixers/mamba.hpp>
#include <emergent/reference/mamba.hpp>

#include "device_mixer_checks.hpp"

namespace {

using namespace device_mixer_checks;

}  // namespace

TEST_CASE("device twin of Mamba: y, dx and every gradient against the reference") {
  const emergent::reference::MambaReference reference;
  check_twin_sizes<emergent::Mamba>(reference);
}

TEST_CASE("device ensemble of Mamba: each member's loss and every gradient equal the CPU model's") {
  check_ensemble_against_cpu<emergent::Mamba, kEnsembleShape>();
}

TEST_CASE("device training of Mamba: 100 steps of a 2-seed ensemble follow the CPU runs") {
  check_training_against_cpu<emergent::Mamba, kTrainingShape>();
}
