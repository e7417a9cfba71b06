#!/usr/bin/env bash
# `emergent sweep` end to end (ctest sweep): the 8-run sweep of resume.toml
#   1. uninterrupted;
#   2. killed with SIGKILL twice mid-run and resumed: every run's row exactly once, the collected
#      rows byte-identical to (1), no trainer left behind by the killed sweep;
#   3. as 2 shards running at the same time: byte-identical to (1);
# and status, summarize, a bad sweep file and a second trainer of a running run folder.
#   tests/sweep/sweep_test.sh path/to/emergent
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
sweep=$here/resume.toml
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null || true; rm -rf "$dir"' EXIT

"$cli" sweep "$sweep" --out "$dir/A" --quiet 2> /dev/null
"$cli" sweep collect "$dir/A" > /dev/null
test "$(wc -l < "$dir/A/results.jsonl")" -eq 8

# Killed twice, then resumed to the end: first once some run has its first checkpoint (no run
# can have finished: 150 steps), then once two runs have rows (others are mid-way).
wait_for() {  # wait_for CONDITION: polls up to 60 s
  for _ in $(seq 600); do eval "$1" && return 0; sleep 0.1; done
  echo "timed out waiting for: $1"; exit 1
}
for condition in 'ls "$dir"/B/runs/*/step_000010.safetensors > /dev/null 2>&1' \
                 'test "$(cat "$dir"/B/rows/*.jsonl 2> /dev/null | wc -l)" -ge 2'; do
  "$cli" sweep "$sweep" --out "$dir/B" --quiet 2> /dev/null &
  pid=$!
  wait_for "$condition"
  kill -9 "$pid"
  wait "$pid" 2> /dev/null || true
  # Its trainers die with it (PR_SET_PDEATHSIG); on a loaded machine that takes a moment, and a
  # dying trainer leaves pgrep's sight (its memory freed) before its run lock is released (its
  # files closed), so status may show it running a moment longer (a CI failure under load).
  for _ in $(seq 100); do
    pgrep -f "train --config $dir/B" > /dev/null ||
      { "$cli" sweep status "$dir/B" > "$dir/status.txt" && grep -q " 0 running," "$dir/status.txt" && break; }
    sleep 0.1
  done
  if pgrep -f "train --config $dir/B" > /dev/null; then echo "a trainer outlived its sweep"; exit 1; fi
  "$cli" sweep status "$dir/B" > "$dir/status.txt"
  grep -q " 0 running," "$dir/status.txt" || { echo "a run lock outlived its trainer"; cat "$dir/status.txt"; exit 1; }
  grep -Eq "8 runs: [0-7] done, 0 running, [1-8] left" "$dir/status.txt"
  # after the first kill, the runs cut mid-way are there to resume
  [ -e "$dir/first_kill.txt" ] || { cp "$dir/status.txt" "$dir/first_kill.txt"; grep -Eq "\([1-9][0-9]* of them started\)" "$dir/first_kill.txt"; }
done
"$cli" sweep "$sweep" --out "$dir/B" --quiet 2> /dev/null
# Every run's row exactly once in the raw rows, and the same numbers as the uninterrupted sweep.
test "$(cat "$dir"/B/rows/*.jsonl | wc -l)" -eq 8
test "$(cat "$dir"/B/rows/*.jsonl | grep -o '"id":"[0-9a-f]*"' | sort -u | wc -l)" -eq 8
"$cli" sweep collect "$dir/B" > /dev/null
cmp "$dir/A/results.jsonl" "$dir/B/results.jsonl"
# A restart of a finished sweep runs nothing. (Output goes to files before grep -q reads it: grep
# -q stops at its first match, and the writer's SIGPIPE would fail the pipe under pipefail.)
"$cli" sweep "$sweep" --out "$dir/B" --quiet > "$dir/restart.txt" 2>&1
grep -q "0 of them to run" "$dir/restart.txt"

# Two shards at the same time into one folder.
"$cli" sweep "$sweep" --out "$dir/C" --shard 0/2 --jobs 1 --quiet 2> /dev/null &
"$cli" sweep "$sweep" --out "$dir/C" --shard 1/2 --jobs 1 --quiet 2> /dev/null
wait
test "$(cat "$dir"/C/rows/shard-0-of-2.jsonl | wc -l)" -eq 4
test "$(cat "$dir"/C/rows/shard-1-of-2.jsonl | wc -l)" -eq 4
"$cli" sweep collect "$dir/C" > /dev/null
cmp "$dir/A/results.jsonl" "$dir/C/results.jsonl"

"$cli" sweep status "$dir/A" > "$dir/status.txt"
grep -q "8 done, 0 running, 0 left" "$dir/status.txt"
"$cli" sweep summarize "$dir/A" --by S,s --json "$dir/summary.json" > "$dir/summary.txt"
grep -q "^S=4 s=1: 2 runs" "$dir/summary.txt"
grep -q "emergence step per seed: 0:" "$dir/summary.txt"
test "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$dir/summary.json")" -eq 4

