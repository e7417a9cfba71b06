#!/usr/bin/env python3
"""Prints one row per run folder from its summary.json and config.json.

    python3 scripts/summarize_runs.py runs/make_run/*_seed*

Censored steps (the threshold was never reached) print as '>N' with N the steps trained.
"""
import json
import sys
from pathlib import Path


def step(value, steps_done):
    return str(value) if value is not None else f">{steps_done}"


def main(folders):
    header = f"{'run':<22}{'S':>4}{'s':>4}{'bias':>6}{'seed':>6}{'plateau_end':>13}{'emergence':>11}{'solved':>9}" \
             f"{'loss':>9}{'x1_loss':>9}{'eval_x1':>9}{'x1_acc':>8}{'IoU':>7}{'wall_s':>8}"
    print(header)
    for folder in map(Path, folders):
        summary_path = folder / "summary.json"
        if not summary_path.exists():
            print(f"{folder.name:<22} (no summary.json: run unfinished)")
            continue
        s = json.loads(summary_path.read_text())
        c = json.loads((folder / "config.json").read_text())
        done = s["steps_done"]
        print(f"{folder.name:<22}{c['S']:>4}{c['s']:>4}{c['bias']:>6g}{c['seed']:>6}"
              f"{step(s['plateau_end'], done):>13}{step(s['emergence_step'], done):>11}{step(s['solved_step'], done):>9}"
              f"{s['final_loss']:>9.4f}{s['final_x1_loss']:>9.4f}{s['eval']['x1_loss']:>9.4f}"
              f"{s['eval']['x1_accuracy']:>8.3f}{s['eval']['attention_iou']:>7.2f}{s['wall_s']:>8.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
