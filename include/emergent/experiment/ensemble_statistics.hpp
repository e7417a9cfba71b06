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
//   - mean_spread for uncensored per-run numbers (final loss, wall time, ...).
// The conventions follow R's survival package (survfit, quantile.survfit) unless a comment says
// otherwise; tests/test_ensemble_statistics.cpp checks the numbers against R's published
// outputs, lifelines and statsmodels.
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
