// mixers/rwkv.hpp on the device, for an ensemble: RWKV-4's time mixing (its opening comment has
// the equations, the numerically stable WKV recurrence with its running maximum, and the
// backward), with the same parameters in the same layout.
//
// The token shift and the sigmoid gate are one index per value; each of the four projections
// (key, value, receptance, output; no biases) is one strided-batched GEMM over the members. WKV
// is one index per (member, sequence, channel), walking the tokens in order with its state
// (aa, bb, pp) in registers, exactly as the CPU's wkv_forward_row computes it, and writing the
// CPU's tape for every token: lambda, sigma, rho, kappa and the state (aa, bb) before the step.
// The backward walks back over the tape with (alpha, beta) in registers and needs no exp; it
// folds the gate's backward in (dL/d gated -> dL/dr and dL/dwkv). Per-sequence dw and du go
// through a [E * B, 2, D] buffer and reduce.cuh's fixed order, as do the time_mix gradients.
//
// Kept per layer for the backward, [tokens, D] each: v, sigmoid(r), wkv and the six tape values
// (9 D floats a token, where the CPU keeps these and also xk, xv, xr, k and gated: the backward
// recomputes the token-shift mixes and sigmoid(r) wkv, and k is not needed by it). Scratch,
// shared by the layers: the three mixes, k, gated and the backward's adjoints.
#pragma once

#include <cmath>
#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/gemm.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/reduce.cuh>
#include <emergent/mixers/rwkv.hpp>

namespace emergent::cuda {

// The token shift, shared by Rwkv and RwkvChannelMix.
namespace rwkv_device {

// Up to three token-shift mixes of one input: branch j mixes with mix[j] (member 0's, [D]; member
// e's at + e * param_stride) into out[j] (the forward) or reads dL/d out[j] from d_out[j] (the
// backward). Branches past `count` are unused.
struct ShiftBranches {
  int count = 0;
  const float* mix[3] = {nullptr, nullptr, nullptr};
  float* out[3] = {nullptr, nullptr, nullptr};
  const float* d_out[3] = {nullptr, nullptr, nullptr};
};

// out_j[t] = x[t] mix_j + x[t-1] (1 - mix_j), x[-1] = 0, over all tokens [tokens, D].
inline void token_shift_forward(const float* x, ShiftBranches branches, const MixerGeometry& at,
                                int D) {
  const int T = at.length;
  const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * T;
  for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t token = i / D, m = token / rows;
    const int c = int(i % D), t = int(token % T);
    const float here = x[i];
    for (int j = 0; j < branches.count; ++j) {
      const float mix = branches.mix[j][m * stride + c];
      branches.out[j][i] = t > 0 ? here * mix + x[i - D] * (1.0f - mix) : here * mix;
    }
  });
}

// dx[t] = sum_j d_out_j[t] mix_j + d_out_j[t+1] (1 - mix_j) (overwritten), and
// g mix_j += sum over tokens of d_out_j[t] (x[t] - x[t-1]), each in reduce.cuh's order;
// g_mix[j] is member 0's gradient of mix_j.
inline void token_shift_backward(float* dx, float* const (&g_mix)[3], const float* x,
                                 ShiftBranches branches, const MixerGeometry& at, int D) {
  const int T = at.length;
  const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * T;
  for_each_index(at.tokens() * D, [=] EMERGENT_HD(std::int64_t i) {
    const std::int64_t token = i / D, m = token / rows;
    const int c = int(i % D), t = int(token % T);
    float sum = 0.0f;
    for (int j = 0; j < branches.count; ++j) {
      const float mix = branches.mix[j][m * stride + c];
      sum += branches.d_out[j][i] * mix;
      if (t + 1 < T) sum += branches.d_out[j][i + D] * (1.0f - mix);
    }
    dx[i] = sum;
  });
  for (int j = 0; j < branches.count; ++j) {
    const float* d_out = branches.d_out[j];
    column_sums<float>(g_mix[j], stride, at.members, rows, D, true,
                       [=] EMERGENT_HD(std::int64_t m, std::int64_t r, int c) {
                         const std::int64_t k = (m * rows + r) * D + c;
                         return d_out[k] * (r % T > 0 ? x[k] - x[k - D] : x[k]);
                       });
  }
}

}  // namespace rwkv_device

template <Shape S>
struct Rwkv {
  using Cpu = ::emergent::Rwkv<S, float>;
  static constexpr int D = Cpu::D;

