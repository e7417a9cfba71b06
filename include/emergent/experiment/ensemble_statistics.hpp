// Statistics of a seed ensemble: N training runs of one configuration that differ only in the
// seed. Emergence is random (the plateau length varies from seed to seed, and some seeds do not
// emerge within the budget), so one run says little; an ensemble is summarised by
//   - the share of runs that emerged, with a Wilson score interval (wilson_interval). Wilson,
//     not the textbook p +- z sqrt(p(1-p)/n), because ensembles are small and shares are often
//     0 or 1, where that interval collapses to a point or leaves [0, 1];
//   - the distribution of the emergence step over ALL runs, including those that never emerged.
//     A run that ended at steps_done without the event is right-censored: we only know that its
//     emergence step is > steps_done. Dropping such runs, or counting them as "emerged at the
//     last step", biases the typical emergence step low, and the more so the harder the
//     configuration. The Kaplan-Meier product-limit estimator (kaplan_meier) uses them
//     correctly, and its median (kaplan_meier_median) is the ensemble's typical emergence step;
//     kaplan_meier_median_with_interval adds the Brookmeyer-Crowley 95% interval;
//   - the log-rank test (log_rank_test) of whether several ensembles (groups of censored times)
//     emerge at the same rate, with its chi-square p-value (chi_square_survival);
//   - mean_spread for uncensored per-run numbers (final loss, wall time, ...).
// The conventions follow R's survival package (survfit, quantile.survfit) unless a comment says
// otherwise; tests/test_ensemble_statistics.cpp checks the numbers against R's published
// outputs, lifelines and statsmodels, and the log-rank test and the chi-square tail against the
// fixture tests/golden/logrank/golden.json (lifelines and scipy:
// tests/golden/make_logrank_golden.py).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <emergent/core/error.hpp>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace emergent {

// z of a two-sided 95% normal interval: the 0.975 quantile of the standard normal.
inline constexpr double kNormalQuantile95 = 1.959963984540054;

// ---- share of runs (binomial proportion) -------------------------------------------------------

struct Proportion {
  int successes = 0;
  int trials = 0;
  double share = 0.0;  // successes / trials; NaN when trials == 0
  double low = 0.0;    // Wilson score interval, within [0, 1]
  double high = 1.0;
};

// The Wilson score interval: the set of true shares p for which |share - p| <= z sqrt(p(1-p)/n),
// i.e. the inversion of the score test. Its limits are
//   (share + z^2/2n -+ z sqrt(share(1-share)/n + z^2/4n^2)) / (1 + z^2/n).
// No trials give no information: share NaN and the whole [0, 1].
inline Proportion wilson_interval(int successes, int trials, double z = kNormalQuantile95) {
  require(trials >= 0, "wilson_interval", "trials must be >= 0, got " + std::to_string(trials));
  require(successes >= 0 && successes <= trials, "wilson_interval",
          "successes must be in [0, trials = " + std::to_string(trials) + "], got " +
              std::to_string(successes));
  require(std::isfinite(z) && z > 0.0, "wilson_interval", "z must be finite and > 0");
  Proportion result{successes, trials, std::numeric_limits<double>::quiet_NaN(), 0.0, 1.0};
  if (trials == 0) return result;

  const double n = static_cast<double>(trials);
  const double share = static_cast<double>(successes) / n;
  const double z2 = z * z;
  const double denominator = 1.0 + z2 / n;
  const double centre = (share + z2 / (2.0 * n)) / denominator;
  const double half_width =
      z / denominator * std::sqrt(share * (1.0 - share) / n + z2 / (4.0 * n * n));
  result.share = share;
  result.low = std::clamp(centre - half_width, 0.0, 1.0);
  result.high = std::clamp(centre + half_width, 0.0, 1.0);
  // The ends are exactly 0 and 1 there in closed form; the subtraction above leaves ~1e-17.
  if (successes == 0) result.low = 0.0;
  if (successes == trials) result.high = 1.0;
  return result;
}

// ---- time to emergence (right-censored) --------------------------------------------------------

