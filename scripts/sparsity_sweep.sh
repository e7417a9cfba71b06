#!/usr/bin/env bash
# Linear-map sparsity sweep (paper Fig. 4 left, one state size): trains s = 1..S (or the list in
# ONES) for each seed, two runs at a time with one thread each, stops a run once its smoothed x1
# loss is below 0.01, and prints the table of summarize_runs.py.
#   bash scripts/sparsity_sweep.sh 8                 # S=8, s=1..8, seed 0, up to 10000 steps
#   STEPS=10000 SEEDS="0 1 2" ONES="3 5" bash scripts/sparsity_sweep.sh 16
# Run folders: runs/sparsity_S<S>/s<s>_seed<seed> (a rerun resumes or skips finished runs).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${1:?usage: sparsity_sweep.sh S}
steps=${STEPS:-10000}
seeds=${SEEDS:-0}
ones=${ONES:-$(seq -s ' ' 1 "$S")}
out=runs/sparsity_S$S
mkdir -p "$out"
running=0
for seed in $seeds; do
  for s in $ones; do
    run="$out/s${s}_seed$seed"
    [ -f "$run/summary.json" ] && continue
    ./build/emergent train --S "$S" --s "$s" --seed "$seed" --steps "$steps" --stop-below 0.01 \
      --threads 1 --quiet --out "$run" > /dev/null &
    running=$((running + 1))
    if [ "$running" -ge 2 ]; then wait -n; running=$((running - 1)); fi
  done
done
wait
python3 scripts/summarize_runs.py "$out"/s*_seed*
