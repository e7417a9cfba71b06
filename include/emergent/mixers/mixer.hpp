// The contract every token mixer satisfies, so that Model<Mixer, Shape> can take any of them.
//
// A mixer is a class template on (Shape, Real) with
//   - `Scalar`: Real, for code outside the class (inside, the parameter Real itself: a member
//     alias named Real would make g++ 12 compile quadratically, docs/design.md "Build time"),
//   - `layout`: a constexpr TensorLayout of its parameters (local names such as "qkv.weight"),
//   - `Activations`: what the forward keeps for the backward, carved from an Arena by `carve`,
//   - `forward(params, x, y, acts, ctx)`: y[B*T,D] from x[B*T,D],
//   - `backward(params, grads, x, dy, dx, acts, ctx)`: dx[B*T,D] = dL/dx (overwritten) and
//     parameter gradients *accumulated* into grads (same layout as params).
// Optional members, each with a concept below:
//   - `init(params, seed, base, layer)`: fills the mixer's Init::custom tensors (MixerWithInit),
//   - `State`, `initial_state()`, `step(params, x_t, y_t, state)`: token-by-token decoding of one
//     sequence, equal to the parallel forward (RecurrentMixer),
//   - `Activations::att` [B, H, T, T]: attention probabilities kept for analysis (KeepsAttention),
//   - `causal = false`: the output at t sees the whole sequence (is_causal below).
// tests/mixer_suite.hpp runs the same checks over every mixer.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <emergent/core/arena.hpp>
#include <emergent/nn/mixer_context.hpp>

namespace emergent {

// Whether a mixer's output at t depends on positions after t: a mixer may declare
// `static constexpr bool causal = false`; otherwise it is causal.
template <class M>
constexpr bool is_causal() {
  if constexpr (requires { M::causal; })
    return M::causal;
  else
    return true;
}

template <class M, class Real = typename M::Scalar>
concept TokenMixer = requires(const Real* params, Real* grads, const Real* x, Real* y,
                              typename M::Activations& acts, Arena<Real>& arena,
                              const MixerContext<Real>& ctx) {
  { M::layout.total } -> std::convertible_to<std::size_t>;
  {M::carve(arena, acts, ctx.batch, ctx.length)};
  {M::forward(params, x, y, acts, ctx)};
  {M::backward(params, grads, x, x, y, acts, ctx)};
};

// Mixers with Init::custom tensors fill them here; `params` is this mixer's slice of layer
// `layer` (0 .. Shape::layers - 1; some inits depend on depth) and `base` its offset in the
// whole buffer, the index into Philox streams of `seed` that keeps an init independent of the
// machine.
template <class M, class Real = typename M::Scalar>
concept MixerWithInit = requires(Real* params, std::uint64_t seed, std::size_t base, int layer) {
  {M::init(params, seed, base, layer)};
};

// Recurrent mixers decode one token at a time from a state: step over t = 0..T-1 of one
// sequence gives the rows of forward's output.
template <class M, class Real = typename M::Scalar>
concept RecurrentMixer = requires(const Real* params, const Real* x, Real* y,
                                  typename M::State& state) {
  { M::initial_state() } -> std::same_as<typename M::State>;
  {M::step(params, x, y, state)};
};

// Mixers that keep attention probabilities att [batch, heads, T, T] for analysis.
template <class M>
concept KeepsAttention = requires(typename M::Activations& acts) {
  { acts.att } -> std::convertible_to<const typename M::Scalar*>;
};

}  // namespace emergent
