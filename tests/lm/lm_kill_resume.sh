#!/usr/bin/env bash
# `emergent lm` end to end on a tiny corpus (random ids under the golden test tokenizer): a run
# killed with SIGKILL mid-run and resumed ends byte-identical to the uninterrupted one (every
# suite checkpoint's model.safetensors, the metrics rows); the folder is a checkpoint suite that
# `emergent pythia emergence` reads; a damaged corpus, an edited config.json and a corpus other
# than the one a run was trained on are refused in one line.
#   tests/lm/lm_kill_resume.sh path/to/emergent
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null || true; rm -rf "$dir"' EXIT

make_corpus() {  # make_corpus FOLDER SEED: 60,000 random ids below 600 and their manifest
  /usr/bin/python3 - "$1" "$2" "$here/../golden/tokenizer/tokenizer.json" <<'PY'
import hashlib, json, os, random, shutil, struct, sys
folder, seed, tokenizer = sys.argv[1], int(sys.argv[2]), sys.argv[3]
os.makedirs(folder)
rng = random.Random(seed)
data = struct.pack("<60000H", *[rng.randrange(600) for _ in range(60000)])
open(os.path.join(folder, "train.tokens"), "wb").write(data)
shutil.copy(tokenizer, os.path.join(folder, "tokenizer.json"))
spec = json.load(open(tokenizer))  # the model's vocabulary: every id of the tokenizer
ids = list(spec["model"]["vocab"].values()) + [t["id"] for t in spec.get("added_tokens", [])]
json.dump({"vocab_size": max(ids) + 1, "train_tokens_sha256": hashlib.sha256(data).hexdigest()},
          open(os.path.join(folder, "corpus.json"), "w"))
PY
}
make_corpus "$dir/corpus" 1
args=(--steps 600 --batch 4 --context 32 --checkpoint-every 100
      --log-every 10 --eval-sequences 2 --threads 1 --quiet)

"$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/a" > /dev/null

"$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/b" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1200); do [ -d "$dir/b/step128" ] && break; sleep 0.05; done
kill -9 "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
[ ! -f "$dir/b/summary.json" ] || { echo "FAIL: the run finished before it was killed"; exit 1; }
"$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/b" > /dev/null

