// The register kernels of mixers/short_causal_attention.hpp (one head, T <= 64) against a
// double computation of the same head written out loop by loop: probabilities (zero above the
// diagonal), outputs, and the three input gradients, with and without the bias pattern, for
// every number of key vectors (T = 1..64), d_head 16 and 32 (and 8 on AVX2). (Inside DotAttention
// they are also covered by the mixer suite's reference and finite-difference checks.)
#include <doctest/doctest.h>

#include <emergent/mixers/short_causal_attention.hpp>

#include "attention_head_reference.hpp"

#if EMERGENT_SIMD_LANES > 0

#include <algorithm>
#include <cmath>
#include <vector>

namespace {

namespace kernel = emergent::short_causal_attention;

using attention_head_reference::Head;

template <int Dh>
void check_head(int T, bool with_bias) {
  CAPTURE(T);
  CAPTURE(Dh);
  CAPTURE(with_bias);
  const Head h = attention_head_reference::random_head(T, Dh, 17 * T + Dh, 1.0f);
  const float scale = 1.0f / std::sqrt(float(Dh)), strength = with_bias ? 0.7f : 0.0f;
  std::vector<float> kt(std::size_t(T) * Dh), vt(std::size_t(T) * Dh);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < Dh; ++d) kt[d * T + t] = h.k[t * Dh + d], vt[d * T + t] = h.v[t * Dh + d];

  std::vector<float> att(std::size_t(T) * T, -1.0f), out(std::size_t(T) * h.stride(), 0.0f);
  std::vector<float> dq(std::size_t(T) * Dh, -1.0f), dk(dq), dv(dq);
  kernel::forward<Dh>(h.q.data(), kt.data(), h.v.data(), att.data(), out.data(), h.stride(), T,
                      scale, with_bias ? h.bias.data() : nullptr, strength);
  kernel::backward<Dh>(h.q.data(), h.k.data(), vt.data(), att.data(), h.d_out.data(), h.stride(),
                       dq.data(), dk.data(), dv.data(), T, scale);

  const attention_head_reference::Expected e =
      attention_head_reference::expected(h, with_bias, double(strength));
  for (int i = 0; i < T; ++i)
    for (int j = i + 1; j < T; ++j) REQUIRE(att[std::size_t(i) * T + j] == 0.0f);
  using attention_head_reference::worst_difference;
  const double worst = std::max({worst_difference(e.att, att), worst_difference(e.out, out),
                                 worst_difference(e.dq, dq), worst_difference(e.dk, dk),
                                 worst_difference(e.dv, dv)});
  CHECK(worst < 2e-5);
}

}  // namespace

TEST_CASE("short causal attention: register kernels against a double computation") {
  for (int T : {1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 47, 48, 49, 56, 63, 64})
    for (bool bias : {false, true}) {
      check_head<16>(T, bias);
      check_head<32>(T, bias);
      if constexpr (kernel::supports<8>) check_head<8>(T, bias);
    }
}

#endif