// One run: event = true means the event (emergence) happened at `time`; event = false means the
// run was censored at `time` (it ended there without the event: its event time is > time).
struct CensoredTime {
  double time = 0.0;
  bool event = false;
};

// A run's outcome from the analysis of its loss curve (analysis/emergence.hpp gives the
// emergence step, nullopt when the curve never got there) and the number of steps it ran.
inline CensoredTime emergence_outcome(std::optional<std::int64_t> emergence_step,
                                      std::int64_t steps_done) {
  if (!emergence_step) return {static_cast<double>(steps_done), false};
  require(*emergence_step <= steps_done, "emergence_outcome",
          "emergence step " + std::to_string(*emergence_step) + " is after the end of the run (" +
              std::to_string(steps_done) + " steps)");
  return {static_cast<double>(*emergence_step), true};
}

// One distinct time of the Kaplan-Meier curve.
struct KaplanMeierStep {
  double time = 0.0;
  int at_risk = 0;        // runs whose time is >= this time (neither event nor censoring before it)
  int events = 0;         // events at this time
  int censored = 0;       // censorings at this time
  double survival = 1.0;  // S(time): the estimated probability that the event is later than time
};

// The product-limit estimator S(t) = prod over event times t_i <= t of (1 - d_i / n_i).
// One step per distinct time, events or censorings, in increasing order (a censoring-only step
// leaves S unchanged but shows the risk set shrinking). At a time with both, the events come
// first: a run censored at t was still running at t, so it is in the risk set n_i of t (the
// convention of R's survival, lifelines and statsmodels). Empty input gives an empty curve.
inline std::vector<KaplanMeierStep> kaplan_meier(std::span<const CensoredTime> runs) {
  for (const CensoredTime& run : runs)
    require(std::isfinite(run.time), "kaplan_meier", "every time must be finite");
  std::vector<CensoredTime> sorted(runs.begin(), runs.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const CensoredTime& a, const CensoredTime& b) { return a.time < b.time; });

  std::vector<KaplanMeierStep> curve;
  int at_risk = static_cast<int>(sorted.size());
  double survival = 1.0;
  for (std::size_t begin = 0; begin < sorted.size();) {
    KaplanMeierStep step;
    step.time = sorted[begin].time;
    step.at_risk = at_risk;
    std::size_t end = begin;
    for (; end < sorted.size() && sorted[end].time == step.time; ++end) {
      if (sorted[end].event)
        ++step.events;
      else
        ++step.censored;
    }
    // (n - d) / n rather than 1 - d / n: one rounding per factor instead of two.
    if (step.events > 0)
      survival *= static_cast<double>(at_risk - step.events) / static_cast<double>(at_risk);
    step.survival = survival;
    curve.push_back(step);
    at_risk -= step.events + step.censored;
    begin = end;
  }
  return curve;
}

namespace detail {

// How far a survival value may sit from 0.5 and still count as equal to it: S is a product of
// rounded fractions, so a curve that is 1/2 in exact arithmetic can come out as 0.49999999999999994
// or 0.5000000000000001. R's quantile.survfit uses the same tolerance, sqrt(machine epsilon).
inline constexpr double kSurvivalTolerance = 1.4901161193847656e-08;

// The first step at which `values[i] <= 0.5` (up to the tolerance); nullopt if none.
// `values` may hold NaN (undefined), which never counts as crossing.
inline std::optional<double> first_time_at_or_below_half(const std::vector<KaplanMeierStep>& curve,
                                                         const std::vector<double>& values) {
  for (std::size_t i = 0; i < curve.size(); ++i)
    if (values[i] <= 0.5 + kSurvivalTolerance) return curve[i].time;
  return std::nullopt;
}

inline std::vector<double> survival_values(const std::vector<KaplanMeierStep>& curve) {
  std::vector<double> values;
  values.reserve(curve.size());
  for (const KaplanMeierStep& step : curve) values.push_back(step.survival);
  return values;
}

}  // namespace detail

