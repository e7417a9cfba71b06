#!/usr/bin/env python3
"""The paper's figures from sweep folders (`emergent sweep FILE --out DIR`), laid out as the paper
lays them out. Seeds are thin lines or small points, the ensemble statistic is bold, and censored
runs (a threshold never reached within the budget) are drawn as open triangles at their budget;
a median is joined only to neighbours whose medians are observed too.
Group statistics come from `emergent sweep summarize` (one implementation of the statistics).

    plot.py sparsity DIR [DIR ...] --out F.png    Fig. 5a: final loss against s/S per S, and
                                                  the solved share with its 95% interval
    plot.py curves DIR --out F.png                Fig. 5b: loss curves, one colour per S
    plot.py plateau DIR --out F.png               Fig. 5c: plateau length against S, with and
                                                  without the attention bias, a line per bias
                                                  and measurement (held-out set or batch)
    plot.py width DIR --out F.png                 Fig. 6: final loss against heads H, per head
                                                  size and at fixed width D = 128, per task
    plot.py depth DIR --out F.png                 depth study: final loss against layers L
    plot.py architectures DIR --out F.png         Fig. 7 / App. B.6: loss curves per token mixer
    plot.py factors DIR --out F.png               App. B.4: plateau length against T, N, k, C, S
    plot.py batch DIR --out F.png                 plateau against S per batch convention and bias
    plot.py attention RUN --out F.png             Fig. 4: per-head maps at the saved steps beside
                                                  the true pattern, and the per-head entropy
    plot.py runs RUN [RUN ...] --out F.png        loss curves of run folders
    plot.py spt DIR [DIR ...] --out F.png         self-pretraining: test accuracy over training
                                                  per condition, final train and test accuracy,
                                                  the proximity of layer 0, and the derivatives
                                                  of both losses along the proximity profile;
                                                  prints the table of docs/self-pretraining.md
    plot.py prepretraining DIR [DIR ...] --out F.png
                                                  stage 2 of pre-pretraining (condition: the
                                                  last component of config init_from, "none"
                                                  when empty; per task if several): Kaplan-Meier
                                                  curves of the runs not yet emerged (+ censored,
                                                  dashed median), the solved share with 95%
                                                  Wilson intervals; prints the table and the
                                                  log-rank test (and lifelines' where importable)

Options: --emergent PATH (default build/emergent), --title TEXT.
Needs Debian's python3-matplotlib and python3-numpy (scripts/install-deps.sh).
"""
import argparse
import json
import math
import os
import re
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

# The paper's numbers, read off its figures (+-5-10%; sources in docs/paper-notes.md §3),
# drawn as grey crosses beside ours.
PAPER_SPARSITY_S16 = {1: 0.336, 2: 0.336, 4: 0.50, 5: 0.60, 6: 0.63, 7: 0.65, 8: 0.67, 9: 0.65,
                      10: 0.63, 11: 0.60, 13: 0.49, 15: 0.36, 16: 0.36}
PAPER_PLATEAU = {4: 61, 8: 377, 16: 400, 32: 650, 64: 1390, 128: 3300, 256: 8600}
PAPER_PLATEAU_BIAS = {4: 61, 8: 180, 16: 180, 32: 180, 64: 180, 128: 180, 256: 180, 512: 180}

PAPER_WIDTH_LINEAR = {"d_head=4": {1: 0.693, 2: 0.693, 4: 0.67, 8: 0.445, 16: 0.345, 32: 0.336},
                      "D=128": {1: 0.63, 2: 0.49, 4: 0.465, 8: 0.345, 16: 0.34, 32: 0.34, 64: 0.34, 128: 0.34}}

# App. B.4 in words (docs/paper-notes.md §4; no numbers), and the settings of its Fig. 5c, whose
# plateaus stand in for App. B.4's at the same base.
PAPER_FACTORS = {"S": "context length sets it (Fig. 5c)", "states": "longer T lengthens it, not monotonically",
                 "rules": "does not change it", "depth": "does not change it", "colours": "does not change it"}
PAPER_AUTOMATON_SETTINGS = {"states": 16, "rules": 256, "depth": 1, "colours": 4}
FACTOR_SYMBOLS = {"S": "S", "states": "T", "rules": "N", "depth": "k", "colours": "C"}

TASK_TITLES = {"linear-map": "linear map", "cellular-automaton": "cellular automaton"}


# ---------------------------------------------------------------------------------------- data
def read_jsonl(path):
    rows = []
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a row cut by a kill: the sweep cuts it off before its next append
    return rows


def sweep_rows(folder):
    """Every finished run of a sweep folder: {"id", "label", "config", "result"}, once per id."""
    by_id = {}
    for shard in sorted((Path(folder) / "rows").glob("*.jsonl")):
        for row in read_jsonl(shard):
            by_id.setdefault(row["id"], row)
    if not by_id:
        raise SystemExit(f"plot.py: {folder}: no finished runs (rows/*.jsonl)")
    return list(by_id.values())


def metrics(folder, row):
    return read_jsonl(Path(folder) / "runs" / row["id"] / "metrics.jsonl")


def summarize(args, folder, by):
    """`emergent sweep summarize DIR --by ... --json`: per group, solve share, plateau median."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        subprocess.run([args.emergent, "sweep", "summarize", str(folder), "--by", ",".join(by),
                        "--json", out.name], check=True, stdout=subprocess.DEVNULL)
        return json.loads(Path(out.name).read_text())


def smoothed(values, n=5):
    """Trailing mean of n rows: what the trainer's emergence steps are read off."""
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= n:
            total -= values[i - n]
        out.append(total / min(i + 1, n))
    return out


def curve(folder, row, key="loss"):
    rows = metrics(folder, row)
    return [r["step"] for r in rows], smoothed([r[key] for r in rows])


def median_curve(curves):
    """Pointwise median of curves over their common steps (runs stopped early hold their last
    value: a solved run stays solved)."""
    longest = max(curves, key=lambda c: len(c[0]))[0]
    values = np.array([c[1] + [c[1][-1]] * (len(longest) - len(c[1])) for c in curves])
    return longest, np.median(values, axis=0)


def linear_floor(S):
    """The linear map's loss floor: the x1 half exact, the x0 half at ln 2."""
    return (S - 1) / (2 * S - 1) * math.log(2)


def solved_offset(sizes, S):
    """A sideways shift in s/S per state size, so that sizes at the same s/S do not hide each other."""
    return (sizes.index(S) - (len(sizes) - 1) / 2) * 0.012


# Line styles and markers that tell series apart where their lines coincide (a colour each is not
# enough: a line drawn later hides an earlier one at the same values).
SERIES_STYLES = [("-", "o"), ("--", "s"), ("-.", "^"), (":", "D"), ((0, (5, 2, 1, 2)), "v"), ((0, (3, 1)), "P")]


# Okabe and Ito's colour-blind-safe palette: colours told apart at a glance, for categories.
DISTINCT_COLOURS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"]


