#!/usr/bin/env python3
"""Prints one row per run folder from its summary.json and config.json.

Columns: emergence / midpoint / solved are the steps at which the smoothed emergence metric
(x1 loss for the linear map, loss for the automaton) fell below the task's thresholds
(summary.json "definitions"); loss and metric are their smoothed final values; eval and acc are
the held-out loss and accuracy of the learnable predictions; IoU is the best-head attention IoU
and IoU>c the same above what the best of as many random heads gets (0: no better than chance).

    python3 scripts/summarize_runs.py runs/make_run/*_seed*

Censored steps (the threshold was never reached) print as '>N' with N the steps trained.
"""
import json
import sys
from pathlib import Path


def step(value, steps_done):
    return str(value) if value is not None else f">{steps_done}"


def main(folders):
    header = f"{'run':<22}{'task':>6}{'S':>4}{'s':>4}{'bias':>6}{'seed':>6}{'emergence':>11}{'midpoint':>10}" \
             f"{'solved':>9}{'loss':>9}{'metric':>9}{'eval':>9}{'acc':>7}{'IoU':>6}{'IoU>c':>7}{'wall_s':>8}"
    print(header)
    for folder in map(Path, folders):
        summary_path = folder / "summary.json"
        if not summary_path.exists():
            print(f"{folder.name:<22} (no summary.json: run unfinished)")
            continue
        s = json.loads(summary_path.read_text())
        c = json.loads((folder / "config.json").read_text())
        done = s["steps_done"]
        prefix = "x1" if c["task"] == "linear-map" else "next_state"
        task = "lin" if c["task"] == "linear-map" else "ca"
        sparsity = c["s"] if c["task"] == "linear-map" else "-"
        print(f"{folder.name:<22}{task:>6}{c['S']:>4}{sparsity:>4}{c['bias']:>6g}{c['seed']:>6}"
              f"{step(s['emergence_step'], done):>11}{step(s['midpoint_step'], done):>10}{step(s['solved_step'], done):>9}"
              f"{s['final_loss']:>9.4f}{s['final_metric']:>9.4f}{s['eval'][prefix + '_loss']:>9.4f}"
              f"{s['eval'][prefix + '_accuracy']:>7.3f}{s['eval']['attention_iou']:>6.2f}{s['eval']['attention_iou_above_chance']:>7.2f}{s['wall_s']:>8.0f}")


if __name__ == "__main__":
    main(sys.argv[1:])
