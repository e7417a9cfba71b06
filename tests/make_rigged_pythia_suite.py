#!/usr/bin/env python3
"""Writes a small checkpoint suite whose answer is rigged, for the prompt-set commands of
`emergent pythia` (cli_smoke.sh, docs/pythia.md): the tiny GPT-NeoX of
tests/golden/neox/parallel_f32 with its embeddings widened to 640 rows (the golden tokenizer's
605 ids fit), saved at steps 0, 1, 2, 4, ..., 512, 1000, 2000.

At every step the final LayerNorm has weight 0.1 and bias 1, so its output z is 1 + 0.1 n with n
the normalised hidden state (sum(n) = 0). All output rows are 0 but two: token 5's is 0.05 x ones
(logit 3.2 on every prompt) and the target's is a(step) x ones + 0.3 r, r a fixed N(0, 1) vector,
a(step) = 0.1 log2(step + 1) / 11, with sum(r) = 0 (logit 64 a + 0.03 r.n). The target therefore becomes the greedy
token between steps 32 (64 a = 2.93) and 64 (3.50), on every prompt whose target it is, and the
small r.n term makes p(target) depend on attention. The attention's query_key_value weights are
scaled by 1 + step / 500, so the patterns change from step to step and patching moves p(target).
Standard library only.

    python3 tests/make_rigged_pythia_suite.py tests/golden/neox/parallel_f32 OUT_SUITE TARGET_ID
"""
import array
import json
import math
import random
import struct
import sys
from pathlib import Path

ROWS = 640
STEPS = [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 2000]


def read_f32(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(raw[8 + n + begin:8 + n + end])
        tensors[name] = (info["shape"], values)
    return tensors


def write_f32(path, tensors):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = values.tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def checkpoint(base, step, target):
    width = base["embed_out.weight"][0][1]
    t = dict(base)
    embed_in = array.array("f", base["gpt_neox.embed_in.weight"][1])
    embed_in.extend([0.0] * ((ROWS - base["gpt_neox.embed_in.weight"][0][0]) * width))
    t["gpt_neox.embed_in.weight"] = ([ROWS, width], embed_in)
    t["gpt_neox.final_layer_norm.weight"] = ([width], array.array("f", [0.1] * width))
    t["gpt_neox.final_layer_norm.bias"] = ([width], array.array("f", [1.0] * width))
    a = 0.1 * math.log2(step + 1) / 11
    rng = random.Random(1234)
    r = [rng.gauss(0, 1) for _ in range(width)]
    r = [x - sum(r) / width for x in r]  # sum(r) = 0: r.z = 0.1 r.n
    embed_out = array.array("f", [0.0] * (ROWS * width))
    for j in range(width):
        embed_out[5 * width + j] = 0.05
        embed_out[target * width + j] = a + 0.3 * r[j]
    t["embed_out.weight"] = ([ROWS, width], embed_out)
    for name, (shape, values) in base.items():
        if name.endswith("attention.query_key_value.weight"):
            t[name] = (shape, array.array("f", [v * (1 + step / 500) for v in values]))
    return t


def main(source, out, target):
    source, out, target = Path(source), Path(out), int(target)
    assert 5 != target < ROWS
    base = read_f32(source / "model.safetensors")
    config = json.loads((source / "config.json").read_text())
    config["vocab_size"] = ROWS
    for step in STEPS:
        folder = out / f"step{step}"
        folder.mkdir(parents=True, exist_ok=True)
        write_f32(folder / "model.safetensors", checkpoint(base, step, target))
        (folder / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
