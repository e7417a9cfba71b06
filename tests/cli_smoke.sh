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
echo "cli_smoke: ok"
