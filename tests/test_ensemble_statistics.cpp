// Seed-ensemble statistics on inputs whose answers are known: hand-worked Wilson intervals,
// textbook Kaplan-Meier curves with ties and censoring, and the published R outputs for them.
//
// Cross-checked outside the project (not a test dependency): every Wilson interval below against
// statsmodels 0.15 proportion_confint(method="wilson"); every Kaplan-Meier curve and median against
// lifelines 0.30 KaplanMeierFitter and statsmodels SurvfuncRight; the median intervals with
// SurvivalBandTransform::log against statsmodels SurvfuncRight.quantile_ci(0.5, method="log") and
// with log_log against lifelines median_survival_times(kmf.confidence_interval_) and
// quantile_ci(method="cloglog"); and both against a line-by-line Python transcription of R
// survival's survfit_confint and quantile.survfit. They all agree to the printed digits, except
// where noted in a test: the flat at exactly S = 0.5 (statsmodels' quantile uses S < 0.5 strictly)
// and the upper limit where S drops to 0 (R leaves it undefined, lifelines and statsmodels don't).
// The log-rank test and the chi-square tail are checked against tests/golden/logrank/golden.json
// (lifelines and scipy, made by tests/golden/make_logrank_golden.py), in this test.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <emergent/experiment/ensemble_statistics.hpp>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace {

using emergent::CensoredTime;
using emergent::SurvivalBandTransform;

// "6+" in survival tables: censored at 6.
CensoredTime event_at(double time) { return {time, true}; }
CensoredTime censored_at(double time) { return {time, false}; }

// The 6-MP arm of the Freireich et al. (1963) leukemia trial (weeks in remission; Gehan 1965;
// the standard Kaplan-Meier example of Kleinbaum & Klein, Klein & Moeschberger, R's MASS::gehan):
// 6, 6, 6, 6+, 7, 9+, 10, 10+, 11+, 13, 16, 17+, 19+, 20+, 22, 23, 25+, 32+, 32+, 34+, 35+.
std::vector<CensoredTime> six_mp_group() {
  return {event_at(6),    event_at(6),     event_at(6),     censored_at(6),  event_at(7),
          censored_at(9), event_at(10),    censored_at(10), censored_at(11), event_at(13),
          event_at(16),   censored_at(17), censored_at(19), censored_at(20), event_at(22),
          event_at(23),   censored_at(25), censored_at(32), censored_at(32), censored_at(34),
          censored_at(35)};
}

std::vector<CensoredTime> all_events(std::vector<double> times) {
  std::vector<CensoredTime> runs;
  for (const double time : times) runs.push_back(event_at(time));
  return runs;
}

}  // namespace

