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
# prepretraining reads result rows only: fabricated stage-2 rows in two sweep folders, the
# conditions from init_from ("" -> none; a sweep folder, or a checkpoint in it -> dyck). The
# emergence steps are the 2-group example worked by hand in tests/test_ensemble_statistics.cpp
# (x 100): log-rank statistic 169/641, p = 0.6076.
mkdir -p "$dir/ppt-a/rows" "$dir/ppt-b/rows"
row() {  # id init_from emergence_step solved_step steps_done
  printf '{"id":"%s","label":"","config":{"task":"linear-map","seed":0,"init_from":"%s"},"result":{"emergence_step":%s,"solved_step":%s,"steps_done":%s,"final_loss":0.1}}\n' "$@"
}
{ row n1 "" 100 150 400; row n2 "" null null 200; row n3 "" 300 null 400; } > "$dir/ppt-a/rows/shard-0-of-1.jsonl"
{ row d1 "runs/ppt-dyck" 200 250 400; row d2 "runs/ppt-dyck/runs/0123/step_000100.safetensors" 300 390 400
  row d3 "runs/figures/prepretraining-1-dyck-small/" null null 400; } > "$dir/ppt-b/rows/shard-0-of-1.jsonl"
/usr/bin/python3 "$root/scripts/plot.py" prepretraining "$dir/ppt-a" "$dir/ppt-b" --event emergence --out "$dir/prepretraining.png" > "$dir/ppt.txt"
grep -q "^| none | 3 | 2 | 300 \[100, not reached\] | 1/3 = 0.33 \[0.06, 0.79\] |" "$dir/ppt.txt"
grep -q "^| dyck | 3 | 2 | 300 \[200, not reached\] | 2/3 = 0.67 \[0.21, 0.94\] |" "$dir/ppt.txt"
grep -q "^log-rank test of the emergence steps across the 2 conditions: chi-square 0.264, df 1, p = 0.608" "$dir/ppt.txt"
grep -q "^solved step: none KM median not reached; dyck KM median 390" "$dir/ppt.txt"
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
