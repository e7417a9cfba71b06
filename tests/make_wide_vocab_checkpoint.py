#!/usr/bin/env python3
"""Writes a GPT-NeoX checkpoint whose greedy next token is an embedding row past the tokenizer's
vocabulary, as Pythia's can be (50,304 embedding rows for 50,277 token ids): the tiny model of
tests/golden/neox/parallel_f32 with its embeddings widened to 640 rows (the golden tokenizer has
605 ids), the output rows all zero but the last two (+c and -c times ones), so one of those two
always wins. Standard library
only (cli_smoke.sh runs it).

    python3 tests/make_wide_vocab_checkpoint.py tests/golden/neox/parallel_f32 OUT_FOLDER
"""
import array
import json
import struct
import sys
from pathlib import Path

ROWS = 640  # the golden tokenizer has 605 ids


def main(source, out):
    source, out = Path(source), Path(out)
    raw = (source / "model.safetensors").read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        begin, end = info["data_offsets"]
        values = array.array("f")
        values.frombytes(data[begin:end])
        tensors[name] = (info["shape"], values)
    width = tensors["embed_out.weight"][0][1]
    old_rows = tensors["gpt_neox.embed_in.weight"][0][0]
    embed_in = tensors["gpt_neox.embed_in.weight"][1]
    embed_in.extend([0.0] * ((ROWS - old_rows) * width))
    tensors["gpt_neox.embed_in.weight"] = ([ROWS, width], embed_in)
    embed_out = array.array("f", [0.0] * (ROWS * width))
    for j in range(width):
        embed_out[(ROWS - 2) * width + j] = 10.0
        embed_out[(ROWS - 1) * width + j] = -10.0
    tensors["embed_out.weight"] = ([ROWS, width], embed_out)

    new_header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        shape, values = tensors[name]
        blob = values.tobytes()
        new_header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(new_header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.safetensors").write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    config = json.loads((source / "config.json").read_text())
    config["vocab_size"] = ROWS
    (out / "config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