TEST_CASE("wilson_interval: hand-worked 95% intervals, the ends at 0 and n, no trials") {
  // 3/10: centre (0.3 + 1.92/10) / 1.384 = 0.3555,
  // half-width 1.416 * sqrt(0.021 + 0.0096) = 0.2477.
  const emergent::Proportion three = emergent::wilson_interval(3, 10);
  CHECK(three.successes == 3);
  CHECK(three.trials == 10);
  CHECK(three.share == doctest::Approx(0.3));
  CHECK(three.low == doctest::Approx(0.107791267406301).epsilon(1e-12));
  CHECK(three.high == doctest::Approx(0.603221852538855).epsilon(1e-12));

  // 0/n and n/n: the interval is one-sided and touches 0 (1) exactly, not a point like Wald's.
  const emergent::Proportion none = emergent::wilson_interval(0, 10);
  CHECK(none.share == 0.0);
  CHECK(none.low == 0.0);
  CHECK(none.high == doctest::Approx(0.277532799862889).epsilon(1e-12));  // z^2 / (n + z^2)
  const emergent::Proportion all = emergent::wilson_interval(10, 10);
  CHECK(all.share == 1.0);
  CHECK(all.low == doctest::Approx(0.722467200137111).epsilon(1e-12));
  CHECK(all.high == 1.0);
  const emergent::Proportion half = emergent::wilson_interval(50, 100);
  CHECK(half.low == doctest::Approx(0.403831530365996).epsilon(1e-12));
  CHECK(half.high == doctest::Approx(0.596168469634004).epsilon(1e-12));

  // Another z (one standard error, ~68%): statsmodels with alpha = 2 (1 - Phi(1)).
  const emergent::Proportion narrow = emergent::wilson_interval(3, 10, 1.0);
  CHECK(narrow.low == doctest::Approx(0.1788208207567646).epsilon(1e-12));
  CHECK(narrow.high == doctest::Approx(0.45754281560687166).epsilon(1e-12));

  const emergent::Proportion empty = emergent::wilson_interval(0, 0);
  CHECK(std::isnan(empty.share));
  CHECK(empty.low == 0.0);
  CHECK(empty.high == 1.0);

  CHECK_THROWS_AS(emergent::wilson_interval(11, 10), emergent::Error);
  CHECK_THROWS_AS(emergent::wilson_interval(-1, 10), emergent::Error);
  CHECK_THROWS_AS(emergent::wilson_interval(0, -1), emergent::Error);
  CHECK_THROWS_AS(emergent::wilson_interval(3, 10, 0.0), emergent::Error);
}

TEST_CASE("kaplan_meier: the 6-MP group, with tied events and censorings") {
  const std::vector<CensoredTime> runs = six_mp_group();
  const std::vector<emergent::KaplanMeierStep> curve = emergent::kaplan_meier(runs);
  // One step per distinct time, events or censorings: 6 7 9 10 11 13 16 17 19 20 22 23 25 32 34 35.
  REQUIRE(curve.size() == 16);

  // At 6: 3 events and 1 censoring, all 21 at risk (the censored run counts at 6).
  CHECK(curve[0].time == 6.0);
  CHECK(curve[0].at_risk == 21);
  CHECK(curve[0].events == 3);
  CHECK(curve[0].censored == 1);
  CHECK(curve[0].survival == doctest::Approx(18.0 / 21.0));  // 0.857
  CHECK(curve[1].time == 7.0);
  CHECK(curve[1].at_risk == 17);
  CHECK(curve[1].survival == doctest::Approx(18.0 / 21.0 * 16.0 / 17.0));  // 0.807
  // A censoring-only time: the curve stays, the risk set shrinks.
  CHECK(curve[2].time == 9.0);
  CHECK(curve[2].events == 0);
  CHECK(curve[2].censored == 1);
  CHECK(curve[2].survival == doctest::Approx(curve[1].survival));
  CHECK(curve[3].time == 10.0);
  CHECK(curve[3].at_risk == 15);
  CHECK(curve[3].events == 1);
  CHECK(curve[3].censored == 1);

  struct Expected {
    double time;
    int at_risk;
    double survival;  // the textbook values, to 4 digits
  };
  const std::vector<Expected> event_steps = {{6, 21, 0.8571},  {7, 17, 0.8067},  {10, 15, 0.7529},
                                             {13, 12, 0.6902}, {16, 11, 0.6275}, {22, 7, 0.5378},
                                             {23, 6, 0.4482}};
  for (const Expected& expected : event_steps) {
    bool found = false;
    for (const emergent::KaplanMeierStep& step : curve) {
      if (step.time != expected.time) continue;
      found = true;
      CHECK(step.at_risk == expected.at_risk);
      CHECK(step.survival == doctest::Approx(expected.survival).epsilon(1e-4));
    }
    CHECK(found);
  }
  CHECK(curve.back().time == 35.0);
  CHECK(curve.back().at_risk == 1);
  CHECK(curve.back().survival == doctest::Approx(0.4482).epsilon(1e-4));

  // The input order does not matter.
  std::vector<CensoredTime> reversed(runs.rbegin(), runs.rend());
  const std::vector<emergent::KaplanMeierStep> curve_of_reversed = emergent::kaplan_meier(reversed);
  REQUIRE(curve_of_reversed.size() == curve.size());
  for (std::size_t i = 0; i < curve.size(); ++i)
    CHECK(curve_of_reversed[i].survival == curve[i].survival);
}

