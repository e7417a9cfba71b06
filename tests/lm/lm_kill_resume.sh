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
json.dump({"vocab_size": 600, "train_tokens_sha256": hashlib.sha256(data).hexdigest()},
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
echo "lm_kill_resume: ok"
