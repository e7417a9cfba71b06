// Causal attention of one head over a long sequence (T > 64), AVX-512 or AVX2 (core/simd.hpp;
// L = 16 or 8 lanes), for d_head a multiple of L up to 64: the cellular automaton's heads
// (T = 1024, d_head = 16). Below, "16" is L and "zmm" a ymm on AVX2. The math is that of
// mixers/dot_attention.hpp; this file only orders it so that the FMAs run from registers.
//
// Queries go in tiles of R rows (R = 8 at d_head 16: the R rows of q, dO and dq fit in the 32
// zmm registers together). A tile i0 .. i0+R-1 sees keys [0, i0 + R); keys above a row's
// diagonal get probability exactly 0, so the tile treats its keys as one rectangle.
//
// Forward, per tile:
//   s_rj = scale q_r . k_j + c P_rj         16 keys per zmm: d_head broadcast FMAs over K^T,
//                                           R rows x 32 keys of accumulators at once
//   e_rj = exp(s_rj - max_l s_rl)           j <= i0 + r (0 after); Cephes' expf, vectorised
//   (core/avx512.hpp) p_rj = e_rj / sum_l e_rl                written to att row i0 + r, zeros
//   after the diagonal o_r  = (sum_j e_rj v_j) / sum_l e_rl    v_j is d_head / 16 zmm; e_rj
//   broadcast
// Backward, per tile (dk, dv accumulate over the tiles; dq is the tile's own):
//   dA_rj = dO_r . v_j                      as s above, over V^T
//   ds_rj = scale p_rj (dA_rj - sum_l p_rl dA_rl)
//   dq_r  = sum_j ds_rj k_j                 for each key j: k_j loaded once, then R broadcast
//   dk_j += sum_r ds_rj q_r                 FMAs into each of dq_r (in registers), dk_j and
//   dv_j += sum_r p_rj dO_r                 dv_j (one load/add/store of dk_j, dv_j per tile)
//
// Memory layout. K and V are transposed per head into blocks of 16 keys, [T/16][d_head][16]: the
// score sweep reads one contiguous run per block, where the rows of a plain K^T [d_head, T] lie
// 4T bytes apart and all fall into the same L1 set when T is a multiple of 1024. A tile's scores
// (and in the backward its dS and p) live in a scratch laid out the same way, [keys/16][R][16]:
// the broadcasts of the inner loops sit at fixed offsets from one pointer. att [T, T] is the one
// stream through memory (4 MiB a head at T = 1024): the forward writes it with streaming stores,
// its zeros a few vectors per block of keys in between the probabilities; the backward fetches
// the next tile's att rows ahead while a tile computes.
#pragma once

#include <cstdint>
#include <emergent/core/simd.hpp>
#include <emergent/mixers/attention_head_split.hpp>
#include <type_traits>

#if EMERGENT_SIMD_LANES > 0

#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

namespace emergent::long_causal_attention {

inline constexpr int L = simd::kLanes;  // keys per block and per vector

// d_head values the kernels take; others use the generic path of dot_attention.hpp.
template <int Dh>
inline constexpr bool supports = Dh % L == 0 && Dh > 0 && Dh <= 64;

namespace detail {

// Query rows per tile. AVX-512 (32 zmm): the backward keeps 3 R d_head / 16 registers (q, dO,
// dq of the tile) live. AVX2 (16 ymm): fewer rows; at d_head 16 the tile's q and dO are read
// from L1 as FMA operands.
template <int Dh>
inline constexpr int kTileRows = L == 16 ? (Dh == 16   ? 8
                                            : Dh == 32 ? 4
                                                       : 2)
                                         : (Dh == 8    ? 4
                                            : Dh == 16 ? 2
                                                       : 1);

using Scratch = std::vector<float, Eigen::aligned_allocator<float>>;

inline int round_up_lanes(int n) { return (n + L - 1) / L * L; }

// b [T, Dh] (K or V) -> its transpose in blocks of 16 keys, packed [round_up_16(T) / 16][Dh][16]
// (packed[16 Dh jb + 16 d + l] = b[jb + l][d]), zeros past T.
template <int Dh>
void pack_key_blocks(const float* b, int T, float* packed) {
  const int padded = round_up_lanes(T);
  for (int jb = 0; jb < padded; jb += L)
    for (int l = 0; l < L; ++l)
      for (int d = 0; d < Dh; ++d)
        packed[jb * Dh + d * L + l] = jb + l < T ? b[(jb + l) * Dh + d] : 0.0f;
}

// acc[r][w] = sum_d a[r][d] bt[d][j0 + 16 w + lane] for R rows of a (row stride a_stride) and W
// blocks of 16 keys from the packed bt.
template <int R, int W, int Dh>
[[gnu::always_inline]] inline void rows_times_key_blocks(const float* a, std::int64_t a_stride,
                                                         const float* packed, int j0,
                                                         simd::Vec (&acc)[R][W]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[r][w] = simd::zero();
  const float* block = packed + static_cast<std::int64_t>(j0) * Dh;
  for (int d = 0; d < Dh; ++d) {
    simd::Vec b[W];
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) b[w] = simd::load(block + w * L * Dh + d * L);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const simd::Vec x = simd::set1(a[r * a_stride + d]);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) acc[r][w] = simd::fmadd(x, b[w], acc[r][w]);
    }
  }
}