TEST_CASE("kaplan_meier_median of the 6-MP group and its Brookmeyer-Crowley interval") {
  const std::vector<CensoredTime> runs = six_mp_group();
  // S(22) = 0.538 > 0.5, S(23) = 0.448 <= 0.5.
  CHECK(emergent::kaplan_meier_median(runs) == std::optional<double>(23.0));

  // R: print(survfit(Surv(time, cens) ~ 1, subset(gehan, treat == "6-MP"))) gives
  // median 23, 0.95LCL 16, 0.95UCL NA (conf.type = "log", the default).
  const emergent::KaplanMeierMedian log_band = emergent::kaplan_meier_median_with_interval(runs);
  CHECK(log_band.reached);
  CHECK(log_band.median == std::optional<double>(23.0));
  CHECK(log_band.low == std::optional<double>(16.0));
  CHECK_FALSE(log_band.high.has_value());
  // lifelines' default band (log-log): [13, inf].
  const emergent::KaplanMeierMedian log_log_band =
      emergent::kaplan_meier_median_with_interval(runs, SurvivalBandTransform::log_log);
  CHECK(log_log_band.median == std::optional<double>(23.0));
  CHECK(log_log_band.low == std::optional<double>(13.0));
  CHECK_FALSE(log_log_band.high.has_value());
}

TEST_CASE("kaplan_meier_median_with_interval matches R's own quantile.survfit test") {
  // survival/tests/quantile.R: test1 without its NA-status row. S = 6/7 at 1, 18/35 at 6, 9/35
  // at 9; quantile(survfit(...), 0.5) gives quantile 9, lower 6, upper NA.
  const std::vector<CensoredTime> runs = {event_at(9), event_at(1),    censored_at(1), event_at(6),
                                          event_at(6), censored_at(8), censored_at(10)};
  const emergent::KaplanMeierMedian result = emergent::kaplan_meier_median_with_interval(runs);
  CHECK(result.median == std::optional<double>(9.0));
  CHECK(result.low == std::optional<double>(6.0));
  CHECK_FALSE(result.high.has_value());
  CHECK(emergent::kaplan_meier_median_with_interval(runs, SurvivalBandTransform::log_log).low ==
        std::optional<double>(1.0));  // lifelines
}

TEST_CASE("kaplan_meier_median: not reached when more than half are censored first") {
  // 8 runs, 2 events; S falls to 0.875 at 3 and 0.7 at 8, then only censorings.
  const std::vector<CensoredTime> runs = {event_at(3),    censored_at(5), censored_at(5),
                                          censored_at(8), event_at(8),    censored_at(9),
                                          censored_at(9), censored_at(10)};
  const std::vector<emergent::KaplanMeierStep> curve = emergent::kaplan_meier(runs);
  CHECK(curve.back().survival == doctest::Approx(0.7));
  // Not the last time (10), not the last event (8): unknown, only known to be > 10.
  CHECK_FALSE(emergent::kaplan_meier_median(runs).has_value());
  const emergent::KaplanMeierMedian result = emergent::kaplan_meier_median_with_interval(runs);
  CHECK_FALSE(result.reached);
  CHECK_FALSE(result.median.has_value());
  CHECK_FALSE(result.high.has_value());
  // The lower limit exists all the same: the median is probably not before 8 (log), 3 (log-log).
  CHECK(result.low == std::optional<double>(8.0));
  CHECK(emergent::kaplan_meier_median_with_interval(runs, SurvivalBandTransform::log_log).low ==
        std::optional<double>(3.0));

  // Every run censored: the curve stays at 1.
  const std::vector<CensoredTime> never = {censored_at(100), censored_at(100), censored_at(100)};
  CHECK(emergent::kaplan_meier(never).back().survival == 1.0);
  CHECK_FALSE(emergent::kaplan_meier_median(never).has_value());
}

