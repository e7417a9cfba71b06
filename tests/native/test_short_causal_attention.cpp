// The register kernels of mixers/short_causal_attention.hpp (one head, T <= 64) against a
// double computation of the same head written out loop by loop: probabilities (zero above the
// diagonal), outputs, and the three input gradients, with and without the bias pattern, for
// every number of key vectors (T = 1..64) and d_head 16 and 32. (Inside DotAttention they are
// also covered by the mixer suite's reference and finite-difference checks.)
#include <doctest/doctest.h>

#include <emergent/mixers/short_causal_attention.hpp>

#if defined(__AVX512F__)

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace {

namespace kernel = emergent::short_causal_attention;

struct Head {
  int T, Dh;
  std::vector<float> q, k, v, d_out, bias;  // d_out and out rows have stride Dh + 5
  int stride() const { return Dh + 5; }
};

Head random_head(int T, int Dh, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Head h{T, Dh, {}, {}, {}, {}, {}};
  for (auto* x : {&h.q, &h.k, &h.v}) {
    x->resize(std::size_t(T) * Dh);
    for (float& e : *x) e = normal(rng);
  }
  h.d_out.resize(std::size_t(T) * h.stride());
  for (float& e : h.d_out) e = normal(rng);
  h.bias.resize(std::size_t(T) * T);
  for (float& e : h.bias) e = normal(rng);
  return h;
}

template <int Dh>
void check_head(int T, bool with_bias) {
  CAPTURE(T);
  CAPTURE(Dh);
  CAPTURE(with_bias);
  const Head h = random_head(T, Dh, 17 * T + Dh);
  const float scale = 1.0f / std::sqrt(float(Dh)), strength = with_bias ? 0.7f : 0.0f;
  std::vector<float> kt(std::size_t(T) * Dh), vt(std::size_t(T) * Dh);
  for (int t = 0; t < T; ++t)
    for (int d = 0; d < Dh; ++d) kt[d * T + t] = h.k[t * Dh + d], vt[d * T + t] = h.v[t * Dh + d];

  std::vector<float> att(std::size_t(T) * T, -1.0f), out(std::size_t(T) * h.stride(), 0.0f);
  std::vector<float> dq(std::size_t(T) * Dh, -1.0f), dk(dq), dv(dq);
  kernel::forward<Dh>(h.q.data(), kt.data(), h.v.data(), att.data(), out.data(), h.stride(), T, scale,
                      with_bias ? h.bias.data() : nullptr, strength);
  kernel::backward<Dh>(h.q.data(), h.k.data(), vt.data(), att.data(), h.d_out.data(), h.stride(), dq.data(),
                       dk.data(), dv.data(), T, scale);

  std::vector<double> rdk(std::size_t(T) * Dh, 0.0), rdv(rdk);
  double worst = 0;
  auto compare = [&worst](double expected, float got) { worst = std::max(worst, std::abs(expected - got)); };
  for (int i = 0; i < T; ++i) {
    std::vector<double> p(i + 1), da(i + 1);
    double top = -1e300, total = 0, row_dot = 0;
    for (int j = 0; j <= i; ++j) {
      double s = 0;
      for (int d = 0; d < Dh; ++d) s += double(h.q[i * Dh + d]) * h.k[j * Dh + d];
      p[j] = s * scale + strength * double(with_bias ? h.bias[i * T + j] : 0.0f);
      top = std::max(top, p[j]);
    }
    for (double& x : p) total += (x = std::exp(x - top));
    for (int j = 0; j <= i; ++j) {
      p[j] /= total;
      compare(p[j], att[i * T + j]);
      for (int d = 0; d < Dh; ++d) da[j] += double(h.d_out[i * h.stride() + d]) * h.v[j * Dh + d];
      row_dot += p[j] * da[j];
    }
    for (int j = i + 1; j < T; ++j) REQUIRE(att[i * T + j] == 0.0f);
    for (int d = 0; d < Dh; ++d) {
      double o = 0, g = 0;
      for (int j = 0; j <= i; ++j) {
        const double ds = scale * p[j] * (da[j] - row_dot);
        o += p[j] * h.v[j * Dh + d];
        g += ds * h.k[j * Dh + d];
        rdk[j * Dh + d] += ds * h.q[i * Dh + d];
        rdv[j * Dh + d] += p[j] * h.d_out[i * h.stride() + d];
      }
      compare(o, out[i * h.stride() + d]);
      compare(g, dq[i * Dh + d]);
    }
  }
  for (std::size_t n = 0; n < rdk.size(); ++n) compare(rdk[n], dk[n]), compare(rdv[n], dv[n]);
  CHECK(worst < 2e-5);
}

}  // namespace

TEST_CASE("short causal attention: register kernels against a double computation") {
  for (int T : {1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64})
    for (bool bias : {false, true}) {
      check_head<16>(T, bias);
      check_head<32>(T, bias);
    }
}

#endif
