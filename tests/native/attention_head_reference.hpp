// One attention head computed in double, loop by loop, for the tests of the AVX-512 attention
// kernels (mixers/short_causal_attention.hpp, mixers/long_causal_attention.hpp): random inputs,
// and the probabilities, outputs and the three input gradients the kernels must reproduce.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <vector>

namespace attention_head_reference {

// q, k, v [T, Dh]; d_out (and the kernels' out) rows of stride Dh + 5; bias [T, T].
struct Head {
  int T, Dh;
  std::vector<float> q, k, v, d_out, bias;
  int stride() const { return Dh + 5; }
};

// q, k, v ~ N(0, spread^2); d_out and bias ~ N(0, 1).
inline Head random_head(int T, int Dh, unsigned seed, float spread) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Head h{T, Dh, {}, {}, {}, {}, {}};
  for (auto* x : {&h.q, &h.k, &h.v}) {
    x->resize(std::size_t(T) * Dh);
    for (float& e : *x) e = spread * normal(rng);
  }
  h.d_out.resize(std::size_t(T) * h.stride());
  for (float& e : h.d_out) e = normal(rng);
  h.bias.resize(std::size_t(T) * T);
  for (float& e : h.bias) e = normal(rng);
  return h;
}

// att [T, T] (zero above the diagonal), out [T, stride], dq, dk, dv [T, Dh].
struct Expected {
  std::vector<double> att, out, dq, dk, dv;
};

// scale 1/sqrt(Dh); the bias enters as strength * bias when with_bias.
inline Expected expected(const Head& h, bool with_bias, double strength) {
  const int T = h.T, Dh = h.Dh;
  const double scale = 1.0 / std::sqrt(double(Dh));
  Expected e{std::vector<double>(std::size_t(T) * T, 0.0),
             std::vector<double>(std::size_t(T) * h.stride(), 0.0),
             std::vector<double>(std::size_t(T) * Dh, 0.0),
             {},
             {}};
  e.dk = e.dv = e.dq;
  for (int i = 0; i < T; ++i) {
    std::vector<double> p(i + 1), da(i + 1, 0.0);
    double top = -1e300, total = 0, row_dot = 0;
    for (int j = 0; j <= i; ++j) {
      double s = 0;
      for (int d = 0; d < Dh; ++d) s += double(h.q[i * Dh + d]) * h.k[j * Dh + d];
      p[j] = s * scale + (with_bias ? strength * double(h.bias[i * T + j]) : 0.0);
      top = std::max(top, p[j]);
    }
    for (double& x : p) total += (x = std::exp(x - top));
    for (int j = 0; j <= i; ++j) {
      p[j] /= total;
      e.att[std::size_t(i) * T + j] = p[j];
      for (int d = 0; d < Dh; ++d) da[j] += double(h.d_out[i * h.stride() + d]) * h.v[j * Dh + d];
      row_dot += p[j] * da[j];
    }
    for (int d = 0; d < Dh; ++d)
      for (int j = 0; j <= i; ++j) {
        const double ds = scale * p[j] * (da[j] - row_dot);
        e.out[i * h.stride() + d] += p[j] * h.v[j * Dh + d];
        e.dq[i * Dh + d] += ds * h.k[j * Dh + d];
        e.dk[j * Dh + d] += ds * h.q[i * Dh + d];
        e.dv[j * Dh + d] += p[j] * h.d_out[i * h.stride() + d];
      }
  }
  return e;
}

// Largest |expected - got| over a buffer (got may be longer: only expected.size() are read).
template <class Floats>
double worst_difference(const std::vector<double>& expected, const Floats& got) {
  double worst = 0;
  for (std::size_t n = 0; n < expected.size(); ++n)
    worst = std::max(worst, std::abs(expected[n] - double(got[n])));
  return worst;
}

}  // namespace attention_head_reference