  struct Activations {
    explicit Activations(const MixerGeometry& at) {
      for (auto* buffer : {&v, &gate, &wkv, &lambda, &sigma, &rho, &kappa, &aa, &bb})
        buffer->resize(at.tokens() * D);
    }
    DeviceVector<float> v;       // [tokens, D] xv Wv^T
    DeviceVector<float> gate;    // [tokens, D] sigmoid(xr Wr^T)
    DeviceVector<float> wkv;     // [tokens, D]
    DeviceVector<float> lambda;  // [tokens, D] the tape (rwkv.hpp): e^{u+k-q} / D~
    DeviceVector<float> sigma;   // [tokens, D] e^{pp-q} / D~
    DeviceVector<float> rho;     // [tokens, D] e^{pp-w-pp'}
    DeviceVector<float> kappa;   // [tokens, D] e^{k-pp'}
    DeviceVector<float> aa;      // [tokens, D] the state before the step
    DeviceVector<float> bb;      // [tokens, D]
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      for (auto* buffer :
           {&xk, &xv, &xr, &k, &gated, &d_gated, &d_k, &d_v, &d_r, &d_xk, &d_xv, &d_xr})
        buffer->resize(at.tokens() * D);
      partial.resize(std::size_t(at.members) * at.batch * 2 * D);
    }
    DeviceVector<float> xk, xv, xr;        // [tokens, D] the token-shift mixes
    DeviceVector<float> k;                 // [tokens, D] xk Wk^T
    DeviceVector<float> gated;             // [tokens, D] sigmoid(r) wkv, the input of output
    DeviceVector<float> d_gated;           // [tokens, D] dL/d gated
    DeviceVector<float> d_k, d_v, d_r;     // [tokens, D]
    DeviceVector<float> d_xk, d_xv, d_xr;  // [tokens, D] dL/d of the mixes
    DeviceVector<float> partial;           // [E * B, 2, D] each sequence's dL/d time_decay, du
  };

  static rwkv_device::ShiftBranches branches(const float* p, Scratch& s) {
    rwkv_device::ShiftBranches b;
    b.count = 3;
    b.mix[0] = p + Cpu::time_mix_k;
    b.mix[1] = p + Cpu::time_mix_v;
    b.mix[2] = p + Cpu::time_mix_r;
    b.out[0] = raw(s.xk);
    b.out[1] = raw(s.xv);
    b.out[2] = raw(s.xr);
    b.d_out[0] = raw(s.d_xk);
    b.d_out[1] = raw(s.d_xv);
    b.d_out[2] = raw(s.d_xr);
    return b;
  }

  static void forward(const float* p, const float* x, float* out, const float* residual,
                      Activations& a, Scratch& s, const MixerGeometry& at,
                      AttentionBias /*bias: config.hpp refuses one for this mixer*/) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("rwkv.token_shift");
      rwkv_device::token_shift_forward(x, branches(p, s), at, D);
    }
    {
      OpScope scope("rwkv.kvr.forward");
      linear_forward(raw(s.k), raw(s.xk), p + Cpu::key_weight, nullptr, stride, at.members, rows, D,
                     D);
      linear_forward(raw(a.v), raw(s.xv), p + Cpu::value_weight, nullptr, stride, at.members, rows,
                     D, D);
      linear_forward(raw(a.gate), raw(s.xr), p + Cpu::receptance_weight, nullptr, stride,
                     at.members, rows, D, D);
    }
    {
      OpScope scope("rwkv.wkv.forward");  // and gate = sigmoid(r), gated = gate wkv
      const float *k = raw(s.k), *v = raw(a.v), *time_decay = p + Cpu::time_decay,
                  *time_first = p + Cpu::time_first;
      float *gate = raw(a.gate), *wkv = raw(a.wkv), *gated = raw(s.gated), *lambda = raw(a.lambda),
            *sigma = raw(a.sigma), *rho = raw(a.rho), *kappa = raw(a.kappa), *saved_aa = raw(a.aa),
            *saved_bb = raw(a.bb);
      for_each_index(std::int64_t(at.members) * B * D, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / D, m = sequence / B;
        const int c = int(i % D);
        const float w = expf(time_decay[m * stride + c]), u = time_first[m * stride + c];
        float aa = 0.0f, bb = 0.0f, pp = 0.0f;
        for (int t = 0; t < T; ++t) {
          const std::int64_t n = (sequence * T + t) * D + c;
          const float kc = k[n], vc = v[n], sig = 1.0f / (1.0f + expf(-gate[n]));
          gate[n] = sig;
          saved_aa[n] = aa;
          saved_bb[n] = bb;
          if (t == 0) {  // no state yet: wkv_0 = v_0; the state becomes (v_0, 1) e^{k_0}
            wkv[n] = vc;
            gated[n] = sig * vc;
            lambda[n] = 1.0f;
            sigma[n] = 0.0f;
            rho[n] = 0.0f;
            kappa[n] = 1.0f;
            aa = vc;
            bb = 1.0f;
            pp = kc;
            continue;
          }
          const float e_out = expf(-fabsf(pp - (u + kc)));
          const bool state_larger = pp > u + kc;
          const float state_factor = state_larger ? 1.0f : e_out,
                      current_factor = state_larger ? e_out : 1.0f;
          const float inverse = 1.0f / (state_factor * bb + current_factor);
          const float l = current_factor * inverse, sg = state_factor * inverse;
          const float o = sg * aa + l * vc;
          lambda[n] = l;
          sigma[n] = sg;
          wkv[n] = o;
          gated[n] = sig * o;
          const float decayed = pp - w;
          const float e_update = expf(-fabsf(decayed - kc));
          const bool decayed_larger = decayed > kc;
          const float r = decayed_larger ? 1.0f : e_update, q = decayed_larger ? e_update : 1.0f;
          rho[n] = r;
          kappa[n] = q;
          aa = r * aa + q * vc;
          bb = r * bb + q;
          pp = decayed_larger ? decayed : kc;
        }
      });
    }
    OpScope scope("rwkv.output.forward");
    if (residual)
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) { out[i] = residual[i]; });
    gemm_strided_batched(int(rows), D, D, 1.0f, {raw(s.gated), D, rows * D},
                         {p + Cpu::output_weight, D, stride, Op::T}, residual ? 1.0f : 0.0f, out, D,
                         rows * D, at.members);
  }

  static void backward(const float* p, float* g, const float* x, const float* dout, float* dx,
                       Activations& a, Scratch& s, const MixerGeometry& at) {
    const int T = at.length, B = at.batch;
    const std::int64_t stride = at.param_stride, rows = std::int64_t(B) * T, tokens = at.tokens();
    {
      OpScope scope("rwkv.recompute");  // the token-shift mixes, and gated = gate wkv
      rwkv_device::token_shift_forward(x, branches(p, s), at, D);
      const float *gate = raw(a.gate), *wkv = raw(a.wkv);
      float* gated = raw(s.gated);
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) { gated[i] = gate[i] * wkv[i]; });
    }
    {
      OpScope scope("rwkv.output.backward");
      linear_backward(raw(s.d_gated), g + Cpu::output_weight, nullptr, dout, raw(s.gated),
                      p + Cpu::output_weight, stride, at.members, rows, D, D);
    }
    {
      OpScope scope("rwkv.wkv.backward");  // with the gate's: dL/d gated -> dL/dr, dL/dwkv
      const float *d_gated = raw(s.d_gated), *gate = raw(a.gate), *v = raw(a.v), *wkv = raw(a.wkv),
                  *lambda = raw(a.lambda), *sigma = raw(a.sigma), *rho = raw(a.rho),
                  *kappa = raw(a.kappa), *saved_aa = raw(a.aa), *saved_bb = raw(a.bb),
                  *time_decay = p + Cpu::time_decay;
      float *d_k = raw(s.d_k), *d_v = raw(s.d_v), *d_r = raw(s.d_r), *partial = raw(s.partial);
      for_each_index(std::int64_t(at.members) * B * D, [=] EMERGENT_HD(std::int64_t i) {
        const std::int64_t sequence = i / D, m = sequence / B;
        const int c = int(i % D);
        float alpha = 0.0f, beta = 0.0f, dw = 0.0f, du = 0.0f;
        for (int t = T - 1; t >= 0; --t) {
          const std::int64_t n = (sequence * T + t) * D + c;
          const float sig = gate[n], dg = d_gated[n], o = wkv[n], vc = v[n];
          d_r[n] = dg * o * sig * (1.0f - sig);
          const float gw = dg * sig;  // dL/dwkv
          const float direct = gw * lambda[n], d_logit = direct * (vc - o);
          d_v[n] = direct + kappa[n] * alpha;
          d_k[n] = d_logit + kappa[n] * (vc * alpha - beta);
          du += d_logit;
          dw -= rho[n] * (alpha * saved_aa[n] - beta * saved_bb[n]);
          const float to_state = gw * sigma[n];
          alpha = rho[n] * alpha + to_state;
          beta = rho[n] * beta + to_state * o;
        }
        // d time_decay = dw w, per sequence (as the CPU multiplies each sequence's)
        partial[sequence * 2 * D + c] = dw * expf(time_decay[m * stride + c]);
        partial[sequence * 2 * D + D + c] = du;
      });
    }
    {
      OpScope scope("rwkv.time_decay_first.backward");
      const float* partial = raw(s.partial);
      for (int j = 0; j < 2; ++j)
        column_sums<float>(g + (j == 0 ? Cpu::time_decay : Cpu::time_first), stride, at.members, B,
                           D, true, [=] EMERGENT_HD(std::int64_t m, std::int64_t b, int c) {
                             return partial[(m * B + b) * 2 * D + j * D + c];
                           });
    }
    {
      OpScope scope("rwkv.kvr.backward");
      linear_backward(raw(s.d_xk), g + Cpu::key_weight, nullptr, raw(s.d_k), raw(s.xk),
                      p + Cpu::key_weight, stride, at.members, rows, D, D);
      linear_backward(raw(s.d_xv), g + Cpu::value_weight, nullptr, raw(s.d_v), raw(s.xv),
                      p + Cpu::value_weight, stride, at.members, rows, D, D);
      linear_backward(raw(s.d_xr), g + Cpu::receptance_weight, nullptr, raw(s.d_r), raw(s.xr),
                      p + Cpu::receptance_weight, stride, at.members, rows, D, D);
    }
    OpScope scope("rwkv.token_shift.backward");
    float* const g_mix[3] = {g + Cpu::time_mix_k, g + Cpu::time_mix_v, g + Cpu::time_mix_r};
    rwkv_device::token_shift_backward(dx, g_mix, x, branches(p, s), at, D);
  }
};
template <Shape S>
struct device_twin<::emergent::Rwkv<S, float>> {
  using type = Rwkv<S>;
};

}  // namespace emergent::cuda
