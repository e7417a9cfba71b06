// RWKV-4 on the device: its time mixing and, in place of the MLP, its channel mixing
// (device_mixer_checks.hpp: check_device_mixer).
#include <doctest/doctest.h>

#include <emergent/cuda/rwkv.cuh>
#include <emergent/cuda/rwkv_channel_mix.cuh>
#include <emergent/mixers/rwkv.hpp>
#include <emergent/mixers/rwkv_channel_mix.hpp>
#include <emergent/reference/rwkv.hpp>

#include "device_mixer_checks.hpp"

TEST_CASE("device RWKV-4: twin, ensemble and training against the CPU") {
  // off the init, which zeroes weights and with them most gradients
  device_mixer_checks::check_device_mixer<emergent::Rwkv, emergent::RwkvChannelMix>(
      emergent::reference::RwkvReference{}, 0.1);
  SUBCASE("the channel mixing's twin: y, dx and every gradient against the reference") {
    device_mixer_checks::check_twin_sizes<emergent::RwkvChannelMix>(
        emergent::reference::RwkvChannelMixReference{});
  }
}
