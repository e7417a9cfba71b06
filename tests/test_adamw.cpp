// AdamW (optim/adamw.hpp) against a hand-written double implementation of torch.optim.AdamW
// (decoupled decay p *= 1 - lr*wd on decayed ranges; m, v; step = lr / (1 - b1^t);
// denom = sqrt(v) / sqrt(1 - b2^t) + eps) preceded by global-norm clipping
// g *= min(1, max_norm / ||g||), and the learning-rate schedule (optim/schedule.hpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/optim/adamw.hpp>
#include <emergent/optim/schedule.hpp>
#include <random>
#include <span>
#include <type_traits>
#include <vector>

namespace {

using emergent::AdamW;
using emergent::AdamWConfig;
using emergent::DecayRange;
using emergent::LrSchedule;

// torch.optim.AdamW, one parameter group, after clip_grad_norm_ (without torch's +1e-6 in the
// clip denominator; the library documents min(1, max_norm / ||g||)).
struct TorchAdamW {
  AdamWConfig config;
  std::vector<DecayRange> ranges;
  std::vector<double> m, v;
  std::int64_t t = 0;

  TorchAdamW(AdamWConfig c, std::vector<DecayRange> r, std::size_t n)
      : config(c), ranges(std::move(r)), m(n, 0), v(n, 0) {}

  double step(std::vector<double>& p, const std::vector<double>& g_in, double lr) {
    double norm2 = 0;
    for (double g : g_in) norm2 += g * g;
    const double norm = std::sqrt(norm2);
    double clip = 1.0;
    if (config.max_grad_norm > 0) clip = std::min(1.0, config.max_grad_norm / norm);
    ++t;
    const double bias1 = 1 - std::pow(config.beta1, double(t));
    const double bias2 = 1 - std::pow(config.beta2, double(t));
    const double step_size = lr / bias1;
    for (const DecayRange& r : ranges)
      for (std::size_t i = r.offset; i < r.offset + r.size; ++i) {
        const double g = g_in[i] * clip;
        if (r.weight_decay) p[i] *= 1 - lr * config.weight_decay;
        m[i] = config.beta1 * m[i] + (1 - config.beta1) * g;
        v[i] = config.beta2 * v[i] + (1 - config.beta2) * g * g;
        const double denom = std::sqrt(v[i]) / std::sqrt(bias2) + config.eps;
        p[i] -= step_size * m[i] / denom;
      }
    return norm;
  }
};

// A 48-float buffer with three ranges and padding between them (like a model's flat buffer).
// |a - b| <= 1e-12 * max(|a|, |b|) (doctest::Approx adds an absolute 1.2e-5, too loose for lrs).
bool close(double a, double b, double rel = 1e-12) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

const std::vector<DecayRange> kRanges{{0, 10, true}, {16, 7, false}, {32, 13, true}};
constexpr std::size_t kSize = 48;

bool in_range(std::size_t i) {
  for (const DecayRange& r : kRanges)
    if (i >= r.offset && i < r.offset + r.size) return true;
  return false;
}

}  // namespace

