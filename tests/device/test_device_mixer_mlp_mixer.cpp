// The causal MLP-Mixer on the device (device_mixer_checks.hpp: check_device_mixer).
#include <doctest/doctest.h>

#include <emergent/cuda/mlp_mixer.cuh>
#include <emergent/mixers/mlp_mixer.hpp>
#include <emergent/reference/mlp_mixer.hpp>

#include "device_mixer_checks.hpp"

TEST_CASE("device MLP-Mixer: twin, ensemble and training against the CPU") {
  device_mixer_checks::check_device_mixer<emergent::MlpMixer>(
      emergent::reference::MlpMixerReference{});
}
