#!/usr/bin/env bash
# ctest example_heads: examples/heads.cpp on a tiny setting (linear map S = 4, s = 1, one seed,
# 10 steps): a row of numbers for each compiled head count; a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_heads: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 1 4 1 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^heads +d_head +seed +emergence +solved +final_loss +x1_loss$' "$out" ||
  fail "no header"
for row in "1 +128" "8 +16" "32 +4"; do
  grep -Eq "^ +$row +0 +>?[0-9]+ +>?[0-9]+ +[0-9]+\.[0-9]{4} +[0-9]+\.[0-9]{4}$" "$out" ||
    fail "no row for heads, d_head = $row"
done
grep -q '"heads": 32' "$work/runs/heads32_seed0/config.json" || fail "heads32 is not recorded"

if "$program" "$work/bad" 20 1 4 1 extra > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "an extra argument was accepted"
fi
grep -q "^heads: too many arguments (usage: heads " "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_heads: ok"
