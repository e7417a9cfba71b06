// Causal multi-head dot-product attention with an optional additive bias on the logits
// (the paper's attention-bias intervention, arXiv 2606.25010 App. B.3).
//
//   qkv    = x W_qkv^T + b_qkv                     x [B,T,D] -> q, k, v [B,T,D] each
//   per head h (d_head = D / H columns of q, k and v):
//     S_ij = q_i . k_j / sqrt(d_head) + c P_ij     j <= i  (causal; -inf for j > i)
//     A_i  = softmax_j(S_i)                        att [B,H,T,T], kept for analysis
//     o_i  = sum_j A_ij v_j
//   y      = concat_h(o) W_out^T + b_out           [B,T,D]
//
// Backward (per head): dV = A^T dO, dA = dO V^T, dS = A * (dA - rowsum(A * dA)),
// dQ = dS K / sqrt(d_head), dK = dS^T Q / sqrt(d_head).
// Any H from 1 to D that divides D works, d_head = 1 included.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <vector>

#include "../core/layout.hpp"
#include "../core/parallel.hpp"
#include "../core/shape.hpp"
#include "../nn/linear.hpp"
#include "mixer.hpp"

namespace emergent {

template <Shape S, class RealT = float>
class DotAttention {
 public:
  using Real = RealT;
  static constexpr std::string_view name = "dot_attention";
  static constexpr int D = S.d_model, H = S.heads, Dh = S.d_head();

  static constexpr auto layout = layout_of(std::array{
      TensorSpec{"qkv.weight", 3 * D, D, true},
      TensorSpec{"qkv.bias", 0, 3 * D, false},
      TensorSpec{"out.weight", D, D, true},
      TensorSpec{"out.bias", 0, D, false},
  });
  static constexpr std::size_t qkv_weight = offset_of(layout, "qkv.weight");
  static constexpr std::size_t qkv_bias = offset_of(layout, "qkv.bias");
  static constexpr std::size_t out_weight = offset_of(layout, "out.weight");
  static constexpr std::size_t out_bias = offset_of(layout, "out.bias");

  struct Activations {
    Real* qkv = nullptr;     // [B*T, 3D]
    Real* att = nullptr;     // [B, H, T, T] softmax probabilities (zero above the diagonal)
    Real* heads = nullptr;   // [B*T, D] concatenated head outputs, input of the out projection
    Real* d_heads = nullptr; // [B*T, D] backward scratch
    Real* d_qkv = nullptr;   // [B*T, 3D] backward scratch
  };

  static void carve(Arena<Real>& arena, Activations& acts, int batch, int length) {
    const std::size_t tokens = static_cast<std::size_t>(batch) * length;
    acts.qkv = arena.take(tokens * 3 * D);
    acts.att = arena.take(static_cast<std::size_t>(batch) * H * length * length);
    acts.heads = arena.take(tokens * D);
    acts.d_heads = arena.take(tokens * D);
    acts.d_qkv = arena.take(tokens * 3 * D);
  }

