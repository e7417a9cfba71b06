#!/usr/bin/env bash
# `make fuzz`: builds every libFuzzer target of tests/fuzz/ with clang (ASan + UBSan) into
# build-fuzz/, and runs each for FUZZ_SECONDS (default 30) from its committed seed corpus
# tests/fuzz/corpus/<target>/ (new inputs go to build-fuzz/corpus/<target>/, never into the
# repository). A crash, a leak, UB or an uncaught exception fails the run and leaves the input in
# build-fuzz/crash-<target>-*. Prints, per target, the inputs tried and the corpus size.
#   FUZZ_SECONDS=300 FUZZ_JOBS=2 bash scripts/fuzz.sh [target ...]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-30}
out=build-fuzz
cxx=${FUZZ_CXX:-clang++}
command -v "$cxx" > /dev/null || { echo "fuzz: $cxx not found (bash scripts/install-deps.sh --fuzz)"; exit 1; }
mkdir -p "$out"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
flags=(-std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -Iinclude
      )
# Build all first, then run each in its own process (single-threaded): FUZZ_JOBS (default: the
# cores) at a time, both.
jobs=${FUZZ_JOBS:-$(nproc)}
pids=()
for t in "${targets[@]}"; do
  "$cxx" "${flags[@]}" "tests/fuzz/fuzz_$t.cpp" -o "$out/fuzz_$t" -lz &  # zlib: the nca task
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p"; done
fuzz_one() {
  local t=$1 log=$out/fuzz_$1.log result runs
  mkdir -p "$out/corpus/$t"
  if ASAN_OPTIONS=detect_leaks=1 "$out/fuzz_$t" -max_total_time="$seconds" -max_len=65536 -timeout=10 \
      -artifact_prefix="$out/crash-$t-" "$out/corpus/$t" "tests/fuzz/corpus/$t" > "$log" 2>&1; then
    result=ok
  else
    result="FAILED (see $log)"
  fi
  runs=$(grep -o 'Done [0-9]* runs' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  echo "fuzz $t: $result, ${runs} inputs in ${seconds} s, corpus $(ls "$out/corpus/$t" | wc -l) files"
  [ "$result" = ok ]
}
status=0
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || status=1; pids=("${pids[@]:1}"); fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
