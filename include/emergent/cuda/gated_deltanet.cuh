// mixers/gated_deltanet.hpp on the device, for an ensemble: the Gated DeltaNet layer (its opening
// comment has the equations and the backward), with the same parameters in the same layout, as
// the CPU's GatedDeltaNet (the chunked form) lays them out; a member's slice is its checkpoint.
//
// The form of the recurrence is the RECURRENT one (gated_deltanet_recurrent.hpp), token by token;
// the chunked form (UT transform) is a later speed step. Its parallelism: the state h [Dh(k) x
// Dh(v)] of a head splits into Dh value columns whose forward recurrences are independent
// (u_j = v_j - alpha h[:, j] . k, h[:, j] = alpha h[:, j] + beta k u_j, o_j = h[:, j] . q), so the
// scan is one index per (member, sequence, head, value column j), walking the tokens in order
// with its Dh floats of state in registers, and writing the state of every token h_t,
// [tokens, H, Dh, Dh] (D Dh floats a token: 2,048 at D = 128, H = 8; the memory estimate counts
// them; the CPU keeps one state per chunk of 16 tokens and recomputes the rest).
// Kept besides, per token: the projections (4 D + 2 H), g and beta (2 H), q^, k^, v (3 D), o and
// the gated heads (2 D): D Dh + 9 D + 4 H floats a token in all, 3,232 at D = 128, H = 8 (the
// CPU keeps 1,312); the backward's scratch, one set shared by the layers, is 12 D + 3 H more.
// The backward (the recurrent form's sequential BPTT) runs per column as well, its adjoint dh[:, j]
// in registers: the sums over columns are separate fixed-order passes: dq_t = h_t do_t reads the
// states before the backward scan; the scan then replaces h_t by the column terms of dk_t
// (beta dh[:, j] u_j - alpha h_{t-1}[:, j] du_j) once it no longer needs it (h_{t-1}, which step t
// reads, is replaced only at step t - 1), and writes the column terms of dbeta_t (u_j k . dh[:, j])
// and dg_t (alpha <dh~[:, j], h_{t-1}[:, j]>), which the next passes sum over j.
//
// Everything around the recurrence is as the CPU computes it: the six projections (q, k, v, the
// output gate, a and b) are strided-batched GEMMs over the members into one [tokens, 4D + 2H]
// buffer (q | k | v | gate | a | b; the parameter tensors need not be adjacent); the causal
// depthwise conv, SiLU and l2 norm of q, k, v one index per (token, head, q/k/v), recomputed in
// the backward as the CPU does; the gates, RMSNorm and output gate one index per (token, head).
// Sums over tokens (conv weights, A_log, dt_bias, o_norm.weight) go through reduce.cuh's fixed
// order; no atomics anywhere.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/reduce.cuh>
#include <emergent/mixers/gated_deltanet.hpp>

namespace emergent::cuda {

namespace detail {
// softplus(z) = max(z, 0) + log1p(exp(-|z|)) (nn/softplus.hpp)
EMERGENT_HD inline float gdn_softplus(float z) {
  return (z > 0 ? z : 0.0f) + log1pf(expf(-fabsf(z)));
}
// The short causal convolution of q, k or v (`which` 0, 1, 2) for one head of one token: the
// pre-activations of its n channels (columns col .. col + n of the [tokens, W] projection
// buffer, weights w [n, K]), t the token's position in its sequence. The forward and the
// backward (which recomputes it) share it.
template <int K>
EMERGENT_HD inline void gdn_conv_head(const float* proj, std::int64_t W, const float* w,
                                      std::int64_t token, int t, int col, int n, float* pre) {
  for (int c = 0; c < n; ++c) {
    float acc = 0.0f;
    for (int j = (K - 1 - t > 0 ? K - 1 - t : 0); j < K; ++j)
      acc += w[c * K + j] * proj[(token - (K - 1) + j) * W + col + c];
    pre[c] = acc;
  }
}
// The conv weights of q, k or v.
EMERGENT_HD inline const float* gdn_conv_weights(int which, const float* q, const float* k,
                                                 const float* v) {
  return which == 0 ? q : which == 1 ? k : v;
}
// Where a projection of x lies: its weight [out, D] in the parameters, its columns in the
// [tokens, 4D + 2H] projection buffer.
struct GdnProjection {
  std::size_t weight;
  int column, out;
};
}  // namespace detail

template <Shape S>
struct GatedDeltaNetMixer {
  using Cpu = ::emergent::GatedDeltaNet<S, float>;
  static constexpr int D = Cpu::D, H = Cpu::H, Dh = Cpu::Dh, K = Cpu::kConv;
  // Columns of the projection buffer: q | k | v | output gate | a | b.
  static constexpr int kQ = 0, kK = D, kV = 2 * D, kG = 3 * D, kA = 4 * D, kB = 4 * D + H,
                       W = 4 * D + 2 * H;
  static constexpr float kL2Eps = float(Cpu::kL2Eps), kNormEps = float(Cpu::kNormEps),
                         kMinLogDecay = float(Cpu::kMinLogDecay);
  static constexpr std::array<detail::GdnProjection, 6> projections{{{Cpu::q_weight, kQ, D},
                                                                     {Cpu::k_weight, kK, D},
                                                                     {Cpu::v_weight, kV, D},
                                                                     {Cpu::g_weight, kG, D},
                                                                     {Cpu::a_weight, kA, H},
                                                                     {Cpu::b_weight, kB, H}}};

