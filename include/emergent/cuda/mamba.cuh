// mixers/mamba.hpp on the device, for an ensemble: the Mamba-1 block (its opening comment has
// the equations and the backward), with the same parameters in the same layout.
//
// Every projection is one strided-batched GEMM over the members; the conv, softplus, gate and
// their backwards are one index per value. The selective scan is one index per (member,
// sequence, channel), walking the tokens in order with its d_state states in registers, and
// writing h of every token, [tokens, E, N]: the backward walks back over them in reverse,
// replacing each h[t] by its adjoint G[t] once it has read it, so the sums over channels (dBm,
// dCm) are separate passes over [tokens, N] that read h or G. (The CPU keeps h every 16 tokens
// and recomputes the rest; this keeps E N floats a token, 16 KiB at D = 128, which the memory
// estimate counts.) Sums over tokens (the biases, conv weights, D and A_log) go through
// reduce.cuh's fixed order.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/reduce.cuh>
#include <emergent/mixers/mamba.hpp>

namespace emergent::cuda {

template <Shape S, int StateSize = 16, int Expand = 2, int ConvWidth = 4>
struct MambaMixer {
  using Cpu = ::emergent::MambaMixer<S, float, StateSize, Expand, ConvWidth>;
  static constexpr int D = Cpu::D, E = Cpu::E, N = Cpu::N, K = Cpu::K, R = Cpu::R,
                       W = Cpu::P;  // W: x_proj's width, R + 2N

  struct Activations {
    explicit Activations(const MixerGeometry& at) {
      const std::size_t tokens = at.tokens();
      xz.resize(tokens * 2 * E);
      for (auto* v : {&conv, &u, &dt_pre, &delta, &y, &gated}) v->resize(tokens * E);
      dbc.resize(tokens * W);
      states.resize(tokens * E * N);
    }
    DeviceVector<float> xz;      // [tokens, 2E] xc | z
    DeviceVector<float> conv;    // [tokens, E] c, before SiLU
    DeviceVector<float> u;       // [tokens, E] SiLU(c)
    DeviceVector<float> dbc;     // [tokens, R + 2N] dl | Bm | Cm
    DeviceVector<float> dt_pre;  // [tokens, E] dl dt_proj^T + dt_b
    DeviceVector<float> delta;   // [tokens, E] softplus(dt_pre)
    DeviceVector<float> y;       // [tokens, E] scan output with D u
    DeviceVector<float> gated;   // [tokens, E] y SiLU(z)
    DeviceVector<float> states;  // [tokens, E, N] h (the backward overwrites it with G)
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      const std::size_t tokens = at.tokens();
      d_xz.resize(tokens * 2 * E);
      for (auto* v : {&d_y, &d_u, &d_scan_u, &d_dt_pre}) v->resize(tokens * E);
      d_dbc.resize(tokens * W);
      d_a.resize(std::size_t(at.members) * at.batch * E * N);
    }
    DeviceVector<float> d_xz;      // [tokens, 2E] dL/dxc | dL/dz
    DeviceVector<float> d_y;       // [tokens, E] dL/d gated, then dL/dy
    DeviceVector<float> d_u;       // [tokens, E] x_proj's share of dL/du, then dL/dc
    DeviceVector<float> d_scan_u;  // [tokens, E] the scan's share of dL/du
    DeviceVector<float> d_dt_pre;  // [tokens, E] dL/d delta, then dL/d dt_pre
    DeviceVector<float> d_dbc;     // [tokens, R + 2N]
    DeviceVector<float> d_a;       // [members * batch, E, N] dL/dA of each sequence
  };