  // y[B*T,D] <- x[B*T,D]
  static void forward(const Real* params, const Real* x, Real* y, Activations& acts,
                      const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    nn::linear_forward(acts.qkv, x, params + qkv_weight, params + qkv_bias, B * T, D, 3 * D);
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const Real* qkv = acts.qkv + b * T * 3 * D;
      Real* att = acts.att + bh * T * T;
      Real* out = acts.heads + b * T * D + h * Dh;
      for (int i = 0; i < T; ++i) {
        const Real* q = qkv + static_cast<std::int64_t>(i) * 3 * D + h * Dh;
        Real* row = att + static_cast<std::int64_t>(i) * T;
        Real max = -std::numeric_limits<Real>::infinity();
        for (int j = 0; j <= i; ++j) {
          const Real* k = qkv + static_cast<std::int64_t>(j) * 3 * D + D + h * Dh;
          Real s = 0;
          for (int d = 0; d < Dh; ++d) s += q[d] * k[d];
          s *= scale;
          if (ctx.bias_pattern) s += ctx.bias_strength * ctx.bias_pattern[i * T + j];
          row[j] = s;
          max = s > max ? s : max;
        }
        Real sum = 0;
        for (int j = 0; j <= i; ++j) {
          row[j] = std::exp(row[j] - max);
          sum += row[j];
        }
        const Real inv = Real(1) / sum;
        for (int j = 0; j <= i; ++j) row[j] *= inv;
        for (int j = i + 1; j < T; ++j) row[j] = 0;
        Real* o = out + static_cast<std::int64_t>(i) * D;
        for (int d = 0; d < Dh; ++d) o[d] = 0;
        for (int j = 0; j <= i; ++j) {
          const Real* v = qkv + static_cast<std::int64_t>(j) * 3 * D + 2 * D + h * Dh;
          const Real a = row[j];
          for (int d = 0; d < Dh; ++d) o[d] += a * v[d];
        }
      }
    });
    nn::linear_forward(y, acts.heads, params + out_weight, params + out_bias, B * T, D, D);
  }

  // dx[B*T,D] = dL/dx; grads += dL/dparams   <- x[B*T,D], dy[B*T,D]
  static void backward(const Real* params, Real* grads, const Real* x, const Real* dy, Real* dx,
                       Activations& acts, const MixerContext<Real>& ctx) {
    const int B = ctx.batch, T = ctx.length;
    nn::linear_backward(acts.d_heads, grads + out_weight, grads + out_bias, dy, acts.heads,
                        params + out_weight, B * T, D, D);
    const Real scale = Real(1) / std::sqrt(Real(Dh));
    parallel_for(static_cast<std::int64_t>(B) * H, [&](std::int64_t bh) {
      const std::int64_t b = bh / H;
      const int h = static_cast<int>(bh % H);
      const Real* qkv = acts.qkv + b * T * 3 * D;
      Real* d_qkv = acts.d_qkv + b * T * 3 * D;
      const Real* att = acts.att + bh * T * T;
      const Real* d_out = acts.d_heads + b * T * D + h * Dh;
      for (int t = 0; t < T; ++t)  // this head's slice of dq, dk, dv, owned by this task alone
        for (int part = 0; part < 3; ++part)
          for (int d = 0; d < Dh; ++d) d_qkv[static_cast<std::int64_t>(t) * 3 * D + part * D + h * Dh + d] = 0;
      std::vector<Real> d_att(T);
      for (int i = 0; i < T; ++i) {
        const Real* row = att + static_cast<std::int64_t>(i) * T;
        const Real* dout = d_out + static_cast<std::int64_t>(i) * D;
        const Real* q = qkv + static_cast<std::int64_t>(i) * 3 * D + h * Dh;
        Real* dq = d_qkv + static_cast<std::int64_t>(i) * 3 * D + h * Dh;
        Real row_dot = 0;  // sum_j A_ij dA_ij
        for (int j = 0; j <= i; ++j) {
          const Real* v = qkv + static_cast<std::int64_t>(j) * 3 * D + 2 * D + h * Dh;
          Real* dv = d_qkv + static_cast<std::int64_t>(j) * 3 * D + 2 * D + h * Dh;
          Real da = 0;
          for (int d = 0; d < Dh; ++d) {
            da += dout[d] * v[d];
            dv[d] += row[j] * dout[d];
          }
          d_att[j] = da;
          row_dot += row[j] * da;
        }
        for (int j = 0; j <= i; ++j) {
          const Real ds = row[j] * (d_att[j] - row_dot) * scale;
          const Real* k = qkv + static_cast<std::int64_t>(j) * 3 * D + D + h * Dh;
          Real* dk = d_qkv + static_cast<std::int64_t>(j) * 3 * D + D + h * Dh;
          for (int d = 0; d < Dh; ++d) {
            dq[d] += ds * k[d];
            dk[d] += ds * q[d];
          }
        }
      }
    });
    nn::linear_backward(dx, grads + qkv_weight, grads + qkv_bias, acts.d_qkv, x,
                        params + qkv_weight, B * T, D, 3 * D);
  }
};

}  // namespace emergent
