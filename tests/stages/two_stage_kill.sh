#!/usr/bin/env bash
# Chained stages through the CLI (config init_from / init_take): a Dyck stage, then the linear map
# from its last checkpoint. Each stage is killed with SIGKILL mid-run and resumed, and must end
# byte-identical to the uninterrupted run: the same last checkpoint, the same metrics rows (but
# wall_s and the changed_on_resume record). Also: the source is recorded in the first row, and an
# unfinished source or a bad init_take is refused in one line.
#   tests/stages/two_stage_kill.sh path/to/emergent
set -euo pipefail
cli=$1
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null || true; rm -rf "$dir"' EXIT

wait_for() {  # wait_for CONDITION: polls up to 120 s
  for _ in $(seq 1200); do eval "$1" && return 0; sleep 0.1; done
  echo "timed out waiting for: $1"; exit 1
}
same_rows() {  # same_rows A B: metrics.jsonl equal but for wall_s and changed_on_resume
  /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
def rows(path):
    out = []
    for line in open(path):
        row = json.loads(line)
        row.pop("wall_s"); row.pop("changed_on_resume", None)
        out.append(row)
    return out
a, b = rows(sys.argv[1]), rows(sys.argv[2])
assert a == b, f"metrics differ: {len(a)} against {len(b)} rows"
PY
}
common=(--layers 1 --max-len 64 --batch-tokens 1024 --threads 1 --checkpoint-every 50 --log-every 5 --quiet)
stage1=(--task dyck --k 2 --max-depth 4 --tokens 32 --steps 150 "${common[@]}")
stage2=(--task linear-map --S 8 --s 3 --steps 150 --init-take all "${common[@]}")

# uninterrupted (the first call also compiles the Dyck shape, if it is not cached)
"$cli" train "${stage1[@]}" --out "$dir/s1" > /dev/null 2>&1
"$cli" train "${stage2[@]}" --init-from "$dir/s1" --out "$dir/s2" > /dev/null 2>&1

# each stage killed once it has its first checkpoint, then resumed
run_killed() {  # run_killed OUT ARGS...: train, SIGKILL after step 50's checkpoint, resume
  local out=$1; shift
  "$cli" train "$@" --out "$out" > /dev/null 2>&1 &
  local pid=$!
  wait_for "test -e '$out/step_000050.safetensors'"
  kill -9 "$pid"
  wait "$pid" 2> /dev/null || true
  if [ -e "$out/summary.json" ]; then echo "the run finished before the kill: nothing tested"; exit 1; fi
  "$cli" train "$@" --out "$out" > /dev/null 2>&1
}
run_killed "$dir/s1k" "${stage1[@]}"
cmp "$dir/s1/step_000150.safetensors" "$dir/s1k/step_000150.safetensors"
same_rows "$dir/s1" "$dir/s1k"
run_killed "$dir/s2k" "${stage2[@]}" --init-from "$dir/s1"
cmp "$dir/s2/step_000150.safetensors" "$dir/s2k/step_000150.safetensors"
same_rows "$dir/s2" "$dir/s2k"

# the source in the first metrics row: the Dyck run's last checkpoint, the blocks taken, the
# embedding and head fresh (vocabulary 4 -> 2)
head -1 "$dir/s2/metrics.jsonl" > "$dir/first.json"
grep -q "\"checkpoint\":\"$dir/s1/step_000150.safetensors\"" "$dir/first.json"
grep -q '"task":"dyck"' "$dir/first.json"
grep -q '"fresh":\["embed.token.weight","head.weight"\]' "$dir/first.json"
if sed -n 2p "$dir/s2/metrics.jsonl" | grep -q init_source; then exit 1; fi

# an unfinished source, and qk for a mixer without query-key projections, in one line each
mkdir -p "$dir/unfinished" && cp "$dir/s1k/config.json" "$dir/s1k/step_000050.safetensors" "$dir/unfinished/"
if "$cli" train "${stage2[@]}" --init-from "$dir/unfinished" --out "$dir/bad1" 2> "$dir/err.txt"; then exit 1; fi
grep -q "field 'init_from': run $dir/unfinished is not finished (no summary.json)" "$dir/err.txt"
test "$(wc -l < "$dir/err.txt")" -eq 1
if "$cli" train --task linear-map --S 8 --s 3 --steps 10 --mixer mlp_mixer --init-take qk --init-from "$dir/s1" \
    --quiet --out "$dir/bad2" 2> "$dir/err.txt"; then exit 1; fi
grep -q "field 'init_take': 'qk' is not allowed for this model" "$dir/err.txt"
echo "two_stage_kill: ok"