// The R x keys products a . bt of a tile, 32 keys at a time, then 16 (lanes past `keys` hold
// products with other keys or zeros); epilogue(r, j, vector of keys j .. j+15) takes each result.
template <int R, int Dh, class Epilogue>
[[gnu::always_inline]] inline void sweep_keys(const float* a, std::int64_t a_stride,
                                              const float* packed, int keys, Epilogue&& epilogue) {
  int j0 = 0;
  for (; j0 + 2 * L <= keys; j0 += 2 * L) {
    simd::Vec acc[R][2];
    rows_times_key_blocks<R, 2, Dh>(a, a_stride, packed, j0, acc);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) epilogue(r, j0, acc[r][0]), epilogue(r, j0 + L, acc[r][1]);
  }
  for (; j0 < keys; j0 += L) {
    simd::Vec acc[R][1];
    rows_times_key_blocks<R, 1, Dh>(a, a_stride, packed, j0, acc);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) epilogue(r, j0, acc[r][0]);
  }
}

// Writes att [T, T]: each tile's probability rows, and the zeros above the diagonal (row i from
// column round_up_16(i + 1) on) a few vectors at a time in between, so that these stores (half
// of att) spread over the compute. Streaming stores where rows are 64-byte aligned: att goes to
// memory without its lines being read for ownership first (the backward reads it back only
// after the rest of the model's forward).
class AttWriter {
 public:
  AttWriter(float* att, int T)
      : att_(att),
        T_(T),
        streaming_(T % L == 0 && reinterpret_cast<std::uintptr_t>(att) % 64 == 0) {}

  // Entries j .. j+15 of row i (j a multiple of 16; lanes from T on are dropped).
  void put(int i, int j, simd::Vec x) {
    float* at = att_ + static_cast<std::int64_t>(i) * T_ + j;
    if (streaming_)
      simd::stream(at, x);
    else
      simd::store_masked(at, simd::lanes_below(T_ - j), x);
  }

  // The next `count` vectors of zeros above the diagonal, in row order.
  void zeros(std::int64_t count) {
    while (count > 0 && zero_row_ < T_) {
      if (zero_col_ >= T_) {
        ++zero_row_;
        zero_col_ = round_up_lanes(zero_row_ + 1);
        continue;
      }
      put(zero_row_, zero_col_, simd::zero());
      zero_col_ += L;
      --count;
    }
  }

  // The zeros left, then a fence: the streaming stores are visible before anyone reads att.
  void finish() {
    zeros(std::numeric_limits<std::int64_t>::max());
    _mm_sfence();
  }

 private:
  float* att_;
  int T_;
  bool streaming_;
  int zero_row_ = 0, zero_col_ = L;  // row 0's zeros start at round_up_lanes(1)
};

