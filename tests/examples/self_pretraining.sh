#!/usr/bin/env bash
# ctest example_self_pretraining: examples/self_pretraining.cpp on a tiny setting (10 updates, one
# seed, 100 training examples): a row of accuracies for supervised-only and for SPT (5 updates of
# masked reconstruction, then 5 of labels, as its metrics rows show); a bad argument is one line
# and exit 1.
set -euo pipefail
program=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_self_pretraining: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

"$program" "$work/runs" 10 1 100 > "$out" || fail "the program failed"
cat "$out"
grep -Eq '^condition +seed +pretrain_steps +train_acc +test_acc +test_label_loss$' "$out" ||
  fail "no header"
for row in "supervised +0 +0" "spt +0 +5"; do
  grep -Eq "^$row +[01]\.[0-9]{4} +[01]\.[0-9]{4} +[0-9]+\.[0-9]{4}$" "$out" ||
    fail "no row for $row"
done
grep -q '"stage":"reconstruction"' "$work/runs/spt_seed0/metrics.jsonl" ||
  fail "SPT did not pretrain"
grep -q '"stage":"label"' "$work/runs/spt_seed0/metrics.jsonl" || fail "SPT did not fine-tune"
if grep -q '"stage":"reconstruction"' "$work/runs/supervised_seed0/metrics.jsonl"; then
  fail "the supervised run pretrained"
fi

if "$program" "$work/bad" 10 1 0 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "TRAIN_EXAMPLES = 0 was accepted"
fi
grep -q "^self_pretraining: .*train_examples" "$work/err.txt" || fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_self_pretraining: ok"
