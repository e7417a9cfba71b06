#!/usr/bin/env bash
# ctest example_prepretraining: examples/prepretraining.cpp on a tiny setting (20 Dyck steps, 20
# map steps, one seed, S = 4): a row per seed; the second stage records its Dyck source and took
# the blocks; a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_prepretraining: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 20 20 1 4 2 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^seed +dyck_closing_acc +solved_scratch +solved_dyck$' "$out" || fail "no header"
grep -Eq '^ +0 +[01]\.[0-9]{3} +>?[0-9]+ +>?[0-9]+$' "$out" || fail "no row for seed 0"
head -1 "$work/runs/after_dyck/seed0/metrics.jsonl" > "$work/first.txt"
grep -q '"task":"dyck"' "$work/first.txt" || fail "the source is not recorded"
grep -q '"layers.0.mixer.qkv.weight"' "$work/first.txt" || fail "the blocks were not taken"
if grep -q init_source "$work/runs/scratch/seed0/metrics.jsonl"; then fail "scratch has a source"; fi

if "$program" "$work/bad" 20 20 0 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "SEEDS = 0 was accepted"
fi
grep -q "^prepretraining: SEEDS must be at least 1 (usage: prepretraining " "$work/err.txt" ||
  fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_prepretraining: ok"
