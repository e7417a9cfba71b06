// The frame that both attention mixers (dot_attention.hpp, bidirectional_attention.hpp) put around
// their per-head work: the fused QKV projection, one call per (sequence, head), in parallel, and
// the output projection; backward, the same in reverse, each head's dq, dk, dv merged into the
// projection's gradient. What a mixer does inside a head (its form of attention, its mask, its
// bias) is the function it passes. The mixer provides D, H, Dh and the offsets qkv_weight,
// qkv_bias, out_weight, out_bias of its parameters (both derive them from Tensors below); its
// activations qkv [B*T, 3D], heads and d_heads [B*T, D] (the heads' outputs, concatenated per
// token, and their gradient), d_qkv [B*T, 3D] and d_q, d_k, d_v [B, H, T, d_head].
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <emergent/core/layout.hpp>
#include <emergent/core/parallel.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <emergent/nn/linear.hpp>

namespace emergent::attention_head {

// The tensors of an attention mixer of width D, by name, and where each starts: the same for the
// causal and the bidirectional mixer, so that their models share checkpoints tensor by tensor.
template <int D>
struct Tensors {
  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"qkv.weight", 3 * D, D, true},
      TensorSpec{"qkv.bias", 0, 3 * D, false, Init::linear, D},
      TensorSpec{"out.weight", D, D, true},
      TensorSpec{"out.bias", 0, D, false, Init::linear, D},
  });
  static constexpr std::size_t qkv_weight = offset_of(layout, "qkv.weight");
  static constexpr std::size_t qkv_bias = offset_of(layout, "qkv.bias");
  static constexpr std::size_t out_weight = offset_of(layout, "out.weight");
  static constexpr std::size_t out_bias = offset_of(layout, "out.bias");
};

// One (sequence, head) problem: sequence b, head h, its index b H + h, and its offset in the
// [B, H, T, d_head] head buffers (q, k, v, d_q, ...).
struct Problem {
  std::int64_t b;
  int h;
  std::int64_t index;
  std::size_t offset;
};

// Problem `index` of sequences of length T, H heads of d_head Dh.
template <int H, int Dh>
Problem problem_of(std::int64_t index, int T) {
  return {index / H, static_cast<int>(index % H), index, static_cast<std::size_t>(index) * T * Dh};
}

// acts.qkv <- x W_qkv^T + b_qkv; head(Problem) for every (b, h), which writes the head's output
// into its columns of acts.heads; y <- acts.heads W_out^T + b_out.
template <class Mixer, class Real, class Acts, class Head>
void multi_head_forward(const Real* params, const Real* x, Real* y, Acts& acts, int B, int T,
                        Head&& head) {
  constexpr int D = Mixer::D, H = Mixer::H, Dh = Mixer::Dh;
  nn::linear_forward(acts.qkv, x, params + Mixer::qkv_weight, params + Mixer::qkv_bias, B * T, D,
                     3 * D);
  parallel_for(static_cast<std::int64_t>(B) * H,
               [&](std::int64_t bh) { head(problem_of<H, Dh>(bh, T)); });
  nn::linear_forward(y, acts.heads, params + Mixer::out_weight, params + Mixer::out_bias, B * T, D,
                     D);
}

// acts.d_heads <- dL/d(heads), the output projection's gradients; head(Problem) for every (b, h),
// which writes the head's dq, dk, dv at its offset of acts.d_q, d_k, d_v, merged into acts.d_qkv;
// dx <- dL/dx (overwritten) and the QKV projection's gradients.
template <class Mixer, class Real, class Acts, class Head>
void multi_head_backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                         Acts& acts, int B, int T, Head&& head) {
  constexpr int D = Mixer::D, H = Mixer::H, Dh = Mixer::Dh;
  nn::linear_backward(acts.d_heads, grads + Mixer::out_weight, grads + Mixer::out_bias, dy,
                      acts.heads, params + Mixer::out_weight, B * T, D, D);
  parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
    const Problem p = problem_of<H, Dh>(bh, T);
    head(p);
    merge_gradients<D, Dh>(acts.d_qkv + p.b * T * 3 * D, p.h, T, acts.d_q + p.offset,
                           acts.d_k + p.offset, acts.d_v + p.offset);
  });
  nn::linear_backward(dx, grads + Mixer::qkv_weight, grads + Mixer::qkv_bias, acts.d_qkv, x,
                      params + Mixer::qkv_weight, B * T, D, 3 * D);
}

}  // namespace emergent::attention_head
