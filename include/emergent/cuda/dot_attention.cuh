// mixers/dot_attention.hpp on the device, for an ensemble: causal multi-head attention with the
// additive bias c P on the scores.
//
//   qkv = x W_qkv^T + b_qkv;  per head: S = q k^T / sqrt(d_head) + c P (keys j <= i),
//   A = softmax(S), o = A v;  y = concat_h(o) W_out^T + b_out
//
// The heads of every sequence of every member are G = E * B * H independent problems, each
// product one batched GEMM over all of them (cuBLAS or Eigen) that reads a head's q, k, v where
// the QKV projection wrote them and writes its output (and, backward, its dq, dk, dv) into the
// merged rows the next layer reads: a table of one pointer per problem (built once, with the
// buffers) stands for the copies into contiguous blocks that the CPU makes
// (attention_head_split.hpp). The GEMMs compute the whole T x T score block; the softmax writes
// exact zeros above the diagonal, so the masked half adds nothing to A v, A^T dO or dS.
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

// Where one layer's attention keeps its activations (device pointers; N = E * B * T tokens,
// G = E * B * H problems). The tables hold problem g's first element in the buffer above them.
struct AttentionActivations {
  float* qkv;            // [N, 3D]
  float* att;            // [G, T, T] softmax probabilities, zero above the diagonal
  float* out;            // [N, D] the heads' outputs, concatenated per token
  float* const* q_of;    // [G] q of problem g inside qkv (row stride 3D); k_of, v_of alike
  float* const* k_of;    // [G]
  float* const* v_of;    // [G]
  float* const* att_of;  // [G] att + g T T
  float* const* out_of;  // [G] inside out (row stride D)
};

