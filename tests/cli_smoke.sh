#!/usr/bin/env bash
# End-to-end check of the `emergent` CLI (ctest cli_smoke): train a few steps, resume, evaluate a
# checkpoint and write its batch, and fail cleanly on a truncated checkpoint.
#   tests/cli_smoke.sh path/to/emergent
set -euo pipefail
cli=$1
root=$(cd "$(dirname "$0")/.." && pwd)
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
expect_error "training stopped at step" "$cli" train --S 4 --s 2 --lr 1000 --warmup-steps 0 --steps 50 --threads 2 \
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

# Results that cannot silently lie (docs/robustness.md). The extension to 40 steps above is
# recorded in its first row; an edited config.json is refused on resume, naming the
# checkpoint's, config.json's and the given value, and the folder is left as it was.
grep -q '"changed_on_resume":{"steps":{"from":20,"to":40}}' "$dir/run/metrics.jsonl"
cp "$dir/run/config.json" "$dir/config.saved"
sed -i 's/"lr": 0.001,/"lr": 0.01,/' "$dir/run/config.json"
expect_error "lr: 0.001 (step_000050.safetensors), 0.01 (config.json), 0.01 (given)" \
  "$cli" train --config "$dir/run/config.json" --steps 60 --quiet --out "$dir/run"
test ! -e "$dir/run/step_000060.safetensors"
cp "$dir/config.saved" "$dir/run/config.json"
# Every CLI error is one line and exit 1, naming the flag or the file.
expect_error "'bogus' is not a command (commands: train, eval, sweep" "$cli" bogus
expect_error "A subcommand is required (commands: train" "$cli"
expect_error "--count: Value -1 not in range" "$cli" listops --count -1
expect_error "--data-seed: Value -1 not in range" "$cli" listops --data-seed -1
expect_error "--jobs: Value -1 not in range" "$cli" sweep "$dir/x.toml" --jobs -1 --out "$dir/j"
expect_error "--seed: and --seeds are both given" \
  "$cli" train --S 4 --s 2 --seeds 0-1 --seed 5 --quiet --out "$dir/seeds"
expect_error "$dir/run: is a folder, not a JSON file" "$cli" train --config "$dir/run" --out "$dir/c"
expect_error "--out $dir/a_file: $dir/a_file cannot be a folder" \
  "$cli" sweep "$root/tests/sweep/resume.toml" --out "$dir/a_file"
# Every size is bounded, and a run larger than this machine is refused with the numbers.
expect_error "field 'batch_tokens' = 99999999999 is not allowed: expected an integer in \[1, 16777216\]" \
  "$cli" train --S 4 --s 2 --batch-tokens 99999999999 --quiet --out "$dir/tokens"
expect_error "needs about .* more than this machine's memory" \
  "$cli" train --S 4 --s 2 --d-model 65536 --d-ff 65536 --layers 1024 --quiet --out "$dir/huge"
expect_error "--precision tf32: is the CUDA device backend's (--backend cuda); --backend cpu trains in fp32" \
  "$cli" train --S 4 --s 2 --precision tf32 --quiet --out "$dir/tf32"
expect_error "the list may hold at most 10000 seeds" \
  "$cli" train --S 4 --s 2 --seeds 0-10000 --quiet --out "$dir/many"
expect_error "--seeds 0-9999: needs about .* more than this machine's memory" \
  "$cli" train --S 4 --s 2 --seeds 0-9999 --backend thrust-omp --quiet --out "$dir/ensemble"
test ! -e "$dir/seeds" && test ! -e "$dir/tokens" && test ! -e "$dir/huge" && test ! -e "$dir/ensemble"
# A checkpoint with a NaN weight is refused by eval, naming the tensor.
python3 - "$dir/run/step_000050.safetensors" "$dir/nan.safetensors" <<'PY'
import json, struct, sys
data = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = next(k for k in header if k != "__metadata__" and not k.startswith("optimizer."))
start = 8 + n + header[name]["data_offsets"][0]
open(sys.argv[2], "wb").write(data[:start] + struct.pack("<f", float("nan")) + data[start + 4:])
PY
expect_error "holds a non-finite value (nan at index 0)" "$cli" eval --checkpoint "$dir/nan.safetensors" --batch 2
# A warm start that cannot be read leaves no folder behind, so the corrected retry starts clean.
expect_error "/nonexistent/x.safetensors" \
  "$cli" spt --warm-start /nonexistent/x.safetensors --steps 2 --out "$dir/spt"