TEST_CASE("kaplan_meier_median: all events, the smallest t with S(t) <= 0.5") {
  // Odd n: S = 0.8, 0.6, 0.4, ... and the median is the sample median.
  const std::vector<CensoredTime> five = all_events({4, 1, 3, 5, 2});
  CHECK(emergent::kaplan_meier_median(five) == std::optional<double>(3.0));
  // Even n: S(2) = 2/4 = 0.5 exactly, so the median is 2, the lower middle value (lifelines: 2).
  // R's quantile.survfit returns the middle of the flat at 0.5 here, 2.5 (the sample median), and
  // statsmodels, which wants S < 0.5, returns 3.
  const std::vector<CensoredTime> four = all_events({1, 2, 3, 4});
  CHECK(emergent::kaplan_meier(four)[1].survival == 0.5);
  CHECK(emergent::kaplan_meier_median(four) == std::optional<double>(2.0));
  // n = 10: S(50) = 9/10 * 8/9 * ... * 5/6 is 0.5 only up to rounding
  // (lifelines: 0.49999999999999983).
  const std::vector<CensoredTime> ten = all_events({10, 20, 30, 40, 50, 60, 70, 80, 90, 100});
  CHECK(emergent::kaplan_meier_median(ten) == std::optional<double>(50.0));
  CHECK(emergent::kaplan_meier(ten).back().survival == 0.0);

  // Intervals. log: low 2 (statsmodels). The upper band stays above 0.5 until S = 0 at 5, where
  // the band is undefined: R gives NA, so do we; lifelines and statsmodels give 5.
  const emergent::KaplanMeierMedian five_log = emergent::kaplan_meier_median_with_interval(five);
  CHECK(five_log.low == std::optional<double>(2.0));
  CHECK_FALSE(five_log.high.has_value());
  // log-log on n = 10: [10, 80], as lifelines and statsmodels.
  const emergent::KaplanMeierMedian ten_log_log =
      emergent::kaplan_meier_median_with_interval(ten, SurvivalBandTransform::log_log);
  CHECK(ten_log_log.median == std::optional<double>(50.0));
  CHECK(ten_log_log.low == std::optional<double>(10.0));
  CHECK(ten_log_log.high == std::optional<double>(80.0));
  // log on n = 10: low 30 (statsmodels); high undefined as above (statsmodels: 100).
  const emergent::KaplanMeierMedian ten_log = emergent::kaplan_meier_median_with_interval(ten);
  CHECK(ten_log.low == std::optional<double>(30.0));
  CHECK_FALSE(ten_log.high.has_value());

  // One run: S drops from 1 to 0, the median is its time and both bands are undefined (R: NA, NA).
  const std::vector<CensoredTime> one = {event_at(5)};
  const emergent::KaplanMeierMedian single = emergent::kaplan_meier_median_with_interval(one);
  CHECK(single.median == std::optional<double>(5.0));
  CHECK_FALSE(single.low.has_value());
  CHECK_FALSE(single.high.has_value());
}

TEST_CASE("kaplan_meier_median: S exactly 0.5 at a tied time after a censoring") {
  // 1+, 2, 2, 3, 4+: 4 at risk at 2 with 2 events, S(2) = 2/4 = 0.5; S(3) = 0.25.
  const std::vector<CensoredTime> runs = {censored_at(1), event_at(2), event_at(2), event_at(3),
                                          censored_at(4)};
  const std::vector<emergent::KaplanMeierStep> curve = emergent::kaplan_meier(runs);
  REQUIRE(curve.size() == 4);
  CHECK(curve[1].time == 2.0);
  CHECK(curve[1].at_risk == 4);
  CHECK(curve[1].events == 2);
  CHECK(curve[1].survival == 0.5);
  CHECK(curve[2].survival == 0.25);
  // lifelines: 2 (R: 2.5, the middle of the flat at 0.5 from 2 to 3).
  CHECK(emergent::kaplan_meier_median(runs) == std::optional<double>(2.0));
  const emergent::KaplanMeierMedian result = emergent::kaplan_meier_median_with_interval(runs);
  CHECK(result.low == std::optional<double>(2.0));  // statsmodels, lifelines
  CHECK_FALSE(result.high.has_value());
}

