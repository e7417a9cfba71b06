// mixers/gated_deltanet.hpp on the device, for an ensemble: the Gated DeltaNet layer (its opening
// comment has the equations and the backward), with the same parameters in the same layout, as
// the CPU's GatedDeltaNet (the chunked form) lays them out; a member's slice is its checkpoint.
//
// The recurrence runs in the CPU's training forms: the forward is the CHUNKED one
// (gated_deltanet_chunked.hpp: chunks of Cpu::kChunk = 16 tokens through the UT transform), the
// backward the recurrent form's sequential BPTT over states recomputed chunk by chunk from the
// states the forward keeps at each chunk's start, as the CPU's. The forward's sums and the
// states' recomputation add in the order the CPU's do (combine_rows' four accumulators:
// detail::gdn_sum4); the backward's sums over value columns (dq, dk, dbeta, dg) are separate
// passes in another order, so the twin follows the CPU to rounding, not bit for bit. Their
// parallelism: the state h [Dh(k) x Dh(v)] of a head splits into Dh value columns whose
// recurrences are independent given the chunk's coefficient matrices
// (u_j = v_j - alpha h[:, j] . k, h[:, j] = alpha h[:, j] + beta k u_j, o_j = h[:, j] . q; in the
// chunked form, column j of V_new, O and the next chunk state read column j of h0 only). So:
//   - the chunk terms (decay Gamma, L = beta K K^T Gamma, the scores Q K^T Gamma, [C, C] each,
//     which no state enters), one index per (sequence, head, chunk, row);
//   - the chunked scan, one index per (member, sequence, head, value column j), walking the chunks
//     in order with its Dh floats of state in registers, writing O and each chunk's incoming state
//     (D Dh / C floats a token: 128 at D = 128, H = 8, C = 16, as the CPU keeps);
//   - in the backward, the states of every token recomputed from the chunk states (one index per
//     (sequence, head, chunk, column), the recurrent form's step) into scratch shared by the layers
//     ([tokens, H, Dh, Dh], D Dh floats a token, once, not per layer).
// Kept besides, per token: the projections (4 D + 2 H), g and beta (2 H), q^, k^, v (3 D), o and
// the gated heads (2 D): D Dh / C + 9 D + 4 H floats a token and layer in all, 1,312 at D = 128,
// H = 8, the CPU's count; the scratch, one set shared by the layers, is D Dh + 12 D + 3 H more a
// token, and the chunk terms 3 C H (its line of settings/mixer_catalog.hpp counts them for the
// memory estimate, train/memory_estimate.hpp).
// The backward runs per column as well, its adjoint dh[:, j] in registers: the sums over columns
// are separate fixed-order passes: dq_t = h_t do_t reads the recomputed states before the backward
// scan; the scan then replaces h_t by the column terms of dk_t
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
// sum_{s < count} term(s) in GatedDeltaRecurrent::combine_rows' order: four accumulators, term s
// into accumulator s mod 4, then (a0 + a1) + (a2 + a3).
template <class Term>
EMERGENT_HD inline float gdn_sum4(int count, const Term& term) {
  float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  int s = 0;
  for (; s + 4 <= count; s += 4) {
    a0 += term(s);
    a1 += term(s + 1);
    a2 += term(s + 2);
    a3 += term(s + 3);
  }
  if (s < count) a0 += term(s);
  if (s + 1 < count) a1 += term(s + 1);
  if (s + 2 < count) a2 += term(s + 2);
  return (a0 + a1) + (a2 + a3);
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
  static constexpr int kChunk = Cpu::kChunk;  // C
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
      chunk_states.resize(std::size_t(at.members) * at.batch * Cpu::chunks(at.length) * D * Dh);
    }
    DeviceVector<float> proj;   // [tokens, 4D + 2H] x W^T: q | k | v (conv inputs) | gate | a | b
    DeviceVector<float> gates;  // [tokens, 2H] g (log decay, clamped) | beta
    DeviceVector<float> qkv;    // [tokens, 3D] q^ (l2-normalised / sqrt(Dh)) | k^ | v
    DeviceVector<float> o;      // [tokens, D] the recurrence's output, head by head
    DeviceVector<float> heads;  // [tokens, D] normed, gated heads: o_proj's input
    DeviceVector<float> chunk_states;  // [sequences, H, chunks, Dh, Dh] h entering each chunk
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      const std::size_t tokens = at.tokens();
      for (auto* v : {&d_heads, &d_o, &norm_terms, &beta_terms, &decay_terms})
        v->resize(tokens * D);
      d_qkv.resize(tokens * 3 * D);
      d_proj.resize(tokens * W);
      d_g.resize(tokens * H);
      states.resize(tokens * D * Dh);
      chunk_terms.resize(std::size_t(at.members) * at.batch * H * Cpu::chunks(at.length) * 3 *
                         kChunk * kChunk);
    }
    DeviceVector<float> d_heads;      // [tokens, D] dL/d heads
    DeviceVector<float> d_o;          // [tokens, D] dL/do
    DeviceVector<float> norm_terms;   // [tokens, D] dL/d o_norm.weight of each token and head
    DeviceVector<float> d_qkv;        // [tokens, 3D] dL/dq^ | dk^ | dv, then dL/d conv output
    DeviceVector<float> beta_terms;   // [tokens, H, Dh] column terms of dL/dbeta
    DeviceVector<float> decay_terms;  // [tokens, H, Dh] column terms of dL/dg
    DeviceVector<float> d_g;          // [tokens, H] dL/dg
    DeviceVector<float> d_proj;       // [tokens, 4D + 2H] dL/d projections
    DeviceVector<float> states;       // [tokens, H, Dh, Dh] h_t, recomputed; then dk's terms
    DeviceVector<float> chunk_terms;  // [sequences, H, chunks, 3, C, C] Gamma | L | scores
  };

  static void forward(const float* p, const float* x, float* out, const float* residual,
                      Activations& a, Scratch& s, const MixerGeometry& at,
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
    const int chunks = Cpu::chunks(T);
    const std::int64_t sequences = std::int64_t(at.members) * B;
    {
      // Row r of each chunk's [C, C] terms (gated_deltanet_chunked.hpp), s <= r: the decay
      // Gamma_rs = exp(g_{s+1} + ... + g_r), summed in that order; L_rs = beta_r (k_r . k_s)
      // Gamma_rs; scores_rs = (q_r . k_s) Gamma_rs.
      OpScope scope("gated_deltanet.chunk_terms");
      const float *qkv = raw(a.qkv), *gates = raw(a.gates);
      float* terms = raw(s.chunk_terms);
      for_each_index(sequences * H * chunks * kChunk, [=] EMERGENT_HD(std::int64_t i) {
        const int r = int(i % kChunk), c = int(i / kChunk % chunks),
                  h = int(i / kChunk / chunks % H);
        const std::int64_t sequence = i / (std::int64_t(kChunk) * chunks * H);
        const int c0 = c * kChunk;
        if (c0 + r >= T) return;
        const std::int64_t first = sequence * T + c0;  // the chunk's first token
        float* decay = terms + (i / kChunk) * 3 * kChunk * kChunk + r * kChunk;
        float *lower = decay + kChunk * kChunk, *scores = lower + kChunk * kChunk;
        const float* qr = qkv + (first + r) * 3 * D + h * Dh;
        const float* kr = qr + D;
        const float beta = gates[(first + r) * 2 * H + H + h];
        for (int col = 0; col <= r; ++col) {
          float log_decay = 0.0f;
          for (int u = col + 1; u <= r; ++u) log_decay += gates[(first + u) * 2 * H + h];
          decay[col] = expf(log_decay);
          const float* ks = qkv + (first + col) * 3 * D + D + h * Dh;
          float kk = 0.0f, qk = 0.0f;
          for (int e = 0; e < Dh; ++e) {
            kk += kr[e] * ks[e];
            qk += qr[e] * ks[e];
          }
          lower[col] = beta * kk * decay[col];
          scores[col] = qk * decay[col];
        }
      });
    }
    {
      // The chunked scan, one index per (sequence, head, value column j), chunk after chunk:
      //   V_new = (I + L)^{-1} (diag(beta) V - diag(beta gamma) K h0) by forward substitution,
      //   O = diag(gamma) Q h0 + (scores (.) [s <= r]) V_new,
      //   h_C = gamma_C h0 + (Gamma_C. K)^T V_new
      OpScope scope("gated_deltanet.scan.forward");
      const float *qkv = raw(a.qkv), *gates = raw(a.gates), *terms = raw(s.chunk_terms);
      float *o = raw(a.o), *chunk_states = raw(a.chunk_states);
      for_each_index(sequences * H * Dh, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / (H * Dh);
        const int h = int(i / Dh % H), j = int(i % Dh);
        float state[Dh], v_new[kChunk];
        for (int r = 0; r < Dh; ++r) state[r] = 0.0f;
        for (int c = 0; c < chunks; ++c) {
          const int c0 = c * kChunk, n = T - c0 < kChunk ? T - c0 : kChunk;
          const std::int64_t first = sequence * T + c0, at_chunk = (sequence * H + h) * chunks + c;
          float* kept = chunk_states + at_chunk * Dh * Dh + j;
          for (int r = 0; r < Dh; ++r) kept[r * Dh] = state[r];
          const float* decay = terms + at_chunk * 3 * kChunk * kChunk;
          const float *lower = decay + kChunk * kChunk, *scores = lower + kChunk * kChunk;
          const auto q_of = [=](int r) { return qkv + (first + r) * 3 * D + h * Dh; };
          float G = 0.0f;
          for (int r = 0; r < n; ++r) {
            G += gates[(first + r) * 2 * H + h];
            const float gamma = expf(G), beta = gates[(first + r) * 2 * H + H + h];
            const float *q = q_of(r), *k = q + D;
            v_new[r] = beta * (q[2 * D + j] - gamma * detail::gdn_sum4(Dh, [&](int e) {
                                                return k[e] * state[e];
                                              }));
            o[(first + r) * D + h * Dh + j] =
                gamma * detail::gdn_sum4(Dh, [&](int e) { return q[e] * state[e]; });
          }
          for (int r = 0; r < n; ++r) {
            const float *lr = lower + r * kChunk, *sr = scores + r * kChunk;
            v_new[r] -= detail::gdn_sum4(r, [&](int u) { return lr[u] * v_new[u]; });
            o[(first + r) * D + h * Dh + j] +=
                detail::gdn_sum4(r + 1, [&](int u) { return sr[u] * v_new[u]; });
          }
          const float *last = decay + (n - 1) * kChunk, gamma_last = expf(G);
          for (int e = 0; e < Dh; ++e)
            state[e] = gamma_last * state[e] + detail::gdn_sum4(n, [&](int u) {
                         return (last[u] * q_of(u)[D + e]) * v_new[u];
                       });
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
    float *states = raw(s.states), *d_qkv = raw(s.d_qkv);
    const int chunks = Cpu::chunks(T);
    const float* chunk_states = raw(a.chunk_states);
    {
      // h_t of every token from the state entering its chunk, by the recurrent form's step
      // (GatedDeltaRecurrent::step, as the CPU's backward recomputes them): one index per
      // (sequence, head, chunk, value column j).
      OpScope scope("gated_deltanet.scan.states");
      for_each_index(
          std::int64_t(at.members) * B * H * chunks * Dh, [=] EMERGENT_HD(std::int64_t i) {
            const int j = int(i % Dh), c = int(i / Dh % chunks), h = int(i / Dh / chunks % H);
            const std::int64_t sequence = i / (std::int64_t(Dh) * chunks * H);
            const float* entering = chunk_states + (i / Dh) * Dh * Dh + j;
            float state[Dh];
            for (int r = 0; r < Dh; ++r) state[r] = entering[r * Dh];
            for (int t = c * kChunk; t < T && t < (c + 1) * kChunk; ++t) {
              const std::int64_t token = sequence * T + t;
              const float alpha = expf(gates[token * 2 * H + h]),
                          beta = gates[token * 2 * H + H + h];
              const float* k = qkv + token * 3 * D + D + h * Dh;
              const float v = k[D + j];
              for (int r = 0; r < Dh; ++r) state[r] *= alpha;
              const float u = v - detail::gdn_sum4(Dh, [&](int r) { return k[r] * state[r]; });
              float* kept = states + (token * H + h) * Dh * Dh + j;
              for (int r = 0; r < Dh; ++r) {
                state[r] += (beta * k[r]) * u;
                kept[r * Dh] = state[r];
              }
            }
          });
    }
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
          // h_{t-1}: at a chunk's start the state the forward kept (as the CPU's backward reads it)
          const float* before =
              t % kChunk == 0
                  ? chunk_states + ((sequence * H + h) * chunks + t / kChunk) * Dh * Dh + j
                  : here - std::int64_t(H) * Dh * Dh;
          float previous[Dh];
          for (int r = 0; r < Dh; ++r) previous[r] = before[r * Dh];
          // u_j = v_j - (alpha h_{t-1}[:, j]) . k, as the states were recomputed
          const float u = q[2 * D + j] -
                          detail::gdn_sum4(Dh, [&](int r) { return k[r] * (previous[r] * alpha); }),
                      d_out = d_o[token * D + h * Dh + j];
          for (int r = 0; r < Dh; ++r) dh[r] += q[r] * d_out;
          const float k_dh = detail::gdn_sum4(Dh, [&](int r) { return k[r] * dh[r]; });  // k . dh
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
      float* const sums[2] = {g + Cpu::a_log, g + Cpu::dt_bias};  // one pass over the rows
      column_sums_of<float, 2>(
          sums, stride, at.members, rows, H, true,
          [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int h) {
            const std::int64_t token = m * rows + r;
            const float z = proj[token * W + kA + h] + dt_bias[m * stride + h];
            const float raw_g = -expf(a_log[m * stride + h]) * detail::gdn_softplus(z);
            return ColumnValues<float, 2>{{raw_g < kMinLogDecay ? 0.0f : dgs[token * H + h] * raw_g,
                                           d_proj_c[token * W + kA + h]}};
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
