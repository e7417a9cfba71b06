// mixers/rwkv_channel_mix.hpp on the device, for an ensemble: RWKV-4's channel mixing (its
// opening comment has the equations and the backward), with the same parameters in the same
// layout; the channel block of the RWKV model, EnsembleModel<Rwkv, S, RwkvChannelMix>, and, as
// on the CPU, a token mixer too (it has the same contract, cuda/mixer.cuh).
//
// The token shift, ReLU^2 and the sigmoid gate are one index per value; key, value and receptance
// (no biases) are one strided-batched GEMM each over the members; the time_mix gradients go
// through reduce.cuh's fixed order (cuda/rwkv.cuh's token_shift_backward).
//
// Kept per layer for the backward: relu(xk Wk^T) [tokens, F], and h Wv^T and sigmoid(xr Wr^T)
// [tokens, D] each. The backward recomputes the mixes xk, xr and h = relu^2 into the scratch,
// shared by the layers, which also holds the adjoints.
#pragma once

#include <cstdint>
#include <emergent/cuda/device_system.cuh>
#include <emergent/cuda/linear.cuh>
#include <emergent/cuda/mixer.cuh>
#include <emergent/cuda/profile.cuh>
#include <emergent/cuda/rwkv.cuh>
#include <emergent/mixers/rwkv_channel_mix.hpp>

namespace emergent::cuda {

template <Shape S>
struct RwkvChannelMix {
  using Cpu = ::emergent::RwkvChannelMix<S, float>;
  static constexpr int D = Cpu::D, F = Cpu::F;

  struct Activations {
    explicit Activations(const MixerGeometry& at)
        : relu(at.tokens() * F), kv(at.tokens() * D), gate(at.tokens() * D) {}
    DeviceVector<float> relu;  // [tokens, F] relu(xk Wk^T)
    DeviceVector<float> kv;    // [tokens, D] relu^2 Wv^T
    DeviceVector<float> gate;  // [tokens, D] sigmoid(xr Wr^T)
  };
  struct Scratch {
    explicit Scratch(const MixerGeometry& at) {
      for (auto* buffer : {&xk, &xr, &d_kv, &d_r, &d_xk, &d_xr}) buffer->resize(at.tokens() * D);
      for (auto* buffer : {&hidden, &d_hidden}) buffer->resize(at.tokens() * F);
    }
    DeviceVector<float> xk, xr;      // [tokens, D] the token-shift mixes
    DeviceVector<float> hidden;      // [tokens, F] relu^2, the input of value
    DeviceVector<float> d_kv, d_r;   // [tokens, D]
    DeviceVector<float> d_hidden;    // [tokens, F] dL/dh, then dL/d(xk Wk^T) in place
    DeviceVector<float> d_xk, d_xr;  // [tokens, D]
  };

  static rwkv_device::ShiftBranches branches(const float* p, Scratch& s) {
    rwkv_device::ShiftBranches b;
    b.count = 2;
    b.mix[0] = p + Cpu::time_mix_k;
    b.mix[1] = p + Cpu::time_mix_r;
    b.out[0] = raw(s.xk);
    b.out[1] = raw(s.xr);
    b.d_out[0] = raw(s.d_xk);
    b.d_out[1] = raw(s.d_xr);
    return b;
  }

