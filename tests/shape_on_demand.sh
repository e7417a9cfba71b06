#!/usr/bin/env bash
# A shape outside the prebuilt registry, compiled on demand (ctest shape_on_demand): the first
# use compiles it into an empty cache (one "compiling ..." line), trains and evaluates; so does
# the device backend's program (--backend thrust-omp) for that shape; the second
# use of the same shape starts at once from the cache and gives the same numbers (and `sweep
# --compile-only` finds both programs there); a header edited
# after the build is refused in one line, not met with the build's stale precompiled header.
#   tests/shape_on_demand.sh path/to/emergent
set -euo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export EMERGENT_SHAPE_CACHE=$dir/cache
args=(--S 4 --s 2 --d-model 32 --heads 8 --d-ff 64 --steps 20 --batch-tokens 128 --threads 2 --quiet)

"$cli" train "${args[@]}" --out "$dir/first" > "$dir/first.txt" 2> "$dir/first.err"
grep -q "^compiling dot_attention vocab=2 d_model=32 heads=8 layers=1 d_ff=64 max_len=64" "$dir/first.err"
grep -q "^compiled .* in [0-9.]* s" "$dir/first.err"
test "$(ls "$dir/cache" | wc -l)" -eq 1

# The device backend at the same shape: its program compiled on demand as well (one line), the
# ensemble of seeds 0 and 1 following the CPU's run of seed 0.
"$cli" train "${args[@]}" --seeds 0-1 --backend thrust-omp --out "$dir/device" > /dev/null \
  2> "$dir/device.err"
grep -q "^compiling dot_attention vocab=2 d_model=32 heads=8 layers=1 d_ff=64 max_len=64 for --backend thrust-omp" "$dir/device.err"
python3 - "$dir" <<'PY'
import json, sys
cpu, device = ([json.loads(line) for line in open(f"{sys.argv[1]}/{run}/metrics.jsonl")]
               for run in ("first", "device/seed_0"))
assert [r["step"] for r in cpu] == [r["step"] for r in device], (cpu, device)
worst = max(abs(a["loss"] - b["loss"]) for a, b in zip(cpu, device))
print(f"device program compiled on demand: worst |loss - cpu loss| {worst:.2e}")
assert worst < 1e-4, worst
PY
test "$(ls "$dir/cache" | wc -l)" -eq 2

# `emergent sweep --compile-only` finds both programs in the cache and compiles nothing; a
# prebuilt shape needs no program on the CPU backend.
cat > "$dir/sweep.toml" <<'TOML'
[base]
task = "linear-map"
S = 4
s = 2
[[grid]]   # the shape above
d_model = 32
d_ff = 64
[[grid]]   # the prebuilt linear-map shape
d_model = 128
TOML
for backend in cpu thrust-omp; do
  "$cli" sweep "$dir/sweep.toml" --compile-only --backend $backend 2> "$dir/compile.err"
  if grep -q compiling "$dir/compile.err"; then echo "--compile-only compiled a cached program"; exit 1; fi
done
grep -q "2 programs for --backend thrust-omp ready, 0 failed" "$dir/compile.err"
"$cli" sweep "$dir/sweep.toml" --compile-only 2>&1 | grep -q "1 programs for --backend cpu ready, 0 failed"

start=$(date +%s%N)
"$cli" train "${args[@]}" --out "$dir/second" > "$dir/second.txt" 2> "$dir/second.err"
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
if grep -q compiling "$dir/second.err"; then echo "the cached shape was compiled again"; exit 1; fi
echo "second use: ${elapsed_ms} ms"
cmp "$dir/first.txt" "$dir/second.txt"   # deterministic: the same summary

# eval of its checkpoint goes through the same cached program
"$cli" eval --checkpoint "$dir/first/step_000020.safetensors" --batch 8 > "$dir/eval.txt" 2> "$dir/eval.err"
grep -q "^loss " "$dir/eval.txt"
if grep -q compiling "$dir/eval.err"; then exit 1; fi

# A header newer than the build (its mtime moved forward, then put back). One that neither the
# precompiled header nor the program object includes does not count.
here=$(cd "$(dirname "$0")/.." && pwd)
header=$here/include/emergent/core/shape.hpp
unused=$here/include/emergent/neox/registry.hpp
saved=$(stat -c %y "$header")
saved_unused=$(stat -c %y "$unused")
trap 'touch -d "$saved" "$header"; touch -d "$saved_unused" "$unused"; rm -rf "$dir"' EXIT
touch "$unused"
"$cli" train "${args[@]}" --out "$dir/unused" > "$dir/unused.txt" 2> "$dir/unused.err"
cmp "$dir/first.txt" "$dir/unused.txt"
touch -d "$saved_unused" "$unused"
touch "$header"
if "$cli" train --S 4 --s 2 --d-model 32 --heads 4 --d-ff 64 --steps 20 --batch-tokens 128 \
     --threads 2 --quiet --out "$dir/stale" 2> "$dir/stale.err"; then exit 1; fi
grep -q "shape.hpp: changed after the program was built; rebuild (make build)" "$dir/stale.err"
touch -d "$saved" "$header"
echo "shape_on_demand: ok"