for a in "$dir"/a/step*/model.safetensors; do
  b=$dir/b/${a#"$dir/a/"}
  cmp -s "$a" "$b" || { echo "FAIL: $b differs from the uninterrupted run"; exit 1; }
done
[ "$(ls -d "$dir"/a/step*/ | wc -l)" -eq 17 ] || { echo "FAIL: expected 17 suite folders (0, 1, 2, 4 ... 512, every 100, 600)"; exit 1; }
cmp -s "$dir/a/metrics.jsonl" "$dir/b/metrics.jsonl" || { echo "FAIL: metrics rows differ"; exit 1; }
ls "$dir"/b/step_*.safetensors | wc -l | grep -qx 1 || { echo "FAIL: older training checkpoints kept"; exit 1; }

# the folder is a suite: the analysis reads every checkpoint of it
"$cli" pythia emergence --suite "$dir/a" --kinds repetition --count 4 > "$dir/emergence.txt"
grep -q "repetition:" "$dir/emergence.txt" || { echo "FAIL: pythia emergence"; exit 1; }

refused() {  # refused WHAT EXPECTED COMMAND...: exits non-zero with EXPECTED in one error line
  local what=$1 expected=$2; shift 2
  if "$@" > "$dir/out.txt" 2>&1; then echo "FAIL: $what was accepted"; exit 1; fi
  grep -q "$expected" "$dir/out.txt" || { echo "FAIL: $what: $(cat "$dir/out.txt")"; exit 1; }
}
cp -r "$dir/corpus" "$dir/damaged"
printf '\x01\x00' >> "$dir/damaged/train.tokens"
refused "a damaged corpus" "train_tokens_sha256" "$cli" lm "${args[@]}" --corpus "$dir/damaged" --out "$dir/c"
cp "$dir/b/config.json" "$dir/config.saved"
sed -i 's/"lr": 0.001/"lr": 0.002/' "$dir/b/config.json"
refused "an edited config.json" "config.json" "$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/b"
cp "$dir/config.saved" "$dir/b/config.json"
rm -rf "$dir/corpus" && make_corpus "$dir/corpus" 2  # the same folder, other tokens
refused "another corpus on resume" "trained on another corpus" "$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/b"

# Results that cannot silently lie, second round (docs/robustness.md).
# A finished run run again is left as it is (before: summary.json rewritten with final_loss 0.0);
# one killed after its last checkpoint but before its summary.json gets the same losses.
cp "$dir/config.saved" "$dir/b/config.json"
rm -rf "$dir/corpus" && make_corpus "$dir/corpus" 1
cp "$dir/a/summary.json" "$dir/summary.a"
"$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/a" > "$dir/again.json"
cmp "$dir/a/summary.json" "$dir/summary.a" || { echo "FAIL: a finished run's summary.json was rewritten"; exit 1; }
rm "$dir/a/summary.json"
"$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/a" > /dev/null
python3 - "$dir/summary.a" "$dir/a/summary.json" "$dir/again.json" <<'PY'
import json, sys
before, rebuilt, printed = (json.load(open(p)) for p in sys.argv[1:])
for key in ("steps_done", "final_loss", "val_loss", "tokens_seen", "corpus_sha256"):
    assert rebuilt[key] == before[key] == printed[key], (key, before[key], rebuilt[key], printed[key])
assert before["final_loss"] > 0
PY
# the memory a run needs is estimated before anything is allocated or written
few=(--context 32 --log-every 10 --eval-sequences 2 --threads 1 --quiet --corpus "$dir/corpus")
refused "a batch larger than the machine" "needs about .* more than this machine's memory" \
  "$cli" lm "${few[@]}" --batch 100000000 --out "$dir/big"
refused "a width larger than the machine" "needs about .* more than this machine's memory" \
  "$cli" lm "${few[@]}" --d-model 65536 --out "$dir/big"
[ ! -e "$dir/big" ] || { echo "FAIL: a refused run left its folder"; exit 1; }
# a corpus whose tokenizer disagrees with it is refused at the start, naming the file
cp -r "$dir/corpus" "$dir/narrow"
python3 - "$dir/narrow/corpus.json" <<'PY'
import json, sys
manifest = json.load(open(sys.argv[1]))
manifest["vocab_size"] = 300  # below its tokenizer's 603 ids (the tokens are below 600)
json.dump(manifest, open(sys.argv[1], "w"))
PY
refused "a vocabulary smaller than the tokenizer" "corpus.json: field 'vocab_size' = 300 is smaller than the tokenizer's 603 ids" \
  "$cli" lm "${args[@]}" --corpus "$dir/narrow" --out "$dir/narrow_run"
cp -r "$dir/corpus" "$dir/broken"
echo "not json" > "$dir/broken/tokenizer.json"
refused "a tokenizer.json that is not JSON" "broken/tokenizer.json" \
  "$cli" lm "${args[@]}" --corpus "$dir/broken" --out "$dir/broken_run"
# --out a Hugging Face model folder (a suite checkpoint) is refused, its config.json kept
cp -r "$dir/a/step0" "$dir/hf"
refused "a Hugging Face folder as --out" "holds model.safetensors, so it is not a run folder" \
  "$cli" lm "${args[@]}" --corpus "$dir/corpus" --out "$dir/hf"
cmp -s "$dir/a/step0/config.json" "$dir/hf/config.json" || { echo "FAIL: config.json overwritten"; exit 1; }
refused "a warmup longer than the run" "field 'warmup_steps' = 1000 is not allowed: it must be at most steps = 5" \
  "$cli" lm "${few[@]}" --warmup-steps 1000 --steps 5 --out "$dir/warm"
echo "lm_kill_resume: ok"