// The median time to the event: the smallest time t with S(t) <= 0.5 (lifelines' convention,
// and the start of the flat where R would report its middle, see below).
//
// std::nullopt means "median not reached": the curve stays above 0.5 because more than half of
// the runs were censored before their event. It must never be replaced by the last time or by
// steps_done: the median is then only known to be later than the last observed time, and
// reporting the last time would make an ensemble in which most seeds never emerged look as if
// it had emerged by the end of the budget.
//
// When S equals 0.5 exactly over a flat (e.g. all runs emerged and the ensemble size is even),
// R's quantile.survfit returns the midpoint of that flat, which for all-event data is the usual
// sample median (mean of the two middle values). We return the flat's start, an observed event
// time, like lifelines; statsmodels' SurvfuncRight.quantile instead requires S < 0.5 strictly
// and returns the flat's end.
inline std::optional<double> kaplan_meier_median(std::span<const CensoredTime> runs) {
  const std::vector<KaplanMeierStep> curve = kaplan_meier(runs);
  return detail::first_time_at_or_below_half(curve, detail::survival_values(curve));
}

// The transform under which the pointwise confidence band of S(t) is symmetric. R's survfit
// default (conf.type = "log") is log: band S exp(-+ z se), with the upper end capped at 1.
// lifelines' default (and R's conf.type = "log-log", statsmodels' "cloglog") is log(-log S):
// band S^exp(+- z se / log S), which stays inside (0, 1) without capping.
// se is Greenwood's standard error of log S(t): sqrt(sum over t_i <= t of d_i / (n_i (n_i - d_i))).
enum class SurvivalBandTransform { log, log_log };

struct KaplanMeierMedian {
  std::optional<double> median;  // nullopt: median not reached (see kaplan_meier_median)
  bool reached = false;          // == median.has_value(), spelled out for reports
  // The Brookmeyer-Crowley confidence interval of the median; nullopt = that limit was not
  // reached. A missing `high` is common and means "unbounded above within the data" (R prints NA,
  // lifelines inf), not "equal to the last time". `low` can exist even when the median does not.
  std::optional<double> low;
  std::optional<double> high;
};

// The median and its Brookmeyer-Crowley interval: the times at which the lower and the upper
// pointwise band of S cross 0.5, found like the median itself. This is the interval R's
// quantile.survfit reports (print(survfit(...)) shows it as 0.95LCL, 0.95UCL) and lifelines'
// median_survival_times(kmf.confidence_interval_) computes (with log_log).
//
// Where S = 0 (the last runs at risk all had their event), Greenwood's se is infinite and the
// band undefined; like R we leave those times out, so a curve that drops to 0 from above the
// upper band's 0.5 gives no `high`. (lifelines and statsmodels put `high` at that time instead.)
// Before the first event S = 1 and se = 0: the log band is the point 1, the log-log band is
// undefined (R leaves it NA); neither is <= 0.5, so it does not matter there.
inline KaplanMeierMedian kaplan_meier_median_with_interval(
    std::span<const CensoredTime> runs,
    SurvivalBandTransform transform = SurvivalBandTransform::log, double z = kNormalQuantile95) {
  require(std::isfinite(z) && z > 0.0, "kaplan_meier_median_with_interval",
          "z must be finite and > 0");
  const std::vector<KaplanMeierStep> curve = kaplan_meier(runs);
  const double undefined = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> lower(curve.size(), undefined), upper(curve.size(), undefined);
  double greenwood_sum = 0.0;  // the variance of log S(t)
  for (std::size_t i = 0; i < curve.size(); ++i) {
    const KaplanMeierStep& step = curve[i];
    if (step.events > 0 && step.events < step.at_risk)
      greenwood_sum +=
          static_cast<double>(step.events) /
          (static_cast<double>(step.at_risk) * static_cast<double>(step.at_risk - step.events));
    const double survival = step.survival;
    if (survival <= 0.0) continue;  // undefined band: see the comment above
    const double se = std::sqrt(greenwood_sum);
    if (transform == SurvivalBandTransform::log) {
      lower[i] = survival * std::exp(-z * se);
      upper[i] = std::min(1.0, survival * std::exp(z * se));
    } else {
      if (survival >= 1.0) continue;
      // log(-log S) +- z se / |log S|, mapped back with S = exp(-exp(.)).
      const double log_minus_log = std::log(-std::log(survival));
      const double half_width = z * se / -std::log(survival);
      lower[i] = std::exp(-std::exp(log_minus_log + half_width));
      upper[i] = std::exp(-std::exp(log_minus_log - half_width));
    }
  }
  KaplanMeierMedian result;
  result.median = detail::first_time_at_or_below_half(curve, detail::survival_values(curve));
  result.reached = result.median.has_value();
  result.low = detail::first_time_at_or_below_half(curve, lower);
  result.high = detail::first_time_at_or_below_half(curve, upper);
  return result;
}

