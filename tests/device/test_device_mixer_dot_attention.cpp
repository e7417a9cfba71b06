// Dot attention on the device (device_mixer_checks.hpp: check_device_mixer).
#include <doctest/doctest.h>

#include <emergent/cuda/dot_attention.cuh>
#include <emergent/mixers/dot_attention.hpp>
#include <emergent/reference/dot_attention.hpp>

#include "device_mixer_checks.hpp"

TEST_CASE("device dot attention: twin, ensemble and training against the CPU") {
  device_mixer_checks::check_device_mixer<emergent::DotAttention>(
      emergent::reference::DotAttentionReference{device_mixer_shapes::kMixerShape.heads});
}