TEST_CASE_TEMPLATE(
    "AdamW matches torch.optim.AdamW semantics over 5 steps with varying lr and clipping", Real,
    float, double) {
  const AdamWConfig config{
      .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .max_grad_norm = 1.0};
  AdamW<Real> optimizer(config, kRanges, kSize);
  TorchAdamW expected(config, kRanges, kSize);

  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> p_ref(kSize, 0.0);
  for (std::size_t i = 0; i < kSize; ++i) p_ref[i] = in_range(i) ? normal(rng) : 0.0;
  std::vector<Real> p(p_ref.begin(), p_ref.end());
  if constexpr (std::is_same_v<Real, float>)
    for (std::size_t i = 0; i < kSize; ++i) p_ref[i] = double(p[i]);

  const double lrs[5] = {1e-3, 3e-2, 2e-3, 5e-4, 1e-2};
  const double grad_scale[5] = {1.0, 0.02, 0.5, 0.05,
                                2.0};  // ||g|| ~ 6.6 * scale: clipped at 0, 2, 4
  int clipped_steps = 0;
  for (int step = 0; step < 5; ++step) {
    CAPTURE(step);
    std::vector<double> g_ref(kSize, 0.0);
    for (std::size_t i = 0; i < kSize; ++i)
      g_ref[i] = in_range(i) ? grad_scale[step] * normal(rng) : 0.0;
    std::vector<Real> g(g_ref.begin(), g_ref.end());
    if constexpr (std::is_same_v<Real, float>)
      for (std::size_t i = 0; i < kSize; ++i) g_ref[i] = double(g[i]);

    const double norm = optimizer.step(p, g, lrs[step]);
    const double norm_ref = expected.step(p_ref, g_ref, lrs[step]);
    clipped_steps += norm_ref > config.max_grad_norm;
    CHECK(close(norm, norm_ref));
    CHECK(optimizer.steps() == step + 1);

    // relative to the largest entry of each buffer: m = b1 m + (1-b1) g can cancel to a small
    // value whose float rounding error is that of its (larger) terms
    const double tolerance = std::is_same_v<Real, float> ? 1e-6 : 1e-13;
    double m_scale = 0, v_scale = 0;
    for (std::size_t i = 0; i < kSize; ++i) {
      m_scale = std::max(m_scale, std::abs(expected.m[i]));
      v_scale = std::max(v_scale, std::abs(expected.v[i]));
    }
    for (std::size_t i = 0; i < kSize; ++i) {
      CAPTURE(i);
      CHECK(std::abs(double(p[i]) - p_ref[i]) <= tolerance * std::max(1.0, std::abs(p_ref[i])));
      CHECK(std::abs(double(optimizer.first_moment()[i]) - expected.m[i]) <= tolerance * m_scale);
      CHECK(std::abs(double(optimizer.second_moment()[i]) - expected.v[i]) <= tolerance * v_scale);
      if (!in_range(i)) CHECK(p[i] == Real(0));  // padding untouched
    }
  }
  CHECK(clipped_steps == 3);
  CHECK(clipped_steps < 5);
}

TEST_CASE("AdamW: a range with weight_decay=false is not decayed, a decayed one is") {
  const AdamWConfig config{.weight_decay = 0.5, .max_grad_norm = 0};
  AdamW<double> optimizer(config, kRanges, kSize);
  std::vector<double> p(kSize, 0.0), g(kSize, 0.0);
  for (std::size_t i = 0; i < kSize; ++i) p[i] = in_range(i) ? 1.0 + double(i) : 0.0;
  const std::vector<double> before = p;
  const double lr = 0.1;
  // Zero gradients: Adam's update is 0 / (0 + eps) = 0, so only the decay acts.
  optimizer.step(p, g, lr);
  for (const DecayRange& r : kRanges)
    for (std::size_t i = r.offset; i < r.offset + r.size; ++i) {
      CAPTURE(i);
      if (r.weight_decay)
        CHECK(close(p[i], before[i] * (1 - lr * 0.5), 1e-15));
      else
        CHECK(p[i] == before[i]);
    }
  // With gradients, the undecayed range follows plain Adam: first step moves every entry by
  // lr * sign(g) (m/(1-b1) = g, sqrt(v/(1-b2)) = |g|), up to eps.
  AdamW<double> fresh(config, kRanges, kSize);
  std::vector<double> q(kSize, 2.0), h(kSize, 0.0);
  for (std::size_t i = 0; i < kSize; ++i) h[i] = (i % 2 ? 1.0 : -3.0);
  fresh.step(q, h, lr);
  for (std::size_t i = 16; i < 23; ++i) CHECK(close(q[i], 2.0 - lr * (h[i] > 0 ? 1 : -1), 1e-7));
  for (std::size_t i = 0; i < 10; ++i)
    CHECK(close(q[i], 2.0 * (1 - lr * 0.5) - lr * (h[i] > 0 ? 1 : -1), 1e-7));
}

