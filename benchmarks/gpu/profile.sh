#!/usr/bin/env bash
# The per-op breakdown of a training step on the GPU (cuda/profile.cuh): runs the ensemble
# program with EMERGENT_DEVICE_PROFILE at ensemble sizes of the linear map (and the automaton at
# E = 16), writing $OUT/profile_<label>_<task>_E<E>.txt. Called by benchmarks/gpu.sh. The first 5
# steps are not profiled (cuBLAS's first calls, allocations); the graph is off while profiling.
#   bash benchmarks/gpu/profile.sh PROGRAM LABEL OUT [STEPS]
set -euo pipefail
program=$1 label=$2 out=$3 steps=${4:-60}
for run in linear-map:1 linear-map:16 linear-map:256 cellular-automaton:16; do
  task=${run%%:*} E=${run##*:}
  dir=$(mktemp -d)
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['steps']=int(sys.argv[2]); json.dump(c, open(sys.argv[3], 'w'))" \
    "benchmarks/gpu/$task.json" "$steps" "$dir/config.json"
  if EMERGENT_DEVICE_PROFILE="$out/profile_${label}_${task}_E$E.txt" "$program" --config "$dir/config.json" \
       --seeds "0-$((E - 1))" --out "$dir/run" --quiet > "$dir/stdout.txt" 2>&1; then
    echo "== $label $task E = $E"; cat "$out/profile_${label}_${task}_E$E.txt"
  else
    echo "== $label $task E = $E failed:"; tail -3 "$dir/stdout.txt"
  fi
  rm -rf "$dir"
done