# A sweep folder is bound to its sweep: an edited file is refused, naming what differs, and rows
# of other ids are ignored and counted.
sed 's/^steps = 150/steps = 160/' "$sweep" > "$dir/edited.toml"
if "$cli" sweep "$dir/edited.toml" --out "$dir/A" --quiet 2> "$dir/err.txt"; then exit 1; fi
grep -q "A/sweep.json: this folder holds the sweep of .*resume.toml (8 runs)" "$dir/err.txt"
grep -q "steps: 150 (sweep.json), 160 (.*edited.toml)" "$dir/err.txt"
echo '{"id":"000000000000","label":"","config":{},"result":{}}' >> "$dir/A/rows/shard-0-of-1.jsonl"
"$cli" sweep summarize "$dir/A" --by S,s > "$dir/summary.txt"
grep -q "^8 finished runs of 8 (1 row ignored: not runs of this sweep)" "$dir/summary.txt"
"$cli" sweep status "$dir/A" > "$dir/status.txt"
grep -q "8 done, 0 running, 0 left (0 of them started) (1 row ignored" "$dir/status.txt"

# A run that fails says why in the sweep's error and in its log, here a full disk (a file-size
# limit under a checkpoint's size); a run's edited config.json is refused, never trained under
# the sweep's id; restored, the run resumes.
printf '[base]\nS = 4\ns = 2\nsteps = 20\ncheckpoint_every = 10\nthreads = 1\n' > "$dir/one.toml"
(ulimit -f 8; "$cli" sweep "$dir/one.toml" --out "$dir/D" --quiet > /dev/null 2> "$dir/err.txt") && exit 1
grep -q "failed with exit status 1 (error: .*step_000010.safetensors.tmp.*); its log: .*train.log" "$dir/err.txt"
grep -q "step_000010.safetensors.tmp" "$dir"/D/runs/*/train.log
config=$(ls "$dir"/D/runs/*/config.json)
cp "$config" "$dir/one-config.saved"
sed -i 's/"lr": 0.001,/"lr": 0.01,/' "$config"
if "$cli" sweep "$dir/one.toml" --out "$dir/D" --quiet 2> "$dir/err.txt"; then exit 1; fi
grep -q "config.json: differs from the sweep's run .*lr: 0.001 (sweep.json), 0.01 (config.json)" "$dir/err.txt"
cp "$dir/one-config.saved" "$config"
"$cli" sweep "$dir/one.toml" --out "$dir/D" --quiet 2> /dev/null

# A bad value in a sweep file names the file, the block, the run, the field and what is allowed.
printf '[base]\nsteps = 10\n[[grid]]\nS = [4]\nbeta1 = [0.9, 1.5]\n' > "$dir/bad.toml"
if "$cli" sweep "$dir/bad.toml" --out "$dir/bad" 2> "$dir/err.txt"; then exit 1; fi
grep -q "bad.toml: grid block 1, run {beta1=1.5}: field 'beta1' = 1.5 is not allowed: expected a finite number in \[0, 1)" "$dir/err.txt"
printf '[base]\nsteps = 10\nbias = inf\n' > "$dir/inf.toml"
if "$cli" sweep "$dir/inf.toml" --out "$dir/inf" 2> "$dir/err.txt"; then exit 1; fi
grep -q "field 'bias' = \"inf\" is not allowed" "$dir/err.txt"
# threads = 0 would make a run's trajectory depend on the machine that runs it under one id
printf '[base]\nsteps = 10\nthreads = 0\n' > "$dir/threads.toml"
if "$cli" sweep "$dir/threads.toml" --out "$dir/threads" 2> "$dir/err.txt"; then exit 1; fi
grep -q "field 'threads' = 0 is not allowed in a sweep" "$dir/err.txt"

# A second trainer of a run folder in use is refused; the lock of a killed one is not.
"$cli" train --S 8 --s 3 --steps 100000 --threads 1 --quiet --out "$dir/locked" > /dev/null 2>&1 &
pid=$!
wait_for 'test -s "$dir/locked/metrics.jsonl"'  # it trains, so it holds the lock
if "$cli" train --S 8 --s 3 --steps 100000 --threads 1 --quiet --out "$dir/locked" 2> "$dir/err.txt"; then exit 1; fi
grep -q "another process is training into this run folder (pid $pid" "$dir/err.txt"
kill -9 "$pid"
wait "$pid" 2> /dev/null || true
"$cli" train --S 8 --s 3 --steps 20 --threads 1 --quiet --out "$dir/unlocked" > /dev/null
echo "sweep_test: ok"