test ! -e "$dir/spt"

# Results that cannot silently lie, second round (docs/robustness.md).
# threads = 0 (OpenMP's default) is recorded as the count it was, and a resume on another count
# is recorded as a change (before: config.json said 0 for 1 and 2 threads alike).
OMP_NUM_THREADS=2 "$cli" train --S 4 --s 2 --steps 10 --checkpoint-every 10 --quiet --out "$dir/t0" > /dev/null
grep -q '"threads": 2' "$dir/t0/config.json"
OMP_NUM_THREADS=1 "$cli" train --S 4 --s 2 --steps 20 --checkpoint-every 10 --quiet --out "$dir/t0" > /dev/null
grep -q '"changed_on_resume":{"steps":{"from":10,"to":20},"threads":{"from":2,"to":1}}' "$dir/t0/metrics.jsonl"
# --out a Hugging Face model folder: refused, its config.json left as it was (before: replaced)
cp -r "$root/tests/golden/neox/parallel_f32" "$dir/hf"
expect_error "$dir/hf: holds model.safetensors, so it is not a run folder" \
  "$cli" train --S 4 --s 2 --steps 5 --quiet --out "$dir/hf"
cmp "$root/tests/golden/neox/parallel_f32/config.json" "$dir/hf/config.json"
mkdir "$dir/hf_config" && cp "$root/tests/golden/neox/parallel_f32/config.json" "$dir/hf_config/"
expect_error "$dir/hf_config: is not a run folder of this kind: its config.json is not" \
  "$cli" train --S 4 --s 2 --steps 5 --quiet --out "$dir/hf_config"
cmp "$root/tests/golden/neox/parallel_f32/config.json" "$dir/hf_config/config.json"
# values read as written, and settings that would do nothing as asked are refused
expect_error "'0x10' is not allowed for --lr" "$cli" train --S 4 --s 2 --lr 0x10 --quiet --out "$dir/hex"
expect_error "field 'warmup_steps' = 1000 is not allowed: it must be at most steps = 5" \
  "$cli" train --S 4 --s 2 --warmup-steps 1000 --steps 5 --quiet --out "$dir/warm"
expect_error "step 999 is past the run's last step (steps = 20 runs steps 0 to 19)" \
  "$cli" train --S 4 --s 2 --steps 20 --save-attention-at 999 --quiet --out "$dir/snap"
expect_error "step 3 is listed twice" \
  "$cli" train --S 4 --s 2 --steps 20 --save-attention-at 3,3 --quiet --out "$dir/snap"
expect_error "seeds from 0 to 4000000000000000000" \
  "$cli" train --S 4 --s 2 --seeds 4000000000000000001 --quiet --out "$dir/bigseed"
test ! -e "$dir/hex" && test ! -e "$dir/warm" && test ! -e "$dir/snap" && test ! -e "$dir/bigseed"
# spt: a reconstruction stage that masks nothing is refused; a warm start that is not a
# safetensors file says so (before: "header length 8386091879847955067")
expect_error "field 'mask_rate' = 0 is not allowed with pretrain_steps = 2" \
  "$cli" spt --mask-rate 0 --pretrain-steps 2 --steps 4 --out "$dir/spt0"
expect_error "$dir/hf/config.json: is not a safetensors file" \
  "$cli" spt --warm-start "$dir/hf/config.json" --steps 2 --out "$dir/spt1"
test ! -e "$dir/spt0" && test ! -e "$dir/spt1"
# a reconstruction score over no masked token is null, not 0.0
"$cli" spt --mask-rate 0 --steps 2 --eval-every 1 --train-examples 40 --test-examples 20 \
  --eval-examples 10 --quiet --out "$dir/spt2" > /dev/null
grep -q '"test_reconstruction_loss": null' "$dir/spt2/summary.json"
# pythia --length: each kind's own range, never clamped, and refused where it means nothing
expect_error "--length: 3 is not allowed for pattern prompts: expected a length in \[4, 64\]" \
  "$cli" pythia prompts --kinds pattern --count 2 --length 3