  struct Activations {
    explicit Activations(const MixerGeometry& at) {
      const std::size_t tokens = at.tokens();
      proj.resize(tokens * W);
      gates.resize(tokens * 2 * H);
      qkv.resize(tokens * 3 * D);
      o.resize(tokens * D);
      heads.resize(tokens * D);
      states.resize(tokens * D * Dh);
    }
    DeviceVector<float> proj;    // [tokens, 4D + 2H] x W^T: q | k | v (conv inputs) | gate | a | b
    DeviceVector<float> gates;   // [tokens, 2H] g (log decay, clamped) | beta
    DeviceVector<float> qkv;     // [tokens, 3D] q^ (l2-normalised / sqrt(Dh)) | k^ | v
    DeviceVector<float> o;       // [tokens, D] the recurrence's output, head by head
    DeviceVector<float> heads;   // [tokens, D] normed, gated heads: o_proj's input
    DeviceVector<float> states;  // [tokens, H, Dh, Dh] h_t (the backward overwrites it)
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      const std::size_t tokens = at.tokens();
      for (auto* v : {&d_heads, &d_o, &norm_terms, &beta_terms, &decay_terms})
        v->resize(tokens * D);
      d_qkv.resize(tokens * 3 * D);
      d_proj.resize(tokens * W);
      d_g.resize(tokens * H);
    }
    DeviceVector<float> d_heads;      // [tokens, D] dL/d heads
    DeviceVector<float> d_o;          // [tokens, D] dL/do
    DeviceVector<float> norm_terms;   // [tokens, D] dL/d o_norm.weight of each token and head
    DeviceVector<float> d_qkv;        // [tokens, 3D] dL/dq^ | dk^ | dv, then dL/d conv output
    DeviceVector<float> beta_terms;   // [tokens, H, Dh] column terms of dL/dbeta
    DeviceVector<float> decay_terms;  // [tokens, H, Dh] column terms of dL/dg
    DeviceVector<float> d_g;          // [tokens, H] dL/dg
    DeviceVector<float> d_proj;       // [tokens, 4D + 2H] dL/d projections
  };

