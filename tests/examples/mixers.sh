#!/usr/bin/env bash
# ctest example_mixers: examples/mixers.cpp on a tiny setting (linear map S = 4, s = 1, one seed,
# 10 steps): a row of numbers for each of the five mixers; a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_mixers: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 1 4 1 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^mixer +seed +parameters +final_loss +x1_loss +emergence$' "$out" ||
  fail "no header"
for mixer in dot_attention mlp_mixer mamba gated_deltanet rwkv; do
  grep -Eq "^$mixer +0 +[0-9]+ +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4} +>?[0-9]+$" "$out" ||
    fail "no row for $mixer"
  grep -q "\"mixer\": \"$mixer\"" "$work/runs/${mixer}_seed0/config.json" ||
    fail "$mixer is not recorded in its config.json"
done

if "$program" "$work/bad" 20 1 4 9 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "s = 9 > S = 4 was accepted"
fi
grep -q "^mixers: .*ones per row s must be in \[1, S=4\], got 9" "$work/err.txt" ||
  fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_mixers: ok"
