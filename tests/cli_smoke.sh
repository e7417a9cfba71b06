#!/usr/bin/env bash
# End-to-end check of the `emergent` CLI (ctest cli_smoke): train a few steps, resume, evaluate a
# checkpoint and write its batch, and fail cleanly on a truncated checkpoint.
#   tests/cli_smoke.sh path/to/emergent
set -euo pipefail
cli=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

"$cli" train --S 4 --s 2 --steps 20 --checkpoint-every 10 --threads 2 --quiet --out "$dir/run" > "$dir/train.txt"
grep -q "steps 20" "$dir/train.txt"
test -f "$dir/run/step_000020.safetensors"
test "$(wc -l < "$dir/run/metrics.jsonl")" -eq 2   # log_every 10: steps 0 and 10

# Extending the same folder resumes from step 20 and logs steps 20 and 30 only.
"$cli" train --S 4 --s 2 --steps 40 --checkpoint-every 10 --threads 2 --quiet --out "$dir/run" > /dev/null
test "$(wc -l < "$dir/run/metrics.jsonl")" -eq 4
test -f "$dir/run/step_000040.safetensors"

"$cli" eval --checkpoint "$dir/run/step_000040.safetensors" --batch 8 --write-batch "$dir/batch.json" > "$dir/eval.txt"
grep -q "^loss " "$dir/eval.txt"
grep -q '"inputs"' "$dir/batch.json"

# Another configuration in the same folder is refused, naming config.json.
if "$cli" train --S 4 --s 2 --lr 0.5 --steps 40 --quiet --out "$dir/run" 2> "$dir/err.txt"; then exit 1; fi
grep -q "config.json" "$dir/err.txt"

# A truncated checkpoint is an error that names the file, not a crash.
head -c 1000 "$dir/run/step_000040.safetensors" > "$dir/cut.safetensors"
if "$cli" eval --checkpoint "$dir/cut.safetensors" 2> "$dir/err.txt"; then exit 1; fi
grep -q "cut.safetensors" "$dir/err.txt"
# Another token mixer through the registry; its summary says it has no attention to analyse.
"$cli" train --mixer mamba --S 4 --s 2 --steps 10 --threads 2 --quiet --out "$dir/mamba" > "$dir/mamba.txt"
grep -q "attention IoU n/a" "$dir/mamba.txt"

# The Pythia commands fail cleanly on a folder that is not a checkpoint suite.
if "$cli" pythia emergence --suite "$dir/run" 2> "$dir/err.txt"; then exit 1; fi
grep -q "no checkpoint folders named step" "$dir/err.txt"

# Bad input and faults: one clear line and a non-zero exit (1, never a signal's 128+N), nothing lost.
expect_error() {  # expect_error PATTERN COMMAND...: fails unless COMMAND exits 1 with PATTERN on stderr
  local pattern=$1 rc=0
  shift
  "$@" > /dev/null 2> "$dir/err.txt" || rc=$?
  if [ "$rc" -ne 1 ] || ! grep -q -- "$pattern" "$dir/err.txt"; then
    echo "expected exit 1 with '$pattern' from: $*"; echo "got exit $rc:"; cat "$dir/err.txt"; exit 1
  fi
}
touch "$dir/a_file"
expect_error "a_file" "$cli" train --S 4 --s 2 --steps 5 --quiet --out "$dir/a_file"
expect_error "/nonexistent/dir/x.json" "$cli" eval --checkpoint "$dir/run/step_000040.safetensors" --batch 2 \
  --write-batch /nonexistent/dir/x.json
expect_error "field 'beta1' = 1.5 is not allowed: expected a finite number in \[0, 1)" \
  "$cli" train --S 4 --s 2 --beta1 1.5 --quiet --out "$dir/beta"
expect_error "'inf' is not allowed for --bias" "$cli" train --S 4 --s 2 --bias inf --quiet --out "$dir/inf"
expect_error "no attention logits" "$cli" train --mixer mamba --S 4 --s 2 --bias 5 --quiet --out "$dir/mb"
test ! -e "$dir/beta" && test ! -e "$dir/inf" && test ! -e "$dir/mb"   # nothing was started
# A diverging run stops at the first non-finite step, says so in summary.json, exits 1.
expect_error "training stopped at step" "$cli" train --S 4 --s 2 --lr 1e30 --warmup-steps 0 --steps 50 --threads 2 \
  --quiet --out "$dir/diverged"
grep -q '"stopped"' "$dir/diverged/summary.json"

# A full disk (a file-size limit smaller than a checkpoint) while a checkpoint is written: a clear
# error naming it, and the previous checkpoint still loads.
size_kb=$(( $(stat -c %s "$dir/run/step_000040.safetensors") / 1024 ))
(ulimit -f $(( size_kb / 2 )); "$cli" train --S 4 --s 2 --steps 50 --checkpoint-every 10 --threads 2 --quiet \
  --out "$dir/run" > /dev/null 2> "$dir/err.txt") && exit 1
grep -q "step_000050.safetensors.tmp" "$dir/err.txt"
test ! -e "$dir/run/step_000050.safetensors"
"$cli" eval --checkpoint "$dir/run/step_000040.safetensors" --batch 2 > /dev/null
"$cli" train --S 4 --s 2 --steps 50 --checkpoint-every 10 --threads 2 --quiet --out "$dir/run" > /dev/null

# pythia: --tokenizer is used when the suite has none, and a greedy embedding row past the
# tokenizer's vocabulary prints as an id.
root=$(cd "$(dirname "$0")/.." && pwd)
python3 "$root/tests/make_wide_vocab_checkpoint.py" "$root/tests/golden/neox/parallel_f32" "$dir/suite/step0"
"$cli" pythia curve --suite "$dir/suite" --tokenizer "$root/tests/golden/tokenizer/tokenizer.json" \
  --json "$dir/curve.json" > "$dir/curve.txt"
grep -Eq "id 63[89] \(no token\)" "$dir/curve.txt"
grep -q '"greedy"' "$dir/curve.json"
expect_error "pass --tokenizer" "$cli" pythia curve --suite "$dir/suite"
echo "cli_smoke: ok"
