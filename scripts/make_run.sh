#!/usr/bin/env bash
# `make run`: the main job. Three seeds of the paper's linear map (S=16, s=3, 1-layer
# transformer D=128, 8 heads) with and without the attention-bias intervention; prints per run
# the plateau end, emergence step, solve step, final losses and attention IoU, and plots the
# x1-loss curves to runs/make_run/curves.png. Runs one training at a time on all cores (the
# data-parallel step scales across them; two one-thread runs at a time leave a core idle at the end).
# Environment: STEPS (max steps per run, default 6000), BIAS (c, default 5), SEEDS (default "0 1 2").
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/make_run
steps=${STEPS:-6000}
bias=${BIAS:-5}
seeds=${SEEDS:-"0 1 2"}
mkdir -p "$out"
common=(--S 16 --s 3 --steps "$steps" --stop-below 0.01)

jobs=()
for seed in $seeds; do
  jobs+=("--seed $seed --bias $bias --out $out/bias_seed$seed")
  jobs+=("--seed $seed --bias 0 --out $out/nobias_seed$seed")
done
start=$(date +%s)
run=0
for job in "${jobs[@]}"; do
  run=$((run + 1))
  echo "make run: run $run of ${#jobs[@]}: $job" >&2
  # The trainer's progress line (step, loss, steps/s, ETA) goes to stderr; its summary is
  # printed for all runs together below.
  # shellcheck disable=SC2086
  ./build/emergent train "${common[@]}" $job > /dev/null
done
echo "make run: $(( $(date +%s) - start )) s for ${#jobs[@]} runs (S=16, s=3, up to $steps steps, bias c=$bias)"
python3 scripts/summarize_runs.py "$out"/*_seed*
/usr/bin/python3 scripts/plot.py runs "$out"/*_seed* --out "$out/curves.png" || echo "(plot skipped: matplotlib missing)"