  static void forward(const float* p, const float* x, float* out, const float* residual,
                      Activations& a, Scratch& /*scratch*/, const MixerGeometry& at,
                      AttentionBias /*bias: config.hpp refuses one for this mixer*/) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("gated_deltanet.projections.forward");
      for (const detail::GdnProjection& pr : projections)
        gemm_strided_batched(int(rows), pr.out, D, 1.0f, {x, D, rows * D},
                             {p + pr.weight, D, stride, Op::T}, 0.0f, raw(a.proj) + pr.column, W,
                             rows * W, at.members);
    }
    {
      OpScope scope("gated_deltanet.gates");  // g = -exp(A_log) softplus(a + dt_bias), beta
      const float *proj = raw(a.proj), *a_log = p + Cpu::a_log, *dt_bias = p + Cpu::dt_bias;
      float* gates = raw(a.gates);
      for_each_index(tokens * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / H, m = token / rows;
        const int h = int(i % H);
        const float z = proj[token * W + kA + h] + dt_bias[m * stride + h];
        const float g = -expf(a_log[m * stride + h]) * detail::gdn_softplus(z);
        gates[token * 2 * H + h] = g < kMinLogDecay ? kMinLogDecay : g;
        gates[token * 2 * H + H + h] = 1.0f / (1.0f + expf(-proj[token * W + kB + h]));
      });
    }
    {
      OpScope scope("gated_deltanet.conv_silu_l2");  // one index per (token, q/k/v, head)
      const float* proj = raw(a.proj);
      const float *conv_q = p + Cpu::q_conv, *conv_k = p + Cpu::k_conv, *conv_v = p + Cpu::v_conv;
      float* qkv = raw(a.qkv);
      for_each_index(tokens * 3 * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / (3 * H), m = token / rows;
        const int which = int(i / H % 3), h = int(i % H), t = int(token % T),
                  col = which * D + h * Dh;
        const float* w =
            detail::gdn_conv_weights(which, conv_q, conv_k, conv_v) + m * stride + h * Dh * K;
        float act[Dh];
        detail::gdn_conv_head<K>(proj, W, w, token, t, col, Dh, act);
        float sum_sq = 0.0f;
        for (int c = 0; c < Dh; ++c) {
          act[c] = act[c] / (1.0f + expf(-act[c]));
          sum_sq += act[c] * act[c];
        }
        const float r = which == 2   ? 1.0f
                        : which == 0 ? (1.0f / sqrtf(float(Dh))) / sqrtf(sum_sq + kL2Eps)
                                     : 1.0f / sqrtf(sum_sq + kL2Eps);
        for (int c = 0; c < Dh; ++c) qkv[token * 3 * D + col + c] = act[c] * r;
      });
    }
    {
      OpScope scope("gated_deltanet.scan.forward");  // one index per (sequence, head, column j)
      const float *qkv = raw(a.qkv), *gates = raw(a.gates);
      float *o = raw(a.o), *states = raw(a.states);
      for_each_index(std::int64_t(at.members) * B * H * Dh, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / (H * Dh);
        const int h = int(i / Dh % H), j = int(i % Dh);
        float state[Dh];
        for (int r = 0; r < Dh; ++r) state[r] = 0.0f;
        for (int t = 0; t < T; ++t) {
          const std::int64_t token = sequence * T + t;
          const float alpha = expf(gates[token * 2 * H + h]), beta = gates[token * 2 * H + H + h];
          const float *q = qkv + token * 3 * D + h * Dh, *k = q + D;
          float recalled = 0.0f;
          for (int r = 0; r < Dh; ++r) {
            state[r] *= alpha;
            recalled += state[r] * k[r];
          }
          const float u = q[2 * D + j] - recalled;
          float out = 0.0f;
          float* kept = states + (token * H + h) * Dh * Dh + j;
          for (int r = 0; r < Dh; ++r) {
            state[r] += beta * k[r] * u;
            out += q[r] * state[r];
            kept[r * Dh] = state[r];
          }
          o[token * D + h * Dh + j] = out;
        }
      });
    }
    {
      OpScope scope("gated_deltanet.norm_gate");  // n = o / rms(o), heads = n w SiLU(gate)
      const float *o = raw(a.o), *proj = raw(a.proj), *norm_w = p + Cpu::norm_weight;
      float* heads = raw(a.heads);
      for_each_index(tokens * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / H, m = token / rows;
        const int h = int(i % H);
        const float* oh = o + token * D + h * Dh;
        float sum_sq = 0.0f;
        for (int c = 0; c < Dh; ++c) sum_sq += oh[c] * oh[c];
        const float r = 1.0f / sqrtf(sum_sq / Dh + kNormEps);
        for (int c = 0; c < Dh; ++c) {
          const float gate = proj[token * W + kG + h * Dh + c];
          heads[token * D + h * Dh + c] =
              (oh[c] * r) * norm_w[m * stride + c] * (gate / (1.0f + expf(-gate)));
        }
      });
    }
    OpScope scope("gated_deltanet.o_proj.forward");
    if (residual)
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) { out[i] = residual[i]; });
    gemm_strided_batched(int(rows), D, D, 1.0f, {raw(a.heads), D, rows * D},
                         {p + Cpu::o_weight, D, stride, Op::T}, residual ? 1.0f : 0.0f, out, D,
                         rows * D, at.members);
  }

  static void backward(const float* p, float* g, const float* x, const float* dout, float* dx,
                       Activations& a, Scratch& s, const MixerGeometry& at) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("gated_deltanet.o_proj.backward");
      linear_backward(raw(s.d_heads), g + Cpu::o_weight, nullptr, dout, raw(a.heads),
                      p + Cpu::o_weight, stride, at.members, rows, D, D);
    }
    {
      OpScope scope("gated_deltanet.norm_gate.backward");
      const float *o = raw(a.o), *proj = raw(a.proj), *norm_w = p + Cpu::norm_weight,
                  *d_heads = raw(s.d_heads);
      float *d_o = raw(s.d_o), *terms = raw(s.norm_terms), *d_proj = raw(s.d_proj);
      for_each_index(tokens * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / H, m = token / rows;
        const int h = int(i % H);
        const std::int64_t at_o = token * D + h * Dh;
        float sum_sq = 0.0f;
        for (int c = 0; c < Dh; ++c) sum_sq += o[at_o + c] * o[at_o + c];
        const float r = 1.0f / sqrtf(sum_sq / Dh + kNormEps);
        float dn[Dh], n[Dh];
        float mean_dn_n = 0.0f;
        for (int c = 0; c < Dh; ++c) {
          const float gate = proj[token * W + kG + h * Dh + c], sig = 1.0f / (1.0f + expf(-gate)),
                      w = norm_w[m * stride + c], d_out = d_heads[at_o + c];
          n[c] = o[at_o + c] * r;
          terms[at_o + c] = d_out * n[c] * (gate * sig);
          d_proj[token * W + kG + h * Dh + c] =
              d_out * n[c] * w * sig * (1.0f + gate * (1.0f - sig));
          dn[c] = d_out * w * (gate * sig);
          mean_dn_n += dn[c] * n[c];
        }
        mean_dn_n /= Dh;
        for (int c = 0; c < Dh; ++c) d_o[at_o + c] = r * (dn[c] - n[c] * mean_dn_n);
      });
      const float* norm_terms = raw(s.norm_terms);
      column_sums<float>(g + Cpu::norm_weight, stride, at.members, rows, Dh, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int c) {
                           float sum = 0.0f;
                           for (int h = 0; h < H; ++h)
                             sum += norm_terms[(m * rows + r) * D + h * Dh + c];
                           return sum;
                         });
    }
    const float *qkv = raw(a.qkv), *gates = raw(a.gates), *d_o = raw(s.d_o);
    float *states = raw(a.states), *d_qkv = raw(s.d_qkv);
    {
      OpScope scope("gated_deltanet.scan.d_q");  // dq_t = h_t do_t, before the scan replaces h_t
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / D;
        const int h = int(i % D) / Dh, r = int(i % Dh);
        const float* state_row = states + ((token * H + h) * Dh + r) * Dh;
        float sum = 0.0f;
        for (int j = 0; j < Dh; ++j) sum += state_row[j] * d_o[token * D + h * Dh + j];
        d_qkv[token * 3 * D + h * Dh + r] = sum;
      });
    }
    {
      OpScope scope("gated_deltanet.scan.backward");  // one index per (sequence, head, column j)
      float *beta_terms = raw(s.beta_terms), *decay_terms = raw(s.decay_terms);
      for_each_index(std::int64_t(at.members) * B * H * Dh, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / (H * Dh);
        const int h = int(i / Dh % H), j = int(i % Dh);
        float dh[Dh];
        for (int r = 0; r < Dh; ++r) dh[r] = 0.0f;
        for (int t = T - 1; t >= 0; --t) {
          const std::int64_t token = sequence * T + t;
          const float alpha = expf(gates[token * 2 * H + h]), beta = gates[token * 2 * H + H + h];
          const float *q = qkv + token * 3 * D + h * Dh, *k = q + D;
          float* here = states + (token * H + h) * Dh * Dh + j;  // h_t[:, j], then dk's terms
          const float* before = t > 0 ? here - std::int64_t(H) * Dh * Dh : nullptr;  // h_{t-1}
          float previous[Dh];
          float recalled = 0.0f;  // u_j = v_j - (alpha h_{t-1}[:, j]) . k, as the forward
          for (int r = 0; r < Dh; ++r) {
            previous[r] = before ? before[r * Dh] : 0.0f;
            recalled += (previous[r] * alpha) * k[r];
          }
          const float u = q[2 * D + j] - recalled, d_out = d_o[token * D + h * Dh + j];
          float k_dh = 0.0f;  // k . dh[:, j]
          for (int r = 0; r < Dh; ++r) {
            dh[r] += q[r] * d_out;
            k_dh += k[r] * dh[r];
          }
          const float du = beta * k_dh;
          d_qkv[token * 3 * D + 2 * D + h * Dh + j] = du;  // dv_t = du
          beta_terms[token * D + h * Dh + j] = k_dh * u;
          float decay = 0.0f;
          for (int r = 0; r < Dh; ++r) {
            here[r * Dh] = beta * dh[r] * u - alpha * previous[r] * du;
            dh[r] -= k[r] * du;  // dh~
            decay += dh[r] * previous[r];
            dh[r] *= alpha;
          }
          decay_terms[token * D + h * Dh + j] = alpha * decay;
        }
      });
    }
    {
      OpScope scope("gated_deltanet.scan.d_k");  // dk_t = sum_j (the scan's column terms)
      const float* terms = states;
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / D;
        const int h = int(i % D) / Dh, r = int(i % Dh);
        const float* row = terms + ((token * H + h) * Dh + r) * Dh;
        float sum = 0.0f;
        for (int j = 0; j < Dh; ++j) sum += row[j];
        d_qkv[token * 3 * D + D + h * Dh + r] = sum;
      });
    }
    {
      OpScope scope("gated_deltanet.gates.backward");
      const float *beta_terms = raw(s.beta_terms), *decay_terms = raw(s.decay_terms),
                  *proj = raw(a.proj), *a_log = p + Cpu::a_log, *dt_bias = p + Cpu::dt_bias;
      float *d_proj = raw(s.d_proj), *d_g = raw(s.d_g);
      for_each_index(tokens * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / H, m = token / rows;
        const int h = int(i % H);
        float dg = 0.0f, dbeta = 0.0f;
        for (int j = 0; j < Dh; ++j) {
          dg += decay_terms[token * D + h * Dh + j];
          dbeta += beta_terms[token * D + h * Dh + j];
        }
        const float A = expf(a_log[m * stride + h]),
                    z = proj[token * W + kA + h] + dt_bias[m * stride + h];
        const float raw_g = -A * detail::gdn_softplus(z), beta = gates[token * 2 * H + H + h];
        d_g[token * H + h] = raw_g < kMinLogDecay ? 0.0f : dg;
        d_proj[token * W + kA + h] =
            raw_g < kMinLogDecay ? 0.0f : -dg * A * (1.0f / (1.0f + expf(-z)));
        d_proj[token * W + kB + h] = dbeta * beta * (1.0f - beta);
      });
      const float* dgs = raw(s.d_g);
      const float* d_proj_c = raw(s.d_proj);
      column_sums<float>(g + Cpu::a_log, stride, at.members, rows, H, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int h) {
                           const std::int64_t token = m * rows + r;
                           const float z = proj[token * W + kA + h] + dt_bias[m * stride + h];
                           const float raw_g =
                               -expf(a_log[m * stride + h]) * detail::gdn_softplus(z);
                           return raw_g < kMinLogDecay ? 0.0f : dgs[token * H + h] * raw_g;
                         });
      column_sums<float>(g + Cpu::dt_bias, stride, at.members, rows, H, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int h) {
                           return d_proj_c[(m * rows + r) * W + kA + h];
                         });
    }
    {
      OpScope scope("gated_deltanet.conv_silu_l2.backward");  // d_qkv <- dL/d conv output
      const float* proj = raw(a.proj);
      const float *conv_q = p + Cpu::q_conv, *conv_k = p + Cpu::k_conv, *conv_v = p + Cpu::v_conv;
      for_each_index(tokens * 3 * H, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / (3 * H), m = token / rows;
        const int which = int(i / H % 3), h = int(i % H), t = int(token % T),
                  col = which * D + h * Dh;
        const float* w =
            detail::gdn_conv_weights(which, conv_q, conv_k, conv_v) + m * stride + h * Dh * K;
        float pre[Dh], sig[Dh], act[Dh];
        detail::gdn_conv_head<K>(proj, W, w, token, t, col, Dh, pre);
        float sum_sq = 0.0f;
        for (int c = 0; c < Dh; ++c) {
          sig[c] = 1.0f / (1.0f + expf(-pre[c]));
          act[c] = pre[c] * sig[c];
          sum_sq += act[c] * act[c];
        }
        float* d = d_qkv + token * 3 * D + col;
        if (which < 2) {  // y = scale a r: da = scale r (dy - a^ (a^ . dy)), a^ = a r
          const float r = 1.0f / sqrtf(sum_sq + kL2Eps),
                      scale = which == 0 ? 1.0f / sqrtf(float(Dh)) : 1.0f;
          float dot = 0.0f;
          for (int c = 0; c < Dh; ++c) dot += act[c] * r * d[c];
          for (int c = 0; c < Dh; ++c) d[c] = (scale * r) * (d[c] - act[c] * r * dot);
        }
        for (int c = 0; c < Dh; ++c) d[c] *= sig[c] * (1.0f + pre[c] * (1.0f - sig[c]));
      });
    }
    {
      OpScope scope("gated_deltanet.conv.backward");
      const float* proj = raw(a.proj);
      const float *conv_q = p + Cpu::q_conv, *conv_k = p + Cpu::k_conv, *conv_v = p + Cpu::v_conv;
      const float* dp = raw(s.d_qkv);
      float* d_proj = raw(s.d_proj);
      for_each_index(tokens * 3 * D,
                     [=] EMERGENT_HD(std::int64_t i) {  // d_in[t] = sum_j w[j] dp[t + K-1-j]
                       const std::int64_t token = i / (3 * D), m = token / rows;
                       const int c = int(i % (3 * D)), which = c / D, t = int(token % T);
                       const float* w = detail::gdn_conv_weights(which, conv_q, conv_k, conv_v) +
                                        m * stride + (c % D) * K;
                       float sum = 0.0f;
                       for (int j = 0; j < K; ++j)
                         if (t + K - 1 - j < T) sum += w[j] * dp[(token + K - 1 - j) * 3 * D + c];
                       d_proj[token * W + c] = sum;
                     });
      const std::array<std::size_t, 3> conv{Cpu::q_conv, Cpu::k_conv, Cpu::v_conv};
      for (int which = 0; which < 3; ++which)
        column_sums<float>(g + conv[which], stride, at.members, rows, D * K, true,
                           [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int c) {
                             const int channel = c / K, j = c % K, t = int(r % T);
                             if (t - K + 1 + j < 0) return 0.0f;
                             const std::int64_t token = m * rows + r;
                             return dp[token * 3 * D + which * D + channel] *
                                    proj[(token - K + 1 + j) * W + which * D + channel];
                           });
    }
    OpScope scope("gated_deltanet.projections.backward");
    const float* d_proj = raw(s.d_proj);
    bool first = true;
    for (const detail::GdnProjection& pr : projections) {
      gemm_strided_batched(int(rows), D, pr.out, 1.0f, {d_proj + pr.column, W, rows * W},
                           {p + pr.weight, D, stride}, first ? 0.0f : 1.0f, dx, D, rows * D,
                           at.members);
      gemm_strided_batched(pr.out, D, int(rows), 1.0f, {d_proj + pr.column, W, rows * W, Op::T},
                           {x, D, rows * D}, 1.0f, g + pr.weight, D, stride, at.members);
      first = false;
    }
  }
};
template <Shape S>
struct device_twin<::emergent::GatedDeltaNetMixer<S, float, GatedDeltaChunked>> {
  using type = GatedDeltaNetMixer<S>;
};

}  // namespace emergent::cuda