  static void forward(const float* p, const float* x, float* y, const float* residual,
                      Activations& a, Scratch& s, const MixerGeometry& at,
                      AttentionBias /*bias: not an attention*/) {
    const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * at.length,
                       tokens = at.tokens();
    {
      OpScope scope("rwkv_channel_mix.token_shift");
      rwkv_device::token_shift_forward(x, branches(p, s), at, D);
    }
    {
      OpScope scope("rwkv_channel_mix.key.forward");
      linear_forward(raw(a.relu), raw(s.xk), p + Cpu::key_weight, nullptr, stride, at.members, rows,
                     D, F);
    }
    {
      OpScope scope("rwkv_channel_mix.relu_square");
      float *relu = raw(a.relu), *hidden = raw(s.hidden);
      for_each_index(tokens * F, [=] EMERGENT_HD(std::int64_t i) {
        const float r = relu[i] > 0.0f ? relu[i] : 0.0f;
        relu[i] = r;
        hidden[i] = r * r;
      });
    }
    {
      OpScope scope("rwkv_channel_mix.value_receptance.forward");
      linear_forward(raw(a.kv), raw(s.hidden), p + Cpu::value_weight, nullptr, stride, at.members,
                     rows, F, D);
      linear_forward(raw(a.gate), raw(s.xr), p + Cpu::receptance_weight, nullptr, stride,
                     at.members, rows, D, D);
    }
    OpScope scope("rwkv_channel_mix.gate");  // y = residual + sigmoid(r) kv
    float* gate = raw(a.gate);
    const float* kv = raw(a.kv);
    for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) {
      const float sig = 1.0f / (1.0f + expf(-gate[i]));
      gate[i] = sig;
      const float v = sig * kv[i];
      y[i] = residual ? residual[i] + v : v;
    });
  }

  static void backward(const float* p, float* g, const float* x, const float* dy, float* dx,
                       Activations& a, Scratch& s, const MixerGeometry& at) {
    const std::int64_t stride = at.param_stride, rows = std::int64_t(at.batch) * at.length,
                       tokens = at.tokens();
    {
      OpScope scope("rwkv_channel_mix.recompute");  // the mixes, and h = relu^2
      rwkv_device::token_shift_forward(x, branches(p, s), at, D);
      const float* relu = raw(a.relu);
      float* hidden = raw(s.hidden);
      for_each_index(tokens * F,
                     [=] EMERGENT_HD(std::int64_t i) { hidden[i] = relu[i] * relu[i]; });
    }
    {
      OpScope scope("rwkv_channel_mix.gate.backward");
      const float *gate = raw(a.gate), *kv = raw(a.kv);
      float *d_kv = raw(s.d_kv), *d_r = raw(s.d_r);
      for_each_index(tokens * D, [=] EMERGENT_HD(std::int64_t i) {
        const float sig = gate[i];
        d_kv[i] = dy[i] * sig;
        d_r[i] = dy[i] * kv[i] * sig * (1.0f - sig);
      });
    }
    {
      OpScope scope("rwkv_channel_mix.value.backward");
      linear_backward(raw(s.d_hidden), g + Cpu::value_weight, nullptr, raw(s.d_kv), raw(s.hidden),
                      p + Cpu::value_weight, stride, at.members, rows, F, D);
    }
    {
      OpScope scope("rwkv_channel_mix.relu_square.backward");  // d(relu^2) = 2 relu
      const float* relu = raw(a.relu);
      float* d_hidden = raw(s.d_hidden);
      for_each_index(tokens * F,
                     [=] EMERGENT_HD(std::int64_t i) { d_hidden[i] *= 2.0f * relu[i]; });
    }
    {
      OpScope scope("rwkv_channel_mix.key_receptance.backward");
      linear_backward(raw(s.d_xk), g + Cpu::key_weight, nullptr, raw(s.d_hidden), raw(s.xk),
                      p + Cpu::key_weight, stride, at.members, rows, D, F);
      linear_backward(raw(s.d_xr), g + Cpu::receptance_weight, nullptr, raw(s.d_r), raw(s.xr),
                      p + Cpu::receptance_weight, stride, at.members, rows, D, D);
    }
    OpScope scope("rwkv_channel_mix.token_shift.backward");
    float* const g_mix[3] = {g + Cpu::time_mix_k, g + Cpu::time_mix_r, nullptr};
    rwkv_device::token_shift_backward(dx, g_mix, x, branches(p, s), at, D);
  }
};
template <Shape S>
struct device_twin<::emergent::RwkvChannelMix<S, float>> {
  using type = RwkvChannelMix<S>;
};

}  // namespace emergent::cuda
