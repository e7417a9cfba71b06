// The contract every token mixer satisfies, so that Model<Mixer, Shape> can take any of them.
//
// A mixer is a class template on (Shape, Real) with
//   - `layout`: a constexpr TensorLayout of its parameters (local names such as "qkv.weight"),
//   - `Activations`: what the forward keeps for the backward, carved from an Arena by `carve`,
//   - `forward(params, x, y, acts, ctx)`: y[B*T,D] from x[B*T,D],
//   - `backward(params, grads, x, dy, dx, acts, ctx)`: dx[B*T,D] = dL/dx (overwritten) and
//     parameter gradients *accumulated* into grads (same layout as params).
#pragma once

#include <concepts>
#include <cstddef>

#include "../core/arena.hpp"

namespace emergent {

// Run-time inputs of a mixer that do not change the architecture.
template <class Real>
struct MixerContext {
  int batch = 0;
  int length = 0;
  // Additive attention bias c * P[query, key], P [length, length]; null when there is none.
  // Mixers without attention logits ignore it.
  const Real* bias_pattern = nullptr;
  Real bias_strength = 0;
};

template <class M, class Real = typename M::Real>
concept TokenMixer = requires(const Real* params, Real* grads, const Real* x, Real* y,
                              typename M::Activations& acts, Arena<Real>& arena,
                              const MixerContext<Real>& ctx) {
  { M::layout.total } -> std::convertible_to<std::size_t>;
  { M::carve(arena, acts, ctx.batch, ctx.length) };
  { M::forward(params, x, y, acts, ctx) };
  { M::backward(params, grads, x, x, y, acts, ctx) };
};

}  // namespace emergent
