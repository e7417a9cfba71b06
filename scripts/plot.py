#!/usr/bin/env python3
"""Plots of emergent run folders (matplotlib; Debian's python3-matplotlib).

    python3 scripts/plot.py curves --out curves.png runs/a runs/b ...   x1 loss and full loss vs step
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("curves", help="loss curves of run folders")
    p.add_argument("--out", required=True)
    p.add_argument("runs", nargs="+")
    args = parser.parse_args()
    {"curves": curves}[args.command](args)


if __name__ == "__main__":
    main()