// Backward scratch, shared by the layers.
struct AttentionScratch {
  float* d_att;            // [G, T, T] dA, then dS
  float* d_out;            // [N, D]
  float* d_qkv;            // [N, 3D]
  float* const* d_att_of;  // [G]
  float* const* d_out_of;  // [G] inside d_out (row stride D)
  float* const* d_q_of;    // [G] inside d_qkv (row stride 3D); d_k_of, d_v_of alike
  float* const* d_k_of;
  float* const* d_v_of;
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

// A table of problem g's [T, dh] block inside `buffer`, whose token rows are `width` wide, from
// `column`: buffer + ((g / H) T) width + column + (g % H) dh.
inline DeviceVector<float*> head_table(float* buffer, int width, int column,
                                       const AttentionGeometry& at) {
  DeviceVector<float*> table(at.problems());
  float** to = raw(table);
  const std::int64_t T = at.length, H = at.heads, dh = at.d_head();
  for_each_index(at.problems(), [=] EMERGENT_HD(std::int64_t g) {
    to[g] = buffer + (g / H) * T * width + column + (g % H) * dh;
  });
  return table;
}

// A table of problem g's [T, T] block of scores: buffer + g T T.
inline DeviceVector<float*> square_table(float* buffer, const AttentionGeometry& at) {
  DeviceVector<float*> table(at.problems());
  float** to = raw(table);
  const std::int64_t square = std::int64_t(at.length) * at.length;
  for_each_index(at.problems(), [=] EMERGENT_HD(std::int64_t g) { to[g] = buffer + g * square; });
  return table;
}

// The bias pattern's row for score row r (problem r / T, query r % T) of member e: the member's
// pattern, or with patterns per sequence that of the problem's sequence (heads problems each);
// null without a bias.
EMERGENT_HD inline const float* bias_row(const AttentionBias& bias, std::int64_t r, std::int64_t e,
                                         int heads, int T) {
  if (!bias.patterns) return nullptr;
  const std::int64_t pattern = bias.per_sequence ? r / T / heads : e;
  return bias.patterns + (pattern * T + r % T) * T;
}

#if EMERGENT_DEVICE_IS_CUDA
// The CUDA kernels of the two softmax passes: one warp per row of scores, the lanes striding over
// the keys (coalesced), max and sums by warp_max / warp_sum. Twins: the functors below.
template <class = void>
__global__ void causal_softmax_rows(float* att, AttentionBias bias, std::int64_t member_rows,
                                    std::int64_t all_rows, int T, int heads) {
  const std::int64_t r = (std::int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (r >= all_rows) return;
  const int i = int(r % T);
  float* row = att + r * T;
  const std::int64_t e = r / member_rows;
  const float* pattern = bias_row(bias, r, e, heads, T);
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
// each member, in order: sequence-major, `heads` per sequence), softmax over keys j <= i, zeros
// above.
inline void causal_softmax(float* att, AttentionBias bias, std::int64_t problems,
                           std::int64_t problems_per_member, int length, int heads) {
  const int T = length;
  const std::int64_t member_rows = problems_per_member * T;
#if EMERGENT_DEVICE_IS_CUDA
  if (run_cuda_kernel())
    return launch_warp_per_row(causal_softmax_rows<>, problems * T, att, bias, member_rows,
                               problems * T, T, heads);
#endif
  for_each_index(problems * T, [=] EMERGENT_HD(std::int64_t r) {  // the twin
    const int i = int(r % T);
    float* row = att + r * T;
    const std::int64_t e = r / member_rows;
    const float* pattern = bias_row(bias, r, e, heads, T);
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
                                  const AttentionActivations& a, AttentionBias bias,
                                  const AttentionGeometry& at, const float* residual = nullptr) {
  const DotAttentionOffsets& offsets = at.offsets;
  const int D = at.d_model, T = at.length, dh = at.d_head();
  const std::int64_t G = at.problems(), P = at.param_stride;
  {
    OpScope scope("attention.qkv.forward");
    linear_forward(a.qkv, x, p + offsets.qkv_weight, p + offsets.qkv_bias, P, at.members,
                   at.batch * std::int64_t(T), D, 3 * D);
  }
  {
    OpScope scope("attention.scores");
    gemm_batched(T, T, dh, 1.0f / std::sqrt(float(dh)), {a.q_of, 3 * D}, {a.k_of, 3 * D, Op::T},
                 0.0f, {a.att_of, T}, G);
  }
  {
    OpScope scope("attention.softmax");
    causal_softmax(a.att, bias, G, G / at.members, T, at.heads);
  }
  {
    OpScope scope("attention.av");
    gemm_batched(T, dh, T, 1.0f, {a.att_of, T}, {a.v_of, 3 * D}, 0.0f, {a.out_of, D}, G);
  }
  {
    OpScope scope("attention.out.forward");
    if (residual) {
      linear_forward(y, a.out, p + offsets.out_weight, nullptr, P, at.members,
                     at.batch * std::int64_t(T), D, D);
      bias_residual_forward(y, p + offsets.out_bias, residual, P, at.members,
                            at.batch * std::int64_t(T), D);
    } else {
      linear_forward(y, a.out, p + offsets.out_weight, p + offsets.out_bias, P, at.members,
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
    linear_backward(s.d_out, g + offsets.out_weight, g + offsets.out_bias, dy, a.out,
                    p + offsets.out_weight, P, at.members, rows, D, D);
  }
  {
    OpScope scope("attention.d_att");
    gemm_batched(T, T, dh, 1.0f, {s.d_out_of, D}, {a.v_of, 3 * D, Op::T}, 0.0f, {s.d_att_of, T}, G);
  }
  {
    OpScope scope("attention.softmax.backward");
    softmax_backward(s.d_att, a.att, 1.0f / std::sqrt(float(dh)), G, T);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_batched(T, dh, T, 1.0f, {s.d_att_of, T}, {a.k_of, 3 * D}, 0.0f, {s.d_q_of, 3 * D}, G);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_batched(T, dh, T, 1.0f, {s.d_att_of, T, Op::T}, {a.q_of, 3 * D}, 0.0f, {s.d_k_of, 3 * D},
                 G);
  }
  {
    OpScope scope("attention.dqkv_gemms");
    gemm_batched(T, dh, T, 1.0f, {a.att_of, T, Op::T}, {s.d_out_of, D}, 0.0f, {s.d_v_of, 3 * D}, G);
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

  static AttentionGeometry geometry(const MixerGeometry& at) {
    return {at.members, at.batch, at.length, D, H, at.param_stride, dot_attention_offsets<S>()};
  }
  struct Activations {
    explicit Activations(const MixerGeometry& mixer)
        : qkv(mixer.tokens() * 3 * D),
          att(geometry(mixer).problems() * mixer.length * mixer.length),
          out(mixer.tokens() * D) {
      const AttentionGeometry at = geometry(mixer);
      q_of = head_table(raw(qkv), 3 * D, 0, at);
      k_of = head_table(raw(qkv), 3 * D, D, at);
      v_of = head_table(raw(qkv), 3 * D, 2 * D, at);
      att_of = square_table(raw(att), at);
      out_of = head_table(raw(out), D, 0, at);
    }
    DeviceVector<float> qkv, att, out;
    DeviceVector<float*> q_of, k_of, v_of, att_of, out_of;
    AttentionActivations view() {
      return {raw(qkv),  raw(att),  raw(out),    raw(q_of),
              raw(k_of), raw(v_of), raw(att_of), raw(out_of)};
    }
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& mixer)
        : d_att(geometry(mixer).problems() * mixer.length * mixer.length),
          d_out(mixer.tokens() * D),
          d_qkv(mixer.tokens() * 3 * D) {
      const AttentionGeometry at = geometry(mixer);
      d_att_of = square_table(raw(d_att), at);
      d_out_of = head_table(raw(d_out), D, 0, at);
      d_q_of = head_table(raw(d_qkv), 3 * D, 0, at);
      d_k_of = head_table(raw(d_qkv), 3 * D, D, at);
      d_v_of = head_table(raw(d_qkv), 3 * D, 2 * D, at);
    }
    DeviceVector<float> d_att, d_out, d_qkv;
    DeviceVector<float*> d_att_of, d_out_of, d_q_of, d_k_of, d_v_of;
    AttentionScratch view() {
      return {raw(d_att),    raw(d_out),  raw(d_qkv),  raw(d_att_of),
              raw(d_out_of), raw(d_q_of), raw(d_k_of), raw(d_v_of)};
    }
  };

  static void forward(const float* p, const float* x, float* y, const float* residual,
                      Activations& acts, Scratch&, const MixerGeometry& at, AttentionBias bias) {
    dot_attention_forward(p, x, y, acts.view(), bias, geometry(at), residual);
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
