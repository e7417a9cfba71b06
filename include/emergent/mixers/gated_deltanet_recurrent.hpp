// The gated delta rule of one head of one sequence, the recurrent form: token by token, the
// form FLA calls fused_recurrent, and the one GatedDeltaNet::step() decodes with. q, k, v [T, K]
// contiguous (K = d_k = d_v, a compile-time constant), g, beta [T]; state h [K, K] row-major,
// h[i*K + j] (key i, value j), FLA's layout (the transpose of the paper's S_t):
//   u_t = v_t - alpha_t h_{t-1}^T k_t        (alpha_t = exp(g_t); the memory's error on key k_t)
//   h_t = alpha_t h_{t-1} + beta_t k_t u_t^T
//   o_t = h_t^T q_t                           h_{-1} = the incoming state (0 in the layer)
//
// Backward: the sequential BPTT of notes §A2.4(a), from dh = 0 after the last token, t = T-1..0:
//   dq_t = h_t do_t;  dh += q_t do_t^T;  du = beta_t dh^T k_t;  dv_t = du
//   dbeta_t = k_t^T dh u_t;  dk_t = beta_t dh u_t - alpha_t h_{t-1} du
//   dh~ = dh - k_t du^T;  dg_t = alpha_t <dh~, h_{t-1}>;  dh = alpha_t dh~
// over states recomputed chunk by chunk from the chunk-boundary states the forward keeps
// (FLA's fused_recurrent refuses a backward for want of these states; storing every h_t would
// cost K^2 per head and token). The chunked form (gated_deltanet_chunked.hpp) has the same
// signature and shares this backward.
//
// Performance: every K-wide operation is an Eigen fixed-size row (explicit SIMD, whatever the
// compiler's unrolling does: plain loops over K = 16 came out scalar at -O3 -march=native), and
// sums over rows go into four independent accumulators so that they are bound by FMA throughput
// rather than latency.
#pragma once

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <emergent/core/error.hpp>
#include <vector>

namespace emergent {

template <class Real, int K>
struct GatedDeltaRecurrent {
  static constexpr const char* name = "recurrent";
  using Mat = Eigen::Matrix<Real, K, K, Eigen::RowMajor>;
  using Vec = Eigen::Matrix<Real, K, 1>;
  using RowVec = Eigen::Matrix<Real, 1, K>;
  using RowMap = Eigen::Map<RowVec>;
  using ConstRowMap = Eigen::Map<const RowVec>;

  // sum_{s < count} coef[s * stride] rows[s] for rows [count, K] contiguous.
  static RowVec combine_rows(const Real* coef, std::ptrdiff_t stride, const Real* rows, int count) {
    RowVec a0 = RowVec::Zero(), a1 = RowVec::Zero(), a2 = RowVec::Zero(), a3 = RowVec::Zero();
    const int full = count / 4 * 4;
    for (int s = 0; s < full; s += 4) {
      a0 += coef[s * stride] * ConstRowMap(rows + s * K);
      a1 += coef[(s + 1) * stride] * ConstRowMap(rows + (s + 1) * K);
      a2 += coef[(s + 2) * stride] * ConstRowMap(rows + (s + 2) * K);
      a3 += coef[(s + 3) * stride] * ConstRowMap(rows + (s + 3) * K);
    }
    switch (count - full) {  // the last 0..3 rows (a switch, not a loop: g++ warns about a
      case 3:                // remainder loop it has proven dead when count is a constant)
        a2 += coef[(full + 2) * stride] * ConstRowMap(rows + (full + 2) * K);
        [[fallthrough]];
      case 2:
        a1 += coef[(full + 1) * stride] * ConstRowMap(rows + (full + 1) * K);
        [[fallthrough]];
      case 1:
        a0 += coef[full * stride] * ConstRowMap(rows + full * K);
        break;
      default:
        break;
    }
    return (a0 + a1) + (a2 + a3);
  }

  // One token: h <- alpha h + beta k u^T with u = v - alpha h^T k; o = h^T q. u_out may be null.
  static void step(const Real* q, const Real* k, const Real* v, Real g, Real beta, Real* h, Real* o,
                   Real* u_out = nullptr) {
    Eigen::Map<Mat>{h} *= std::exp(g);
    const RowVec u = ConstRowMap(v) - combine_rows(k, 1, h, K);
    RowVec a0 = RowVec::Zero(), a1 = RowVec::Zero(), a2 = RowVec::Zero(), a3 = RowVec::Zero();
    constexpr int full = K / 4 * 4;
    for (int i = 0; i < full; i += 4) {  // h += beta k u^T and o = h^T q, row by row
      RowMap r0(h + i * K), r1(h + (i + 1) * K), r2(h + (i + 2) * K), r3(h + (i + 3) * K);
      r0 += (beta * k[i]) * u;
      r1 += (beta * k[i + 1]) * u;
      r2 += (beta * k[i + 2]) * u;
      r3 += (beta * k[i + 3]) * u;
      a0 += q[i] * r0;
      a1 += q[i + 1] * r1;
      a2 += q[i + 2] * r2;
      a3 += q[i + 3] * r3;
    }
    if constexpr (full < K)
      for (int i = full; i < K; ++i) {
        RowMap r(h + i * K);
        r += (beta * k[i]) * u;
        a0 += q[i] * r;
      }
    RowMap{o} = (a0 + a1) + (a2 + a3);
    if (u_out) RowMap{u_out} = u;
  }

