#!/usr/bin/env bash
# The one script for a GPU machine (docs/cuda.md): builds the CUDA targets with nvcc, runs the
# device tests against the reference, and measures the device ensemble beside PyTorch and JAX on
# the same GPU. Everything it measures goes to $OUT (default runs/gpu): gpu.log, cuda_tests.txt,
# graph_check.txt (benchmarks/gpu/graph_check.sh), emergent.jsonl (one row per ensemble run, its
# precision named), profiles.txt (the per-op breakdowns, profile_after_*.txt, and the graph's
# launch counts, counts_graph_*.txt, one after another: a GPU machine returns at most 8 files),
# peers.json. Meant to finish in under 8 minutes on an H200 with 16 cores (each part has a time
# limit).
#
# That machine reaches no package registry, so the header-only dependencies travel with the
# tree: on this side run `bash benchmarks/gpu.sh --gather` (copies Eigen, nlohmann/json, CLI11,
# doctest, toml++ and zlib's headers from /usr/include into build-gpu-deps/; toml++ and zlib are
# for benchmarks/gpu/figures.sh's CLI), then carry build-gpu-deps to the GPU
# machine and run `bash benchmarks/gpu.sh` there. No CMake is needed there: two nvcc commands.
# CUDA_ARCH=sm_90 builds for that GPU instead of the one present (to try the script without one);
# PYTHON names the interpreter with torch and jax (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=build-gpu-deps
if [ "${1:-}" = "--gather" ]; then
  rm -rf "$deps" && mkdir -p "$deps/include"
  for d in eigen3 nlohmann CLI doctest toml++ zlib.h zconf.h; do cp -r "/usr/include/$d" "$deps/include/"; done
  du -sh "$deps"
  exit 0
fi
out=${OUT:-runs/gpu}
mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
exec > >(tee "$out/gpu.log") 2>&1
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
grep -m1 'model name' /proc/cpuinfo; nproc; "$nvcc" --version | tail -2

flags=(-std=c++20 -O3 --extended-lambda --expt-relaxed-constexpr -diag-suppress=20012,1675,128
       -arch="${CUDA_ARCH:-native}" -Xcompiler=-fopenmp,-march=native,-Wno-unknown-pragmas,-Wno-parentheses
       -Iinclude -isystem "$deps/include" -isystem "$deps/include/eigen3" -lcublas
       -l:libz.so.1)  # zlib (the nca task): its runtime, which has no unversioned libz.so there
mkdir -p build-gpu
echo "== build"; start=$(date +%s)
"$nvcc" "${flags[@]}" tests/device/cuda_tests.cu -o build-gpu/emergent_cuda_tests &
tests_pid=$!
"$nvcc" "${flags[@]}" apps/device/ensemble.cu -o build-gpu/emergent_ensemble_cuda &
wait "$tests_pid" $!  # these two only: a bare `wait` would also wait for the tee above
echo "built in $(($(date +%s) - start)) s"

echo "== device tests (each op against the reference; 100 steps of an ensemble against the CPU;"
echo "   launches and host synchronisations of a step; the graph against direct launches)"
build-gpu/emergent_cuda_tests | tee "$out/cuda_tests.txt" || echo "emergent_cuda_tests: exit $?"

echo "== the step's graph against direct launches: a padded ensemble compacted, and Gated DeltaNet"
timeout 60 bash benchmarks/gpu/graph_check.sh build-gpu/emergent_ensemble_cuda "$out" ||
  echo "graph_check: exit $?"

# One timed ensemble run: task, E, precision, steps, time limit (s). Appends a row to
# emergent.jsonl: steps/s from the run's own summary (training only, not the CPU's held-out
# evaluation after it), or, when the time limit stopped it, from its last progress line.
ensemble() {
  local task=$1 E=$2 precision=$3 steps=$4 limit=$5 dir
  dir=$(mktemp -d)
  python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['steps']=int(sys.argv[2]); json.dump(c, open(sys.argv[3], 'w'))" \
    "benchmarks/gpu/$task.json" "$steps" "$dir/config.json"
  local rc=0
  timeout "$limit" build-gpu/emergent_ensemble_cuda --config "$dir/config.json" --seeds "0-$((E - 1))" \
    --precision "$precision" --out "$dir/run" > "$dir/stdout.txt" 2> "$dir/stderr.txt" || rc=$?
  python3 - "$dir" "$task" "$E" "$precision" "$steps" "$limit" "$rc" >> "$out/emergent.jsonl" <<'PY'
import json, os, re, sys
run, task, E, precision, steps, limit, rc = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), sys.argv[6], int(sys.argv[7])
row = {"library": "emergent-cuda", "precision": precision, "task": task, "ensemble": E, "steps_asked": steps}
summary = f"{run}/run/seed_0/summary.json"
if rc == 0 and os.path.exists(summary):
    s = json.load(open(summary))
    row.update(steps=s["steps_done"], seconds=s["wall_s"], steps_per_s=s["steps_done"] / s["wall_s"],
               final_loss_seed_0=s["final_loss"])