expect_error "--length: 25 is not allowed for induction prompts: expected a length in \[2, 24\]" \
  "$cli" pythia prompts --kinds induction --count 2 --length 25
expect_error "--length: is not allowed for ioi prompts, which have no length" \
  "$cli" pythia prompts --kinds ioi --count 2 --length 5

# pythia: --tokenizer is used when the suite has none, and a greedy embedding row past the
# tokenizer's vocabulary prints as an id.
python3 "$root/tests/make_wide_vocab_checkpoint.py" "$root/tests/golden/neox/parallel_f32" "$dir/suite/step0"
"$cli" pythia curve --suite "$dir/suite" --tokenizer "$root/tests/golden/tokenizer/tokenizer.json" \
  --json "$dir/curve.json" > "$dir/curve.txt"
grep -Eq "id 63[89] \(no token\)" "$dir/curve.txt"
grep -q '"greedy"' "$dir/curve.json"
expect_error "pass --tokenizer" "$cli" pythia curve --suite "$dir/suite"
# pythia: Hugging Face weights holding a NaN are refused by every load, naming the tensor
# (before: read as "not solved", rc 0)
python3 - "$dir/suite/step0" "$dir/nan_suite/step0" <<'PY'
import json, os, shutil, struct, sys
source, target = sys.argv[1], sys.argv[2]
shutil.copytree(source, target)
path = os.path.join(target, "model.safetensors")
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = sorted(k for k in header if k != "__metadata__")[0]
start = 8 + n + header[name]["data_offsets"][0]
open(path, "wb").write(data[:start] + struct.pack("<f", float("nan")) + data[start + 4:])
PY
expect_error "model.safetensors: tensor '.*' holds a non-finite value (nan at index 0)" \
  "$cli" pythia curve --suite "$dir/nan_suite" --tokenizer "$root/tests/golden/tokenizer/tokenizer.json"

# pythia prompt sets (docs/pythia.md): the prompts as JSON lines, distinct per kind; a rigged
# suite whose token 316 (" p" in the golden tokenizer) wins from step 64 on, the target of one of
# four pattern prompts: solved from 64 at accuracy >= 0.25, never at 0.5; patching's top K.
"$cli" pythia prompts --kinds ioi,pattern --count 5 --length 4 > "$dir/prompts.jsonl"
python3 "$root/tests/make_rigged_pythia_suite.py" "$root/tests/golden/neox/parallel_f32" "$dir/rigged" 316
cp "$root/tests/golden/tokenizer/tokenizer.json" "$dir/rigged/"
set4=(--kinds pattern --count 4 --length 4)
"$cli" pythia emergence --suite "$dir/rigged" "${set4[@]}" --threshold 0.25 --json "$dir/set_emergence.json" > /dev/null
"$cli" pythia emergence --suite "$dir/rigged" "${set4[@]}" --json "$dir/set_never.json" > /dev/null
"$cli" pythia curve --suite "$dir/rigged" "${set4[@]}" --threshold 0.25 --json "$dir/set_curve.json" > /dev/null
"$cli" pythia patch --suite "$dir/rigged" --pre-step 32 --post-step 64 "${set4[@]}" --json "$dir/set_patch.json" > /dev/null
python3 - "$dir" <<'PY'
import json, sys
from pathlib import Path
d = Path(sys.argv[1])
rows = [json.loads(line) for line in open(d / "prompts.jsonl")]
assert len(rows) == 10 and all(list(r) == ["kind", "seed", "text", "target"] for r in rows), rows
for kind in ("ioi", "pattern"):
    assert len({r["text"] for r in rows if r["kind"] == kind}) == 5, rows
close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(b))
em = json.load(open(d / "set_emergence.json"))
k = em["kinds"][0]
assert (k["outcome"], k["last_failing_step"], k["first_solving_step"], k["emergence_step"]) == ("emerged", 32, 64, 48.0), k
assert k["prompts"][0]["target_token"] == 316 and len(k["evaluations"]) <= 6
for e in k["evaluations"]:
    assert len(e["p_target"]) == len(e["correct"]) == len(e["greedy"]) == 4
    assert close(e["accuracy"], sum(e["correct"]) / 4) and close(e["mean_p_target"], sum(e["p_target"]) / 4)
    assert e["solved"] == (e["accuracy"] >= 0.25)
