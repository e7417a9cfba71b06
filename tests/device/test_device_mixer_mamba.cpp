// Mamba on the device (device_mixer_checks.hpp: check_device_mixer).
#include <doctest/doctest.h>

#include <emergent/cuda/mamba.cuh>
#include <emergent/mixers/mamba.hpp>
#include <emergent/reference/mamba.hpp>

#include "device_mixer_checks.hpp"

TEST_CASE("device Mamba: twin, ensemble and training against the CPU") {
  device_mixer_checks::check_device_mixer<emergent::Mamba>(emergent::reference::MambaReference{});
}
