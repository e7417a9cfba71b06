// The contract of a token mixer's device twin, so that EnsembleModel<Mixer, S> (cuda/model.cuh)
// takes any mixer that has one: a new twin is one file, cuda/<mixer>.cuh beside the CPU's
// mixers/<mixer>.hpp, and its test (tests/device/test_device_mixer_<mixer>.cpp).
//
// A twin is a class template on the Shape, in namespace emergent::cuda, named as its CPU mixer,
// with
//   - `Cpu`: the CPU mixer (MixerT<S, float>) whose parameter layout it shares, so that a
//     member's slice of the ensemble's buffer is that mixer's parameters in a CPU checkpoint;
//   - `Activations(geometry)`: the device buffers one layer's forward keeps for its backward;
//   - `Scratch(geometry)`: the backward's buffers, one set shared by the layers;
//   - `forward(p, x, y, residual, acts, scratch, geometry, bias)`: y = residual + mixer(x), [N, D]
//     over all N = E * B * T tokens of all members (the residual addition fused where it can be);
//   - `backward(p, g, x, dy, dx, acts, scratch, geometry)`: dx = dL/dx (overwritten) and
//     g += dL/dp, the gradients accumulated as the CPU mixers accumulate them; once per forward
//     (it may overwrite the activations: Mamba's replaces its states by their adjoints).
// p and g point at member 0's mixer parameters; member e's lie at + e * geometry.param_stride.
// The registration `device_twin<CpuMixer>` maps the CPU mixer to its twin, so that the ensemble
// is named by the CPU's mixer template, as Model is.
#pragma once

#include <concepts>
#include <cstdint>
#include <emergent/core/shape.hpp>

namespace emergent::cuda {

// Sizes of one layer's mixing over an ensemble, and where members' parameters lie.
struct MixerGeometry {
  int members, batch, length;
  std::int64_t param_stride;
  std::int64_t tokens() const { return std::int64_t(members) * batch * length; }
};

// The attention-bias intervention, c P added to the scores, each member with its own pattern P
// and strength c (a mixed ensemble's members may differ in both); null patterns leave it off.
// A task whose target moves from sequence to sequence (Dyck) has one pattern per sequence.
// Only the mixers the CPU lets take it read it (train/config.hpp refuses a bias for the others).
struct AttentionBias {
  const float* patterns = nullptr;   // [E, T, T], member e's at e T T; per sequence [E, B, T, T]
  const float* strengths = nullptr;  // [E]
  bool per_sequence = false;
};

template <class M>
concept DeviceMixer = std::constructible_from<typename M::Activations, const MixerGeometry&> &&
    std::constructible_from<typename M::Scratch, const MixerGeometry&> &&
    requires(const float* p, float* g, const float* x, float* y, typename M::Activations& acts,
             typename M::Scratch& scratch, const MixerGeometry& geometry, AttentionBias bias) {
  { M::Cpu::layout.total } -> std::convertible_to<std::size_t>;
  {M::forward(p, x, y, x, acts, scratch, geometry, bias)};
  {M::backward(p, g, x, x, y, acts, scratch, geometry)};
};

// device_twin<CpuMixer>::type is the twin of CpuMixer (= MixerT<S, float>); each twin's file
// specialises it.
template <class CpuMixer>
struct device_twin;

}  // namespace emergent::cuda