// One row of scores in the tile scratch (vector j at s + R j, keys [0, visible) valid) -> e =
// exp(s - max s) there, 0 from visible to padded; returns 1 / sum e.
template <int R>
float exponentiate_row(float* s, int visible, int padded) {
  const int full = visible / L * L;
  const simd::Vec minus_inf = simd::set1(-std::numeric_limits<float>::infinity());
  simd::Vec row_max = minus_inf;
  for (int j = 0; j < full; j += L) row_max = simd::max(row_max, simd::load(s + R * j));
  if (full < visible)
    row_max = simd::max(row_max, simd::blend(simd::lanes_below(visible - full), minus_inf,
                                             simd::load(s + R * full)));
  const simd::Vec max_all = simd::set1(simd::reduce_max(row_max));
  simd::Vec total = simd::zero();
  int j = 0;
  for (; j < full; j += L) {
    const simd::Vec e = simd::exp(simd::sub(simd::load(s + R * j), max_all));
    simd::store(s + R * j, e);
    total = simd::add(total, e);
  }
  if (full < visible) {
    const simd::Vec e = simd::zero_unless(simd::lanes_below(visible - full),
                                          simd::exp(simd::sub(simd::load(s + R * j), max_all)));
    simd::store(s + R * j, e);
    total = simd::add(total, e);
    j += L;
  }
  for (; j < padded; j += L) simd::store(s + R * j, simd::zero());
  return 1.0f / simd::reduce_add(total);
}

// Query rows i0 .. i0+R-1: scores into the scratch, softmax, att rows through the writer (plus
// zeros_per_block vectors of zeros per 16 keys), o = P V into out.
template <int R, int Dh>
void forward_tile(const float* q, const float* kt_packed, const float* v, AttWriter& att,
                  std::int64_t zeros_per_block, float* out, std::int64_t out_stride, int T,
                  float scale, const float* bias, float bias_strength, int i0, float* scores) {
  constexpr int DV = Dh / L;
  const int keys = i0 + R, padded = round_up_lanes(keys);
  const simd::Vec scale_v = simd::set1(scale), strength = simd::set1(bias_strength);
  sweep_keys<R, Dh>(
      q + static_cast<std::int64_t>(i0) * Dh, Dh, kt_packed, keys, [&](int r, int j, simd::Vec s) {
        s = simd::mul(s, scale_v);
        if (bias) {
          const float* pattern = bias + static_cast<std::int64_t>(i0 + r) * T + j;
          s = simd::fmadd(strength, simd::load_masked(simd::lanes_below(T - j), pattern), s);
        }
        simd::store(scores + R * j + L * r, s);
      });
  float inverse_sum[R];
  for (int r = 0; r < R; ++r)
    inverse_sum[r] = exponentiate_row<R>(scores + L * r, i0 + r + 1, padded);
  // Even and odd keys accumulate apart: 2 R independent chains of FMAs.
  simd::Vec o[2][R][DV];
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u) o[h][r][u] = simd::zero();
  auto accumulate = [&](int h, const float* e, int j) {
    simd::Vec vj[DV];
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) vj[u] = simd::load(v + static_cast<std::int64_t>(j) * Dh + L * u);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const simd::Vec er = simd::set1(e[L * r]);
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u) o[h][r][u] = simd::fmadd(er, vj[u], o[h][r][u]);
    }
  };
  // Per block of 16 keys: the block's vector of each row (where not above the diagonal), then
  // zeros_per_block vectors of zeros, to att; then the block's terms of o.
  for (int jb = 0; jb < keys; jb += L) {
    const float* block = scores + R * jb;
    for (int r = 0; r < R; ++r)
      if (jb <= i0 + r)
        att.put(i0 + r, jb, simd::mul(simd::load(block + L * r), simd::set1(inverse_sum[r])));
    att.zeros(zeros_per_block);
    const int count = std::min(L, keys - jb);
    int l = 0;
    for (; l + 2 <= count; l += 2)
      accumulate(0, block + l, jb + l), accumulate(1, block + l + 1, jb + l + 1);
    if (l < count) accumulate(0, block + l, jb + l);
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u)
      simd::store(out + (i0 + r) * out_stride + L * u,
                  simd::mul(simd::add(o[0][r][u], o[1][r][u]), simd::set1(inverse_sum[r])));
}

