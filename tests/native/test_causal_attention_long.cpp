// The AVX-512 or AVX2 kernels of mixers/causal_attention_long.hpp (CausalAttentionLong: one head,
// T > 64 in DotAttention) alone against the reference (tests/reference_checks.hpp: probabilities,
// every entry above the diagonal written as 0, outputs and the three input gradients, the same
// bits on a second run), for d_head 16 .. 64, lengths on either side of the tile, key-vector and
// key-block edges, and short ones where the selector takes the short form, with and without the
// bias, att rows aligned (streaming stores) or not; then inside DotAttention through the mixer
// suite and the bias check of tests/dot_attention_checks.hpp.
#include <doctest/doctest.h>

#include <emergent/mixers/causal_attention_long.hpp>

#include "../dot_attention_checks.hpp"
#include "../reference_checks.hpp"

#if EMERGENT_SIMD_LANES > 0

namespace {

using emergent::CausalAttentionLong;
using reference_checks::AttentionCase;
using reference_checks::check_attention_form;

template <int Dh>
void check_head(int T, bool with_bias, int att_offset) {
  check_attention_form<CausalAttentionLong, float, Dh>(
      AttentionCase{T, with_bias, 0.7, 1.5, att_offset}, 1e-5);
}

using dot_attention_checks::kHead16;
constexpr emergent::Shape kHead32{
    .vocab = 5, .d_model = 64, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 140};
constexpr emergent::Shape kHead48{
    .vocab = 5, .d_model = 48, .heads = 1, .layers = 1, .d_ff = 16, .max_len = 140};
constexpr emergent::Shape kHead64{
    .vocab = 5, .d_model = 128, .heads = 2, .layers = 1, .d_ff = 16, .max_len = 140};

}  // namespace

TEST_CASE("causal attention form: long (tiles), alone against the reference") {
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
  check_head<16>(256, true, 1);  // rows not 64-byte aligned: no streaming stores
  if constexpr (CausalAttentionLong<float, 8>::available)  // AVX2: d_head of one ymm; 68, 71:
    for (int T : {65, 68, 71, 96, 129, 256})               // 8-key remainders
      for (bool bias : {false, true}) check_head<8>(T, bias, 0);
  // Lengths where select_causal_attention takes the short form: one row, part of a tile, one
  // key block and a bit, 64.
  for (int T : {1, 5, 17, 64})
    for (bool bias : {false, true}) {
      check_head<16>(T, bias, 0);
      check_head<32>(T, bias, 0);
    }
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
