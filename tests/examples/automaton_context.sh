#!/usr/bin/env bash
# ctest example_automaton_context: examples/automaton_context.cpp on a tiny setting (S = 2, bias 0
# and 5, one seed, 10 steps of the 4-layer model): a row of numbers per run, the bias recorded; a
# bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_automaton_context: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 5 1 2 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^ +S +bias +seed +plateau +midpoint +final_loss +next_state_acc$' "$out" ||
  fail "no header"
for bias in 0 5; do
  grep -Eq "^ +2 +$bias +0 +>?[0-9]+ +>?[0-9]+ +[0-9]+\.[0-9]{4} +[01]\.[0-9]{4}$" "$out" ||
    fail "no row for bias $bias"
done
grep -Eq '"bias": 5(\.0)?,' "$work/runs/S2_bias5_seed0/config.json" || fail "bias 5 not recorded"

if "$program" "$work/bad" 10 5 1 64 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "S = 64 (1024 tokens) was accepted"
fi
grep -q "^automaton_context: .*max_len" "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_automaton_context: ok"