// Query rows i0 .. i0+R-1 of the backward. scratch [keys/16][2R][16]: dA then dS of row r at
// 16 r of each block, p of row r at 16 (R + r).
template <int R, int Dh>
void backward_tile(const float* q, const float* k, const float* vt_packed, const float* att,
                   const float* d_out, std::int64_t d_out_stride, float* dq, float* dk, float* dv,
                   int T, float scale, int i0, float* scratch) {
  constexpr int DV = Dh / L;
  const int keys = i0 + R;
  sweep_keys<R, Dh>(
      d_out + i0 * d_out_stride, d_out_stride, vt_packed, keys,
      [&](int r, int j, simd::Vec da) { simd::store(scratch + 2 * R * j + L * r, da); });
  // p from att (0 from `keys` on: masked loads; att row i0+r is 0 above the diagonal), so dS is 0
  // there whatever dA holds.
  const simd::Vec scale_v = simd::set1(scale);
  for (int r = 0; r < R; ++r) {
    const float* p = att + static_cast<std::int64_t>(i0 + r) * T;
    auto p_times_da = [&](int j) {  // also keeps p_rj .. p_r(j+15) in the scratch
      float* block = scratch + 2 * R * j;
      const simd::Vec pj = simd::load_masked(simd::lanes_below(keys - j), p + j);
      simd::store(block + L * (R + r), pj);
      return simd::mul(pj, simd::load(block + L * r));
    };
    simd::Vec dot0 = simd::zero(), dot1 = simd::zero();  // two chains of adds
    int j = 0;
    for (; j + 2 * L <= keys; j += 2 * L) {
      dot0 = simd::add(dot0, p_times_da(j));
      dot1 = simd::add(dot1, p_times_da(j + L));
    }
    for (; j < keys; j += L) dot0 = simd::add(dot0, p_times_da(j));
    const simd::Vec row_dot = simd::set1(simd::reduce_add(simd::add(dot0, dot1)));
    for (j = 0; j < keys; j += L) {
      float* block = scratch + 2 * R * j;
      const simd::Vec ds =
          simd::mul(simd::load(block + L * (R + r)), simd::sub(simd::load(block + L * r), row_dot));
      simd::store(block + L * r, simd::mul(ds, scale_v));
    }
  }
  simd::Vec qr[R][DV], dor[R][DV], dqr[R][DV];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) {
      qr[r][u] = simd::load(q + (i0 + r) * Dh + L * u);
      dor[r][u] = simd::load(d_out + (i0 + r) * d_out_stride + L * u);
      dqr[r][u] = simd::zero();
    }
  // The next tile's att rows come from memory: fetch them while this tile computes.
  const int rows_ahead = std::min(R, T - keys);
  for (int jb = 0; jb < keys; jb += L) {
    for (int r = 0; r < rows_ahead; ++r)
      _mm_prefetch(
          reinterpret_cast<const char*>(att + static_cast<std::int64_t>(keys + r) * T + jb),
          _MM_HINT_T0);
    const int count = std::min(L, keys - jb);
    for (int l = 0; l < count; ++l) {
      const float* at = scratch + 2 * R * jb + l;
      const int j = jb + l;
      simd::Vec kj[DV], dkj[DV], dvj[DV];
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u)
        kj[u] = simd::load(k + j * Dh + L * u), dkj[u] = simd::zero(), dvj[u] = simd::zero();
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const simd::Vec ds = simd::set1(at[L * r]), p = simd::set1(at[L * (R + r)]);
#pragma GCC unroll 4
        for (int u = 0; u < DV; ++u) {
          dqr[r][u] = simd::fmadd(ds, kj[u], dqr[r][u]);
          dkj[u] = simd::fmadd(ds, qr[r][u], dkj[u]);
          dvj[u] = simd::fmadd(p, dor[r][u], dvj[u]);
        }
      }
#pragma GCC unroll 4
      for (int u = 0; u < DV; ++u) {
        const int to = j * Dh + L * u;
        simd::store(dk + to, simd::add(simd::load(dk + to), dkj[u]));
        simd::store(dv + to, simd::add(simd::load(dv + to), dvj[u]));
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int u = 0; u < DV; ++u) simd::store(dq + (i0 + r) * Dh + L * u, dqr[r][u]);
}

// tile(rows, i0) over the query rows [begin, T): tiles of R rows, then one each of R/2, R/4 .. 1
// rows for what is left (rows: std::integral_constant).
template <int R, class Tile>
void over_row_tiles(int begin, int T, Tile&& tile) {
  int i0 = begin;
  for (; i0 + R <= T; i0 += R) tile(std::integral_constant<int, R>{}, i0);
  if constexpr (R > 1) over_row_tiles<R / 2>(i0, T, tile);
}

}  // namespace detail

