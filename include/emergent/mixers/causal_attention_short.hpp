// Causal attention of one head over a short sequence (T <= 64) held in vector registers
// (core/simd.hpp: AVX-512 or AVX2), for d_head a multiple of the lane count: the linear map's
// heads (T = 2S - 1, d_head = 16).
//
// Forward, per query row i (the math of mixers/dot_attention.hpp):
//   s_j  = scale q_i . k_j + c P_ij        for j <= i: the T keys sit in ceil(T / lanes)
//                                           registers, each score vector built from d_head
//                                           broadcast FMAs over the rows of K^T
//   p    = softmax(s) over j <= i, 0 above the diagonal, written as row i of att
//   o_i  = sum_j p_j v_j                   v_j is d_head / lanes registers; p_j broadcast
// Backward, per row i:
//   dA_j = dO_i . v_j                       broadcast FMAs over the rows of V^T, as s above
//   ds_j = scale p_j (dA_j - sum_l p_l dA_l)
//   dq_i = sum_j ds_j k_j,   dk_j += ds_j q_i,   dv_j += p_j dO_i
// The exponential is core/simd.hpp's, as in the long-sequence kernels.
#pragma once

#include <cstdint>
#include <emergent/core/simd.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <type_traits>

#if EMERGENT_SIMD_LANES > 0

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

namespace emergent::short_causal_attention {

inline constexpr int kMaxLength = 64;
inline constexpr int L = simd::kLanes;

// d_head values the kernels take; others use the generic path of dot_attention.hpp.
template <int Dh>
inline constexpr bool supports = Dh % L == 0 && Dh <= 64;

namespace detail {

using simd::Mask;
using simd::Vec;

// out[w] lanes j = x . column L w + j of the transposed keys [Dh, T], for the visible keys:
// d_head broadcast FMAs per vector of keys.
template <int NV, int Dh>
inline void dot_with_keys(const float* x, const float* transposed, int T, const Mask visible[NV],
                          Vec out[NV]) {
#pragma GCC unroll 8
  for (int w = 0; w < NV; ++w) out[w] = simd::zero();
  for (int d = 0; d < Dh; ++d) {
    const Vec xd = simd::set1(x[d]);
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w)
      out[w] = simd::fmadd(xd, simd::load_masked(visible[w], transposed + d * T + L * w), out[w]);
  }
}

template <int NV, int Dh>
void forward(const float* q, const float* kt, const float* v, float* att, float* out,
             std::int64_t out_stride, int T, float scale, const float* bias, float bias_strength) {
  constexpr int DV = Dh / L;
  for (int i = 0; i < T; ++i) {
    Vec s[NV];
    Mask visible[NV];
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w) visible[w] = simd::lanes_below(i + 1 - L * w);
    dot_with_keys<NV, Dh>(q + i * Dh, kt, T, visible, s);
    const Vec minus_inf = simd::set1(-std::numeric_limits<float>::infinity());
    Vec row_max = minus_inf;
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w) {
      s[w] = simd::mul(s[w], simd::set1(scale));
      if (bias)
        s[w] = simd::fmadd(simd::set1(bias_strength),
                           simd::load_masked(visible[w], bias + i * T + L * w), s[w]);
      s[w] = simd::blend(visible[w], minus_inf, s[w]);
      row_max = simd::max(row_max, s[w]);
    }
    const Vec max_all = simd::set1(simd::reduce_max(row_max));
    Vec total = simd::zero();
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w) {
      s[w] = simd::zero_unless(visible[w], simd::exp(simd::sub(s[w], max_all)));
      total = simd::add(total, s[w]);
    }
    const Vec inverse = simd::set1(1.0f / simd::reduce_add(total));
    float* row = att + static_cast<std::size_t>(i) * T;
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w)
      simd::store_first(row + L * w, T - L * w, simd::mul(s[w], inverse));
    Vec o[DV];
#pragma GCC unroll 8
    for (int u = 0; u < DV; ++u) o[u] = simd::zero();
    for (int j = 0; j <= i; ++j) {
      const Vec p = simd::set1(row[j]);
#pragma GCC unroll 8
      for (int u = 0; u < DV; ++u) o[u] = simd::fmadd(p, simd::load(v + j * Dh + L * u), o[u]);
    }
#pragma GCC unroll 8
    for (int u = 0; u < DV; ++u) simd::store(out + i * out_stride + L * u, o[u]);
  }
}

template <int NV, int Dh>
void backward(const float* q, const float* k, const float* vt, const float* att, const float* d_out,
              std::int64_t d_out_stride, float* dq, float* dk, float* dv, int T, float scale) {
  constexpr int DV = Dh / L;
  std::fill(dk, dk + T * Dh, 0.0f);
  std::fill(dv, dv + T * Dh, 0.0f);
  alignas(64) float ds_row[kMaxLength];
  for (int i = 0; i < T; ++i) {
    Vec da[NV];
    Mask visible[NV];
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w) visible[w] = simd::lanes_below(i + 1 - L * w);
    const float* doi = d_out + i * d_out_stride;
    dot_with_keys<NV, Dh>(doi, vt, T, visible, da);
    const float* row = att + static_cast<std::size_t>(i) * T;
    Vec p[NV], dot = simd::zero();
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w) {
      p[w] = simd::load_masked(visible[w], row + L * w);
      dot = simd::fmadd(p[w], da[w], dot);
    }
    const Vec row_dot = simd::set1(simd::reduce_add(dot));