else:
    progress = re.findall(r"step (\d+)/\d+\s+(\d+) steps/s", open(f"{run}/stderr.txt").read())
    row.update(error=f"exit {rc}" + (f" (time limit {limit} s)" if rc == 124 else ""),
               stderr_tail=open(f"{run}/stderr.txt").read()[-300:].replace("\r", "\n").strip())
    if progress:
        row.update(steps_reached=int(progress[-1][0]), steps_per_s_progress=int(progress[-1][1]))
print(json.dumps(row))
PY
  tail -1 "$out/emergent.jsonl"
  rm -rf "$dir"
}

echo "== device ensembles: steps/s at ensemble sizes 1, 16, 256, fp32 and tf32"
echo "   (the linear map 200 steps, 100 at E = 256; the automaton 50 steps)"
: > "$out/emergent.jsonl"
for precision in fp32 tf32; do
  for E in 1 16; do ensemble linear-map "$E" "$precision" 200 60; done
  ensemble linear-map 256 "$precision" 100 60
  for E in 1 16; do ensemble cellular-automaton "$E" "$precision" 50 60; done
done

echo "== 16 seeds x 10,000 steps of the linear map (goal: under 30 s in fp32, under 15 s in tf32)"
for precision in fp32 tf32; do ensemble linear-map 16 "$precision" 10000 75; done

echo "== where a step's time goes now (per op, CUDA events; the graph off while profiling)"
bash benchmarks/gpu/profile.sh build-gpu/emergent_ensemble_cuda after "$out" 40 \
  | grep -E "^==|all scopes|plain steps|logging" || true
dir=$(mktemp -d)
python3 -c "import json,sys; c=json.load(open(sys.argv[1])); c['steps']=60; json.dump(c, open(sys.argv[2], 'w'))" \
  benchmarks/gpu/linear-map.json "$dir/config.json"
EMERGENT_DEVICE_COUNTS="$out/counts_graph_linear-map_E16.txt" build-gpu/emergent_ensemble_cuda \
  --config "$dir/config.json" --seeds 0-15 --out "$dir/run" --quiet > /dev/null 2>&1 || true
cat "$out/counts_graph_linear-map_E16.txt" || true
rm -rf "$dir"

# At most 8 files come back from a GPU machine (the device tool's limit): the four profiles and
# the counts as one file.
for file in "$out"/profile_*.txt "$out"/counts_*.txt; do
  [ -f "$file" ] || continue
  echo "== $(basename "$file")"
  cat "$file"
  rm "$file"
done > "$out/profiles.txt.tmp"
mv "$out/profiles.txt.tmp" "$out/profiles.txt"

echo "== peers on the same GPU: the linear map, S = 16, 4,096 tokens per step per seed"
echo "   (200 timed steps after 10 of warm-up, median of 3 repeats; stopped after ${PEERS_LIMIT:-170} s,"
echo "   the runs in order of importance: what did not fit is missing from peers.json)"
XLA_PYTHON_CLIENT_PREALLOCATE=false timeout "${PEERS_LIMIT:-170}" "${PYTHON:-python3}" benchmarks/gpu_peers.py \
  --device cuda --out "$out/peers.json" \
  --runs "jax-vmap:highest:1/16,jax-vmap:default:1/16,torch-vmap:fp32:1/16,torch-vmap:tf32:1/16,torch-eager:fp32:1,torch-eager:tf32:1,jax-vmap:default:256,jax-vmap:highest:256,torch-eager:fp32:16" \
  || true

echo "== summary"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
rows = [json.loads(l) for l in open(f"{out}/emergent.jsonl")]
try:
    peers = json.load(open(f"{out}/peers.json"))
except (OSError, ValueError):
    peers = []
print(f"{'run':50s} {'steps/s':>9s} {'s':>8s}")
for r in rows:
    name = f"emergent {r['task']} E={r['ensemble']} {r['precision']} ({r['steps_asked']} steps)"
    if "steps_per_s" in r:
        print(f"{name:50s} {r['steps_per_s']:9.1f} {r['seconds']:8.2f}")
    else:
        print(f"{name:50s} {r.get('steps_per_s_progress', float('nan')):9.1f} {'-':>8s}  {r['error']}, step {r.get('steps_reached')}")
for r in peers:
    name = f"{r['library']} E={r['ensemble']} {r['precision']}"
    if "steps_per_s" in r:
        print(f"{name:50s} {r['steps_per_s']:9.1f} {r['seconds']:8.2f}")
    else:
        print(f"{name:50s} {'-':>9s} {'-':>8s}  {r['error'][:60]}")
PY
echo "== done: $out"