assert json.load(open(d / "set_never.json"))["kinds"][0]["outcome"] == "never solved"
curve = json.load(open(d / "set_curve.json"))["kinds"][0]
assert len(curve["checkpoints"]) == 13 and curve["emergence_step"] == 48.0 and curve["monotone"]
patch = json.load(open(d / "set_patch.json"))["kinds"][0]
heads, top = patch["heads"], patch["top_k"]
assert [t["k"] for t in top] == [1, 2, 4, 8]  # 16 capped at 2 layers x 4 heads
assert all(h["name"] == f"L{h['layer']}H{h['head']}" for h in heads) and len(heads) == 8
gap = patch["mean_p_post"] - patch["mean_p_pre"]
for t in top:
    assert t["heads"] == [h["name"] for h in heads[:t["k"]]]
    assert close(t["mean_p_patched"], sum(t["p_patched"]) / 4)
    assert close(t["recovery"], (t["mean_p_patched"] - patch["mean_p_pre"]) / gap)
PY
"$cli" pythia curve --suite "$dir/rigged" --kind repetition --count 1 | grep -q '^prompt (repetition, '
expect_error 'ioi prompt (seed 0) "Then, ' "$cli" pythia curve --suite "$dir/rigged" --kinds ioi --count 2
expect_error "--threshold: applies to prompt sets" "$cli" pythia curve --suite "$dir/rigged" --threshold 0.3
expect_error "--top: prompt-set patching reports" \
  "$cli" pythia patch --suite "$dir/rigged" --pre-step 0 --post-step 64 "${set4[@]}" --top 3
expect_error "only 896 distinct ioi prompts" "$cli" pythia prompts --kinds ioi --count 897
# pythia attention: chosen heads' patterns [T x T] (query x key) at chosen steps of the rigged
# suite; each row a distribution over the keys up to the query. A head, a name, a step or a
# suite that is not there is one error line.
"$cli" pythia attention --suite "$dir/rigged" --steps 32,2000 --kind pattern --length 4 \
  --heads L0H3,L1H0 --json "$dir/attention.json" > "$dir/attention.txt"
test "$(grep -c '^ *\(32\|2000\)  L[01]H[03] ' "$dir/attention.txt")" -eq 4
python3 - "$dir/attention.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["kind"] == "pattern" and j["prompt"]["target"] == " p", j["prompt"]
T = len(j["token_ids"])
assert T > 1 and len(j["tokens"]) == T and all(isinstance(t, str) for t in j["tokens"])
assert [c["step"] for c in j["checkpoints"]] == [32, 2000]
for c in j["checkpoints"]:
    assert [h["name"] for h in c["heads"]] == ["L0H3", "L1H0"]
    for h in c["heads"]:
        rows = h["pattern"]
        assert len(rows) == T and all(len(r) == T for r in rows), h["name"]
        for q, r in enumerate(rows):
            assert abs(sum(r) - 1) <= 1e-5, (c["step"], h["name"], q, r)
            assert all(v == 0 for v in r[q + 1:]) and all(v >= 0 for v in r), (c["step"], h["name"], q, r)
PY
attention=(pythia attention --suite "$dir/rigged" --steps 32 --kind pattern --length 4)
expect_error "'L2H0' is not a head of .* (2 layers x 4 heads" "$cli" "${attention[@]}" --heads L0H0,L2H0
test "$(wc -l < "$dir/err.txt")" -eq 1
expect_error "'1.2' is not a head name (expected L<layer>H<head>" "$cli" "${attention[@]}" --heads 1.2
test "$(wc -l < "$dir/err.txt")" -eq 1
expect_error "no checkpoint folder for step 33 (nearest steps: 32, 64)" \
  "$cli" pythia attention --suite "$dir/rigged" --steps 33 --heads L0H0
test "$(wc -l < "$dir/err.txt")" -eq 1
expect_error "$dir/none: is not a folder" "$cli" pythia attention --suite "$dir/none" --steps 0 --heads L0H0
echo "cli_smoke: ok"