#pragma GCC unroll 8
    for (int w = 0; w < NV; ++w)
      simd::store(ds_row + L * w,
                  simd::mul(simd::mul(p[w], simd::sub(da[w], row_dot)), simd::set1(scale)));
    Vec qi[DV], oi[DV], dqi[DV];
#pragma GCC unroll 8
    for (int u = 0; u < DV; ++u) {
      qi[u] = simd::load(q + i * Dh + L * u);
      oi[u] = simd::load(doi + L * u);
      dqi[u] = simd::zero();
    }
    for (int j = 0; j <= i; ++j) {
      const Vec ds = simd::set1(ds_row[j]), pj = simd::set1(row[j]);
#pragma GCC unroll 8
      for (int u = 0; u < DV; ++u) {
        const int at = j * Dh + L * u;
        dqi[u] = simd::fmadd(ds, simd::load(k + at), dqi[u]);
        simd::store(dk + at, simd::fmadd(ds, qi[u], simd::load(dk + at)));
        simd::store(dv + at, simd::fmadd(pj, oi[u], simd::load(dv + at)));
      }
    }
#pragma GCC unroll 8
    for (int u = 0; u < DV; ++u) simd::store(dq + i * Dh + L * u, dqi[u]);
  }
}

// ceil(T / L) vectors of keys (1 to kMaxLength / L), a compile-time constant for the kernels:
// f.template operator()<NV>() for the NV that T needs.
template <class F>
void with_key_vectors(int T, F&& f) {
  const int needed = std::clamp((T + L - 1) / L, 1, kMaxLength / L);
  [&]<int... N>(std::integer_sequence<int, N...>) {
    ((needed == N + 1 && (f.template operator()<N + 1>(), true)) || ...);
  }
  (std::make_integer_sequence<int, kMaxLength / L>{});
}

}  // namespace detail

// One head: q, v [T, Dh], kt [Dh, T] contiguous; att [T, T] (row i: softmax over j <= i, zeros
// after); out rows of stride out_stride. bias: [T, T] pattern or null.
template <int Dh>
void forward(const float* q, const float* kt, const float* v, float* att, float* out,
             std::int64_t out_stride, int T, float scale, const float* bias, float bias_strength) {
  static_assert(supports<Dh>);
  detail::with_key_vectors(T, [&]<int NV>() {
    detail::forward<NV, Dh>(q, kt, v, att, out, out_stride, T, scale, bias, bias_strength);
  });
}

// dq, dk, dv [T, Dh] (overwritten) of one head from d_out (rows of stride d_out_stride).
template <int Dh>
void backward(const float* q, const float* k, const float* vt, const float* att, const float* d_out,
              std::int64_t d_out_stride, float* dq, float* dk, float* dv, int T, float scale) {
  static_assert(supports<Dh>);
  detail::with_key_vectors(T, [&]<int NV>() {
    detail::backward<NV, Dh>(q, k, vt, att, d_out, d_out_stride, dq, dk, dv, T, scale);
  });
}

}  // namespace emergent::short_causal_attention

#endif

namespace emergent {

// These kernels as a form of causal attention (the selector of dot_attention.hpp takes it for
// T <= 64): the signature of every form (causal_attention_direct.hpp), for float with d_head a
// multiple of the lanes up to 64 on AVX-512 or AVX2; `available` is false elsewhere, and then
// nothing may call it.
template <class Real, int Dh>
struct CausalAttentionShort {
  static constexpr const char* name = "short";
#if EMERGENT_SIMD_LANES > 0
  static constexpr bool available =
      std::is_same_v<Real, float> && short_causal_attention::supports<Dh>;
#else
  static constexpr bool available = false;
#endif
  static constexpr int max_length = 64;     // the keys of a row sit in registers
  static constexpr bool transposed = true;  // reads in.kt and in.vt

  static void forward(const attention_head::HeadInputs<Real>& in, Real* att, Real* out,
                      std::int64_t out_stride, int T, Real scale, const Real* bias,
                      Real bias_strength) {
    static_assert(sizeof(Real) > 0 && available, "CausalAttentionShort is not available here");
#if EMERGENT_SIMD_LANES > 0
    if constexpr (available)
      short_causal_attention::forward<Dh>(in.q, in.kt, in.v, att, out, out_stride, T, scale, bias,
                                          bias_strength);
#endif
  }

  static void backward(const attention_head::HeadInputs<Real>& in, const Real* att,
                       const Real* d_out, std::int64_t d_out_stride, Real* dq, Real* dk, Real* dv,
                       int T, Real scale) {
    static_assert(sizeof(Real) > 0 && available, "CausalAttentionShort is not available here");
#if EMERGENT_SIMD_LANES > 0
    if constexpr (available)
      short_causal_attention::backward<Dh>(in.q, in.k, in.vt, att, d_out, d_out_stride, dq, dk, dv,
                                           T, scale);
#endif
  }
};

}  // namespace emergent
