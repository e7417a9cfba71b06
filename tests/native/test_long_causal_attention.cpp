// The AVX-512 kernels of mixers/long_causal_attention.hpp (one head, T > 64): alone against a
// double computation of the same head written out loop by loop (probabilities, every entry above
// the diagonal written as 0, outputs and the three input gradients, the same bits on a second
// run), for d_head 16 .. 64, lengths on either side of the tile, key-vector and key-block edges,
// with and without the bias, att rows aligned (streaming stores) or not; then inside DotAttention
// through the mixer suite and the bias check of tests/dot_attention_checks.hpp.
#include <doctest/doctest.h>

#include <emergent/mixers/long_causal_attention.hpp>

#include "../dot_attention_checks.hpp"
#include "attention_head_reference.hpp"

#if EMERGENT_SIMD_LANES > 0

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

namespace kernel = emergent::long_causal_attention;
using Floats = std::vector<float, Eigen::aligned_allocator<float>>;  // 64-byte aligned

using attention_head_reference::Head;

struct Result {
  Floats att;
  std::vector<float> out, dq, dk, dv;
};

// att_offset floats into a 64-byte aligned buffer: 0 lets T % 16 == 0 take the streaming stores.
template <int Dh>
Result run_kernels(const Head& h, bool with_bias, int att_offset) {
  const int T = h.T;
  const float scale = 1.0f / std::sqrt(float(Dh)), strength = with_bias ? 0.7f : 0.0f;
  Result r{Floats(std::size_t(T) * T + att_offset, -1.0f),
           std::vector<float>(std::size_t(T) * h.stride(), 0.0f),
           std::vector<float>(std::size_t(T) * Dh, -1.0f),
           {},
           {}};
  r.dk = r.dv = r.dq;
  float* att = r.att.data() + att_offset;
  kernel::forward<Dh>(h.q.data(), h.k.data(), h.v.data(), att, r.out.data(), h.stride(), T, scale,
                      with_bias ? h.bias.data() : nullptr, strength);
  kernel::backward<Dh>(h.q.data(), h.k.data(), h.v.data(), att, h.d_out.data(), h.stride(),
                       r.dq.data(), r.dk.data(), r.dv.data(), T, scale);
  return r;
}

template <int Dh>
void check_head(int T, bool with_bias, int att_offset) {
  CAPTURE(T);
  CAPTURE(Dh);
  CAPTURE(with_bias);
  CAPTURE(att_offset);
  const Head h = attention_head_reference::random_head(T, Dh, 17 * T + Dh, 1.5f);
  const Result r = run_kernels<Dh>(h, with_bias, att_offset);
  const attention_head_reference::Expected e =
      attention_head_reference::expected(h, with_bias, double(0.7f));
  const float* att = r.att.data() + att_offset;
  // every entry above the diagonal written as exactly 0 (the buffer started at -1)
  int nonzero_above = 0;
  for (int i = 0; i < T; ++i)
    for (int j = i + 1; j < T; ++j) nonzero_above += att[std::size_t(i) * T + j] != 0.0f;
  CHECK(nonzero_above == 0);
  using attention_head_reference::worst_difference;
  const double worst = std::max({worst_difference(e.att, att), worst_difference(e.out, r.out),
                                 worst_difference(e.dq, r.dq), worst_difference(e.dk, r.dk),
                                 worst_difference(e.dv, r.dv)});
  CHECK(worst < 5e-5);
  CHECK(std::all_of(r.att.begin(), r.att.begin() + att_offset, [](float x) { return x == -1.0f; }));

  const Result again = run_kernels<Dh>(h, with_bias, att_offset);
  CHECK(std::equal(again.att.begin(), again.att.end(), r.att.begin()));
  CHECK(again.out == r.out);
  CHECK(again.dq == r.dq);
  CHECK(again.dk == r.dk);
  CHECK(again.dv == r.dv);
}

constexpr emergent::Shape kHead16{
    .vocab = 5, .d_model = 32, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 260};
constexpr emergent::Shape kHead32{
    .vocab = 5, .d_model = 64, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 140};
constexpr emergent::Shape kHead48{
    .vocab = 5, .d_model = 48, .heads = 1, .layers = 1, .d_ff = 16, .max_len = 140};
constexpr emergent::Shape kHead64{
    .vocab = 5, .d_model = 128, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 140};

}  // namespace

TEST_CASE("long causal attention: AVX-512 or AVX2 kernels against a double computation") {
  // 65: a tile of 1 row at the end; 72, 80: whole tiles; 79: a 4 + 2 + 1 row remainder and a
  // 15-key last vector; 96 and 129: key counts at and past blocks of 32; 256 and 257: aligned
  // rows (streaming stores) and one past.
  for (int T : {65, 72, 79, 80, 96, 129, 256, 257})
    for (bool bias : {false, true}) {
      check_head<16>(T, bias, 0);
      check_head<32>(T, bias, 0);
    }
  for (int T : {67, 96, 130}) {
    check_head<48>(T, true, 0);
    check_head<64>(T, true, 0);
  }
  check_head<16>(256, true, 1);       // rows not 64-byte aligned: no streaming stores
  if constexpr (kernel::supports<8>)  // AVX2: d_head of one ymm; 68, 71: 8-key remainders
    for (int T : {65, 68, 71, 96, 129, 256})
      for (bool bias : {false, true}) check_head<8>(T, bias, 0);
}

TEST_CASE("mixer suite: DotAttention on the vectorised long path (d_head 16)") {
  // 65: one query past the direct path; 129: one past 16 tiles of 8 rows; 200: rows not a
  // multiple of 16 floats; 256: aligned rows.
  mixer_suite::run_all<emergent::DotAttention, kHead16>(
      dot_attention_checks::DotAttentionReference{kHead16.heads}, {65, 129, 200, 256});
}

TEST_CASE(
    "DotAttention on the vectorised long path with the bias: reference, att, row sums, "
    "determinism") {
  for (int T : {65, 129, 200, 256}) dot_attention_checks::check_mixer_with_bias<kHead16>(2, T, 0.7);
  dot_attention_checks::check_mixer_with_bias<kHead16>(1, 160,
                                                       30.0);  // near one-hot rows, exp underflow
  dot_attention_checks::check_mixer_with_bias<kHead32>(2, 131, 0.7);
  dot_attention_checks::check_mixer_with_bias<kHead48>(1, 97, 0.7);
  dot_attention_checks::check_mixer_with_bias<kHead64>(1, 131, 0.7);
}

#endif