TEST_CASE("kaplan_meier: empty input, bad times") {
  const std::vector<CensoredTime> none;
  CHECK(emergent::kaplan_meier(none).empty());
  CHECK_FALSE(emergent::kaplan_meier_median(none).has_value());
  const emergent::KaplanMeierMedian result = emergent::kaplan_meier_median_with_interval(none);
  CHECK_FALSE(result.reached);
  CHECK_FALSE(result.median.has_value());
  CHECK_FALSE(result.low.has_value());
  CHECK_FALSE(result.high.has_value());

  const std::vector<CensoredTime> not_a_time = {event_at(std::numeric_limits<double>::quiet_NaN())};
  CHECK_THROWS_AS(emergent::kaplan_meier(not_a_time), emergent::Error);
  const std::vector<CensoredTime> fine = {event_at(1)};
  CHECK_THROWS_AS(
      emergent::kaplan_meier_median_with_interval(fine, SurvivalBandTransform::log, -1.0),
      emergent::Error);
}

TEST_CASE("emergence_outcome: an emergence step is an event, none is a censoring at steps_done") {
  const CensoredTime emerged = emergent::emergence_outcome(std::int64_t{300}, 1000);
  CHECK(emerged.time == 300.0);
  CHECK(emerged.event);
  const CensoredTime censored = emergent::emergence_outcome(std::nullopt, 1000);
  CHECK(censored.time == 1000.0);
  CHECK_FALSE(censored.event);
  CHECK_THROWS_AS(emergent::emergence_outcome(std::int64_t{1200}, 1000), emergent::Error);
}

TEST_CASE("mean_spread: sample standard deviation, one value, none") {
  const std::vector<double> values = {2, 4, 4, 4, 5, 5, 7, 9};
  const emergent::MeanSpread spread = emergent::mean_spread(values);
  CHECK(spread.count == 8);
  CHECK(spread.mean == doctest::Approx(5.0));
  CHECK(spread.standard_deviation == doctest::Approx(std::sqrt(32.0 / 7.0)));  // 2.138, n - 1
  CHECK(spread.min == 2.0);
  CHECK(spread.max == 9.0);

  // A small spread on a large mean (no cancellation): sd of {-0.25, 0, 0.25} around 10000.5.
  const std::vector<double> steps = {10000.5, 10000.25, 10000.75};
  CHECK(emergent::mean_spread(steps).standard_deviation == doctest::Approx(0.25).epsilon(1e-12));

  const std::vector<double> one = {3.5};
  const emergent::MeanSpread single = emergent::mean_spread(one);
  CHECK(single.count == 1);
  CHECK(single.mean == 3.5);
  CHECK(single.standard_deviation == 0.0);
  CHECK(single.min == 3.5);
  CHECK(single.max == 3.5);

  const std::vector<double> none;
  const emergent::MeanSpread empty = emergent::mean_spread(none);
  CHECK(empty.count == 0);
  CHECK(std::isnan(empty.mean));
  CHECK(std::isnan(empty.standard_deviation));
  CHECK(std::isnan(empty.min));
  CHECK(std::isnan(empty.max));

  const std::vector<double> diverged = {1.0, std::numeric_limits<double>::infinity()};
  CHECK_THROWS_AS(emergent::mean_spread(diverged), emergent::Error);
}

// ---- the chi-square tail and the log-rank test -------------------------------------------------

