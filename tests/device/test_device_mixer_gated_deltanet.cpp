// Gated DeltaNet on the device (device_mixer_checks.hpp: check_device_mixer).
#include <doctest/doctest.h>

#include <emergent/cuda/gated_deltanet.cuh>
#include <emergent/mixers/gated_deltanet.hpp>
#include <emergent/reference/gated_deltanet.hpp>

#include "device_mixer_checks.hpp"

TEST_CASE("device Gated DeltaNet: twin, ensemble and training against the CPU") {
  using device_mixer_shapes::kMixerShape;
  const emergent::reference::GatedDeltaNetReference reference{kMixerShape.heads};
  device_mixer_checks::check_device_mixer<emergent::GatedDeltaNet>(reference);
  // With the suite's parameters a head's decay is about 0.5 a token, so the state a chunk of 16
  // hands to the next is below rounding; with A_log = -5 it is about 0.99 a token, and the state
  // carried across three chunks counts in y and every gradient.
  SUBCASE("the twin with slow decays, across three chunks") {
    using Cpu = emergent::GatedDeltaNet<kMixerShape, float>;
    device_mixer_checks::check_twin<emergent::GatedDeltaNet>(
        reference, 2, 40,
        [](std::span<float> p) { std::fill_n(p.begin() + Cpu::a_log, kMixerShape.heads, -5.0f); });
  }
}
