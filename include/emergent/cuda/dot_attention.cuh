// mixers/dot_attention.hpp on the device, for an ensemble: causal multi-head attention with the
// additive bias c P on the scores.
//
//   qkv = x W_qkv^T + b_qkv;  per head: S = q k^T / sqrt(d_head) + c P (keys j <= i),
//   A = softmax(S), o = A v;  y = concat_h(o) W_out^T + b_out
//
// The heads of every sequence of every member are G = E * B * H independent problems: their
// q, k, v are copied into contiguous [G, T, d_head] blocks (as attention_head_split.hpp does on
// the CPU) so that each product is one strided-batched GEMM over all of them, on cuBLAS or
// Eigen. The GEMMs compute the whole T x T score block; the softmax writes exact zeros above the
// diagonal, so the masked half adds nothing to A v, A^T dO or dS.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/mixers/dot_attention.hpp>

namespace emergent::cuda {

// Where one layer's attention keeps its activations (device pointers; [G, T, dh] blocks have
// N * D values, N = E * B * T tokens, G = E * B * H).
struct AttentionActivations {
  float* qkv;    // [N, 3D]
  float* q;      // [G, T, dh]
  float* k;      // [G, T, dh]
  float* v;      // [G, T, dh]
  float* att;    // [G, T, T] softmax probabilities, zero above the diagonal
  float* heads;  // [N, D] concatenated head outputs
};

// Backward scratch, shared by the layers.
struct AttentionScratch {
  float* head_block;  // [G, T, dh] o in the forward, dO in the backward
  float* d_att;       // [G, T, T] dA, then dS
  float* d_q;         // [G, T, dh]
  float* d_k;
  float* d_v;
  float* d_heads;  // [N, D]
  float* d_qkv;    // [N, 3D]
};

// Where DotAttention<S> keeps its tensors, from the start of its parameters.
struct DotAttentionOffsets {
  std::size_t qkv_weight, qkv_bias, out_weight, out_bias;
};
template <Shape S>
constexpr DotAttentionOffsets dot_attention_offsets() {
  using Mixer = ::emergent::DotAttention<S, float>;
  return {Mixer::qkv_weight, Mixer::qkv_bias, Mixer::out_weight, Mixer::out_bias};
}

// Sizes, and where the parameters lie.
struct AttentionGeometry {
  int members, batch, length, d_model, heads;
  std::int64_t param_stride;
  DotAttentionOffsets offsets;
  std::int64_t tokens() const { return std::int64_t(members) * batch * length; }
  std::int64_t problems() const { return std::int64_t(members) * batch * heads; }
  int d_head() const { return d_model / heads; }
};

namespace attention_detail {

// dst[g, t, d] <- src[(g / H) * T + t, column + (g % H) * dh + d] for `width`-wide rows of src
inline void split_heads(float* dst, const float* src, int width, int column,
                        const AttentionGeometry& at) {
  const int T = at.length, H = at.heads, dh = at.d_head();
  for_each_index(at.tokens() * at.d_model, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t g = i / (std::int64_t(T) * dh);
    const std::int64_t t = (i / dh) % T;
    const int d = int(i % dh);
    dst[i] = src[((g / H) * T + t) * width + column + (g % H) * dh + d];
  });
}

// dst[(g / H) * T + t, column + (g % H) * dh + d] <- src[g, t, d]
inline void merge_heads(float* dst, const float* src, int width, int column,
                        const AttentionGeometry& at) {
  const int T = at.length, H = at.heads, dh = at.d_head(), D = at.d_model;
  for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t row = i / D;
    const int c = int(i % D), h = c / dh, d = c % dh;
    const std::int64_t g = (row / T) * H + h, t = row % T;
    dst[row * width + column + c] = src[(g * T + t) * dh + d];
  });
}

}  // namespace attention_detail

