#!/usr/bin/env bash
# The CUDA-only paths of a step that the device tests do not reach, run end to end on a GPU: the
# step's graph against the same kernels launched directly (EMERGENT_DEVICE_GRAPH=0), for a mixed
# ensemble whose members differ in length (padded, sampled on the device) and in steps (the short
# one finishes and leaves: the ensemble is compacted and its graph captured again), and for a
# mixer other than dot attention (Gated DeltaNet). The graph replays the same kernels in the same
# order, so its rows must equal the direct run's to the bit; the ensemble without compaction
# (EMERGENT_DEVICE_COMPACT=0) runs other batch counts through cuBLAS, so it is compared within
# 1e-5. Under OpenMP (no graph) the same script checks itself: the three runs agree exactly.
#   benchmarks/gpu/graph_check.sh path/to/emergent_ensemble_<backend> OUT_DIR
set -euo pipefail
cd "$(dirname "$0")/../.."
program=$1
out=$2
mkdir -p "$out"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

# config NAME KEY=VALUE...: benchmarks/gpu/linear-map.json with the given fields, as $dir/NAME.json
config() {
  local name=$1
  shift
  python3 - "$dir/$name.json" "$@" <<'PY'
import json, sys
c = json.load(open("benchmarks/gpu/linear-map.json"))
c.update(batch_tokens=512, log_every=10, checkpoint_every=20, analysis_every=10, warmup_steps=10)
for pair in sys.argv[2:]:
    key, value = pair.split("=", 1)
    c[key] = value if key in ("mixer", "task", "schedule") else json.loads(value)
json.dump(c, open(sys.argv[1], "w"))
PY
}
config short S=5 s=2 steps=30
config long S=6 s=2 steps=80 seed=1 bias=1.0
config gdn mixer=gated_deltanet S=6 s=2 steps=40

# launch NAME [ENV...] -- ARGS...: one quiet run of the program with ARGS (and ENV), its output in
# $dir/NAME.log; a failed run shows its last lines and stops the script
launch() {
  local name=$1 envs=()
  shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$program" "$@" --quiet > "$dir/$name.log" 2>&1 ||
    { echo "$name: exit $?"; tail -5 "$dir/$name.log"; return 1; }
}
# mixed RUN [ENV...]: the two members as one ensemble into $dir/RUN/{short,long}
mixed() {
  local run=$1
  shift
  launch "$run" "$@" -- --configs "$dir/short.json" "$dir/long.json" \
    --run-dirs "$dir/$run/short" "$dir/$run/long"
}
mixed graph
mixed direct EMERGENT_DEVICE_GRAPH=0
mixed whole EMERGENT_DEVICE_COMPACT=0
launch gdn_graph -- --config "$dir/gdn.json" --seeds 0-1 --out "$dir/gdn_graph"
launch gdn_direct EMERGENT_DEVICE_GRAPH=0 -- --config "$dir/gdn.json" --seeds 0-1 \
  --out "$dir/gdn_direct"
grep -h "CUDA graph" "$dir"/*.log | sort | uniq -c || true  # a graph that failed says so

python3 - "$dir" <<'PY' | tee "$out/graph_check.txt"
import json, sys
root = sys.argv[1]
def rows(path):
    # every number of every row but the clock's
    out = []
    for line in open(f"{root}/{path}/metrics.jsonl"):
        row = json.loads(line)
        out.append({k: v for k, v in row.items() if not any(t in k for t in ("time", "wall", "per_s"))})
    return out
def differ(x, y, where):
    # the largest relative difference of two rows' numbers, and where it is
    if isinstance(x, dict):
        assert x.keys() == y.keys(), (where, x.keys(), y.keys())
        return max([differ(x[k], y[k], f"{where}.{k}") for k in x] + [(0.0, "")])
    if isinstance(x, list):
        assert len(x) == len(y), (where, x, y)
        return max([differ(a, b, f"{where}[{i}]") for i, (a, b) in enumerate(zip(x, y))] + [(0.0, "")])
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return (abs(x - y) / max(1.0, abs(x)), where if x != y else "")
    assert x == y, (where, x, y)
    return (0.0, "")
def worst(a, b):
    assert [r["step"] for r in a] == [r["step"] for r in b], ([r["step"] for r in a], [r["step"] for r in b])
    return max(differ(x, y, f"step {x['step']}") for x, y in zip(a, b))
failed = False
for member in ("short", "long"):
    g, d, w = (rows(f"{run}/{member}") for run in ("graph", "direct", "whole"))
    (exact, at), (compact, compact_at) = worst(g, d), worst(g, w)
    print(f"mixed ensemble, {member}: {len(g)} rows; graph vs direct {exact:.1e} {at} (must be 0), "
          f"compacted vs not {compact:.1e} {compact_at} (must be < 1e-5)")
    failed |= exact != 0 or compact >= 1e-5
for seed in (0, 1):
    exact, at = worst(rows(f"gdn_graph/seed_{seed}"), rows(f"gdn_direct/seed_{seed}"))
    print(f"gated_deltanet seed {seed}: graph vs direct {exact:.1e} {at} (must be 0)")
    failed |= exact != 0
print("graph_check:", "FAILED" if failed else "ok")
sys.exit(1 if failed else 0)
PY