def distinct_line(index, count, points, marks=8):
    """Plot keywords for series `index` of `count`: its line style and marker, the markers at
    `marks` places shifted per series so that coinciding lines show every series' markers."""
    every = max(1, points // marks)
    ls, marker = SERIES_STYLES[index % len(SERIES_STYLES)]
    return dict(ls=ls, marker=marker, ms=5, markevery=(index * every // count, every))


def colours(n):
    cmap = plt.get_cmap("viridis")
    return [cmap(i / max(1, n - 1) * 0.9) for i in range(n)]


def plateau_points(ax, x, group, colour, offset=1.0):
    """Per-seed plateau lengths: a finished run as a dot at its plateau end, a run that did not
    finish within its budget (censored) as an open triangle at the budget."""
    for e in group["emergence"]:
        if e["censored"]:
            ax.scatter([x * offset], [e["steps_done"]], marker="^", facecolors="none",
                       edgecolors=colour, s=40, lw=1.2, zorder=3)
        else:
            ax.scatter([x * offset], [max(e["emergence_step"], 1)], marker="o", color=colour,
                       alpha=0.6, s=14, zorder=3)


def plateau_interval(ax, x, group, colour):
    """The Brookmeyer-Crowley interval of a median: solid between its ends, dotted from the median
    to the group's last time where its upper end is open; none where neither end is reached
    (one run)."""
    m = group["plateau_median"]
    if m["low"] is None and m["high"] is None:
        return
    low = m["low"] if m["low"] is not None else m["median"]
    high = m["high"] if m["high"] is not None else m["median"]
    ax.plot([x] * 2, [max(low, 1), max(high, 1)], color=colour, lw=1)
    if m["high"] is None:
        last = max(e["steps_done"] if e["censored"] else e["emergence_step"] for e in group["emergence"])
        ax.plot([x] * 2, [max(m["median"], 1), last], color=colour, lw=1, ls=":")


def plateau_median_line(ax, xs, groups, colour, label, offset=1.0, style="-", marker="o"):
    """Bold Kaplan-Meier medians with their intervals, joined only between neighbouring sizes whose
    medians are both observed: a median not reached (most runs censored) breaks the line."""
    line_x, line_y = [], []
    for x, g in zip(xs, groups):
        m = g["plateau_median"]
        if m["median"] is None:
            line_x.append(np.nan), line_y.append(np.nan)
            continue
        line_x.append(x * offset), line_y.append(max(m["median"], 1))
        plateau_interval(ax, x * offset, g, colour)
    ax.plot(line_x, line_y, marker=marker, ls=style, color=colour, lw=2.2, ms=6, label=label)


def plateau_key(ax, groups):
    """What the marks of plateau_points and plateau_interval mean, in the legend, and a dotted grey
    line at each budget a run did not finish within."""
    budgets = sorted({e["steps_done"] for g in groups for e in g["emergence"] if e["censored"]})
    for budget in budgets:
        ax.axhline(budget, color="grey", ls=(0, (1, 3)), lw=0.8)
    ax.scatter([], [], marker="o", color="grey", alpha=0.6, s=14, label="a run: its plateau end")
    if budgets:
        steps = " or ".join(f"{b:,}" for b in budgets)
        ax.scatter([], [], marker="^", facecolors="none", edgecolors="grey", s=40, lw=1.2,
                   label=f"a run not finished by step {steps} (drawn there)")
    if any(g["plateau_median"]["high"] is None and g["plateau_median"]["low"] is not None for g in groups):
        ax.plot([], [], color="grey", lw=1, ls=":", label="95% interval open above (dotted to the last run)")


def finish(fig, args, default_title):
    fig.suptitle(args.title or default_title, fontsize=11)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


# ------------------------------------------------------------------------------------- figures
def sparsity(args):
    """Fig. 5a: final loss against s/S, one line per S."""
    fig, (ax, ax_solved) = plt.subplots(1, 2, figsize=(11, 4.3))
    rows = [(folder, r) for folder in args.dirs for r in sweep_rows(folder)]
    sizes = sorted({r["config"]["S"] for _, r in rows})
    for S, colour in zip(sizes, colours(len(sizes))):
        of_S = [r for _, r in rows if r["config"]["S"] == S]
        xs = sorted({r["config"]["s"] for r in of_S})
        for r in of_S:
            ax.scatter(r["config"]["s"] / S, r["result"]["final_loss"], s=10, color=colour, alpha=0.5)
        means = [np.mean([r["result"]["final_loss"] for r in of_S if r["config"]["s"] == s]) for s in xs]
        counts = [sum(1 for r in of_S if r["config"]["s"] == s) for s in xs]
        seeds = f"{min(counts)}" if min(counts) == max(counts) else f"{min(counts)}-{max(counts)}"
        line_x, line_y = [], []  # the line breaks over a stretch of s not run (gap over S/4)
        for k, s in enumerate(xs):
            if k and s - xs[k - 1] > S / 4:
                line_x.append(np.nan), line_y.append(np.nan)
            line_x.append(s / S), line_y.append(means[k])
        ax.plot(line_x, line_y, "-o", color=colour, lw=2, ms=4, label=f"S={S} (mean of {seeds} seeds)")
        ax.axhline(linear_floor(S), color=colour, ls=":", lw=0.8)
    for folder in args.dirs:
        for g in summarize(args, folder, ["S", "s"]):
            S, s = g["group"]["S"], g["group"]["s"]
            colour = colours(len(sizes))[sizes.index(S)]
            share = g["solved"]
            ax_solved.errorbar([s / S + solved_offset(sizes, S)], [share["share"]],
                               yerr=[[share["share"] - share["low"]], [share["high"] - share["share"]]],
                               fmt="o", color=colour, ms=4, capsize=2)
    for S, colour in zip(sizes, colours(len(sizes))):
        ax_solved.plot([], [], "o-", color=colour, ms=4, label=f"S={S}")
    ax_solved.legend(fontsize=7)
    if 16 in sizes:
        ax.scatter([s / 16 for s in PAPER_SPARSITY_S16], list(PAPER_SPARSITY_S16.values()), marker="x",
                   color="grey", label="paper, S=16 (read off its figure)", zorder=4)
    ax.axhline(math.log(2), color="black", ls="--", lw=1, label="ln 2 (chance)")
    ax.set_xlabel("s / S")
    ax.set_ylabel("final loss (full sequence, smoothed)")
    ax.set_title("final loss (dotted: each S's floor)")
    ax.legend(fontsize=7)
    ax_solved.set_xlabel("s / S")
    ax_solved.set_ylabel("share of seeds solved (x1 loss < 0.05)")
    ax_solved.set_ylim(-0.05, 1.05)
    ax_solved.set_title("solved share, 95% Wilson interval (each S shifted sideways)")
    finish(fig, args, "Linear map: medium sparsity is hardest (paper Fig. 5a)")


def curves(args):
    """Fig. 5b: loss curves per state size S."""
    rows = sweep_rows(args.dirs[0])
    biases = sorted({r["config"]["bias"] for r in rows})
    fig, axes = plt.subplots(1, len(biases), figsize=(6.5 * len(biases), 4.3), squeeze=False)
    for ax, bias in zip(axes[0], biases):
        of_bias = [r for r in rows if r["config"]["bias"] == bias]
        sizes = sorted({r["config"]["S"] for r in of_bias})
        for S, colour in zip(sizes, colours(len(sizes))):
            runs = [curve(args.dirs[0], r) for r in of_bias if r["config"]["S"] == S]
            for steps, loss in runs:
                ax.plot(steps, loss, color=colour, lw=0.6, alpha=0.45)
            steps, median = median_curve(runs)
            ax.plot(steps, median, color=colour, lw=2, label=f"S={S} ({len(runs)} seeds)")
        ax.axhline(1.3, color="grey", ls=":", lw=1, label="1.3 (plateau threshold)")
        ax.set_xlabel("step")
        ax.set_ylabel("loss (smoothed)")
        ax.set_title("no bias" if bias == 0 else f"attention bias c={bias:g}")
        ax.legend(fontsize=7)
    finish(fig, args, "Cellular automaton: longer states learn later and more abruptly (paper Fig. 5b)")


def plateau_measurement(eval_every):
    return "read off a held-out set" if eval_every else "read off the training batch"


def plateau(args):
    """Fig. 5c: plateau length against S, with and without the bias (log-log), one line per bias
    and measurement (held-out set or training batch: never pooled)."""
    fig, ax = plt.subplots(figsize=(10, 5))
    groups = summarize(args, args.dirs[0], ["S", "bias", "eval_every"])
    keys = sorted({(g["group"]["bias"], g["group"]["eval_every"]) for g in groups}, key=lambda k: (k[0], -k[1]))
    for i, (bias, eval_every) in enumerate(keys):
        of_key = sorted((g for g in groups if (g["group"]["bias"], g["group"]["eval_every"]) == (bias, eval_every)),
                        key=lambda g: g["group"]["S"])
        colour, offset = ["C0", "C1", "C3", "C2", "C4", "C5"][i], 1.0 + 0.05 * i
        xs = [g["group"]["S"] for g in of_key]
        for x, g in zip(xs, of_key):
            plateau_points(ax, x, g, colour, offset)
        name = "no bias" if bias == 0 else f"bias c={bias:g}"
        plateau_median_line(ax, xs, of_key, colour, f"{name}, {plateau_measurement(eval_every)}", offset,
                            "-" if eval_every else "--", "D" if eval_every else "o")
    ax.scatter(list(PAPER_PLATEAU), list(PAPER_PLATEAU.values()), marker="x", color="grey",
               label="paper, no bias", zorder=4)
    ax.scatter(list(PAPER_PLATEAU_BIAS), list(PAPER_PLATEAU_BIAS.values()), marker="+", color="grey",
               label="paper, bias", zorder=4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("state size S")
    ax.set_ylabel("plateau length (first step with loss < 1.3)")
    plateau_key(ax, groups)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    finish(fig, args, "Cellular automaton: plateau against S\n(bold: Kaplan-Meier median, "
           "joined only where observed; open ^: not finished)")


def per_task_panels(rows):
    """One panel per task of the sweep, the linear map first."""
    tasks = sorted({r["config"]["task"] for r in rows}, key=lambda t: t != "linear-map")
    fig, axes = plt.subplots(1, len(tasks), figsize=(6.0 * len(tasks), 4.3), squeeze=False)
    return tasks, fig, axes


def seed_points_and_mean(ax, points, colour, label, style="-o"):
    """points: {x: [final losses]}: seeds as small dots, their mean bold."""
    xs = sorted(points)
    for x in xs:
        ax.scatter([x] * len(points[x]), points[x], s=10, color=colour, alpha=0.5)
    ax.plot(xs, [np.mean(points[x]) for x in xs], style, color=colour, lw=2, ms=4, label=label)


def width(args):
    """Fig. 6: more heads help more than bigger heads."""
    rows = sweep_rows(args.dirs[0])
    tasks, fig, axes = per_task_panels(rows)
    for ax, task in zip(axes[0], tasks):
        of_task = [r for r in rows if r["config"]["task"] == task]
        series = {}
        for r in of_task:
            c = r["config"]
            series.setdefault(f"d_head={c['d_model'] // c['heads']}", {}).setdefault(c["heads"], []).append(r)
            if c["d_model"] == 128:
                series.setdefault("D=128 fixed", {}).setdefault(c["heads"], []).append(r)
        names = sorted((n for n in series if n.startswith("d_head")), key=lambda n: int(n.split("=")[1]))
        for name, colour in zip(names, colours(len(names))):
            if len(series[name]) > 1:
                seed_points_and_mean(ax, {h: [r["result"]["final_loss"] for r in rs] for h, rs in series[name].items()},
                                     colour, name)
        if "D=128 fixed" in series:
            seed_points_and_mean(ax, {h: [r["result"]["final_loss"] for r in rs]
                                      for h, rs in series["D=128 fixed"].items()}, "C3", "D=128, d_head=128/H", "--s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("heads H")
        ax.set_ylabel("final loss (smoothed)")
        if task == "linear-map":
            S = of_task[0]["config"]["S"]
            for (name, paper), marker in zip(PAPER_WIDTH_LINEAR.items(), ["x", "+"]):
                ax.scatter(list(paper), list(paper.values()), marker=marker, color="grey", zorder=4,
                           label=f"paper, {name} (read off its figure)")
            ax.axhline(linear_floor(S), color="grey", ls=":", lw=1, label="floor")
            ax.axhline(math.log(2), color="black", ls="--", lw=1, label="ln 2")
        ax.set_title(f"{TASK_TITLES.get(task, task)}")
        ax.legend(fontsize=7)
    finish(fig, args, "More heads help more than bigger heads (paper Fig. 6)")


def depth(args):
    rows = sweep_rows(args.dirs[0])
    tasks, fig, axes = per_task_panels(rows)
    for ax, task in zip(axes[0], tasks):
        of_task = [r for r in rows if r["config"]["task"] == task]
        points = {}
        for r in of_task:
            points.setdefault(r["config"]["layers"], []).append(r["result"]["final_loss"])
        seed_points_and_mean(ax, points, "C0", "final loss (seeds: dots; mean: line)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(points), [str(L) for L in sorted(points)])
        ax.set_xlabel("layers L")
        ax.set_ylabel("final loss (smoothed)")
        sizes = ", ".join(f"S={S}" for S in sorted({r["config"]["S"] for r in of_task}))
        ax.set_title(f"{TASK_TITLES.get(task, task)} {sizes}")
        ax.legend(fontsize=7)
    finish(fig, args, "Depth: it hurts on the linear map and helps on the automaton (the paper)")


def architectures(args):
    rows = sweep_rows(args.dirs[0])
    panels = sorted({(r["config"]["task"], r["config"].get("s")) for r in rows},
                    key=lambda p: (p[0] != "linear-map", p[1] or 0))
    mixers = sorted({r["config"]["mixer"] for r in rows}, key=lambda m: (m != "dot_attention", m))
    colour = dict(zip(mixers, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.2), squeeze=False)
    for ax, (task, s) in zip(axes[0], panels):
        for mixer in mixers:
            runs = [curve(args.dirs[0], r) for r in rows
                    if r["config"]["task"] == task and r["config"].get("s") == s and r["config"]["mixer"] == mixer]
            if not runs:
                continue
            for steps, loss in runs:
                ax.plot(steps, loss, color=colour[mixer], lw=0.6, alpha=0.4)
            steps, median = median_curve(runs)
            ax.plot(steps, median, color=colour[mixer], lw=2, alpha=0.85, label=f"{mixer} ({len(runs)} seeds)",
                    **distinct_line(mixers.index(mixer), len(mixers), len(steps)))
        S = next(r["config"]["S"] for r in rows if r["config"]["task"] == task)
        if task == "linear-map":
            ax.axhline(linear_floor(S), color="grey", ls=":", lw=1)
        ax.set_title(f"{TASK_TITLES.get(task, task)} S={S}" + (f", s={s}" if s else ""))
        ax.set_xlabel("step")
        ax.set_ylabel("loss (smoothed)")
        ax.legend(fontsize=7)
    finish(fig, args, "Token mixers (paper Fig. 7 and App. B.6)")


def factors_paper_reference(ax, name, xs, common):
    """The paper's plateau for a panel of App. B.4 where its settings are the file's base (those of
    its Fig. 5c): its Fig. 5c values on the S panel; on the others its S = base plateau at the base
    value, and a dashed line at it where App. B.4's text says the factor does not change it."""
    if any(common[n] != v for n, v in PAPER_AUTOMATON_SETTINGS.items()) or common["S"] not in PAPER_PLATEAU:
        return
    if name == "S":
        sizes = [x for x in xs if x in PAPER_PLATEAU]
        ax.scatter(sizes, [PAPER_PLATEAU[x] for x in sizes], marker="x", color="grey", zorder=4,
                   label="paper (Fig. 5c)")
        return
    base = PAPER_PLATEAU[common["S"]]
    if PAPER_FACTORS[name] == "does not change it":
        ax.axhline(base, color="grey", ls="--", lw=1, label=f"paper: no change (its ~{base} at S={common['S']})")
    else:
        ax.scatter([common[name]], [base], marker="x", color="grey", zorder=4,
                   label=f"paper at {FACTOR_SYMBOLS[name]}={common[name]} (Fig. 5c); no numbers for others")


def factors(args):
    """App. B.4: plateau against each automaton setting varied alone (the others at the file's
    most common value), beside the paper's values where it gives them."""
    rows = sweep_rows(args.dirs[0])
    names = [n for n in ("S", "states", "rules", "depth", "colours") if len({r["config"][n] for r in rows}) > 1]
    common = {n: max({r["config"][n] for r in rows}, key=lambda v: sum(r["config"][n] == v for r in rows))
              for n in ("S", "states", "rules", "depth", "colours")}
    groups = summarize(args, args.dirs[0], ["S", "states", "rules", "depth", "colours"])
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 4.6), squeeze=False, sharey=True)
    titles = {"S": "state size S", "states": "trajectory length T", "rules": "rules N",
              "depth": "rule applications k", "colours": "colours C"}
    for ax, name in zip(axes[0], names):
        alone = sorted((g for g in groups if all(g["group"][n] == common[n] for n in common if n != name)),
                       key=lambda g: g["group"][name])
        xs = [g["group"][name] for g in alone]
        for x, g in zip(xs, alone):
            plateau_points(ax, x, g, "C0")
        plateau_median_line(ax, xs, alone, "C0", "Kaplan-Meier median (joined where observed)")
        factors_paper_reference(ax, name, xs, common)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plateau_key(ax, alone)
        ax.set_xticks(xs, [str(x) for x in xs])
        if xs:  # room beside the first and last value for their marks
            ax.set_xlim(xs[0] / 1.4, xs[-1] * 1.4)
        ax.set_xlabel(titles[name])
        ax.set_title(f"paper: {PAPER_FACTORS[name]}", fontsize=8)
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("plateau length (steps)")
    times = [e["steps_done"] if e["censored"] else max(e["emergence_step"], 1) for g in groups for e in g["emergence"]]
    axes[0][0].set_ylim(min(times) / 2, max(times) * 3)  # the budget well inside the axes
    finish(fig, args, "Cellular automaton: what sets the plateau (App. B.4); others at "
           + ", ".join(f"{n}={common[n]}" for n in common))


def batch(args):
    """The batch convention (fixed tokens per step against fixed sequences per step) and the
    measurement (the plateau's end read off the training batch or a fixed held-out set)."""
    rows = sweep_rows(args.dirs[0])
    fig, ax = plt.subplots(figsize=(10, 4.8))
    groups = summarize(args, args.dirs[0], ["S", "bias", "batch_tokens", "eval_every"])

    # A batch_tokens value shared by several S is the fixed-tokens convention; one value per S
    # (batch_tokens = sequences * tokens per sequence, zipped with S) the fixed-sequences one.
    keys = {}
    sizes_per_tokens = {}
    for g in groups:
        sizes_per_tokens.setdefault(g["group"]["batch_tokens"], set()).add(g["group"]["S"])
    for g in groups:
        shared = len(sizes_per_tokens[g["group"]["batch_tokens"]]) > 1
        tokens_per_sequence = g["group"]["S"] * next(r["config"]["states"] for r in rows)
        name = (f"{g['group']['batch_tokens']} tokens per step" if shared
                else f"{g['group']['batch_tokens'] // tokens_per_sequence} sequences per step")
        name += ", read off a fixed held-out set" if g["group"]["eval_every"] else ", read off the batch"
        keys.setdefault((name, g["group"]["bias"]), []).append(g)
    for ((name, bias), of_key), colour, offset in zip(sorted(keys.items()), ["C0", "C1", "C3", "C2", "C4", "C5", "C6"],
                                                     [1.0, 1.05, 1.1, 1.15, 1.2, 1.25, 1.3]):
        of_key.sort(key=lambda g: g["group"]["S"])
        xs = [g["group"]["S"] for g in of_key]
        for x, g in zip(xs, of_key):
            plateau_points(ax, x, g, colour, offset)
        plateau_median_line(ax, xs, of_key, colour, f"{name}, " + ("no bias" if bias == 0 else f"bias {bias:g}"),
                            offset)
    ax.scatter(list(PAPER_PLATEAU), list(PAPER_PLATEAU.values()), marker="x", color="grey", label="paper, no bias")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("state size S")
    ax.set_ylabel("plateau length (first step with loss < 1.3)")
    plateau_key(ax, groups)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    finish(fig, args, "Cellular automaton: plateau against S by batch convention and measurement")


def read_safetensors(path):
    """A safetensors file's F16/F32 tensors as numpy arrays, and its metadata."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    metadata = header.pop("__metadata__", {})
    dtypes = {"F16": np.float16, "F32": np.float32}
    tensors = {name: np.frombuffer(data[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]],
                                   dtype=dtypes[t["dtype"]]).reshape(t["shape"]).astype(np.float32)
               for name, t in header.items()}
    return tensors, metadata


def attention(args):
    """Fig. 4: the maps of every head at each saved step, the true pattern, the entropy curve."""
    run = Path(args.dirs[0])
    snapshots = sorted((run / "attention").glob("step_*.safetensors"))
    if not snapshots:
        raise SystemExit(f"plot.py: {run}/attention: no snapshots (train with --save-attention-at)")
    loaded = [read_safetensors(p) for p in snapshots]
    L, H, T, _ = loaded[0][0]["attention"].shape
    layer = args.layer
    config = json.loads((run / "config.json").read_text())
    fig = plt.figure(figsize=(1.6 * (H + 1), 1.7 * len(loaded) + 3.2))
    grid = fig.add_gridspec(len(loaded) + 1, H + 1, height_ratios=[1] * len(loaded) + [1.6])
    # The queries and keys the true pattern involves (the linear map: x1's predictions against
    # x0), unless --full: the rest of the map is the causal triangle's other rows.
    target = loaded[0][0]["target"]
    rows, cols = np.flatnonzero(target.any(axis=1)), np.flatnonzero(target.any(axis=0))
    box = (slice(None), slice(None)) if args.full or rows.size == 0 else \
        (slice(rows.min(), rows.max() + 1), slice(cols.min(), cols.max() + 1))
    for i, (tensors, meta) in enumerate(loaded):
        for h in range(H):
            ax = fig.add_subplot(grid[i, h])
            ax.imshow(tensors["attention"][layer, h][box], cmap="magma", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if i == 0:
                ax.set_title(f"head {h}", fontsize=8)
            if h == 0:
                ax.set_ylabel(f"step {meta['step']}\nloss {float(meta['loss']):.3f}", fontsize=8)
        ax = fig.add_subplot(grid[i, H])
        ax.imshow(tensors["target"][box], cmap="Greens", vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks([])
        ax.set_yticks([])
        if i == 0:
            ax.set_title("true pattern", fontsize=8)
    rows = read_jsonl(run / "metrics.jsonl")
    analysed = [r for r in rows if "attention_entropy" in r]
    ax = fig.add_subplot(grid[len(loaded), : (H + 1) // 2])
    for h in range(H):
        ax.plot([r["step"] for r in analysed], [r["attention_entropy"][layer][h] for r in analysed], lw=1,
                label=f"head {h}")
    ax.set_xlabel("step")
    ax.set_ylabel("entropy (nats) on target keys")
    ax.legend(fontsize=6, ncol=2)
    ax2 = fig.add_subplot(grid[len(loaded), (H + 1) // 2:])
    metric = next(k for k in rows[0] if k.endswith("_loss") and k != "loss")
    ax2.plot([r["step"] for r in rows], smoothed([r[metric] for r in rows]), color="black", lw=1.2, label=metric)
    ax2.plot([r["step"] for r in rows], smoothed([r["loss"] for r in rows]), color="grey", lw=1, label="loss")
    for tensors, meta in loaded:
        for a in (ax, ax2):
            a.axvline(int(meta["step"]), color="C3", ls=":", lw=1)
    ax2.set_xlabel("step")
    ax2.set_ylabel("loss (smoothed)")
    ax2.legend(fontsize=7)
    task = config["task"]
    shown = "every query and key" if box[0] == slice(None) else \
        f"queries {box[0].start}-{box[0].stop - 1}, keys {box[1].start}-{box[1].stop - 1}"
    finish(fig, args, f"{TASK_TITLES.get(task, task)}: layer {layer}'s heads before and after the jump "
           f"(rows: queries, columns: keys; {shown}; dotted: the saved steps)")


def runs(args):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for folder in args.dirs:
        config = json.loads((Path(folder) / "config.json").read_text())
        rows = read_jsonl(Path(folder) / "metrics.jsonl")
        metric = next(k for k in rows[0] if k.endswith("_loss") and k != "loss")
        steps = [r["step"] for r in rows]
        style = "--" if config.get("bias", 0) else "-"
        axes[0].plot(steps, smoothed([r["loss"] for r in rows]), style, label=Path(folder).name, lw=1)
        axes[1].plot(steps, smoothed([r[metric] for r in rows]), style, label=Path(folder).name, lw=1)
        axes[1].set_title(metric)
    axes[0].set_title("loss (full sequence)")
    for ax in axes:
        ax.set_xlabel("step")
        ax.set_ylabel("loss (smoothed)")
        ax.legend(fontsize=7)
    finish(fig, args, "")

def spt_condition(config):
    """The condition of a self-pretraining run, from its config."""
    if config["warm_start"]:
        return {"qk": "QK transplant", "all_but_qk": "all but QK transplant"}.get(config["take"], "warm start")
    if config["pretrain_steps"] > 0:
        return "SPT"
    if config["learn_slopes"]:
        return "learned proximity slope"
    if config["proximity_bias"]:
        return f"fixed proximity bias {config['proximity_bias']:g}"
    return "supervised"


def spt_runs(folders):
    """(condition, config, metrics rows, finished, step offset) of every run folder that has rows;
    warm-started runs are offset by their source checkpoint's step, the budget spent before them."""
    out = []
    for folder in folders:
        for run in sorted((Path(folder) / "runs").glob("*")):
            if not (run / "metrics.jsonl").exists():
                continue
            config = json.loads((run / "config.json").read_text())
            rows = read_jsonl(run / "metrics.jsonl")
            if not rows:
                continue
            offset = 0
            if config["warm_start"]:
                offset = int(Path(config["warm_start"]).stem.split("_")[-1])
            out.append((spt_condition(config), config, rows, (run / "summary.json").exists(), offset))
    if not out:
        raise SystemExit(f"plot.py: {folders}: no self-pretraining runs with metrics")
    return out


def spt(args):
    """Self-pretraining on ListOps: does SPT, a transplant or a proximity bias beat supervision?"""
    runs_ = spt_runs(args.dirs)
    order = ["supervised", "SPT", "QK transplant", "all but QK transplant", "learned proximity slope"]
    conditions = sorted({r[0] for r in runs_}, key=lambda c: (order.index(c) if c in order else 9, c))
    colour = dict(zip(conditions, DISTINCT_COLOURS))

    def marks(c, points, places=8):  # the condition's line style and markers (distinct_line)
        return distinct_line(conditions.index(c), len(conditions), points, places)
    fig, axes = plt.subplots(2, 3, figsize=(17, 8.5))
    ax_curve, ax_final, ax_proximity, ax_blind, ax_mass, ax_form = axes.flat
    table = []
    for c in conditions:
        members = [r for r in runs_ if r[0] == c]
        curves = []
        for _, config, rows, finished, offset in members:
            label_rows = [r for r in rows if r["stage"] == "label"]
            steps = [r["step"] + offset for r in label_rows]
            acc = [r["test_accuracy"] for r in label_rows]
            ax_curve.plot(steps, acc, color=colour[c], lw=0.7, alpha=0.5)
            curves.append((steps, acc))
            prox = [np.mean(r["proximity"][0]) for r in rows]
            ax_proximity.plot([r["step"] + offset for r in rows], prox, color=colour[c], lw=1, alpha=0.8,
                              **marks(c, len(rows)))
        if curves and all(len(cv[0]) == len(curves[0][0]) for cv in curves):
            ax_curve.plot(curves[0][0], np.mean([cv[1] for cv in curves], axis=0), color=colour[c], lw=2.2,
                          label=f"{c} ({len(members)} seeds)", **marks(c, len(curves[0][0])))
        else:
            ax_curve.plot([], [], color=colour[c], lw=2.2, label=f"{c} ({len(members)} runs)", **marks(c, 1))
        finished = [m for m in members if m[3]]
        train = [m[2][-1]["train_accuracy"] for m in finished]
        test = [m[2][-1]["test_accuracy"] for m in finished]
        x = conditions.index(c)
        marker = marks(c, 1)["marker"]
        ax_final.scatter([x - 0.12] * len(train), train, marker=marker, facecolors="none", edgecolors=colour[c], s=30)
        ax_final.scatter([x + 0.12] * len(test), test, marker=marker, color=colour[c], s=30)
        if test:
            ax_final.errorbar([x + 0.12], [np.mean(test)], yerr=[np.std(test)], color="k", capsize=3, lw=1)
        table.append((c, len(finished), len(members), train, test))
        # Profiles against the offset j - i, layer 0, mean over heads and seeds: first row dashed,
        # last row solid.
        if finished:
            width = len(finished[0][2][0]["mass_profile"][0][0])
            offsets = np.arange(width) - width // 2
            for index, style in ((0, "--"), (-1, "-")):
                mass = np.mean([np.mean(m[2][index]["mass_profile"][0], axis=0) for m in finished], axis=0)
                form = np.mean([np.mean(m[2][index]["position_form"], axis=0) for m in finished], axis=0)
                ax_mass.plot(offsets, mass, color=colour[c], lw=1.2, label=c if index == -1 else None,
                             **{**marks(c, width), "ls": style})
                ax_form.plot(offsets, form, color=colour[c], lw=1.2, **{**marks(c, width), "ls": style})
        for _, config, rows, finished_, offset in members:
            for key, style in (("d_label_d_proximity", "-"), ("d_reconstruction_d_proximity", ":")):
                ys = [np.mean(np.abs(np.array(r[key]))) for r in rows]
                ax_blind.plot([r["step"] + offset for r in rows], ys, color=colour[c], lw=0.8, alpha=0.7,
                              **{**marks(c, len(rows), 4), "ls": style, "ms": 3})
    ax_curve.set_title("test accuracy (label stage; x: all updates, pretraining included)", fontsize=10)
    ax_curve.set_xlabel("update")
    ax_curve.set_ylabel("accuracy")
    ax_curve.axhline(0.1, color="grey", lw=0.6, ls="--")
    ax_curve.legend(fontsize=7)
    ax_final.set_xticks(range(len(conditions)))
    ax_final.set_xticklabels(conditions, rotation=20, fontsize=7)
    ax_final.set_title("final accuracy per seed: train (open), test (filled, mean +- sd)", fontsize=10)
    ax_final.axhline(0.1, color="grey", lw=0.6, ls="--")
    ax_proximity.set_title("layer-0 proximity, mean over heads (0: uniform attention)", fontsize=10)
    ax_proximity.set_xlabel("update")
    ax_blind.set_yscale("log")
    ax_blind.set_title("|dL/da| along a f(j - i), mean over heads:\nlabel loss (solid), reconstruction loss (dotted)", fontsize=9)
    ax_blind.set_xlabel("update")
    ax_mass.set_title("attention mass against j - i, layer 0 (first row dashed, last solid)", fontsize=9)
    ax_mass.set_xlabel("j - i")
    ax_mass.set_yscale("log")
    ax_mass.legend(fontsize=7)
    ax_form.set_title("position-position form p_i W_Q^T W_K p_j against j - i, layer 0", fontsize=9)
    ax_form.set_xlabel("j - i")
    for ax in (ax_curve, ax_proximity, ax_blind, ax_mass, ax_form):
        ax.grid(alpha=0.3)
    finish(fig, args, "Self-pretraining on ListOps")
    def stat(v, digits=3):
        return (f"{np.mean(v):.{digits}f} +- {np.std(v):.{digits}f} ({', '.join(f'{x:.{digits}f}' for x in v)})"
                if v else "-")
    print("| condition | finished runs | train accuracy | test accuracy |")
    print("|---|---|---|---|")
    for c, done, total, train, test in table:
        print(f"| {c} | {done} of {total} | {stat(train)} | {stat(test)} |")
    # Proximity and the blindness measurement at the first and the last row of each finished run
    # (the first row is after one update: the init, to first order).
    print("\n| condition | layer-0 proximity, first row | last row | mean abs d(label loss)/da, first | last "
          "| mean abs d(reconstruction loss)/da, first | last |")
    print("|---|---|---|---|---|---|---|")
    for c in conditions:
        done = [m for m in runs_ if m[0] == c and m[3]]
        if not done:
            continue
        def at(index, key, layer=None):
            values = []
            for m in done:
                v = np.array(m[2][index][key])
                values.append(float(np.mean(v[layer] if layer is not None else np.abs(v))))
            return values
        print(f"| {c} | {stat(at(0, 'proximity', 0))} | {stat(at(-1, 'proximity', 0))} "
              f"| {stat(at(0, 'd_label_d_proximity'), 4)} | {stat(at(-1, 'd_label_d_proximity'), 4)} "
              f"| {stat(at(0, 'd_reconstruction_d_proximity'), 4)} | {stat(at(-1, 'd_reconstruction_d_proximity'), 4)} |")


# ----------------------------------------------------------------- pre-pretraining (stage 2)
# The statistics of experiment/ensemble_statistics.hpp, written again here for groups that
# `sweep summarize` does not form (a condition named by the last component of init_from, over
# several sweep folders). Same conventions: a run censored at t is at risk at t, the median is the
# first time with S <= 0.5, its interval Brookmeyer-Crowley on the log band (R's default).
Z95 = 1.959963984540054


def wilson(successes, trials, z=Z95):
    """(share, low, high): the Wilson score interval."""
    if trials == 0:
        return math.nan, 0.0, 1.0
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z / denominator * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials))
    return (share, 0.0 if successes == 0 else max(0.0, centre - half),
            1.0 if successes == trials else min(1.0, centre + half))


def kaplan_meier(runs):
    """runs: [(time, event)]. One row (time, at risk, events, censored, S) per distinct time."""
    out, at_risk, survival = [], len(runs), 1.0
    for t in sorted({r[0] for r in runs}):
        events = sum(1 for r in runs if r[0] == t and r[1])
        censored = sum(1 for r in runs if r[0] == t and not r[1])
        if events:
            survival *= (at_risk - events) / at_risk
        out.append((t, at_risk, events, censored, survival))
        at_risk -= events + censored
    return out


def km_median(runs, z=Z95):
    """(median, low, high), None where not reached: the first time the curve (its log band's
    lower and upper end) is <= 0.5; the band is undefined where S = 0, as in R."""
    curve = kaplan_meier(runs)
    greenwood, lower, upper = 0.0, [], []
    for t, n, d, _, s in curve:
        if 0 < d < n:
            greenwood += d / (n * (n - d))
        se = math.sqrt(greenwood)
        lower.append(s * math.exp(-z * se) if s > 0 else math.nan)
        upper.append(min(1.0, s * math.exp(z * se)) if s > 0 else math.nan)
    tolerance = 1.4901161193847656e-08

    def first(values):
        return next((row[0] for row, v in zip(curve, values) if v <= 0.5 + tolerance), None)
    return first([row[4] for row in curve]), first(lower), first(upper)


def chi_square_sf(x, df):
    """P(chi-square(df) >= x) for integer df >= 1, in closed form: Q(k, y) = e^-y sum_{i<k} y^i/i!
    for even df = 2k, and erfc(sqrt y) + e^-y sum_{i=1}^{k} y^(i-1/2) / Gamma(i+1/2) for odd
    df = 2k + 1 (y = x / 2)."""
    if x <= 0:
        return 1.0
    y = x / 2
    if df % 2 == 0:
        term, total = 1.0, 1.0
        for i in range(1, df // 2):
            term *= y / i
            total += term
        return math.exp(-y) * total
    term, total = math.sqrt(y) / math.gamma(1.5), 0.0
    for i in range(1, (df - 1) // 2 + 1):
        total += term
        term *= y / (i + 0.5)
    return math.erfc(math.sqrt(y)) + math.exp(-y) * total


def log_rank(groups):
    """The log-rank test of groups of [(time, event)]: (statistic, df, p, observed, expected), as
    log_rank_test of ensemble_statistics.hpp (hypergeometric variance at ties; df the rank of V;
    nothing to compare: 0, 0, 1)."""
    G = len(groups)
    at_risk = [len(g) for g in groups]
    observed, expected = [0] * G, [0.0] * G
    V = np.zeros((G, G))
    pooled = sorted((t, g, e) for g, runs in enumerate(groups) for t, e in runs)
    times = sorted({p[0] for p in pooled})
    for t in times:
        d_g = [sum(1 for p in pooled if p[0] == t and p[1] == g and p[2]) for g in range(G)]
        c_g = [sum(1 for p in pooled if p[0] == t and p[1] == g and not p[2]) for g in range(G)]
        n, d = sum(at_risk), sum(d_g)
        if d:
            for g in range(G):
                observed[g] += d_g[g]
                expected[g] += d * at_risk[g] / n
            if 1 < n and d < n:
                scale = d * (n - d) / ((n - 1) * n * n)
                for g in range(G):
                    for h in range(G):
                        V[g, h] += scale * (at_risk[g] * (n - at_risk[g]) if g == h else -at_risk[g] * at_risk[h])
        at_risk = [a - dd - cc for a, dd, cc in zip(at_risk, d_g, c_g)]
    z = np.array(observed, dtype=float) - np.array(expected)
    start, done, statistic, rank = V.diagonal().copy(), [False] * G, 0.0, 0
    while True:
        candidates = [g for g in range(G) if not done[g] and V[g, g] > 1e-10 * start[g] and V[g, g] > 0]
        if not candidates:
            break
        p = max(candidates, key=lambda g: V[g, g])
        done[p], rank = True, rank + 1
        statistic += z[p] ** 2 / V[p, p]
        for g in range(G):
            if not done[g]:
                factor = V[g, p] / V[p, p]
                z[g] -= factor * z[p]
                V[g, :] -= factor * V[p, :]
    if rank == 0:
        return 0.0, 0, 1.0, observed, expected
    return statistic, rank, chi_square_sf(statistic, rank), observed, expected


def ppt_condition(init_from):
    """The pre-pretraining of a stage-2 run: "none" for an empty init_from, else the last
    component of the path it names ('runs/ppt-dyck', 'runs/figures/prepretraining-1-dyck-small'
    -> 'dyck'; a run folder or checkpoint inside
    a sweep folder, '.../ppt-dyck/runs/<id>/step_000100.safetensors', names that sweep folder)."""
    if not init_from:
        return "none"
    parts = [p for p in init_from.replace("\\", "/").split("/") if p not in ("", ".")]
    if parts and parts[-1].endswith(".safetensors"):
        parts.pop()
    if len(parts) >= 3 and parts[-2] == "runs":
        parts = parts[:-2]
    name = parts[-1] if parts else init_from
    # The stage-1 sweep's name less what all conditions share: "ppt-", "prepretraining-1-" and
    # "-small" / "-full" (sweeps/prepretraining-1-dyck-small.toml -> dyck).
    short = re.sub(r"^(ppt|pre-?pretraining)(-\d+)?[-_]", "", name)
    short = re.sub(r"[-_](small|full)$", "", short)
    return short or name


def prepretraining(args):
    """Pre-pretraining: does a first stage on another task (init_from) make the real task emerge
    sooner? Left: Kaplan-Meier curves of the share of runs that have not yet reached --event
    (default solved: at a hard linear map the loss leaves ln 2 within 100 steps in every run, so
    the emergence step says little), per condition; right:
    the solved share with 95% Wilson intervals. Prints the table and the log-rank test."""
    rows = [r for folder in args.dirs for r in sweep_rows(folder)]
    for r in rows:
        if "emergence_step" not in r["result"] or "solved_step" not in r["result"]:
            raise SystemExit(f"plot.py prepretraining: run {r['id']} has no emergence steps "
                             "(a self-pretraining run? plot.py spt)")
    tasks = sorted({r["config"].get("task", "") for r in rows})

    def label(r):
        condition = ppt_condition(r["config"].get("init_from", ""))
        return (r["config"].get("task", ""), condition)
    keys = sorted({label(r) for r in rows}, key=lambda k: (k[0], k[1] != "none", k[1]))
    names = {k: (f"{k[0]}: {k[1]}" if len(tasks) > 1 else k[1]) for k in keys}
    colour = dict(zip(keys, colours(len(keys)) if len(keys) > 2 else ["C0", "C3"]))
    fig, (ax_km, ax_solved) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    table, outcomes = [], {}
    event = f"{args.event}_step"

    def times_of(members, column):  # (step, True) where the run reached it, else censored
        return [(m["steps_done"], False) if m.get(column) is None else (m[column], True) for m in members]
    for x, k in enumerate(keys):
        members = [r["result"] for r in rows if label(r) == k]
        runs_ = times_of(members, event)
        outcomes[k] = runs_
        curve = kaplan_meier(runs_)
        median, low, high = km_median(runs_)
        steps = [0] + [row[0] for row in curve]
        survival = [1.0] + [row[4] for row in curve]
        text = "not reached" if median is None else f"{median:g}"
        ax_km.step(steps, survival, where="post", color=colour[k], lw=1.8,
                   label=f"{names[k]} (n={len(runs_)}, median {text})")
        cx = [row[0] for row in curve if row[3]]
        cy = [row[4] for row in curve if row[3]]
        ax_km.scatter(cx, cy, marker="+", color=colour[k], s=70, zorder=3)
        if median is not None:
            ax_km.axvline(median, color=colour[k], ls="--", lw=1)
        solved = sum(1 for m in members if m["solved_step"] is not None)
        share, s_low, s_high = wilson(solved, len(members))
        ax_solved.errorbar([x], [share], yerr=[[share - s_low], [s_high - share]], fmt="o",
                           color=colour[k], ms=6, capsize=4)
        table.append((names[k], len(runs_), sum(1 for _, e in runs_ if e), median, low, high,
                      solved, share, s_low, s_high))
    ax_km.axhline(0.5, color="grey", ls=":", lw=0.8)
    ax_km.set_ylim(-0.03, 1.03)
    ax_km.set_xlabel("step")
    ax_km.set_ylabel(f"share of runs without {args.event} step yet")
    # One log-rank test across the conditions of each task.
    tests = []
    for task in tasks:
        of_task = [k for k in keys if k[0] == task]
        if len(of_task) < 2:
            continue
        statistic, df, p, _, _ = log_rank([outcomes[k] for k in of_task])
        where = f" ({task})" if len(tasks) > 1 else ""
        line = (f"log-rank test of the {args.event} steps across the {len(of_task)} conditions{where}: "
                + (f"chi-square {statistic:.3f}, df {df}, p = {p:.3g}" if df else "nothing to compare, p = 1"))
        try:
            from lifelines.statistics import multivariate_logrank_test
            times = [t for k in of_task for t, _ in outcomes[k]]
            events = [e for k in of_task for _, e in outcomes[k]]
            groups = [i for i, k in enumerate(of_task) for _ in outcomes[k]]
            check = multivariate_logrank_test(times, groups, events)
            line += (f" (lifelines: chi-square {check.test_statistic:.3f}, df {check.degrees_of_freedom}, "
                     f"p = {check.p_value:.3g})")
        except ImportError:
            pass
        tests.append((where, p, line))
    ax_km.set_title("Kaplan-Meier (+: censored; dashed: median)"
                    + "".join(f"\nlog-rank{where}: p = {p:.3g}" for where, p, _ in tests), fontsize=10)
    ax_km.legend(fontsize=7)
    ax_solved.set_xticks(range(len(keys)))
    ax_solved.set_xticklabels([names[k] for k in keys], rotation=20, fontsize=8)
    ax_solved.set_xlim(-0.5, len(keys) - 0.5)
    ax_solved.set_ylim(-0.05, 1.05)
    ax_solved.set_ylabel("share of runs solved")
    ax_solved.set_title("solved share, 95% Wilson interval", fontsize=10)
    for ax in (ax_km, ax_solved):
        ax.grid(alpha=0.3)
    finish(fig, args, "Pre-pretraining: emergence of the real task per first stage")

    def step(v):
        return "not reached" if v is None else f"{v:g}"
    print(f"| condition | runs | reached | KM median {args.event} step [95% CI] | solved share [95% Wilson] |")
    print("|---|---|---|---|---|")
    for name, n, emerged, median, low, high, solved, share, s_low, s_high in table:
        print(f"| {name} | {n} | {emerged} | {step(median)} [{step(low)}, {step(high)}] "
              f"| {solved}/{n} = {share:.2f} [{s_low:.2f}, {s_high:.2f}] |")
    for _, _, line in tests:
        print(line)
    # The other events' medians and tests, in text: each step of analysis/emergence.hpp.
    for other in ("emergence", "midpoint", "solved"):
        if other == args.event:
            continue
        column = f"{other}_step"
        print(f"\n{other} step: " + "; ".join(
            f"{names[k]} KM median {step(km_median(times_of([r['result'] for r in rows if label(r) == k], column))[0])}"
            for k in keys))
        for task in tasks:
            of_task = [k for k in keys if k[0] == task]
            if len(of_task) >= 2:
                statistic, df, p, _, _ = log_rank(
                    [times_of([r["result"] for r in rows if label(r) == k], column) for k in of_task])
                print(f"log-rank test of the {other} steps: chi-square {statistic:.3f}, df {df}, p = {p:.3g}")


# ----------------------------------------------------------------- the suite trained here
# docs/mini-suite.md: rows of scripts/mini_suite.py evaluate (<sweep>/evaluation.jsonl), one per
# (size, seed), each kind's binary-search emergence step, its curve and its patching.
def minisuite_rows(paths):
    rows = []
    for path in paths:
        file = path if path.endswith(".jsonl") else os.path.join(path, "evaluation.jsonl")
        with open(file) as f:
            rows += [json.loads(line) for line in f if line.strip()]
    if not rows:
        sys.exit("plot minisuite: no evaluated runs (run scripts/mini_suite.py evaluate first)")
    return rows


def minisuite_size(row):
    c = row["config"]
    return (c["d_model"], c["layers"], f"{c['layers']} x {c['d_model']}")


def minisuite(args):
    rows = minisuite_rows(args.dirs)
    kinds = list(rows[0]["kinds"])
    sizes = sorted({minisuite_size(r) for r in rows})
    last = max(r["config"]["steps"] for r in rows)
    colors = plt.cm.viridis([0.1, 0.5, 0.85])
    base = os.path.splitext(args.out)[0]

    # Fig. 1 analogue: each seed's emergence step per size (censored: an arrow at the last step),
    # the Kaplan-Meier median, and the share of seeds that solve with a Wilson interval.
    fig, axes = plt.subplots(2, len(kinds), figsize=(3.6 * len(kinds), 6.4), sharex=True)
    table = []
    for col, kind in enumerate(kinds):
        top, bottom = axes[0][col], axes[1][col]
        for i, size in enumerate(sizes):
            of_size = [r for r in rows if minisuite_size(r) == size]
            times = []
            for r in of_size:
                k = r["kinds"][kind]
                step = k["emergence_step"]
                event = step is not None
                times.append((step if event else last, event))
                jitter = (r["config"]["seed"] - 3.5) * 0.025
                if event:
                    top.plot(i + jitter, max(step, 0.5), "o", color=colors[i], ms=4)
                else:
                    top.annotate("", (i + jitter, last * 1.9), (i + jitter, last),
                                 arrowprops=dict(arrowstyle="->", color=colors[i], lw=0.8))
            median, low, high = km_median(times)
            if median is not None:
                top.plot([i - 0.3, i + 0.3], [median, median], color="k", lw=2)
            solved = sum(1 for _, e in times if e)
            share, s_low, s_high = wilson(solved, len(times))
            bottom.errorbar(i, share, yerr=[[share - s_low], [s_high - share]], fmt="o",
                            color=colors[i], capsize=4)
            rises = [minisuite_rise(r["kinds"][kind]["curve"]) for r in of_size]
            rises = [x for x in rises if x is not None]
            table.append((kind, size[2], len(times), solved, share, s_low, s_high, median, low,
                          high, sorted(t for t, e in times if e), statistics.median(rises) if rises else None,
                          sum(1 for r in of_size if not r["kinds"][kind]["monotone"])))
        top.set_yscale("log")
        top.set_ylim(0.5, last * 2.2)
        top.set_title(kind)
        top.grid(alpha=0.3)
        bottom.set_ylim(-0.05, 1.05)
        bottom.set_xticks(range(len(sizes)), [s[2] for s in sizes])
        bottom.grid(alpha=0.3)
        if col == 0:
            top.set_ylabel("emergence step (binary search)")
            bottom.set_ylabel("share of seeds that solve")
    for ax in axes[1]:
        ax.set_xlabel("layers x d_model")
    finish(fig, args, "Emergence in the suite trained here: each seed (dot; arrow: not by step "
           f"{last}), Kaplan-Meier median (bar), solve share (95% Wilson)")

    # p(target) of every seed across checkpoints, per size and kind.
    fig, axes = plt.subplots(len(sizes), len(kinds), figsize=(3.6 * len(kinds), 2.6 * len(sizes)),
                             sharex=True, sharey=True, squeeze=False)
    for i, size in enumerate(sizes):
        for col, kind in enumerate(kinds):
            ax = axes[i][col]
            for r in rows:
                if minisuite_size(r) != size:
                    continue
                curve = r["kinds"][kind]["curve"]
                ax.plot([max(p["step"], 0.5) for p in curve], [p["mean_p_target"] for p in curve],
                        color=colors[i], alpha=0.7, lw=1)
            ax.set_xscale("log")
            ax.grid(alpha=0.3)
            if i == 0:
                ax.set_title(kind)
            if col == 0:
                ax.set_ylabel(f"{size[2]}\nmean p(target)")
            if i == len(sizes) - 1:
                ax.set_xlabel("step")
    args_curves = argparse.Namespace(**{**vars(args), "out": base + "-curves.png"})
    finish(fig, args_curves, "p(target) over 64 prompts a kind, every seed, every checkpoint")

    # Patching: top-K recovery per size, mean over the seeds where the kind emerged.
    patched = [(r, kind) for r in rows for kind in kinds if "patch" in r["kinds"][kind]]
    if patched:
        fig, axes = plt.subplots(1, len(kinds), figsize=(3.6 * len(kinds), 3.2), sharey=True)
        print("\n| kind | size | seeds patched | recovery at K = 1, 2, 4, 8, 16 (mean) | top heads (seed: best two) |")
        print("|---|---|---|---|---|")
        for col, kind in enumerate(kinds):
            ax = axes[col]
            for i, size in enumerate(sizes):
                of = [r["kinds"][kind]["patch"] for r, k in patched if k == kind and minisuite_size(r) == size]
                if not of:
                    continue
                ks = [t["k"] for t in of[0]["top_k"]]
                means = [statistics.mean(p["top_k"][j]["recovery"] for p in of
                                         if j < len(p["top_k"]) and p["top_k"][j]["recovery"] is not None)
                         for j in range(len(ks))]
                for p in of:
                    ax.plot([t["k"] for t in p["top_k"]], [t["recovery"] for t in p["top_k"]],
                            color=colors[i], alpha=0.25, lw=0.8)
                ax.plot(ks, means, "o-", color=colors[i], label=size[2])
                seeds = [r for r, k in patched if k == kind and minisuite_size(r) == size]
                heads = "; ".join(f"{r['config']['seed']}: {', '.join(h['name'] for h in r['kinds'][kind]['patch']['heads'][:2])}"
                                  for r in seeds)
                print(f"| {kind} | {size[2]} | {len(of)} | {', '.join(f'{m:.2f}' for m in means)} | {heads} |")
            ax.set_xscale("log", base=2)
            ax.set_title(kind)
            ax.set_xlabel("K heads patched")
            ax.axhline(1, color="gray", lw=0.8, ls="--")
            ax.grid(alpha=0.3)
        axes[0].set_ylabel("recovery of the p(target) gap")
        axes[0].legend(fontsize=8)
        args_patch = argparse.Namespace(**{**vars(args), "out": base + "-patching.png"})
        finish(fig, args_patch, "Attention patterns of the last checkpoint patched into the last "
               "one before emergence: top-K heads")
        minisuite_attention(args, rows, kinds, base)

    def step(v):
        return "-" if v is None else f"{v:g}"
    print("\n| kind | size | seeds | solved [95% Wilson] | KM median emergence step [95% CI] | emergence steps | median rise (steps, acc <= 0.1 to >= 0.9) | non-monotone curves |")
    print("|---|---|---|---|---|---|---|---|")
    for kind, size, n, solved, share, s_low, s_high, median, low, high, steps, rise, bumpy in table:
        print(f"| {kind} | {size} | {n} | {solved}/{n} = {share:.2f} [{s_low:.2f}, {s_high:.2f}] "
              f"| {step(median)} [{step(low)}, {step(high)}] | {', '.join(f'{s:g}' for s in steps) or '-'} "
              f"| {step(rise)} | {bumpy} |")
    for kind in kinds:
        groups = []
        for size in sizes:
            groups.append([(r["kinds"][kind]["emergence_step"] if r["kinds"][kind]["emergence_step"] is not None else last,
                            r["kinds"][kind]["emergence_step"] is not None)
                           for r in rows if minisuite_size(r) == size])
        if sum(e for g in groups for _, e in g) > 0:
            statistic, df, p, _, _ = log_rank(groups)
            print(f"{kind}: log-rank test across sizes: chi-square {statistic:.3f}, df {df}, p = {p:.3g}")


def minisuite_rise(curve):
    """Steps from the last checkpoint with accuracy <= 0.1 before the first with >= 0.9 to that
    one: how abrupt the rise is (None when it never reaches 0.9 or starts above 0.1)."""
    for j, p in enumerate(curve):
        if p["accuracy"] >= 0.9:
            before = [q for q in curve[:j] if q["accuracy"] <= 0.1]
            return p["step"] - before[-1]["step"] if before else None
    return None


def minisuite_attention(args, rows, kinds, base):
    """Attention maps of the two top heads of one seed per size, before and after emergence, on
    the first prompt of the kind (emergent pythia attention)."""
    picks = []
    for r in sorted(rows, key=lambda r: (minisuite_size(r), r["config"]["seed"])):
        for kind in kinds:
            if "patch" in r["kinds"][kind] and all(minisuite_size(r) != minisuite_size(q) for q, _ in picks):
                picks.append((r, kind))
                break
    sweep = next(d for d in args.dirs if not d.endswith(".jsonl"))
    maps = []
    for r, kind in picks:
        patch = r["kinds"][kind]["patch"]
        heads = [h["name"] for h in patch["heads"][:2]]
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            subprocess.run([args.emergent, "pythia", "attention", "--suite", os.path.join(sweep, "runs", r["id"]),
                            "--steps", f"{patch['pre_step']},{patch['post_step']}", "--kind", kind,
                            "--heads", ",".join(heads), "--json", out.name],
                           check=True, capture_output=True)
            with open(out.name) as f:
                maps.append((r, kind, json.load(f)))
    if not maps:
        return
    fig, axes = plt.subplots(len(maps), 4, figsize=(12, 3.1 * len(maps)), squeeze=False)
    for i, (r, kind, data) in enumerate(maps):
        for j, (checkpoint, head) in enumerate((c, h) for h_index in range(2) for c in data["checkpoints"]
                                               for h in [c["heads"][h_index]] if h_index < len(c["heads"])):
            if j >= 4:
                break
            ax = axes[i][j]
            ax.imshow(np.array(head["pattern"]), cmap="Blues", vmin=0, vmax=1)
            ax.set_title(f"{minisuite_size(r)[2]} seed {r['config']['seed']} {kind}\n"
                         f"{head['name']} step {checkpoint['step']}", fontsize=8)
            ax.set_xlabel("key")
            ax.set_ylabel("query")
    args_maps = argparse.Namespace(**{**vars(args), "out": base + "-attention.png"})
    finish(fig, args_maps, "Top heads before and after emergence (first prompt of the kind)")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = {"sparsity": sparsity, "curves": curves, "plateau": plateau, "width": width, "depth": depth,
                "architectures": architectures, "factors": factors, "batch": batch, "attention": attention,
                "runs": runs, "spt": spt, "prepretraining": prepretraining,
                "minisuite": minisuite}
    parser.add_argument("command", choices=sorted(commands))
    parser.add_argument("dirs", nargs="+", help="sweep folders (run folders for attention and runs)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--emergent", default="build/emergent")
    parser.add_argument("--title", default="")
    parser.add_argument("--layer", type=int, default=0, help="attention: the layer drawn")
    parser.add_argument("--event", default="solved", choices=["emergence", "midpoint", "solved"],
                        help="prepretraining: the step whose Kaplan-Meier curves are drawn (the others "
                             "are printed)")
    parser.add_argument("--full", action="store_true", help="attention: the whole map, not only the "
                        "queries and keys of the true pattern")
    args = parser.parse_args()
    commands[args.command](args)


if __name__ == "__main__":
    main()
