#!/usr/bin/env bash
# ctest example_sparsity: examples/sparsity.cpp on a tiny grid (S = 4, s = 1 and 2, one seed, 20
# steps): a row of numbers per run, the solve counts, the run folders; a bad argument is one line
# and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_sparsity: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 20 1 4 1 2 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^ +S +s +seed +emergence +solved +final_loss +x1_loss$' "$out" || fail "no header"
row='^ +4 +[12] +0 +>?[0-9]+ +>?[0-9]+ +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4}$'
rows=$(grep -Ec "$row" "$out")
[ "$rows" = 2 ] || fail "expected 2 run rows, got $rows"
grep -Eq '^S 4  s 2  s/S 0\.500  solved [01] of 1$' "$out" ||
  fail "no solve count of s = 2"
grep -Eq '^solved [0-2] of 2 runs$' "$out" || fail "no total solve count"
for run in S4_s1_seed0 S4_s2_seed0; do
  grep -q '"steps_done"' "$work/runs/$run/summary.json" || fail "no summary.json in $run"
done

if "$program" "$work/bad" 20 two > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "SEEDS = two was accepted"
fi
grep -q "^sparsity: bad argument 'two' (usage: sparsity " "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_sparsity: ok"