#if EMERGENT_DEVICE_IS_CUDA
// The CUDA kernels of the two softmax passes: one warp per row of scores, the lanes striding over
// the keys (coalesced), max and sums by warp_max / warp_sum. Twins: the functors below.
template <class = void>
__global__ void causal_softmax_rows(float* att, AttentionBias bias, std::int64_t member_rows,
                                    std::int64_t all_rows, int T) {
  const std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= all_rows) return;
  const int i = int(r % T);
  float* row = att + r * T;
  const std::int64_t e = r / member_rows;
  const float* pattern = bias.patterns ? bias.patterns + (e * T + i) * T : nullptr;
  const float c = bias.patterns ? bias.strengths[e] : 0.0f;
  float max = -INFINITY;
  for (int j = lane; j <= i; j += 32) {
    if (pattern) row[j] += c * pattern[j];
    max = row[j] > max ? row[j] : max;
  }
  max = warp_max(max);
  float sum = 0;
  for (int j = lane; j <= i; j += 32) {
    row[j] = expf(row[j] - max);
    sum += row[j];
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int j = lane; j <= i; j += 32) row[j] *= inv;
  for (int j = i + 1 + lane; j < T; j += 32) row[j] = 0.0f;
}

template <class = void>
__global__ void softmax_backward_rows(float* d_att, const float* att, float scale,
                                      std::int64_t all_rows, int T) {
  const std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= all_rows) return;
  const int i = int(r % T);
  const float* a = att + r * T;
  float* ds = d_att + r * T;
  float row_dot = 0;
  for (int j = lane; j <= i; j += 32) row_dot += a[j] * ds[j];
  row_dot = warp_sum(row_dot);
  for (int j = lane; j <= i; j += 32) ds[j] = a[j] * (ds[j] - row_dot) * scale;
  for (int j = i + 1 + lane; j < T; j += 32) ds[j] = 0.0f;
}
#endif

