// The gated delta rule of one head of one sequence, the chunked form (notes §A2.3; FLA's
// chunk_gated_delta_rule): the signature and result of the recurrent form
// (gated_deltanet_recurrent.hpp: q, k, v [T, K], g, beta [T], state h [K, K] in FLA's layout),
// computed in chunks of C tokens with incoming state h0, G_r = sum_{i<=r} g_i, gamma_r = exp(G_r),
// Gamma_rs = exp(g_{s+1} + ... + g_r) (s <= r; an exponent <= 0, so it never overflows; summed
// per pair rather than as G_r - G_s, which cancels in float after a large decay):
//   L      = strictly-lower(diag(beta) (K K^T (.) Gamma))
//   V_new  = (I + L)^{-1} (diag(beta) V - diag(beta gamma) K h0)    (= U - W h0 of the WY form)
//   O      = diag(gamma) Q h0 + ((Q K^T) (.) Gamma (.) [s <= r]) V_new
//   h_C    = gamma_C h0 + (diag(gamma_C / gamma) K)^T V_new      (with gamma_C/gamma_r = Gamma_Cr)
// The UT transform (I + L)^{-1} is applied by forward substitution on the combined right-hand
// side (one n^2/2 x K pass) instead of forming A, W = A diag(beta gamma) K and U = A diag(beta) V
// separately: the same algebra, fewer flops on a CPU.
//
// Backward: the recurrent form's (sequential BPTT over states recomputed from the chunk states
// this forward keeps); there is no chunkwise backward.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <emergent/mixers/gated_deltanet_recurrent.hpp>
#include <vector>

namespace emergent {

template <class Real, int K>
struct GatedDeltaChunked {
  static constexpr const char* name = "chunked";
  static constexpr int kMaxChunk = 64;
  using Recurrent = GatedDeltaRecurrent<Real, K>;
  using RowMap = typename Recurrent::RowMap;
  using ConstRowMap = typename Recurrent::ConstRowMap;
  using Array = Eigen::Array<Real, Eigen::Dynamic, 1>;

  // o [T, K] from the tokens, in chunks of `chunk` tokens (1..kMaxChunk); h: the state before
  // (in) and after (out) the sequence. chunk_states, when not null, receives the state entering
  // each chunk [ceil(T / chunk), K, K], which the backward starts its recomputation from.
  static void forward(const Real* q, const Real* k, const Real* v, const Real* g, const Real* beta,
                      int T, int chunk, Real* o, Real* h, Real* chunk_states) {
    require(chunk >= 1 && chunk <= kMaxChunk, "GatedDeltaChunked::forward",
            "chunk must be in 1..64");
    const int C = chunk;
    // v_new [C, K]; keys transposed [K, C]; per row r: decay Gamma_r., beta_r (k_r . k_s) Gamma_rs
    // (s < r) and (q_r . k_s) Gamma_rs (s <= r), each [C, C]; coefficients [C].
    std::vector<Real> buffer(static_cast<std::size_t>(2) * C * K +
                             static_cast<std::size_t>(3) * C * C + C);
    Real* v_new = buffer.data();
    Real* kt = v_new + C * K;
    Real* decay = kt + C * K;
    Real* lower = decay + C * C;
    Real* scores = lower + C * C;
    Real* coef = scores + C * C;
    for (int c0 = 0, c = 0; c0 < T; c0 += C, ++c) {
      const int n = std::min(C, T - c0);
      const Real *Q = q + c0 * K, *Kc = k + c0 * K, *V = v + c0 * K, *b = beta + c0;
      if (chunk_states) std::copy(h, h + K * K, chunk_states + static_cast<std::size_t>(c) * K * K);
      for (int s = 0; s < n; ++s)
        for (int i = 0; i < K; ++i) kt[i * C + s] = Kc[s * K + i];
      // log Gamma_rs = g_{s+1} + ... + g_r as running sums of same-sign terms, not G_r - G_s:
      // after a large decay the difference of two large cumsums would cancel (in float, g ~ -1000
      // followed by alpha ~ 1 gives Gamma off by 1e-4 relative).
      for (int r = 0; r < n; ++r) {
        Real* row = decay + r * C;
        const Real* above = row - C;
        for (int s = 0; s < r; ++s) row[s] = above[s] + g[c0 + r];
        row[r] = 0;
      }
      for (int r = 0; r < n; ++r) {
        Eigen::Map<Array> row(decay + r * C, r + 1);
        row = row.exp();
      }
      // L = beta_r (k_r . k_s) Gamma_rs and (q_r . k_s) Gamma_rs, as axpys over s (local
      // accumulators: stores through pointers that may alias would keep them scalar).
      for (int r = 0; r < n; ++r) {
        Real kk[kMaxChunk] = {}, qk[kMaxChunk] = {};
        for (int i = 0; i < K; ++i) {
          const Real ki = Kc[r * K + i], qi = Q[r * K + i];
          const Real* kti = kt + i * C;
          for (int s = 0; s <= r; ++s) {
            kk[s] += ki * kti[s];
            qk[s] += qi * kti[s];
          }
        }
        const Real* dr = decay + r * C;
        Real *lr = lower + r * C, *sr = scores + r * C;
        for (int s = 0; s <= r; ++s) {
          lr[s] = b[r] * kk[s] * dr[s];
          sr[s] = qk[s] * dr[s];
        }
      }
      // Right-hand side beta_r (v_r - gamma_r h0^T k_r) and the inter-chunk output gamma_r h0^T
      // q_r, with gamma_r = exp(G_r) (G_r a cumsum of same-sign terms from the chunk start).
      Real G = 0;
      for (int r = 0; r < n; ++r) {
        G += g[c0 + r];
        const Real gamma = std::exp(G);
        RowMap(v_new + r * K) =
            b[r] * (ConstRowMap(V + r * K) - gamma * Recurrent::combine_rows(Kc + r * K, 1, h, K));
        RowMap(o + static_cast<std::size_t>(c0 + r) * K) =
            gamma * Recurrent::combine_rows(Q + r * K, 1, h, K);
      }
      // Forward substitution with I + L (the UT transform), row by row; row r of V_new is final
      // once the rows above are, so its intra-chunk output term follows at once.
      for (int r = 0; r < n; ++r) {
        RowMap(v_new + r * K) -= Recurrent::combine_rows(lower + r * C, 1, v_new, r);
        RowMap(o + static_cast<std::size_t>(c0 + r) * K) +=
            Recurrent::combine_rows(scores + r * C, 1, v_new, r + 1);
      }
      // State leaving the chunk: gamma_n h0 + sum_s Gamma_{n-1,s} k_s v_new_s^T, row by row.
      const Real* last = decay + (n - 1) * C;
      const Real gamma_last = std::exp(G);
      for (int i = 0; i < K; ++i) {
        for (int s = 0; s < n; ++s) coef[s] = last[s] * Kc[s * K + i];
        RowMap row(h + i * K);
        row = gamma_last * row + Recurrent::combine_rows(coef, 1, v_new, n);
      }
    }
  }

  // The recurrent form's backward (header).
  static void backward(const Real* q, const Real* k, const Real* v, const Real* g, const Real* beta,
                       int T, int chunk, const Real* chunk_states, const Real* d_o, Real* dq,
                       Real* dk, Real* dv, Real* dg, Real* dbeta) {
    Recurrent::backward(q, k, v, g, beta, T, chunk, chunk_states, d_o, dq, dk, dv, dg, dbeta);
  }
};

}  // namespace emergent
