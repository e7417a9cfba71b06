// Every mixer's device twin (cuda/mixer.cuh's contract) against the same Eigen reference as its
// CPU mixer (tests/mixer_suite.hpp): an ensemble of members with their own parameters, on
// awkward sizes, each member's y (less the residual the twin adds), dL/dx and every parameter
// gradient; and a second forward and backward must add the same gradients to what the buffers
// held. A new twin is one test case here.
// (The attention bias is checked in test_device_ops.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/cuda/dot_attention.cuh>
#include <emergent/cuda/gated_deltanet.cuh>
#include <emergent/cuda/mamba.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/mlp_mixer.cuh>
#include <emergent/cuda/rwkv.cuh>
#include <emergent/cuda/rwkv_channel_mix.cuh>
#include <emergent/reference/dot_attention.hpp>
#include <emergent/reference/gated_deltanet.hpp>
#include <emergent/reference/mamba.hpp>
#include <emergent/reference/mlp_mixer.hpp>
#include <emergent/reference/rwkv.hpp>
#include <span>
#include <vector>

#include "../mixer_suite.hpp"
#include "device_checks.hpp"

namespace device_mixer_shapes {
inline constexpr emergent::Shape kMixerShape{
    .vocab = 2, .d_model = 12, .heads = 3, .layers = 1, .d_ff = 8, .max_len = 20};
}

namespace {

using device_mixer_shapes::kMixerShape;
using emergent::Shape;
namespace cuda = emergent::cuda;
using cuda::copy_to_host;
using cuda::DeviceVector;
using cuda::raw;
using device_checks::random_floats;
using device_checks::to_device;

constexpr int kMixerMembers = 3;
constexpr double kMixerTolerance = 2e-5;  // relative, float against the double reference

// adjust(member's parameters) may set some of them before the check (the default leaves them).
template <template <Shape, class> class MixerT, class Reference,
          class Adjust = void (*)(std::span<float>)>
void check_twin(
    const Reference& reference, int batch, int length, Adjust adjust = [](std::span<float>) {}) {
  using Cpu = MixerT<kMixerShape, float>;
  using Twin = typename cuda::device_twin<Cpu>::type;
  static_assert(cuda::DeviceMixer<Twin>);
  constexpr int D = kMixerShape.d_model;
  CAPTURE(batch);
  CAPTURE(length);
  const std::int64_t stride = Cpu::layout.total + 24;  // members' parameters apart, not packed
  const std::size_t per_member = std::size_t(batch) * length * D, n = kMixerMembers * per_member;
  std::vector<float> params(kMixerMembers * stride, 0.0f);
  for (int e = 0; e < kMixerMembers; ++e) {
    const std::vector<double> p = mixer_suite::mixer_parameters<MixerT, kMixerShape>(30 + e, 0.1);
    std::copy(p.begin(), p.end(), params.begin() + e * stride);
    adjust(std::span<float>(params).subspan(e * stride, Cpu::layout.total));
  }
  const std::vector<float> x = random_floats(n, 1), dy = random_floats(n, 2),
                           residual = random_floats(n, 3), g0 = random_floats(params.size(), 4);
  DeviceVector<float> p = to_device(params), xd = to_device(x), dyd = to_device(dy),
                      rd = to_device(residual), g(params.size(), 0.0f), g_added = to_device(g0),
                      y(n), dx(n);
  const cuda::MixerGeometry geometry{kMixerMembers, batch, length, stride};
  typename Twin::Activations acts(geometry);
  typename Twin::Scratch scratch(geometry);
  Twin::forward(raw(p), raw(xd), raw(y), raw(rd), acts, scratch, geometry, {});
  Twin::backward(raw(p), raw(g), raw(xd), raw(dyd), raw(dx), acts, scratch, geometry);
  const std::vector<float> g_host = copy_to_host(g);
  Twin::forward(raw(p), raw(xd), raw(y), raw(rd), acts, scratch, geometry, {});
  Twin::backward(raw(p), raw(g_added), raw(xd), raw(dyd), raw(dx), acts, scratch, geometry);
  const std::vector<float> y_host = copy_to_host(y), dx_host = copy_to_host(dx),
                           added = copy_to_host(g_added);
  double worst_addition = 0;  // |added - (g0 + g)|, in units of float rounding of the sum
  for (std::size_t i = 0; i < added.size(); ++i)
    worst_addition = std::max(worst_addition, std::abs(double(added[i]) - (g0[i] + g_host[i])) /
                                                  (std::abs(g0[i]) + std::abs(g_host[i]) + 1e-30));
  CHECK(worst_addition < 1e-6);
  for (int e = 0; e < kMixerMembers; ++e) {
    CAPTURE(e);
    const auto member = [&](const std::vector<float>& v) {
      return std::span<const float>(v).subspan(e * per_member, per_member);
    };
    std::vector<float> mixed(per_member), grads(Cpu::layout.total);
    for (std::size_t i = 0; i < per_member; ++i)
      mixed[i] = y_host[e * per_member + i] - residual[e * per_member + i];
    std::copy_n(g_host.begin() + e * stride, grads.size(), grads.begin());
    const std::span<const float> member_params(params.data() + e * stride, Cpu::layout.total);
    reference_checks::check_mixer_close<Cpu, float>(
        mixed, member(dx_host), grads,
        reference_checks::reference_batch<Cpu, float>(reference, member_params, member(x),
                                                      member(dy), batch, length),
        kMixerTolerance);
  }
}

// The awkward sizes every twin is checked at: (batch, length) = (2, 9), (3, 1) and (1, 20).
template <template <Shape, class> class MixerT, class Reference>
void check_twin_sizes(const Reference& reference) {
  check_twin<MixerT>(reference, 2, 9);
  check_twin<MixerT>(reference, 3, 1);
  check_twin<MixerT>(reference, 1, 20);
}

TEST_CASE("device twin of DotAttention: y, dx and every gradient against the reference") {
  const emergent::reference::DotAttentionReference reference{kMixerShape.heads};
  check_twin_sizes<emergent::DotAttention>(reference);
}

TEST_CASE("device twin of MlpMixer: y, dx and every gradient against the reference") {
  const emergent::reference::MlpMixerReference reference;
  check_twin_sizes<emergent::MlpMixer>(reference);
}

TEST_CASE("device twin of Mamba: y, dx and every gradient against the reference") {
  const emergent::reference::MambaReference reference;
  check_twin_sizes<emergent::Mamba>(reference);
}

TEST_CASE("device twin of RWKV's time mixing: y, dx and every gradient against the reference") {
  const emergent::reference::RwkvReference reference;
  check_twin_sizes<emergent::Rwkv>(reference);
}

TEST_CASE("device twin of RWKV's channel mixing: y, dx and every gradient against the reference") {
  const emergent::reference::RwkvChannelMixReference reference;
  check_twin_sizes<emergent::RwkvChannelMix>(reference);
}

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

}  // namespace