  // o [T, K] from the tokens; h: the state before (in) and after (out) the sequence.
  // chunk_states, when not null, receives the state entering each chunk of `chunk` tokens
  // [ceil(T / chunk), K, K], which the backward starts its recomputation from.
  static void forward(const Real* q, const Real* k, const Real* v, const Real* g, const Real* beta,
                      int T, int chunk, Real* o, Real* h, Real* chunk_states) {
    require(chunk >= 1, "GatedDeltaRecurrent::forward", "chunk must be at least 1");
    for (int t = 0; t < T; ++t) {
      if (chunk_states && t % chunk == 0)
        std::copy(h, h + K * K, chunk_states + static_cast<std::size_t>(t / chunk) * K * K);
      step(q + t * K, k + t * K, v + t * K, g[t], beta[t], h, o + t * K);
    }
  }

  // Sequential backward (header) from zero initial and final-state gradients: dq, dk, dv [T, K],
  // dg, dbeta [T] (overwritten) from d_o [T, K], recomputing the states of each chunk from
  // chunk_states (as a forward of either form wrote them with the same `chunk`).
  static void backward(const Real* q, const Real* k, const Real* v, const Real* g, const Real* beta,
                       int T, int chunk, const Real* chunk_states, const Real* d_o, Real* dq,
                       Real* dk, Real* dv, Real* dg, Real* dbeta) {
    require(chunk >= 1, "GatedDeltaRecurrent::backward", "chunk must be at least 1");
    using MatMap = Eigen::Map<Mat>;
    using ConstMatMap = Eigen::Map<const Mat>;
    using VecMap = Eigen::Map<Vec>;
    using ConstVecMap = Eigen::Map<const Vec>;
    // states [chunk + 1, K, K]: states[i] = h before token c0 + i; dh [K, K]; u [chunk, K].
    std::vector<Real> buffer(static_cast<std::size_t>(chunk + 2) * K * K +
                             static_cast<std::size_t>(chunk) * K);
    Real* states = buffer.data();
    MatMap dh(states + static_cast<std::size_t>(chunk + 1) * K * K);
    Real* us = dh.data() + K * K;
    dh.setZero();
    const int chunks = (T + chunk - 1) / chunk;
    for (int c = chunks - 1; c >= 0; --c) {
      const int c0 = c * chunk, n = std::min(chunk, T - c0);
      std::copy(chunk_states + static_cast<std::size_t>(c) * K * K,
                chunk_states + static_cast<std::size_t>(c + 1) * K * K, states);
      for (int i = 0; i < n; ++i) {
        Real* next = states + static_cast<std::size_t>(i + 1) * K * K;
        std::copy(states + static_cast<std::size_t>(i) * K * K, next, next);
        Real o_unused[K];
        const int t = c0 + i;
        step(q + t * K, k + t * K, v + t * K, g[t], beta[t], next, o_unused, us + i * K);
      }
      for (int i = n - 1; i >= 0; --i) {
        const int t = c0 + i;
        const ConstMatMap prev(states + static_cast<std::size_t>(i) * K * K),
            cur(prev.data() + K * K);
        const ConstVecMap qt(q + t * K), kt(k + t * K), dot(d_o + t * K), u(us + i * K);
        const Real alpha = std::exp(g[t]), b = beta[t];
        VecMap(dq + t * K).noalias() = cur.lazyProduct(dot);  // inline, not Eigen's GEMV call
        dh.noalias() += qt * dot.transpose();
        const Vec du = b * combine_rows(k + t * K, 1, dh.data(), K).transpose();  // beta dh^T k
        const Vec dhu = dh.lazyProduct(u);
        dbeta[t] = kt.dot(dhu);
        VecMap(dk + t * K).noalias() = b * dhu - alpha * prev.lazyProduct(du);
        dh.noalias() -= kt * du.transpose();  // dh~
        dg[t] = alpha * dh.cwiseProduct(prev).sum();
        dh *= alpha;
        VecMap(dv + t * K) = du;
      }
    }
  }
};

}  // namespace emergent