namespace {

const nlohmann::json& logrank_golden() {
  static const nlohmann::json value = [] {
    std::ifstream in(std::string(EMERGENT_SOURCE_DIR) + "/tests/golden/logrank/golden.json",
                     std::ios::binary);
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
  }();
  return value;
}

std::vector<std::vector<CensoredTime>> groups_of(const nlohmann::json& groups) {
  std::vector<std::vector<CensoredTime>> out;
  for (const nlohmann::json& group : groups) {
    out.emplace_back();
    for (const nlohmann::json& run : group)
      out.back().push_back({run.at(0).get<double>(), run.at(1).get<int>() == 1});
  }
  return out;
}

}  // namespace

TEST_CASE("regularized_upper_gamma and chi_square_survival: closed forms") {
  // df = 2: Q(1, x / 2) = exp(-x / 2). df = 1: Q(1/2, x / 2) = erfc(sqrt(x / 2)). Both sides of
  // the series / continued fraction split (x / 2 < a + 1 or not), and far tails.
  for (const double x : {1e-8, 0.01, 0.3, 1.0, 2.5, 3.9, 4.1, 10.0, 50.0, 300.0, 1400.0}) {
    CAPTURE(x);
    CHECK(emergent::chi_square_survival(x, 2) == doctest::Approx(std::exp(-x / 2)).epsilon(1e-14));
    CHECK(emergent::chi_square_survival(x, 1) ==
          doctest::Approx(std::erfc(std::sqrt(x / 2))).epsilon(1e-13));
  }
  // The 95% critical value of 1 df is 1.959964^2; of 4 df the tail at 9.487729 is 0.05.
  CHECK(emergent::chi_square_survival(3.841458820694124, 1) ==
        doctest::Approx(0.05).epsilon(1e-13));
  CHECK(emergent::chi_square_survival(9.487729036781154, 4) ==
        doctest::Approx(0.05).epsilon(1e-13));
  // Integer a: Q(n, x) = exp(-x) sum_{k < n} x^k / k!; Q(3, 2) = 5 e^-2.
  CHECK(emergent::regularized_upper_gamma(3.0, 2.0) == doctest::Approx(5.0 * std::exp(-2.0)));
  CHECK(emergent::regularized_upper_gamma(3.0, 0.0) == 1.0);
  CHECK(emergent::regularized_upper_gamma(3.0, std::numeric_limits<double>::infinity()) == 0.0);
  CHECK(emergent::chi_square_survival(0.0, 3) == 1.0);
  CHECK(emergent::chi_square_survival(-1.0, 3) == 1.0);
  CHECK_THROWS_AS(emergent::regularized_upper_gamma(0.0, 1.0), emergent::Error);
  CHECK_THROWS_AS(emergent::regularized_upper_gamma(1.0, -1.0), emergent::Error);
  CHECK_THROWS_AS(emergent::chi_square_survival(1.0, 0.0), emergent::Error);
  CHECK_THROWS_AS(emergent::chi_square_survival(std::numeric_limits<double>::quiet_NaN(), 1.0),
                  emergent::Error);
}

TEST_CASE("chi_square_survival against scipy.stats.chi2.sf (tests/golden/logrank)") {
  double worst = 0.0;  // the largest relative difference, reported below
  for (const nlohmann::json& row : logrank_golden().at("chi_square_sf")) {
    const double df = row.at(0), x = row.at(1), expected = row.at(2);
    const double ours = emergent::chi_square_survival(x, df);
    CAPTURE(df);
    CAPTURE(x);
    CHECK(ours == doctest::Approx(expected).epsilon(1e-11));
    worst = std::max(worst, std::fabs(ours - expected) / expected);
  }
  MESSAGE("chi_square_survival: largest relative difference from scipy ", worst);
  CHECK(logrank_golden().at("chi_square_sf").size() > 100);
}

