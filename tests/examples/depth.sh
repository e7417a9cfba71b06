#!/usr/bin/env bash
# ctest example_depth: examples/depth.cpp on a tiny setting (automaton S = 2, one seed, 10 steps):
# a row of numbers and a mean for 1 and 2 layers; a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_depth: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 1 2 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^layers +seed +final_loss +next_state_loss +plateau$' "$out" || fail "no header"
for layers in 1 2; do
  grep -Eq "^ +$layers +0 +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4} +>?[0-9]+$" "$out" ||
    fail "no row for $layers layers"
  grep -Eq "^layers $layers  mean final loss [0-9]+\.[0-9]{4} over 1 seeds$" "$out" ||
    fail "no mean for $layers layers"
  grep -q "\"layers\": $layers" "$work/runs/layers${layers}_seed0/config.json" ||
    fail "layers $layers is not recorded"
done

if "$program" "$work/bad" 10 0 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "SEEDS = 0 was accepted"
fi
grep -q "^depth: SEEDS must be at least 1 (usage: depth " "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_depth: ok"
