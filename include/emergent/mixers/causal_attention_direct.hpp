// Causal attention of one head, the direct form: per query row, a loop over the keys with d_head a
// compile-time constant, vectorised over the keys through k and v transposed [d_head, T]. Any
// Real, any d_head, any T. No set-up (no GEMM packing), which is why the selector of
// dot_attention.hpp takes it for short sequences (T <= 64) where the register kernels of
// causal_attention_short.hpp do not apply (double, d_head not a multiple of the lanes, no SIMD).
//
// The math is that of dot_attention.hpp, per query row i:
//   s_j  = scale q_i . k_j + c P_ij    (j <= i)       p = softmax(s), written as row i of att
//   o_i  = sum_j p_j v_j
// Backward, per row i: dA_j = dO_i . v_j, ds_j = scale p_j (dA_j - sum_l p_l dA_l),
//   dq_i = sum_j ds_j k_j,  dk_j += ds_j q_i,  dv_j += p_j dO_i.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <emergent/mixers/attention_head_split.hpp>
#include <vector>

namespace emergent {

template <class Real, int Dh>
struct CausalAttentionDirect {
  static constexpr const char* name = "direct";
  static constexpr bool available = true;   // every Real, d_head and machine
  static constexpr bool transposed = true;  // reads in.kt and in.vt

  // att [T, T] (row i: softmax over j <= i, zeros after) and out (rows of stride out_stride) of
  // one head; bias: [T, T] pattern or null.
  static void forward(const attention_head::HeadInputs<Real>& in, Real* att, Real* out,
                      std::int64_t out_stride, int T, Real scale, const Real* bias,
                      Real bias_strength) {
    for (int i = 0; i < T; ++i) {
      Real* row = att + static_cast<std::size_t>(i) * T;
      const Real* q = in.q + i * Dh;
      std::fill(row, row + i + 1, Real(0));
      for (int d = 0; d < Dh; ++d) {  // scores, vectorised over the keys
        const Real qd = q[d];
        const Real* kt = in.kt + d * T;
        for (int j = 0; j <= i; ++j) row[j] += qd * kt[j];
      }
      attention_head::causal_softmax_row(row, i, T, scale, bias, bias_strength);
      Real o[Dh] = {};
      for (int j = 0; j <= i; ++j) {
        const Real a = row[j];
        const Real* v = in.v + j * Dh;
        for (int d = 0; d < Dh; ++d) o[d] += a * v[d];
      }
      std::copy(o, o + Dh, out + i * out_stride);
    }
  }

  // dq, dk, dv [T, d_head] (overwritten) of one head from d_out (rows of stride d_out_stride);
  // in and att as the forward had them.
  static void backward(const attention_head::HeadInputs<Real>& in, const Real* att,
                       const Real* d_out, std::int64_t d_out_stride, Real* dq, Real* dk, Real* dv,
                       int T, Real scale) {
    std::fill(dk, dk + T * Dh, Real(0));
    std::fill(dv, dv + T * Dh, Real(0));
    // dA of one row: on the stack for the lengths the selector gives this form, else on the heap.
    Real on_stack[kStackLength];
    std::vector<Real> on_heap(T > kStackLength ? T : 0);
    Real* d_att = T > kStackLength ? on_heap.data() : on_stack;
    for (int i = 0; i < T; ++i) {
      const Real* row = att + static_cast<std::size_t>(i) * T;
      const Real* dout = d_out + i * d_out_stride;
      const Real* q = in.q + i * Dh;
      std::fill(d_att, d_att + i + 1, Real(0));
      for (int d = 0; d < Dh; ++d) {  // dA_ij = dO_i . v_j, vectorised over the keys
        const Real od = dout[d];
        const Real* vt = in.vt + d * T;
        for (int j = 0; j <= i; ++j) d_att[j] += od * vt[j];
      }
      Real row_dot = 0;  // sum_j A_ij dA_ij
      for (int j = 0; j <= i; ++j) row_dot += row[j] * d_att[j];
      Real dq_i[Dh] = {};
      for (int j = 0; j <= i; ++j) {
        const Real a = row[j], ds = a * (d_att[j] - row_dot) * scale;
        const Real* k = in.k + j * Dh;
        Real* dk_j = dk + j * Dh;
        Real* dv_j = dv + j * Dh;
        for (int d = 0; d < Dh; ++d) {
          dv_j[d] += a * dout[d];
          dq_i[d] += ds * k[d];
          dk_j[d] += ds * q[d];
        }
      }
      std::copy(dq_i, dq_i + Dh, dq + i * Dh);
    }
  }

 private:
  static constexpr int kStackLength = 64;
};

}  // namespace emergent