TEST_CASE("log_rank_test: a 2-group example worked by hand") {
  // A = 1, 2+, 3; B = 2, 3, 4+. At each event time t: n_A, n_B at risk, d events,
  // E_A += d n_A / n, V += d (n - d) / (n - 1) * n_A n_B / n^2.
  //   t = 1: n_A 3, n_B 3, d 1 (A)        E_A 3/6 = 1/2   V 1 * 5/5 * 9/36 = 1/4
  //   t = 2: n_A 2 (2+ still at risk), n_B 3, d 1 (B)
  //                                       E_A 2/5         V 1 * 4/4 * 6/25 = 6/25
  //   t = 3: n_A 1, n_B 2, d 2 (one each, a tie)
  //                                       E_A 2/3         V 2 * 1/2 * 2/9 = 2/9
  // O_A = 2, E_A = 47/30, O_A - E_A = 13/30; V = 641/900; E_B = 4 - 47/30 = 73/30.
  // Statistic (13/30)^2 / (641/900) = 169/641 = 0.26365, df 1, p = erfc(sqrt(169/1282)) = 0.6076.
  const std::vector<std::vector<CensoredTime>> groups = {
      {event_at(1), censored_at(2), event_at(3)}, {event_at(2), event_at(3), censored_at(4)}};
  const emergent::LogRankTest test = emergent::log_rank_test(groups);
  CHECK(test.observed == std::vector<int>{2, 2});
  REQUIRE(test.expected.size() == 2);
  CHECK(test.expected[0] == doctest::Approx(47.0 / 30.0).epsilon(1e-14));
  CHECK(test.expected[1] == doctest::Approx(73.0 / 30.0).epsilon(1e-14));
  CHECK(test.degrees_of_freedom == 1);
  CHECK(test.statistic == doctest::Approx(169.0 / 641.0).epsilon(1e-14));
  CHECK(test.p_value == doctest::Approx(std::erfc(std::sqrt(169.0 / 1282.0))).epsilon(1e-13));
  CHECK(test.p_value == doctest::Approx(0.6076232002624802).epsilon(1e-12));  // lifelines

  // The order of the groups and of the runs within them does not matter.
  const std::vector<std::vector<CensoredTime>> swapped = {
      {censored_at(4), event_at(3), event_at(2)}, {event_at(3), event_at(1), censored_at(2)}};
  const emergent::LogRankTest test_swapped = emergent::log_rank_test(swapped);
  CHECK(test_swapped.statistic == doctest::Approx(test.statistic).epsilon(1e-14));
  CHECK(test_swapped.observed == std::vector<int>{2, 2});
}

TEST_CASE("log_rank_test against lifelines' multivariate_logrank_test (tests/golden/logrank)") {
  double worst_statistic = 0.0, worst_p = 0.0;  // absolute differences, reported below
  for (const nlohmann::json& dataset : logrank_golden().at("datasets")) {
    CAPTURE(dataset.at("name").get<std::string>());
    const std::vector<std::vector<CensoredTime>> groups = groups_of(dataset.at("groups"));
    const emergent::LogRankTest test = emergent::log_rank_test(groups);
    const nlohmann::json& oracle = dataset.at("lifelines");
    const double statistic = oracle.at("statistic");
    // lifelines keeps df = G - 1 where a group never shares an event time with the others; we
    // leave such groups out, as R's survdiff does (the fixture gives that df and scipy's p).
    const int df =
        oracle.value("df_without_groups_never_at_risk", oracle.at("degrees_of_freedom").get<int>());
    const double p_value = oracle.value("p_value_at_that_df", oracle.at("p_value").get<double>());
    CHECK(test.degrees_of_freedom == df);
    CHECK(test.statistic == doctest::Approx(statistic).epsilon(1e-12));
    CHECK(test.p_value == doctest::Approx(p_value).epsilon(1e-12));
    worst_statistic = std::max(worst_statistic, std::fabs(test.statistic - statistic));
    worst_p = std::max(worst_p, std::fabs(test.p_value - p_value));
    // Observed and expected events both add up to all events.
    int events = 0;
    for (const auto& group : groups)
      for (const CensoredTime& run : group) events += run.event ? 1 : 0;
    double observed = 0.0, expected = 0.0;
    for (std::size_t g = 0; g < groups.size(); ++g)
      observed += test.observed[g], expected += test.expected[g];
    CHECK(observed == events);
    CHECK(expected == doctest::Approx(events).epsilon(1e-12));
  }
  MESSAGE("log_rank_test: largest absolute difference from lifelines: statistic ", worst_statistic,
          ", p-value ", worst_p);
  // The published value of the 6-MP trial (R: survdiff, Chisq = 16.8 on 1 df, p = 4e-05).
  for (const nlohmann::json& dataset : logrank_golden().at("datasets"))
    if (dataset.at("name") == "freireich-6mp-placebo") {
      const emergent::LogRankTest test = emergent::log_rank_test(groups_of(dataset.at("groups")));
      CHECK(test.statistic == doctest::Approx(16.8).epsilon(0.003));
      CHECK(test.observed == std::vector<int>{9, 21});
      CHECK(test.expected[0] == doctest::Approx(19.25).epsilon(1e-3));  // Kleinbaum & Klein
    }
}

