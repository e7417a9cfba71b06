#!/usr/bin/env python3
"""Golden fixture for the log-rank test and the chi-square tail of
include/emergent/experiment/ensemble_statistics.hpp (log_rank_test, chi_square_survival), made by
lifelines and scipy.

Rerun (a venv of its own, gitignored like every .venv*/; lifelines brings numpy, scipy, pandas):

  python3 -m venv .venv-stats && .venv-stats/bin/pip install lifelines scipy
  .venv-stats/bin/python tests/golden/make_logrank_golden.py

The fixture in the repository was made with lifelines 0.30.3, scipy 1.17.1, numpy 2.4.6 and
pandas 2.3.3 (recorded in the file). The script is deterministic: fixed data, no random numbers.

What it writes to tests/golden/logrank/golden.json:

  datasets       groups of right-censored times, each run [time, 1 = event / 0 = censored], and
                 lifelines.statistics.multivariate_logrank_test's test_statistic, p_value and
                 degrees_of_freedom on them (for two groups the script asserts that
                 logrank_test gives the same). Where a group never shares an informative event
                 time with the others, lifelines keeps df = G - 1 and emergent (like R's
                 survdiff) does not: "df_without_groups_never_at_risk" is the df emergent
                 should report and "p_value_at_that_df" scipy's chi2.sf of lifelines' statistic
                 at that df.
  chi_square_sf  [df, x, scipy.stats.chi2.sf(x, df)] over df 1..200 and x from 1e-3 to 2000,
                 tails down to 1e-300, both sides of the series / continued fraction split
                 (x / 2 = df / 2 + 1).

The C++ test (tests/test_ensemble_statistics.cpp) checks all of it.
"""

import json
import pathlib

import lifelines
import numpy
import pandas
import scipy
from lifelines.statistics import logrank_test, multivariate_logrank_test
from scipy.stats import chi2

OUT = pathlib.Path(__file__).resolve().parent / "logrank" / "golden.json"


def event(t):
    return [t, 1]


def censored(t):
    return [t, 0]


# The Freireich et al. (1963) leukemia trial (weeks in remission; R's MASS::gehan), 6-MP against
# placebo: ties of events and of censorings. R: survdiff gives Chisq = 16.8 on 1 df, p = 4e-05.
SIX_MP = [event(6), event(6), event(6), censored(6), event(7), censored(9), event(10),
          censored(10), censored(11), event(13), event(16), censored(17), censored(19),
          censored(20), event(22), event(23), censored(25), censored(32), censored(32),
          censored(34), censored(35)]
PLACEBO = [event(t) for t in (1, 1, 2, 2, 3, 4, 4, 5, 5, 8, 8, 8, 8, 11, 11, 12, 12, 15, 17, 22,
                              23)]

DATASETS = [
    {"name": "hand-worked",
     "note": "the 2-group example worked by hand in tests/test_ensemble_statistics.cpp",
     "groups": [[event(1), censored(2), event(3)], [event(2), event(3), censored(4)]]},
    {"name": "freireich-6mp-placebo",
     "note": "6-MP against placebo: tied events and censorings, a tie of both groups at 22, 23",
     "groups": [SIX_MP, PLACEBO]},
    {"name": "three-groups-emergence",
     "note": "emergence steps of 3 seed ensembles with a budget of 400 steps: runs censored at "
             "400 (and one stopped early at 250), ties within and across groups, one group with "
             "no event at all",
     "groups": [[event(120), event(150), event(150), event(180), event(210), censored(400)],
                [event(150), event(240), event(300), censored(250), censored(400),
                 censored(400), event(390)],
                [censored(400), censored(400), censored(400), censored(400)]]},
    {"name": "four-groups-one-never-at-risk",
     "note": "4 groups; the last one's runs were all censored before the first event (E = 0, a "
             "zero row of V): the same statistic, but df 2 where lifelines says 3",
     "groups": [[event(5), event(8), event(8), censored(12), event(14)],
                [event(6), censored(9), event(11), event(11), event(20), censored(20)],
                [event(3), event(8), event(15), censored(16)],
                [censored(1), censored(2), censored(2)]]},
    {"name": "all-censored",
     "note": "no event at all: nothing to compare",
     "groups": [[censored(100), censored(100)], [censored(100), censored(80)]]},
]


def columns(groups):
    times, flags, labels = [], [], []
    for g, runs in enumerate(groups):
        for t, e in runs:
            times.append(t)
            flags.append(e)
            labels.append(g)
    return times, flags, labels


def oracle(dataset):
    groups = dataset["groups"]
    times, flags, labels = columns(groups)
    result = multivariate_logrank_test(times, labels, flags)
    out = {"statistic": float(result.test_statistic), "p_value": float(result.p_value),
           "degrees_of_freedom": int(result.degrees_of_freedom)}
    if len(groups) == 2:
        (ta, ea), (tb, eb) = ([[r[0] for r in g], [r[1] for r in g]] for g in groups)
        two = logrank_test(ta, tb, event_observed_A=ea, event_observed_B=eb)
        assert abs(two.test_statistic - result.test_statistic) <= 1e-12 * max(1, result.test_statistic)
        assert abs(two.p_value - result.p_value) <= 1e-12
    # Groups never at risk at an event time have no expected events; R and emergent leave them
    # out of df.
    event_times = sorted({t for t, e in zip(times, flags) if e})
    at_risk_somewhere = [any(t >= s for t, _ in runs for s in event_times) for runs in groups]
    df = sum(at_risk_somewhere) - 1 if event_times else 0
    if df != out["degrees_of_freedom"]:
        out["df_without_groups_never_at_risk"] = df
        out["p_value_at_that_df"] = float(chi2.sf(out["statistic"], df)) if df > 0 else 1.0
    return out


def chi_square_table():
    rows = []
    for df in (1, 2, 3, 4, 5, 7, 10, 30, 100, 200):
        for x in (1e-3, 0.1, 0.5, 1.0, 2.0, 3.841458820694124, 5.0, df + 1.0, df + 2.0, df + 3.0,
                  10.0, 25.0, 50.0, 100.0, 300.0, 1000.0, 2000.0):
            sf = float(chi2.sf(x, df))
            if sf > 0.0 and sf >= 1e-300:
                rows.append([df, x, sf])
    return rows


def main():
    out = {"versions": {"lifelines": lifelines.__version__, "scipy": scipy.__version__,
                        "numpy": numpy.__version__, "pandas": pandas.__version__},
           "datasets": [dict(d, lifelines=oracle(d)) for d in DATASETS],
           "chi_square_sf": chi_square_table()}
    OUT.parent.mkdir(parents=True, exist_ok=True)
    # One line per dataset and per chi-square row: short, and diffs read well.
    lines = ["{", f' "versions": {json.dumps(out["versions"])},', ' "datasets": [']
    lines += [f"  {json.dumps(d)}," for d in out["datasets"]]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" ],", ' "chi_square_sf": [']
    lines += [f"  {json.dumps(row)}," for row in out["chi_square_sf"]]
    lines[-1] = lines[-1].rstrip(",")
    lines += [" ]", "}"]
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == out
    OUT.write_text(text)
    for d in out["datasets"]:
        print(f"{d['name']}: {d['lifelines']}")
    print(f"wrote {OUT} ({len(out['chi_square_sf'])} chi-square tails)")


if __name__ == "__main__":
    main()
