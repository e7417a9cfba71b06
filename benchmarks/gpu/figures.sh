#!/usr/bin/env bash
# The paper's -full sweep files on a GPU machine, in one call of at most 10 minutes
# (docs/reproduce.md, "On a GPU"): builds the CLI (g++) and the CUDA ensemble program (nvcc)
# without CMake, then runs the files biggest claims first with `emergent sweep --backend cuda`
# (mixed ensembles packed by the GPU's memory; shapes the program lacks, such as Fig. 5b/5c's
# S >= 32 and Fig. 6's widths, compiled on demand with nvcc), each under the time that is left.
#
# Resumable: a sweep writes each finished ensemble's rows at once, so what the time limit cuts
# off is only the ensembles still training. Unpack the previous call's archive here and carry
# that folder (`mkdir prev && cat figures.tar.gz* | tar -xz -C prev`; FIGURES_FROM=prev): the
# next call skips the runs done.
# Output: for each file a sweep folder without checkpoints, <file>/ (sweep.json; rows/*.jsonl as
# a CPU sweep writes them and results.jsonl, their collection; runs/<id>/ with config.json,
# metrics.jsonl and summary.json), which scripts/plot.py takes as it takes a CPU sweep's, all in
# one archive, $OUT/figures.tar.gz (in 15 MiB parts, figures.tar.gz.00, .01, ..., when larger):
# what comes back from a GPU machine is at most 8 files, none more than two folders down. Beside
# it $OUT/figures/times.txt, compile.log and the log. ARCHIVE=0 leaves the folders unpacked in
# $OUT/figures instead. The whole sweep folders stay in $WORK (runs/gpu-figures).
#
#   bash benchmarks/gpu.sh --gather      here first: the header-only dependencies, carried
#   bash benchmarks/gpu/figures.sh        there (carry build-gpu-deps)
#   BACKEND=thrust-omp EMERGENT=build/emergent SHARD=0/96 LIMIT=300 bash benchmarks/gpu/figures.sh
#                                         here: the same script on a slice, under the OpenMP build
# Settings: LIMIT (seconds for the whole call, default 560), FILES (the sweep files, in order),
# SHARD (I/N: only that share of each file), MAX_MEMBERS (runs per ensemble, default: by memory),
# BACKEND (cuda), EMERGENT (a built CLI: skips the build), CUDA_ARCH (default native).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
started=$(date +%s)
limit=${LIMIT:-560}
backend=${BACKEND:-cuda}
out=${OUT:-runs/gpu}/figures
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee -a "$out/figures.log") 2>&1
files=${FILES:-"sweeps/fig5a-linear-map-full.toml sweeps/fig5bc-automaton-context-full.toml
                sweeps/fig6-heads-full.toml sweeps/fig7-mixers-full.toml"}
echo "== $(date -u +%FT%TZ): $backend, $limit s; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores"
command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader || true

emergent=${EMERGENT:-}
if [ -z "$emergent" ]; then
  # The CLI and the ensemble program, as CMake would build them, and the files the CLI's shape
  # compiler reads (shape_compiler.json, compile_commands.json) so that it can compile the
  # ensemble program for a shape on demand with the same nvcc command.
  deps=$root/build-gpu-deps
  [ -d "$deps/include/toml++" ] || { echo "carry build-gpu-deps (bash benchmarks/gpu.sh --gather)"; exit 2; }
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  mkdir -p build-gpu
  cuda_flags="-std=c++20 -O3 --extended-lambda --expt-relaxed-constexpr -diag-suppress=20012,1675,128 -arch=${CUDA_ARCH:-native} -Xcompiler=-fopenmp,-march=native,-Wno-unknown-pragmas,-Wno-parentheses -I$root/include -isystem $deps/include -isystem $deps/include/eigen3"
  python3 - "$root" "$nvcc" "$cuda_flags" <<'PY'
import json, sys
root, nvcc, flags = sys.argv[1], sys.argv[2], sys.argv[3]
source = f"{root}/apps/device/ensemble.cu"
json.dump([{"directory": f"{root}/build-gpu", "file": source,
            "command": f"{nvcc} {flags} -o ensemble.o -c {source}"}],
          open(f"{root}/build-gpu/compile_commands.json", "w"), indent=1)
json.dump({"source_dir": root, "compile_commands": f"{root}/build-gpu/compile_commands.json",
           "reference_source": "", "program_objects": [], "link_flags": [],
           "device": {"cuda": {"reference_source": source,
                               "link_flags": ["-lcublas", "-Xcompiler=-fopenmp", "-l:libz.so.1"]}}},
          open(f"{root}/build-gpu/shape_compiler.json", "w"), indent=1)
PY
  echo "== build"; build_start=$(date +%s)
  # shellcheck disable=SC2086
  "$nvcc" $cuda_flags apps/device/ensemble.cu -lcublas -l:libz.so.1 -o build-gpu/emergent_ensemble_cuda &
  nvcc_pid=$!
  cxx_flags=(-std=c++20 -O3 -march=native -fopenmp -w -Iinclude -Iapps -isystem "$deps/include"
             -isystem "$deps/include/eigen3"
             "-DEMERGENT_SHAPE_COMPILER_INFO=\"$root/build-gpu/shape_compiler.json\"")
  objects=()
  for source in apps/emergent.cpp apps/registry/*.cpp; do
    object=build-gpu/$(basename "$source" .cpp).o
    g++ "${cxx_flags[@]}" -c "$source" -o "$object" &
    objects+=("$object")
  done
  wait "$nvcc_pid"
  for job in $(jobs -p); do wait "$job"; done
  g++ -fopenmp "${objects[@]}" -l:libz.so.1 -o build-gpu/emergent
  emergent=$root/build-gpu/emergent
  echo "built in $(($(date +%s) - build_start)) s"
fi

work=${WORK:-$root/runs/gpu-figures}  # the sweep folders, run folders and checkpoints included
# The programs the files need that the build lacks (Fig. 5b/5c's S >= 32, Fig. 6's 42 shapes),
# compiled into the shape cache on the CPU's cores while the GPU trains the first file: every core
# but two (the training process drives the GPU from one). A sweep that reaches a program being
# compiled waits for it (one lock per program) instead of compiling it again.
# Its own session, so that the end of this script stops it and its compilers.
compile_jobs=$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))
# shellcheck disable=SC2016,SC2086
setsid bash -c 'emergent=$1 backend=$2 jobs=$3 shard=$4; shift 4
  for file; do
    "$emergent" sweep "$file" --compile-only --backend "$backend" --jobs "$jobs" \
      ${shard:+--shard "$shard"} || true
  done' compile-ahead "$emergent" "$backend" "$compile_jobs" "${SHARD:-}" $files \
  > "$out/compile.log" 2>&1 &
compile_pid=$!
trap 'kill -- "-$compile_pid" 2> /dev/null || true' EXIT
for file in $files; do
  name=$(basename "$file" .toml)
  dir=$work/$name
  left=$((limit - ($(date +%s) - started)))
  if [ "$left" -lt 30 ]; then echo "== $name: no time left"; continue; fi
  if [ -n "${FIGURES_FROM:-}" ] && [ -d "$FIGURES_FROM/$name" ] && [ ! -e "$dir" ]; then
    mkdir -p "$dir" && cp -r "$FIGURES_FROM/$name/sweep.json" "$FIGURES_FROM/$name/rows" "$dir/"
  fi
  echo "== $file -> $dir ($left s left)"
  file_start=$(date +%s)
  rc=0
  timeout --signal=TERM "$left" "$emergent" sweep "$file" --out "$dir" --backend "$backend" \
    --quiet ${SHARD:+--shard "$SHARD"} ${MAX_MEMBERS:+--max-members "$MAX_MEMBERS"} || rc=$?
  # What comes back under $OUT: the plan, the rows and their collection, not the checkpoints.
  mkdir -p "$out/$name"
  cp "$dir/sweep.json" "$out/$name/"
  [ -d "$dir/rows" ] && cp -r "$dir/rows" "$out/$name/"
  [ -d "$dir/runs" ] && (cd "$dir" && find runs \( -name metrics.jsonl -o -name summary.json \
    -o -name config.json \) -exec cp --parents {} "$out/$name/" \;)  # Fig. 5b's curves
  "$emergent" sweep collect "$dir" > /dev/null 2>&1 && cp "$dir/results.jsonl" "$out/$name/" || true
  rows=$(cat "$dir"/rows/*.jsonl 2> /dev/null | wc -l || true)
  runs=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["runs"]))' "$dir/sweep.json")
  state=$([ "$rc" -eq 124 ] && echo "stopped by the time limit" || echo "exit $rc")
  echo "$name: $rows of $runs runs done, $(($(date +%s) - file_start)) s ($state; $backend${SHARD:+, shard $SHARD}; $(date -u +%F))" \
    | tee -a "$out/times.txt"
done
if [ "${ARCHIVE:-1}" = 1 ]; then  # the folders as one archive (the header says why)
  archive=$(dirname "$out")/figures.tar.gz
  rm -f "$archive" "$archive".*
  names=()
  for file in $files; do
    name=$(basename "$file" .toml)
    [ -d "$out/$name" ] && names+=("$name")
  done
  if [ ${#names[@]} -gt 0 ]; then
    tar -czf "$archive" -C "$out" "${names[@]}"
    rm -rf "${names[@]/#/$out/}"
    if [ "$(stat -c %s "$archive")" -gt $((15 * 1024 * 1024)) ]; then
      split -b 15m -d "$archive" "$archive."
      rm "$archive"
    fi
    ls -l "$archive"*
  fi
fi
echo "== done in $(($(date +%s) - started)) s: $out"
