#!/usr/bin/env bash
# scripts/plot.py on a real sweep folder (ctest plot): a tiny sweep with attention snapshots, then
# a tiny automaton sweep and a tiny self-pretraining sweep with its transplant stage: every figure kind, each a PNG; and `sweep --dry-run` lists without running.
#   tests/plot/plot_test.sh path/to/emergent
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$cli" sweep "$here/tiny.toml" --dry-run > "$dir/plan.txt"
grep -q "tiny.toml: 4 runs, every one checked" "$dir/plan.txt"
test ! -e "$dir/sweep"  # nothing written

"$cli" sweep "$here/tiny.toml" --out "$dir/sweep" --quiet 2> /dev/null
run=$(ls -d "$dir"/sweep/runs/* | head -1)
test -s "$run/attention/step_000010.safetensors"
test -s "$run/attention/step_000050.safetensors"

plot() { /usr/bin/python3 "$root/scripts/plot.py" "$@" --emergent "$cli" > /dev/null; }
plot sparsity "$dir/sweep" --out "$dir/sparsity.png"
plot architectures "$dir/sweep" --out "$dir/architectures.png"
plot width "$dir/sweep" --out "$dir/width.png"
plot curves "$dir/sweep" --out "$dir/curves.png"
plot plateau "$dir/sweep" --out "$dir/plateau.png"
plot depth "$dir/sweep" --out "$dir/depth.png"
plot attention "$run" --out "$dir/attention.png"
plot runs "$run" --out "$dir/runs.png"
"$cli" sweep "$here/tiny_ca.toml" --out "$dir/ca" --quiet 2> /dev/null
plot factors "$dir/ca" --out "$dir/factors.png"
plot batch "$dir/ca" --out "$dir/batch.png"
plot curves "$dir/ca" --out "$dir/ca_curves.png"
"$cli" sweep "$here/tiny_spt.toml" --out "$dir/spt" --quiet 2> /dev/null
EMERGENT=$cli bash "$root/scripts/spt_transplant.sh" "$dir/spt" 2> /dev/null
test "$(ls "$dir/spt-transplant/runs" | wc -l)" -eq 4  # 2 SPT seeds x (qk, all_but_qk)
plot spt "$dir/spt" "$dir/spt-transplant" --out "$dir/spt.png"
# sweep summarize knows emergence steps only: a self-pretraining folder is one line.
if "$cli" sweep summarize "$dir/spt" --by seed > /dev/null 2> "$dir/summarize.err"; then exit 1; fi
grep -q "no emergence steps to summarize" "$dir/summarize.err"
for png in "$dir"/*.png; do
  # a PNG: its signature, and more than a blank canvas
  test "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a
  test "$(stat -c %s "$png")" -gt 10000
done
# A folder without finished runs is one line, not a traceback.
mkdir -p "$dir/empty/rows"
if /usr/bin/python3 "$root/scripts/plot.py" sparsity "$dir/empty" --out "$dir/x.png" 2> "$dir/err.txt"; then exit 1; fi
grep -q "no finished runs" "$dir/err.txt"
echo "plot_test: ok"