// ---- chi-square tail ---------------------------------------------------------------------------

// Q(a, x) = Gamma(a, x) / Gamma(a), the regularised upper incomplete gamma function, for a > 0 and
// x >= 0 (Q(a, 0) = 1, Q(a, inf) = 0). Two expansions, each where it converges fast (the split of
// Numerical Recipes' gammq, Press et al. 2007, section 6.2):
//   x < a + 1   the series of the lower function, P(a, x) = x^a e^-x / Gamma(a) *
//               sum_n x^n / (a (a+1) ... (a+n)), and Q = 1 - P. Q is not small there (the median
//               of Gamma(a) is about a - 1/3), so the subtraction loses nothing that matters;
//   x >= a + 1  the continued fraction Q(a, x) = x^a e^-x / Gamma(a) *
//               1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...))), evaluated by the modified Lentz
//               method; it gives tiny tails (1e-300) to full relative precision.
// Both stop when a term changes the sum by less than machine epsilon; a non-converging case (not
// reached for a < 1e6) is an error rather than a silently wrong p-value.
inline double regularized_upper_gamma(double a, double x) {
  require(std::isfinite(a) && a > 0.0, "regularized_upper_gamma", "a must be finite and > 0");
  require(!std::isnan(x) && x >= 0.0, "regularized_upper_gamma", "x must be >= 0");
  if (x == 0.0) return 1.0;
  if (std::isinf(x)) return 0.0;
  constexpr double epsilon = std::numeric_limits<double>::epsilon();
  constexpr int max_terms = 100000;
  // log(x^a e^-x / Gamma(a)), the factor both expansions share.
  const double log_prefactor = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n <= max_terms; ++n) {
      term *= x / (a + n);
      sum += term;
      if (std::fabs(term) < std::fabs(sum) * epsilon)
        return std::max(0.0, 1.0 - sum * std::exp(log_prefactor));
    }
  } else {
    // Lentz: f = b0 + a1/(b1 + a2/(b2 + ...)) with b_n = x + 2n + 1 - a, a_n = -n (n - a).
    constexpr double tiny = std::numeric_limits<double>::min() / epsilon;
    double b = x + 1.0 - a;
    double c = 1.0 / tiny;
    double d = 1.0 / b;
    double h = d;
    for (int n = 1; n <= max_terms; ++n) {
      const double an = -n * (n - a);
      b += 2.0;
      d = an * d + b;
      if (std::fabs(d) < tiny) d = tiny;
      c = b + an / c;
      if (std::fabs(c) < tiny) c = tiny;
      d = 1.0 / d;
      const double delta = d * c;
      h *= delta;
      if (std::fabs(delta - 1.0) < epsilon) return std::exp(log_prefactor) * h;
    }
  }
  throw Error("regularized_upper_gamma: no convergence for a = " + std::to_string(a) +
              ", x = " + std::to_string(x));
}

// P(X >= x) for X chi-square with `degrees_of_freedom` > 0: Q(df / 2, x / 2). x <= 0 gives 1.
inline double chi_square_survival(double x, double degrees_of_freedom) {
  require(std::isfinite(degrees_of_freedom) && degrees_of_freedom > 0.0, "chi_square_survival",
          "degrees of freedom must be finite and > 0");
  require(!std::isnan(x), "chi_square_survival", "x must not be NaN");
  if (x <= 0.0) return 1.0;
  return regularized_upper_gamma(degrees_of_freedom / 2.0, x / 2.0);
}

// ---- comparing groups of censored times: the log-rank test -------------------------------------