TEST_CASE(
    "AdamW clipping: above max_norm scales g by max/||g||, below and disabled leave it alone") {
  const std::vector<DecayRange> one{{0, 4, false}};
  const std::vector<double> g{3.0, 0.0, -4.0, 0.0};  // ||g|| = 5
  auto first_moment_after = [&](double max_norm, double scale) {
    AdamW<double> opt(
        {.beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0, .max_grad_norm = max_norm},
        one, 4);
    std::vector<double> p(4, 0.0), grads(4);
    for (int i = 0; i < 4; ++i) grads[i] = g[i] * scale;
    const double norm = opt.step(p, grads, 1e-3);
    CHECK(close(norm, 5.0 * scale));  // the norm before clipping
    return std::vector<double>(opt.first_moment().begin(), opt.first_moment().end());
  };
  // above: ||g|| = 5 > 1 -> g * 0.2; m = (1 - b1) * g * 0.2
  auto m = first_moment_after(1.0, 1.0);
  CHECK(close(m[0], 0.1 * 3.0 * 0.2));
  CHECK(close(m[2], 0.1 * -4.0 * 0.2));
  // below: ||g|| = 0.5 < 1 -> unchanged
  m = first_moment_after(1.0, 0.1);
  CHECK(close(m[0], 0.1 * 0.3));
  CHECK(close(m[2], 0.1 * -0.4));
  // exactly at the max: unchanged
  m = first_moment_after(5.0, 1.0);
  CHECK(close(m[0], 0.1 * 3.0));
  // disabled (max_grad_norm <= 0): unchanged even for a large norm
  m = first_moment_after(0.0, 100.0);
  CHECK(close(m[2], 0.1 * -400.0));
}

TEST_CASE("LrSchedule: linear warmup, constant, cosine endpoints") {
  const LrSchedule constant{.peak = 1e-3,
                            .warmup_steps = 4,
                            .kind = LrSchedule::Kind::constant,
                            .total_steps = 100,
                            .min_ratio = 0.1};
  CHECK(close(constant.at(0), 0.25e-3));
  CHECK(close(constant.at(1), 0.5e-3));
  CHECK(close(constant.at(2), 0.75e-3));
  CHECK(close(constant.at(3), 1e-3));  // peak at the end of warmup
  for (std::int64_t s : {4, 5, 50, 100, 1000}) CHECK(constant.at(s) == 1e-3);

  const LrSchedule cosine{.peak = 2e-3,
                          .warmup_steps = 10,
                          .kind = LrSchedule::Kind::cosine,
                          .total_steps = 110,
                          .min_ratio = 0.1};
  CHECK(close(cosine.at(0), 2e-4));
  CHECK(close(cosine.at(9), 2e-3));                       // last warmup step reaches the peak
  CHECK(close(cosine.at(10), 2e-3));                      // cosine starts at the peak
  CHECK(close(cosine.at(60), 2e-3 * (0.1 + 0.9 * 0.5)));  // midpoint
  CHECK(close(cosine.at(110), 2e-4));                     // min_ratio * peak at total_steps
  CHECK(close(cosine.at(500), 2e-4));                     // and stays there
  double previous = cosine.at(10);
  for (std::int64_t s = 11; s <= 110; ++s) {
    CHECK(cosine.at(s) <= previous);
    previous = cosine.at(s);
  }

  const LrSchedule no_warmup{.peak = 1e-3,
                             .warmup_steps = 0,
                             .kind = LrSchedule::Kind::cosine,
                             .total_steps = 10,
                             .min_ratio = 0.0};
  CHECK(close(no_warmup.at(0), 1e-3));
  CHECK(std::abs(no_warmup.at(10)) < 1e-18);

  CHECK(emergent::parse_schedule_kind("cosine") == LrSchedule::Kind::cosine);
  CHECK(emergent::parse_schedule_kind("constant") == LrSchedule::Kind::constant);
  CHECK_THROWS_AS(emergent::parse_schedule_kind("linear"), emergent::Error);
}