// Scores in att are scaled already; adds member e's c_e P_e (problems_per_member problems of
// each member, in order), softmax over keys j <= i, zeros above.
inline void causal_softmax(float* att, AttentionBias bias, std::int64_t problems,
                           std::int64_t problems_per_member, int length) {
  const int T = length;
  const std::int64_t member_rows = problems_per_member * T;
#if EMERGENT_DEVICE_IS_CUDA
  if (run_cuda_kernel())
    return launch_warp_per_row(causal_softmax_rows<>, problems * T, att, bias, member_rows,
                               problems * T, T);
#endif
  for_each_index(problems * T, [=] EMERGENT_HD(std::int64_t r) {  // the twin
    const int i = int(r % T);
    float* row = att + r * T;
    const std::int64_t e = r / member_rows;
    const float* pattern = bias.patterns ? bias.patterns + (e * T + i) * T : nullptr;
    const float c = bias.patterns ? bias.strengths[e] : 0.0f;
    float max = -INFINITY;
    for (int j = 0; j <= i; ++j) {
      if (pattern) row[j] += c * pattern[j];
      max = row[j] > max ? row[j] : max;
    }
    float sum = 0;
    for (int j = 0; j <= i; ++j) {
      row[j] = expf(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j <= i; ++j) row[j] *= inv;
    for (int j = i + 1; j < T; ++j) row[j] = 0.0f;
  });
}

// d_att (dA on entry, dS on return) = A (dA - rowsum(A dA)) scale
inline void softmax_backward(float* d_att, const float* att, float scale, std::int64_t problems,
                             int length) {
  const int T = length;
#if EMERGENT_DEVICE_IS_CUDA
  if (run_cuda_kernel())
    return launch_warp_per_row(softmax_backward_rows<>, problems * T, d_att, att, scale,
                               problems * T, T);
#endif
  for_each_index(problems * T, [=] EMERGENT_HD(std::int64_t r) {  // the twin
    const int i = int(r % T);
    const float* a = att + r * T;
    float* ds = d_att + r * T;
    float row_dot = 0;
    for (int j = 0; j <= i; ++j) row_dot += a[j] * ds[j];
    for (int j = 0; j <= i; ++j) ds[j] = a[j] * (ds[j] - row_dot) * scale;
    for (int j = i + 1; j < T; ++j) ds[j] = 0.0f;
  });
}

// y[N, D] <- x[N, D]; p: the mixer's parameters of member 0 (member e at + e * param_stride),
// laid out as at.offsets says. With `residual` [N, D], y = attention(x) + residual, the addition
// fused into the output layer's bias pass.
inline void dot_attention_forward(const float* p, const float* x, float* y,
                                  const AttentionActivations& a, const AttentionScratch& s,
                                  AttentionBias bias, const AttentionGeometry& at,
                                  const float* residual = nullptr) {
  const DotAttentionOffsets& offsets = at.offsets;
  const int D = at.d_model, T = at.length, dh = at.d_head();
  const std::int64_t G = at.problems(), P = at.param_stride;
  {
    OpScope scope("attention.qkv.forward");
    linear_forward(a.qkv, x, p + offsets.qkv_weight, p + offsets.qkv_bias, P, at.members,
                   at.batch * std::int64_t(T), D, 3 * D);
  }
  {
    OpScope scope("attention.split_heads");
    attention_detail::split_heads(a.q, a.qkv, 3 * D, 0, at);
  }
  {
    OpScope scope("attention.split_heads");
    attention_detail::split_heads(a.k, a.qkv, 3 * D, D, at);
  }
  {
    OpScope scope("attention.split_heads");
    attention_detail::split_heads(a.v, a.qkv, 3 * D, 2 * D, at);
  }
  const std::int64_t block = std::int64_t(T) * dh, square = std::int64_t(T) * T;
  {
    OpScope scope("attention.scores");
    gemm_strided_batched(T, T, dh, 1.0f / std::sqrt(float(dh)), {a.q, dh, block},
                         {a.k, dh, block, Op::T}, 0.0f, a.att, T, square, G);
  }
  {
    OpScope scope("attention.softmax");
    causal_softmax(a.att, bias, G, G / at.members, T);
  }
  {
    OpScope scope("attention.av");
    gemm_strided_batched(T, dh, T, 1.0f, {a.att, T, square}, {a.v, dh, block}, 0.0f, s.head_block,
                         dh, block, G);
  }
  {
    OpScope scope("attention.merge_heads");
    attention_detail::merge_heads(a.heads, s.head_block, D, 0, at);
  }
  {
    OpScope scope("attention.out.forward");
    if (residual) {
      linear_forward(y, a.heads, p + offsets.out_weight, nullptr, P, at.members,
                     at.batch * std::int64_t(T), D, D);
      bias_residual_forward(y, p + offsets.out_bias, residual, P, at.members,
                            at.batch * std::int64_t(T), D);
    } else {
      linear_forward(y, a.heads, p + offsets.out_weight, p + offsets.out_bias, P, at.members,
                     at.batch * std::int64_t(T), D, D);
    }
  }
}

// dx[N, D] = dL/dx (overwritten); grads g (same layout as p) += dL/dparams
inline void dot_attention_backward(const float* p, float* g, const float* x, const float* dy,
                                   float* dx, const AttentionActivations& a,
                                   const AttentionScratch& s, const AttentionGeometry& at) {
  const DotAttentionOffsets& offsets = at.offsets;
  const int D = at.d_model, T = at.length, dh = at.d_head();
  const std::int64_t G = at.problems(), P = at.param_stride, rows = at.batch * std::int64_t(T);
  {
    OpScope scope("attention.out.backward");
    linear_backward(s.d_heads, g + offsets.out_weight, g + offsets.out_bias, dy, a.heads,
                    p + offsets.out_weight, P, at.members, rows, D, D);
  }
  {
    OpScope scope("attention.split_heads");
    attention_detail::split_heads(s.head_block, s.d_heads, D, 0, at);
  }  // dO
  const std::int64_t block = std::int64_t(T) * dh, square = std::int64_t(T) * T;
  {
    OpScope scope("attention.d_att");
    gemm_strided_batched(T, T, dh, 1.0f, {s.head_block, dh, block}, {a.v, dh, block, Op::T}, 0.0f,
                         s.d_att, T, square, G);
  }
  {
    OpScope scope("attention.softmax.backward");
    softmax_backward(s.d_att, a.att, 1.0f / std::sqrt(float(dh)), G, T);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_strided_batched(T, dh, T, 1.0f, {s.d_att, T, square}, {a.k, dh, block}, 0.0f, s.d_q, dh,
                         block, G);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_strided_batched(T, dh, T, 1.0f, {s.d_att, T, square, Op::T}, {a.q, dh, block}, 0.0f, s.d_k,
                         dh, block, G);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_strided_batched(T, dh, T, 1.0f, {a.att, T, square, Op::T}, {s.head_block, dh, block}, 0.0f,
                         s.d_v, dh, block, G);
  }
  {
    OpScope scope("attention.merge_heads");
    attention_detail::merge_heads(s.d_qkv, s.d_q, 3 * D, 0, at);
  }
  {
    OpScope scope("attention.merge_heads");
    attention_detail::merge_heads(s.d_qkv, s.d_k, 3 * D, D, at);
  }
  {
    OpScope scope("attention.merge_heads");
    attention_detail::merge_heads(s.d_qkv, s.d_v, 3 * D, 2 * D, at);
  }
  {
    OpScope scope("attention.qkv.backward");
    linear_backward(dx, g + offsets.qkv_weight, g + offsets.qkv_bias, s.d_qkv, x,
                    p + offsets.qkv_weight, P, at.members, rows, D, 3 * D);
  }
}

// The twin of DotAttention<S, float> (cuda/mixer.cuh's contract) over the functions above.
template <Shape S>
struct DotAttention {
  using Cpu = ::emergent::DotAttention<S, float>;
  static constexpr int D = S.d_model, H = S.heads;

  struct Activations {
    explicit Activations(const MixerGeometry& at) {
      const std::size_t N = at.tokens(),
                        square = std::size_t(at.members) * at.batch * H * at.length * at.length;
      qkv.resize(N * 3 * D);
      for (auto* v : {&q, &k, &v, &heads}) v->resize(N * D);
      att.resize(square);
    }
    DeviceVector<float> qkv, q, k, v, att, heads;
    AttentionActivations view() { return {raw(qkv), raw(q), raw(k), raw(v), raw(att), raw(heads)}; }
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      const std::size_t N = at.tokens(),
                        square = std::size_t(at.members) * at.batch * H * at.length * at.length;
      for (auto* v : {&head_block, &d_q, &d_k, &d_v, &d_heads}) v->resize(N * D);
      d_att.resize(square);
      d_qkv.resize(N * 3 * D);
    }
    DeviceVector<float> head_block, d_att, d_q, d_k, d_v, d_heads, d_qkv;
    AttentionScratch view() {
      return {raw(head_block), raw(d_att), raw(d_q), raw(d_k), raw(d_v), raw(d_heads), raw(d_qkv)};
    }
  };

  static AttentionGeometry geometry(const MixerGeometry& at) {
    return {at.members, at.batch, at.length, D, H, at.param_stride, dot_attention_offsets<S>()};
  }
  static void forward(const float* p, const float* x, float* y, const float* residual,
                      Activations& acts, Scratch& scratch, const MixerGeometry& at,
                      AttentionBias bias) {
    dot_attention_forward(p, x, y, acts.view(), scratch.view(), bias, geometry(at), residual);
  }
  static void backward(const float* p, float* g, const float* x, const float* dy, float* dx,
                       Activations& acts, Scratch& scratch, const MixerGeometry& at) {
    dot_attention_backward(p, g, x, dy, dx, acts.view(), scratch.view(), geometry(at));
  }
};
template <Shape S>
struct device_twin<::emergent::DotAttention<S, float>> {
  using type = DotAttention<S>;
};

}  // namespace emergent::cuda