// One head: q, k, v [T, Dh] contiguous; att [T, T] (row i: softmax over j <= i, zeros after);
// out rows of stride out_stride. bias: [T, T] pattern or null.
template <int Dh>
void forward(const float* q, const float* k, const float* v, float* att, float* out,
             std::int64_t out_stride, int T, float scale, const float* bias, float bias_strength) {
  static_assert(supports<Dh>);
  constexpr int R = detail::kTileRows<Dh>;
  const int padded = detail::round_up_lanes(T);
  detail::Scratch kt_packed(static_cast<std::size_t>(padded) * Dh),
      scores(static_cast<std::size_t>(padded) * R);
  detail::pack_key_blocks<Dh>(k, T, kt_packed.data());
  // Zeros above the diagonal, spread evenly over the tiles' blocks of 16 keys.
  std::int64_t zero_vectors = 0, key_blocks = 0;
  for (int i = 0; i < T; ++i) zero_vectors += (T - detail::round_up_lanes(i + 1) + L - 1) / L;
  detail::over_row_tiles<R>(
      0, T, [&](auto rows, int i0) { key_blocks += (i0 + decltype(rows)::value + L - 1) / L; });
  const std::int64_t zeros_per_block = (zero_vectors + key_blocks - 1) / key_blocks;
  detail::AttWriter writer(att, T);
  detail::over_row_tiles<R>(0, T, [&](auto rows, int i0) {
    detail::forward_tile<decltype(rows)::value, Dh>(q, kt_packed.data(), v, writer, zeros_per_block,
                                                    out, out_stride, T, scale, bias, bias_strength,
                                                    i0, scores.data());
  });
  writer.finish();
}

// dq, dk, dv [T, Dh] (overwritten) of one head from d_out (rows of stride d_out_stride); q, k, v
// and att as the forward had them.
template <int Dh>
void backward(const float* q, const float* k, const float* v, const float* att, const float* d_out,
              std::int64_t d_out_stride, float* dq, float* dk, float* dv, int T, float scale) {
  static_assert(supports<Dh>);
  constexpr int R = detail::kTileRows<Dh>;
  const int padded = detail::round_up_lanes(T);
  detail::Scratch vt_packed(static_cast<std::size_t>(padded) * Dh),
      scratch(static_cast<std::size_t>(padded) * 2 * R);
  detail::pack_key_blocks<Dh>(v, T, vt_packed.data());
  std::memset(dk, 0, sizeof(float) * T * Dh);
  std::memset(dv, 0, sizeof(float) * T * Dh);
  detail::over_row_tiles<R>(0, T, [&](auto rows, int i0) {
    detail::backward_tile<decltype(rows)::value, Dh>(
        q, k, vt_packed.data(), att, d_out, d_out_stride, dq, dk, dv, T, scale, i0, scratch.data());
  });
}

}  // namespace emergent::long_causal_attention

#endif

namespace emergent {

// These kernels as a form of causal attention (the selector of dot_attention.hpp takes it for
// T > 64): the signature of every form (causal_attention_direct.hpp), for float with d_head a
// multiple of the lanes up to 64 on AVX-512 or AVX2; `available` is false elsewhere, and then
// nothing may call it.
template <class Real, int Dh>
struct CausalAttentionLong {
  static constexpr const char* name = "long";
#if EMERGENT_SIMD_LANES > 0
  static constexpr bool available =
      std::is_same_v<Real, float> && long_causal_attention::supports<Dh>;
#else
  static constexpr bool available = false;
#endif
  static constexpr bool transposed = false;  // packs k and v itself

  static void forward(const attention_head::HeadInputs<Real>& in, Real* att, Real* out,
                      std::int64_t out_stride, int T, Real scale, const Real* bias,
                      Real bias_strength) {
    static_assert(sizeof(Real) > 0 && available, "CausalAttentionLong is not available here");
#if EMERGENT_SIMD_LANES > 0
    if constexpr (available)
      long_causal_attention::forward<Dh>(in.q, in.k, in.v, att, out, out_stride, T, scale, bias,
                                         bias_strength);
#endif
  }

  static void backward(const attention_head::HeadInputs<Real>& in, const Real* att,
                       const Real* d_out, std::int64_t d_out_stride, Real* dq, Real* dk, Real* dv,
                       int T, Real scale) {
    static_assert(sizeof(Real) > 0 && available, "CausalAttentionLong is not available here");
#if EMERGENT_SIMD_LANES > 0
    if constexpr (available)
      long_causal_attention::backward<Dh>(in.q, in.k, in.v, att, d_out, d_out_stride, dq, dk, dv, T,
                                          scale);
#endif
  }
};

}  // namespace emergent
