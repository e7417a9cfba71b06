#!/usr/bin/env bash
# A short check on a GPU machine, before benchmarks/gpu.sh: builds the two CUDA programs, runs the
# device tests, and times the linear map at E = 1 and 16 in fp32 and tf32 (200 steps), with the
# launch and synchronisation counts of a step (EMERGENT_DEVICE_COUNTS). Output under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-runs/gpu-check}
mkdir -p "$out" build-gpu
deps=build-gpu-deps
flags=(-std=c++20 -O3 --extended-lambda --expt-relaxed-constexpr -diag-suppress=20012,1675,128
       -arch="${CUDA_ARCH:-native}" -Xcompiler=-fopenmp,-march=native,-Wno-unknown-pragmas,-Wno-parentheses
       -Iinclude -isystem "$deps/include" -isystem "$deps/include/eigen3" -lcublas
       -l:libz.so.1)  # zlib (the nca task): its runtime, which has no unversioned libz.so there
start=$(date +%s)
nvcc "${flags[@]}" tests/device/cuda_tests.cu -o build-gpu/emergent_cuda_tests 2> "$out/build_tests.txt" &
a=$!
nvcc "${flags[@]}" apps/device/ensemble.cu -o build-gpu/emergent_ensemble_cuda 2> "$out/build_ensemble.txt" &
wait $a $!
echo "built in $(($(date +%s) - start)) s"
build-gpu/emergent_cuda_tests > "$out/cuda_tests.txt" 2>&1; echo "cuda tests: exit $?"
grep -E "ERROR|MESSAGE|test cases|assertions" "$out/cuda_tests.txt" | sort | uniq -c | head -30
for precision in fp32 tf32; do
  for E in 1 16; do
    dir=$(mktemp -d)
    EMERGENT_DEVICE_COUNTS="$out/counts_${precision}_E$E.txt" timeout 60 build-gpu/emergent_ensemble_cuda \
      --config benchmarks/gpu/linear-map.json --seeds "0-$((E - 1))" --precision "$precision" \
      --out "$dir" --quiet > "$dir/log.txt" 2>&1 || { echo "E=$E $precision failed:"; tail -3 "$dir/log.txt"; }
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print(sys.argv[2], 'E =', sys.argv[3], s['steps_done'] / s['wall_s'], 'steps/s, final loss', s['final_loss'])" \
      "$dir/seed_0/summary.json" "$precision" "$E" || true
    grep -E "plain|graph" "$out/counts_${precision}_E$E.txt" || true
    rm -rf "$dir"
  done
done
EMERGENT_DEVICE_PROFILE="$out/profile_E16.txt" build-gpu/emergent_ensemble_cuda --config benchmarks/gpu/linear-map.json \
  --seeds 0-15 --out "$(mktemp -d)" --quiet > /dev/null 2>&1; tail -n 42 "$out/profile_E16.txt"