struct LogRankTest {
  std::vector<int> observed;     // events per group
  std::vector<double> expected;  // events per group expected if every group had the same hazard
  double statistic = 0.0;        // chi-square
  int degrees_of_freedom = 0;    // the rank of the covariance of observed - expected (G - 1)
  double p_value = 1.0;          // P(chi-square(df) >= statistic); 1 when df == 0
};

// The Mantel-Cox log-rank test of "all groups have the same hazard" (R's survdiff with rho = 0,
// lifelines' multivariate_logrank_test): at each distinct event time t of the pooled runs, with
// n_g runs of group g at risk (time >= t, so a run censored at t is at risk at t, as in
// kaplan_meier), n = sum n_g and d events in all (ties: several events at one time),
//   E_g  += d n_g / n                                     expected events of group g
//   V_gh += d (n - d) / (n - 1) * n_g / n * (delta_gh - n_h / n)
// V is the covariance of the hypergeometric distribution of the d events among the groups (the
// exact treatment of ties; its factor (n - d) / (n - 1) is 0 when every run at risk has the
// event, or only one is at risk). The statistic is (O - E)' V^- (O - E), chi-square with
// rank(V) degrees of freedom under the null hypothesis.
//
// rank(V) is G - 1 for ordinary data (the rows of V sum to 0). It is less when some groups never
// share an informative event time with the others: an empty group, or one whose runs were all
// censored before the first event, has E_g = 0 and a zero row in V and drops out, as in R's
// survdiff (which leaves out groups with E_g = 0 and reports df = their number - 1); lifelines
// gives the same statistic but keeps df = G - 1, a smaller p-value. The quadratic form uses a
// generalised inverse, by symmetric elimination with the largest remaining diagonal as pivot,
// skipping pivots that the elimination reduced to below 1e-10 of their starting value (dependent
// up to rounding): O - E lies in the range of V, so any generalised inverse gives the same value,
// and for df = G - 1 it equals the usual formula with one group left out.
//
// Nothing to compare (no events at all, every run censored; or no event time at which two groups
// are at risk and not every run at risk has the event): statistic 0, df 0, p-value 1. That is
// "no evidence of a difference", not a test result; report df with the p-value.
// At least two groups; a group may be empty. Every time must be finite.
inline LogRankTest log_rank_test(std::span<const std::vector<CensoredTime>> groups) {
  require(groups.size() >= 2, "log_rank_test",
          "needs at least 2 groups, got " + std::to_string(groups.size()));
  struct Run {
    double time;
    std::size_t group;
    bool event;
  };
  std::vector<Run> pooled;
  const std::size_t group_count = groups.size();
  std::vector<int> at_risk(group_count, 0);
  for (std::size_t g = 0; g < group_count; ++g) {
    for (const CensoredTime& run : groups[g]) {
      require(std::isfinite(run.time), "log_rank_test", "every time must be finite");
      pooled.push_back({run.time, g, run.event});
    }
    at_risk[g] = static_cast<int>(groups[g].size());
  }
  std::sort(pooled.begin(), pooled.end(),
            [](const Run& a, const Run& b) { return a.time < b.time; });

  LogRankTest result;
  result.observed.assign(group_count, 0);
  result.expected.assign(group_count, 0.0);
  std::vector<double> covariance(group_count * group_count, 0.0);  // V, row-major
  std::vector<int> events(group_count), censored(group_count);
  for (std::size_t begin = 0; begin < pooled.size();) {
    std::fill(events.begin(), events.end(), 0);
    std::fill(censored.begin(), censored.end(), 0);
    std::size_t end = begin;
    int total_events = 0;
    for (; end < pooled.size() && pooled[end].time == pooled[begin].time; ++end) {
      if (pooled[end].event)
        ++events[pooled[end].group], ++total_events;
      else
        ++censored[pooled[end].group];
    }
    if (total_events > 0) {
      int total_at_risk = 0;
      for (const int n : at_risk) total_at_risk += n;
      const double n = total_at_risk, d = total_events;
      for (std::size_t g = 0; g < group_count; ++g) {
        result.observed[g] += events[g];
        result.expected[g] += d * at_risk[g] / n;
      }
      if (total_at_risk > 1 && total_events < total_at_risk) {
        // Integer products first, so that a term that is 0 in exact arithmetic is exactly 0.
        const double scale = d * (n - d) / ((n - 1.0) * n * n);
        for (std::size_t g = 0; g < group_count; ++g) {
          if (at_risk[g] == 0) continue;
          for (std::size_t h = 0; h < group_count; ++h) {
            const double product =
                (g == h) ? static_cast<double>(at_risk[g]) *
                               static_cast<double>(total_at_risk - at_risk[g])
                         : -static_cast<double>(at_risk[g]) * static_cast<double>(at_risk[h]);
            covariance[g * group_count + h] += scale * product;
          }
        }
      }
    }
    for (std::size_t g = 0; g < group_count; ++g) at_risk[g] -= events[g] + censored[g];
    begin = end;
  }

  // (O - E)' V^- (O - E) by symmetric elimination with diagonal pivoting (V is positive
  // semi-definite): each pivot p adds z_p^2 / V_pp and leaves the Schur complement.
  std::vector<double> z(group_count);
  for (std::size_t g = 0; g < group_count; ++g) z[g] = result.observed[g] - result.expected[g];
  std::vector<double> start(group_count);
  for (std::size_t g = 0; g < group_count; ++g) start[g] = covariance[g * group_count + g];
  std::vector<bool> done(group_count, false);
  constexpr double kDependent = 1e-10;
  double statistic = 0.0;
  int rank = 0;
  for (;;) {
    std::size_t pivot = group_count;
    double best = 0.0;
    for (std::size_t g = 0; g < group_count; ++g) {
      const double diagonal = covariance[g * group_count + g];
      if (!done[g] && diagonal > kDependent * start[g] && diagonal > best)
        pivot = g, best = diagonal;
    }
    if (pivot == group_count) break;
    done[pivot] = true;
    ++rank;
    statistic += z[pivot] * z[pivot] / best;
    for (std::size_t g = 0; g < group_count; ++g) {
      if (done[g]) continue;
      const double factor = covariance[g * group_count + pivot] / best;
      z[g] -= factor * z[pivot];
      for (std::size_t h = 0; h < group_count; ++h)
        if (!done[h])
          covariance[g * group_count + h] -= factor * covariance[pivot * group_count + h];
    }
  }
  result.degrees_of_freedom = rank;
  result.statistic = rank > 0 ? statistic : 0.0;
  result.p_value = rank > 0 ? chi_square_survival(result.statistic, rank) : 1.0;
  return result;
}

