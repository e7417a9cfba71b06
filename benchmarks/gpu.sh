#!/usr/bin/env bash
# The one script for a GPU machine (docs/cuda.md): builds the CUDA targets with nvcc, runs the
# device tests against the reference, and measures the device ensemble beside PyTorch and JAX on
# the same GPU. Everything it measures goes to $OUT (default runs/gpu). Meant to finish in under
# 8 minutes on an H200 with 16 cores.
#
# That machine reaches no package registry, so the header-only dependencies travel with the
# tree: on this side run `bash benchmarks/gpu.sh --gather` (copies Eigen, nlohmann/json, CLI11
# and doctest from /usr/include into build-gpu-deps/), then carry build-gpu-deps to the GPU
# machine and run `bash benchmarks/gpu.sh` there. No CMake is needed there: two nvcc commands.
# CUDA_ARCH=sm_90 builds for that GPU instead of the one present (to try the script without one);
# PYTHON names the interpreter with torch and jax (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
deps=build-gpu-deps
if [ "${1:-}" = "--gather" ]; then
  rm -rf "$deps" && mkdir -p "$deps/include"
  for d in eigen3 nlohmann CLI doctest; do cp -r "/usr/include/$d" "$deps/include/"; done
  du -sh "$deps"
  exit 0
fi
out=${OUT:-runs/gpu}
mkdir -p "$out"
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
exec > >(tee "$out/gpu.log") 2>&1
echo "== machine"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true
grep -m1 'model name' /proc/cpuinfo; nproc; "$nvcc" --version | tail -2

flags=(-std=c++20 -O3 --extended-lambda --expt-relaxed-constexpr -diag-suppress=20012,1675
       -arch="${CUDA_ARCH:-native}" -Xcompiler=-fopenmp,-march=native,-Wno-unknown-pragmas,-Wno-parentheses
       -Iinclude -isystem "$deps/include" -isystem "$deps/include/eigen3" -lcublas)
mkdir -p build-gpu
echo "== build"; start=$(date +%s)
"$nvcc" "${flags[@]}" tests/device/cuda_tests.cu -o build-gpu/emergent_cuda_tests &
tests_pid=$!
"$nvcc" "${flags[@]}" examples/device/ensemble.cu -o build-gpu/emergent_ensemble_cuda &
wait "$tests_pid" $!  # these two only: a bare `wait` would also wait for the tee above
echo "built in $(($(date +%s) - start)) s"

echo "== device tests (each op against the reference; 100 steps of an ensemble against the CPU)"
build-gpu/emergent_cuda_tests | tee "$out/cuda_tests.txt" || echo "emergent_cuda_tests: exit $?"

echo "== device ensembles: steps/s at ensemble sizes 1, 16, 256"
: > "$out/emergent.jsonl"
for task in linear-map cellular-automaton; do
  for E in 1 16 256; do
    [ "$task" = cellular-automaton ] && [ "$E" = 256 ] && continue  # 256 x 4 layers x 255^2 maps
    dir=$(mktemp -d)
    if build-gpu/emergent_ensemble_cuda --config "benchmarks/gpu/$task.json" --seeds "0-$((E - 1))" \
         --out "$dir" --quiet > "$dir/stdout.txt" 2>&1; then
      python3 - "$dir" "$task" "$E" "benchmarks/gpu/$task.json" >> "$out/emergent.jsonl" <<'PY'
import json, sys
run, task, E, config = sys.argv[1], sys.argv[2], int(sys.argv[3]), json.load(open(sys.argv[4]))
s = json.load(open(f"{run}/seed_0/summary.json"))
print(json.dumps({"library": "emergent-cuda", "task": task, "ensemble": E, "steps": s["steps_done"],
                  "seconds": s["wall_s"], "steps_per_s": s["steps_done"] / s["wall_s"],
                  "final_loss_seed_0": s["final_loss"]}))
PY
    else
      echo "{\"library\": \"emergent-cuda\", \"task\": \"$task\", \"ensemble\": $E, \"error\": \"$(tail -1 "$dir/stdout.txt" | tr -d '"')\"}" >> "$out/emergent.jsonl"
    fi
    tail -1 "$out/emergent.jsonl"
    rm -rf "$dir"
  done
done

echo "== peers on the same GPU: the linear map, S = 16, 4,096 tokens per step per seed"
"${PYTHON:-python3}" benchmarks/gpu_peers.py --device cuda --ensembles 1,16,256 --steps 20 --out "$out/peers.json" || true
echo "== done: $out"
