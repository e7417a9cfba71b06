#!/usr/bin/env bash
# ctest example_attention_bias: examples/attention_bias.cpp (the README's program, which ctest
# package_consumer checks against the README) for 10 steps, bias 0 and 5: a row of numbers each;
# a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_attention_bias: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 5 > "$out" || fail "the program failed"
cat "$out"
for c in 0 5; do
  row="^bias $c  steps 10  x1 loss [0-9]+\.[0-9]{4}  emergence step ([0-9]+|none)  "
  grep -Eq "$row""attention IoU [0-9]\.[0-9]{3} \(chance [0-9]\.[0-9]{3}\)$" "$out" ||
    fail "no row for bias $c"
  grep -q '"attention_iou"' "$work/runs/bias_$c/summary.json" ||
    fail "no IoU in bias_$c/summary.json"
done
grep -Eq "\"bias\": 5(\.0)?," "$work/runs/bias_5/config.json" ||
  fail "bias_5 was not trained with bias 5"

if "$program" "$work/bad" 10 five > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "C = five was accepted"
fi
grep -q "^attention_bias: bad argument 'five'" "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_attention_bias: ok"