// ---- uncensored per-run numbers ----------------------------------------------------------------

struct MeanSpread {
  int count = 0;
  double mean = 0.0;
  double standard_deviation = 0.0;  // sample (n - 1) standard deviation; 0 for one value
  double min = 0.0;
  double max = 0.0;
};

// count 0 gives NaN for the rest (there is no mean of nothing). A NaN or infinite value is an
// error rather than a NaN result: a diverged run should be excluded, or counted, by the caller
// on purpose, not silently turn the ensemble's mean into NaN.
inline MeanSpread mean_spread(std::span<const double> values) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  MeanSpread result{static_cast<int>(values.size()), nan, nan, nan, nan};
  if (values.empty()) return result;
  for (const double value : values)
    require(std::isfinite(value), "mean_spread", "every value must be finite");

  // Two passes (mean, then squared deviations from it): no cancellation when the spread is small
  // against the mean, as for step counts in the tens of thousands.
  double sum = 0.0;
  for (const double value : values) sum += value;
  const double mean = sum / static_cast<double>(values.size());
  double squared_deviations = 0.0;
  for (const double value : values) squared_deviations += (value - mean) * (value - mean);
  result.mean = mean;
  result.standard_deviation =
      values.size() > 1 ? std::sqrt(squared_deviations / static_cast<double>(values.size() - 1))
                        : 0.0;
  const auto [smallest, largest] = std::minmax_element(values.begin(), values.end());
  result.min = *smallest;
  result.max = *largest;
  return result;
}

}  // namespace emergent