  static void forward(const float* p, const float* x, float* out, const float* residual,
                      Activations& a, Scratch& /*scratch*/, const MixerGeometry& at,
                      AttentionBias /*bias: config.hpp refuses one for this mixer*/) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("mamba.in_proj.forward");
      linear_forward(raw(a.xz), x, p + Cpu::in_weight, nullptr, stride, at.members, rows, D, 2 * E);
    }
    {
      OpScope scope("mamba.conv_silu");
      float *conv = raw(a.conv), *u = raw(a.u);
      const float *xz = raw(a.xz), *w = p + Cpu::conv_weight, *b = p + Cpu::conv_bias;
      for_each_index(tokens * E, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / E, m = token / rows;
        const int e = int(i % E), t = int(token % T);
        float c = b[m * stride + e];
        for (int j = 0; j < K; ++j) {
          const int source = t - K + 1 + j;
          if (source >= 0) c += w[m * stride + e * K + j] * xz[(token - K + 1 + j) * 2 * E + e];
        }
        conv[i] = c;
        u[i] = c / (1.0f + expf(-c));
      });
    }
    {
      OpScope scope("mamba.x_proj.forward");
      linear_forward(raw(a.dbc), raw(a.u), p + Cpu::x_weight, nullptr, stride, at.members, rows, E,
                     W);
    }
    {
      OpScope scope("mamba.dt_proj.forward");
      gemm_strided_batched(int(rows), E, R, 1.0f, {raw(a.dbc), W, rows * W},
                           {p + Cpu::dt_weight, R, stride, Op::T}, 0.0f, raw(a.dt_pre), E, rows * E,
                           at.members);
    }
    {
      OpScope scope("mamba.softplus");
      float *pre = raw(a.dt_pre), *delta = raw(a.delta);
      const float* b = p + Cpu::dt_bias;
      for_each_index(tokens * E, [=] EMERGENT_HD(std::int64_t i) {
        const float v = pre[i] + b[(i / (rows * E)) * stride + i % E];
        pre[i] = v;
        delta[i] = (v > 0 ? v : 0.0f) + log1pf(expf(-fabsf(v)));
      });
    }
    {
      OpScope scope("mamba.scan.forward");
      const float *delta = raw(a.delta), *u = raw(a.u), *dbc = raw(a.dbc), *a_log = p + Cpu::a_log,
                  *d_skip = p + Cpu::d_skip;
      float *y = raw(a.y), *h_all = raw(a.states);
      for_each_index(std::int64_t(at.members) * B * E, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / E, m = sequence / B;
        const int e = int(i % E);
        float rate[N], h[N];
        for (int n = 0; n < N; ++n) {
          rate[n] = -expf(a_log[m * stride + e * N + n]);
          h[n] = 0.0f;
        }
        for (int t = 0; t < T; ++t) {
          const std::int64_t token = sequence * T + t;
          const float d = delta[token * E + e], uu = u[token * E + e];
          const float* bc = dbc + token * W + R;
          float sum = 0.0f;
          for (int n = 0; n < N; ++n) {
            h[n] = expf(d * rate[n]) * h[n] + d * bc[n] * uu;
            sum += bc[N + n] * h[n];
            h_all[(token * E + e) * N + n] = h[n];
          }
          y[token * E + e] = sum + d_skip[m * stride + e] * uu;
        }
      });
    }
    {
      OpScope scope("mamba.gate");
      const float *y = raw(a.y), *xz = raw(a.xz);
      float* gated = raw(a.gated);
      for_each_index(tokens * E, [=] EMERGENT_HD(std::int64_t i) {
        const float z = xz[(i / E) * 2 * E + E + i % E];
        gated[i] = y[i] * z / (1.0f + expf(-z));
      });
    }
    OpScope scope("mamba.out_proj.forward");
    if (residual)
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) { out[i] = residual[i]; });
    gemm_strided_batched(int(rows), D, E, 1.0f, {raw(a.gated), E, rows * E},
                         {p + Cpu::out_weight, E, stride, Op::T}, residual ? 1.0f : 0.0f, out, D,
                         rows * D, at.members);
  }

  static void backward(const float* p, float* g, const float* x, const float* dout, float* dx,
                       Activations& a, Scratch& s, const MixerGeometry& at) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("mamba.out_proj.backward");
      linear_backward(raw(s.d_y), g + Cpu::out_weight, nullptr, dout, raw(a.gated),
                      p + Cpu::out_weight, stride, at.members, rows, E, D);
    }
    {
      OpScope scope("mamba.gate.backward");  // d_y: dL/d gated -> dL/dy; d_xz[:, E:] = dL/dz
      const float *y = raw(a.y), *xz = raw(a.xz);
      float *d_y = raw(s.d_y), *d_xz = raw(s.d_xz);
      for_each_index(tokens * E, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / E;
        const float z = xz[token * 2 * E + E + i % E], sig = 1.0f / (1.0f + expf(-z));
        d_xz[token * 2 * E + E + i % E] = d_y[i] * y[i] * sig * (1.0f + z * (1.0f - sig));
        d_y[i] *= z * sig;
      });
    }
    const float *delta = raw(a.delta), *u = raw(a.u), *dbc = raw(a.dbc), *d_y = raw(s.d_y);
    float *h_or_g = raw(a.states), *d_dbc = raw(s.d_dbc);
    {
      OpScope scope("mamba.scan.d_c");  // dCm[t, n] = sum_e dy[t, e] h[t, e, n], before G
      for_each_index(tokens * N, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / N;
        const int n = int(i % N);
        float sum = 0.0f;
        for (int e = 0; e < E; ++e) sum += d_y[token * E + e] * h_or_g[(token * E + e) * N + n];
        d_dbc[token * W + R + N + n] = sum;
      });
    }
    {
      OpScope scope("mamba.scan.backward");
      const float *a_log = p + Cpu::a_log, *d_skip = p + Cpu::d_skip;
      float *d_scan_u = raw(s.d_scan_u), *d_delta = raw(s.d_dt_pre), *d_a = raw(s.d_a);
      for_each_index(std::int64_t(at.members) * B * E, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / E, m = sequence / B;
        const int e = int(i % E);
        float rate[N], carry[N], da[N];  // carry: exp(delta[t+1] A) G[t+1], G[t]'s share of t+1
        for (int n = 0; n < N; ++n) {
          rate[n] = -expf(a_log[m * stride + e * N + n]);
          carry[n] = da[n] = 0.0f;
        }
        for (int t = T - 1; t >= 0; --t) {
          const std::int64_t token = sequence * T + t;
          const float d = delta[token * E + e], uu = u[token * E + e], dy = d_y[token * E + e];
          const float* bc = dbc + token * W + R;
          float* here = h_or_g + (token * E + e) * N;
          const float* before = t > 0 ? here - std::int64_t(E) * N : nullptr;
          float du = 0.0f, dd = 0.0f;
          for (int n = 0; n < N; ++n) {
            const float G = dy * bc[N + n] + carry[n], decay = expf(d * rate[n]),
                        h_before = before ? before[n] : 0.0f;
            du += G * bc[n];
            dd += G * (bc[n] * uu + rate[n] * decay * h_before);
            da[n] += G * d * decay * h_before;
            carry[n] = decay * G;
            here[n] = G;
          }
          d_scan_u[token * E + e] = d * du + d_skip[m * stride + e] * dy;
          d_delta[token * E + e] = dd;
        }
        for (int n = 0; n < N; ++n) d_a[(sequence * E + e) * N + n] = da[n];
      });
    }
    {
      OpScope scope("mamba.scan.d_b");  // dBm[t, n] = sum_e G[t, e, n] delta[t, e] u[t, e]
      for_each_index(tokens * N, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t token = i / N;
        const int n = int(i % N);
        float sum = 0.0f;
        for (int e = 0; e < E; ++e)
          sum += h_or_g[(token * E + e) * N + n] * delta[token * E + e] * u[token * E + e];
        d_dbc[token * W + R + n] = sum;
      });
    }
    {
      OpScope scope("mamba.a_log_d.backward");  // dA_log = A sum_sequences dA;  dD = sum dy u
      const float* d_a = raw(s.d_a);
      const float* a_log = p + Cpu::a_log;
      column_sums<float>(g + Cpu::a_log, stride, at.members, B, E * N, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t b, int c) {
                           return d_a[(m * B + b) * E * N + c] * -expf(a_log[m * stride + c]);
                         });
      column_sums<float>(g + Cpu::d_skip, stride, at.members, rows, E, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int e) {
                           const std::int64_t k = (m * rows + r) * E + e;
                           return d_y[k] * u[k];
                         });
    }
    {
      OpScope scope("mamba.softplus.backward");  // softplus' = sigmoid
      float* d_pre = raw(s.d_dt_pre);
      const float* pre = raw(a.dt_pre);
      for_each_index(tokens * E,
                     [=] EMERGENT_HD(std::int64_t i) { d_pre[i] /= 1.0f + expf(-pre[i]); });
    }
    {
      OpScope scope("mamba.dt_proj.backward");
      const float* d_pre = raw(s.d_dt_pre);
      column_sums<float>(g + Cpu::dt_bias, stride, at.members, rows, E, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int e) {
                           return d_pre[(m * rows + r) * E + e];
                         });
      // d dl = d_pre dt_proj (into d_dbc's first R columns); d dt_proj += d_pre^T dl
      gemm_strided_batched(int(rows), R, E, 1.0f, {d_pre, E, rows * E},
                           {p + Cpu::dt_weight, R, stride}, 0.0f, d_dbc, W, rows * W, at.members);
      gemm_strided_batched(E, R, int(rows), 1.0f, {d_pre, E, rows * E, Op::T}, {dbc, W, rows * W},
                           1.0f, g + Cpu::dt_weight, R, stride, at.members);
    }
    {
      OpScope scope("mamba.x_proj.backward");
      linear_backward(raw(s.d_u), g + Cpu::x_weight, nullptr, d_dbc, u, p + Cpu::x_weight, stride,
                      at.members, rows, E, W);
    }
    {
      OpScope scope("mamba.silu.backward");  // d_u <- dL/dc
      float* d_u = raw(s.d_u);
      const float *d_scan_u = raw(s.d_scan_u), *conv = raw(a.conv);
      for_each_index(tokens * E, [=] EMERGENT_HD(std::int64_t i) {
        const float c = conv[i], sig = 1.0f / (1.0f + expf(-c));
        d_u[i] = (d_u[i] + d_scan_u[i]) * sig * (1.0f + c * (1.0f - sig));
      });
    }
    {
      OpScope scope("mamba.conv.backward");
      const float *dc = raw(s.d_u), *xz = raw(a.xz), *w = p + Cpu::conv_weight;
      float* d_xz = raw(s.d_xz);
      for_each_index(tokens * E,
                     [=] EMERGENT_HD(std::int64_t i) {  // dxc[s] = sum_j w_j dc[s+K-1-j]
                       const std::int64_t token = i / E, m = token / rows;
                       const int e = int(i % E), t = int(token % T);
                       float sum = 0.0f;
                       for (int j = 0; j < K; ++j) {
                         const int target = t + K - 1 - j;
                         if (target < T)
                           sum += w[m * stride + e * K + j] * dc[(token + K - 1 - j) * E + e];
                       }
                       d_xz[token * 2 * E + e] = sum;
                     });
      column_sums<float>(g + Cpu::conv_bias, stride, at.members, rows, E, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int e) {
                           return dc[(m * rows + r) * E + e];
                         });
      column_sums<float>(g + Cpu::conv_weight, stride, at.members, rows, E * K, true,
                         [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int c) {
                           const int e = c / K, j = c % K, t = int(r % T);
                           if (t - K + 1 + j < 0) return 0.0f;
                           return dc[(m * rows + r) * E + e] *
                                  xz[(m * rows + r - K + 1 + j) * 2 * E + e];
                         });
    }
    OpScope scope("mamba.in_proj.backward");
    linear_backward(dx, g + Cpu::in_weight, nullptr, raw(s.d_xz), x, p + Cpu::in_weight, stride,
                    at.members, rows, D, 2 * E);
  }
};
template <Shape S, int StateSize, int Expand, int ConvWidth>
struct device_twin<::emergent::MambaMixer<S, float, StateSize, Expand, ConvWidth>> {
  using type = MambaMixer<S, StateSize, Expand, ConvWidth>;
};

}  // namespace emergent::cuda
