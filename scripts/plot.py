#!/usr/bin/env python3
"""Plots of emergent run folders (matplotlib; Debian's python3-matplotlib).

    python3 scripts/plot.py curves --out curves.png runs/a runs/b ...   x1 loss and full loss vs step
    python3 scripts/plot.py sparsity --out sparsity.png runs/sparsity_S8 runs/sparsity_S16
                                         final full-sequence loss against s/S (paper Fig. 4 left)
    python3 scripts/plot.py plateau --out plateau.png runs/ca_context_length/results.jsonl
                                         CA plateau length against S, with and without the bias
    python3 scripts/plot.py architectures --out arch.png runs/architectures/results.jsonl
                                         loss curves per token mixer, one panel per task (Fig. 7)
"""
import argparse
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_metrics(folder):
    rows = [json.loads(line) for line in (Path(folder) / "metrics.jsonl").read_text().splitlines() if line]
    return rows


def curves(args):
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for folder in args.runs:
        config = json.loads((Path(folder) / "config.json").read_text())
        rows = read_metrics(folder)
        steps = [r["step"] for r in rows]
        label = f"{Path(folder).name}"
        style = "--" if config.get("bias", 0) else "-"
        axes[0].plot(steps, [r["loss"] for r in rows], style, label=label, lw=1)
        axes[1].plot(steps, [r["x1_loss"] for r in rows], style, label=label, lw=1)
        S = config["S"]
        floor = (S - 1) / (2 * S - 1) * math.log(2)
    axes[0].axhline(floor, color="grey", ls=":", lw=1, label=f"floor (S-1)/(2S-1) ln2 = {floor:.4f}")
    axes[0].set_title("full-sequence loss (what the paper plots)")
    axes[1].axhline(math.log(2), color="grey", ls=":", lw=1, label="ln 2")
    axes[1].set_title("loss on the x1 half")
    for ax in axes:
        ax.set_xscale("symlog", linthresh=100)
        ax.set_xlim(left=0)
        ax.set_xlabel("step")
        ax.set_ylabel("loss (nats)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def sparsity(args):
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for sweep in args.sweeps:
        points = []
        for run in sorted(Path(sweep).glob("s*_seed*")):
            summary_path = run / "summary.json"
            if not summary_path.exists():
                continue
            config = json.loads((run / "config.json").read_text())
            summary = json.loads(summary_path.read_text())
            points.append((config["s"] / config["S"], summary["final_loss"]))
        if not points:
            continue
        points.sort()
        S = json.loads((next(Path(sweep).glob("s*_seed*")) / "config.json").read_text())["S"]
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", label=f"S={S}")
        ax.axhline((S - 1) / (2 * S - 1) * math.log(2), color="grey", ls=":", lw=1)
    ax.axhline(math.log(2), color="black", ls="--", lw=1, label="ln 2 (chance)")
    ax.set_xlabel("s / S")
    ax.set_ylabel("final full-sequence loss (smoothed)")
    ax.set_title("linear map: sparsity (dotted: floors (S-1)/(2S-1) ln 2)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def plateau(args):
    rows = [json.loads(line) for line in Path(args.results).read_text().splitlines() if line]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for biased, style, label in ((False, "o-", "no bias"), (True, "s--", "attention bias")):
        by_size = {}
        for r in rows:
            if (r["bias"] != 0) == biased:
                value = r["plateau_length"] if r["plateau_length"] is not None else r["steps_done"]
                by_size.setdefault(r["S"], []).append((value, r["plateau_length"] is None))
        sizes = sorted(by_size)
        means = [sum(v for v, _ in by_size[S]) / len(by_size[S]) for S in sizes]
        ax.plot(sizes, means, style, label=label)
        for S in sizes:
            for value, censored in by_size[S]:
                ax.scatter([S], [value], marker="^" if censored else ".", color="grey", zorder=3)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("state size S")
    ax.set_ylabel("plateau length (steps to smoothed loss < 1.3)")
    ax.set_title("cellular automaton (^: censored at the step budget)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


def architectures(args):
    results = Path(args.results)
    rows = [json.loads(line) for line in results.read_text().splitlines() if line]
    panels = sorted({r["run"].split("_")[0] + ("_" + r["run"].split("_")[1] if r["task"] == "linear-map" else "")
                     for r in rows}, key=lambda p: (p == "ca", p))  # the automaton last
    mixers = sorted({r["mixer"] for r in rows})
    colours = dict(zip(mixers, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        labelled = set()
        for r in rows:
            if not r["run"].startswith(panel + "_"):
                continue
            metrics = read_metrics(results.parent / r["run"])
            steps = [m["step"] for m in metrics]
            loss = [m["loss"] for m in metrics]
            smooth = [sum(loss[max(0, i - 4):i + 1]) / len(loss[max(0, i - 4):i + 1]) for i in range(len(loss))]
            label = None if r["mixer"] in labelled else f'{r["mixer"]} ({r["parameters"] / 1000:.0f}k)'
            labelled.add(r["mixer"])
            ax.plot(steps, smooth, color=colours[r["mixer"]], lw=1.2, label=label)
        title = panel.replace("linmap_s", "linear map S=16, s=") if panel.startswith("linmap") else "cellular automaton S=16"
        ax.set_title(title)
        ax.set_xlabel("step")
        ax.set_ylabel("loss (full sequence)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("curves", help="loss curves of run folders")
    p.add_argument("--out", required=True)
    p.add_argument("runs", nargs="+")
    p = sub.add_parser("sparsity", help="final loss against s/S of sparsity sweeps")
    p.add_argument("--out", required=True)
    p.add_argument("sweeps", nargs="+")
    p = sub.add_parser("plateau", help="CA plateau length against S from ca_context_length results")
    p.add_argument("--out", required=True)
    p.add_argument("results")
    p = sub.add_parser("architectures", help="loss curves per token mixer from examples/architectures results")
    p.add_argument("--out", required=True)
    p.add_argument("results")
    args = parser.parse_args()
    {"curves": curves, "sparsity": sparsity, "plateau": plateau, "architectures": architectures}[args.command](args)


if __name__ == "__main__":
    main()