TEST_CASE("log_rank_test: nothing to compare, empty groups, bad input") {
  // Every run censored: no events, statistic 0, df 0, p 1 (no evidence; not a test).
  const std::vector<std::vector<CensoredTime>> never = {{censored_at(100), censored_at(100)},
                                                        {censored_at(100), censored_at(80)}};
  const emergent::LogRankTest none = emergent::log_rank_test(never);
  CHECK(none.statistic == 0.0);
  CHECK(none.degrees_of_freedom == 0);
  CHECK(none.p_value == 1.0);
  CHECK(none.observed == std::vector<int>{0, 0});
  CHECK(none.expected == std::vector<double>{0.0, 0.0});

  // Every run at risk has its event at the one event time: the hypergeometric variance is 0.
  const std::vector<std::vector<CensoredTime>> together = {{event_at(5)}, {event_at(5)}};
  const emergent::LogRankTest tied = emergent::log_rank_test(together);
  CHECK(tied.degrees_of_freedom == 0);
  CHECK(tied.p_value == 1.0);

  // An empty group drops out of df like a group never at risk; the others are compared as if
  // it were not there.
  const std::vector<std::vector<CensoredTime>> with_empty = {
      {event_at(1), censored_at(2), event_at(3)}, {}, {event_at(2), event_at(3), censored_at(4)}};
  const emergent::LogRankTest skipped = emergent::log_rank_test(with_empty);
  CHECK(skipped.degrees_of_freedom == 1);
  CHECK(skipped.statistic == doctest::Approx(169.0 / 641.0).epsilon(1e-14));
  CHECK(skipped.observed == std::vector<int>{2, 0, 2});
  CHECK(skipped.expected[1] == 0.0);

  // Identical groups: O = E, statistic 0 with df 2, p 1.
  const std::vector<CensoredTime> one = {event_at(3), event_at(7), censored_at(9)};
  const std::vector<std::vector<CensoredTime>> same = {one, one, one};
  const emergent::LogRankTest equal = emergent::log_rank_test(same);
  CHECK(equal.degrees_of_freedom == 2);
  CHECK(equal.statistic == doctest::Approx(0.0).scale(1.0));
  CHECK(equal.p_value == doctest::Approx(1.0));

  const std::vector<std::vector<CensoredTime>> single = {one};
  CHECK_THROWS_AS(emergent::log_rank_test(single), emergent::Error);
  const std::vector<std::vector<CensoredTime>> bad = {
      one, {event_at(std::numeric_limits<double>::infinity())}};
  CHECK_THROWS_AS(emergent::log_rank_test(bad), emergent::Error);
}
