#!/usr/bin/env bash
# ctest example_pythia_emergence: examples/pythia_emergence.cpp on a checkpoint suite made here
# from the tiny GPT-NeoX fixture of tests/golden/neox/parallel_f32 (transformers' save_pretrained
# format) and the golden GPT-NeoX-style tokenizer, with the Python standard library only: 16
# folders step0 ... step5000 on Pythia's schedule whose greedy answer to the paper's repetition
# prompt ("0 7 3 1 2 0 2 3 0 7 3 1 2 0 2" -> " 3") becomes the target from step 2000 on. The
# search must report last failing step 1000, first solving step 2000 and emergence at step 1500,
# loading at most 6 of the 16 checkpoints; a bad argument is one line and exit 1.
set -euo pipefail
program=$1 work=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work"
out=$work/out.txt
fail() { echo "example_pythia_emergence: $*" >&2; cat "$work"/*.txt >&2; exit 1; }

# The suite. Each checkpoint is the fixture with its embedding widened to 640 rows (the tokenizer
# has 605 ids; " 3" is id 337) and a final LayerNorm of weight 0 and bias e_0, so the logits are
# column 0 of the unembedding: the target's entry grows with the step (10 * step / 5000) and a
# rival token's is fixed between steps 1000 and 2000, so the target wins from step 2000 on.
python3 - "$root/tests/golden/neox/parallel_f32" "$root/tests/golden/tokenizer/tokenizer.json" \
  "$work/suite" <<'PY'
import array, json, shutil, struct, sys
from pathlib import Path

source, tokenizer, suite = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
ROWS, TARGET, RIVAL = 640, json.loads(tokenizer.read_text())["model"]["vocab"]["Ġ3"], 17
raw = (source / "model.safetensors").read_bytes()
n = struct.unpack("<Q", raw[:8])[0]
header = json.loads(raw[8:8 + n])
tensors = {}
for name, info in header.items():
    if name != "__metadata__":
        values = array.array("f")
        values.frombytes(raw[8 + n + info["data_offsets"][0]:8 + n + info["data_offsets"][1]])
        tensors[name] = (info["shape"], values)
width = tensors["embed_out.weight"][0][1]
embed_in = tensors["gpt_neox.embed_in.weight"][1]
embed_in.extend([0.0] * ((ROWS - tensors["gpt_neox.embed_in.weight"][0][0]) * width))
tensors["gpt_neox.embed_in.weight"] = ([ROWS, width], embed_in)
tensors["gpt_neox.final_layer_norm.weight"] = ([width], array.array("f", [0.0] * width))
tensors["gpt_neox.final_layer_norm.bias"] = ([width], array.array("f", [1.0] + [0.0] * (width - 1)))
config = json.loads((source / "config.json").read_text())
config["vocab_size"] = ROWS
steps = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000, 3000, 4000, 5000]
for step in steps:
    embed_out = array.array("f", [0.0] * (ROWS * width))
    embed_out[TARGET * width] = 10.0 * step / steps[-1]
    embed_out[RIVAL * width] = 10.0 * 1500 / steps[-1]
    tensors["embed_out.weight"] = ([ROWS, width], embed_out)
    meta, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = values.tobytes()
        meta[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(meta).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    folder = suite / f"step{step}"
    folder.mkdir(parents=True)
    blob = struct.pack("<Q", len(text)) + text + b"".join(blobs)
    (folder / "model.safetensors").write_bytes(blob)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
shutil.copy(tokenizer, suite / "tokenizer.json")
PY

"$program" "$work/suite" > "$out" || fail "the program failed"
cat "$out"
grep -q '^prompt "0 7 3 1 2 0 2 3 0 7 3 1 2 0 2" -> " 3" (token 337)$' "$out" ||
  fail "not the paper's prompt"
grep -q '^16 checkpoints, steps 0 .. 5000$' "$out" || fail "not the 16 checkpoints"
grep -Eq '^ +2000 +0\.[0-9]{4} +337 +yes$' "$out" || fail "step 2000 does not solve"
grep -Eq '^ +1000 +0\.[0-9]{4} +17 +no$' "$out" || fail "step 1000 solves"
grep -Eq '^emerged after [3-6] of 16 checkpoints: last failing step 1000, ' "$out" ||
  fail "not the expected search"
grep -Eq 'first solving step 2000, emergence at step 1500\.0$' "$out" ||
  fail "not the expected point of emergence"

if "$program" "$work/suite" repetition 0 1 > "$work/bad_out.txt" 2> "$work/err.txt"; then
  fail "LENGTH = 1 was accepted"
fi
grep -q "^pythia_emergence: capability prompt: length: 1 is not allowed for repetition prompts: expected a length in \[2, 64\]$" "$work/err.txt" ||
  fail "unclear error"
[ "$(wc -l < "$work/err.txt")" = 1 ] || fail "the error is not one line"
echo "example_pythia_emergence: ok"
