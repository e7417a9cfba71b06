#!/usr/bin/env python3
"""Loads a GPT-NeoX checkpoint folder that emergent exported (config.json + model.safetensors, or
a sharded model.safetensors.index.json) with Hugging Face transformers, runs it on the token ids
of FOLDER/tokens.json, and writes what transformers computes, for emergent to compare with its
own logits.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python tests/golden/check_neox_export.py FOLDER

FOLDER/tokens.json: a JSON list of equal-length lists of token ids, [[id, ...], ...] ([B][T]).
Writes FOLDER/transformers_logits.safetensors: "logits", F32 [B, T, V], from
GPTNeoXForCausalLM.from_pretrained(FOLDER, dtype=torch.float32) with eager attention, no
attention mask (every position attends causally to the ones before it, positions 0..T-1), and
prints the shape and max |logit|. No tokenizer is involved.

Exits with status 1 and a one-line reason when (an earlier transformers_logits.safetensors is
deleted first, so nothing is left there then): the folder, config.json or
tokens.json is missing or malformed; the config is not gpt_neox; from_pretrained reports a
missing, unexpected or mismatched (wrong shape) key, or any other loading error; the file holds
a tensor save_pretrained would not write (e.g. the legacy attention.bias / masked_bias /
rotary_emb.inv_freq buffers, which from_pretrained drops silently); a token id is
outside [0, vocab_size) or T exceeds max_position_embeddings; a logit is not finite.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


def fail(message: str) -> None:
    print(f"check_neox_export: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def read_tokens(path: Path) -> list[list[int]]:
    if not path.is_file():
        fail(f"{path} is missing (a JSON list of lists of token ids)")
    try:
        tokens = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        fail(f"{path}: not valid JSON ({e})")
    if (not isinstance(tokens, list) or not tokens
            or not all(isinstance(row, list) and row for row in tokens)):
        fail(f"{path}: expected a non-empty list of non-empty lists of token ids")
    if len({len(row) for row in tokens}) != 1:
        fail(f"{path}: rows have different lengths {sorted({len(row) for row in tokens})}")
    if not all(isinstance(t, int) and not isinstance(t, bool) for row in tokens for t in row):
        fail(f"{path}: every token id must be an integer")
    return tokens


def file_tensors(folder: Path) -> dict[str, str]:
    """name -> safetensors dtype of every tensor in the folder's checkpoint file(s)."""
    import safetensors

    index = folder / "model.safetensors.index.json"
    files = ([folder / "model.safetensors"] if not index.is_file()
             else [folder / f for f in sorted(set(json.loads(index.read_text())["weight_map"].values()))])
    out = {}
    for path in files:
        with safetensors.safe_open(path, "pt") as f:
            for name in f.keys():
                out[name] = f.get_slice(name).get_dtype()
    return out


def saved_names(model) -> set[str]:
    """The tensor names save_pretrained writes for this model: its state_dict, lm_head.weight
    spelled embed_out.weight (the name in every GPT-NeoX checkpoint), without it when tied."""
    names = set(model.state_dict())
    if "lm_head.weight" in names:
        names.discard("lm_head.weight")
        if not model.config.tie_word_embeddings:
            names.add("embed_out.weight")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path, help="checkpoint folder (config.json, model.safetensors, tokens.json)")
    folder: Path = parser.parse_args().folder

    if not folder.is_dir():
        fail(f"{folder} is not a folder")
    (folder / "transformers_logits.safetensors").unlink(missing_ok=True)  # never leave a stale one
    config_path = folder / "config.json"
    if not config_path.is_file():
        fail(f"{config_path} is missing")
    try:
        model_type = json.loads(config_path.read_text()).get("model_type")
    except (json.JSONDecodeError, AttributeError) as e:
        fail(f"{config_path}: not a JSON object ({e})")
    if model_type != "gpt_neox":
        fail(f"{config_path}: model_type is {model_type!r}, expected 'gpt_neox'")
    if not (folder / "model.safetensors").is_file() and not (folder / "model.safetensors.index.json").is_file():
        fail(f"{folder} has neither model.safetensors nor model.safetensors.index.json")
    tokens = read_tokens(folder / "tokens.json")

    import safetensors.torch
    import torch
    import transformers
    from transformers import GPTNeoXForCausalLM

    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()  # the loading report below says what matters
    transformers.logging.disable_progress_bar()

    try:
        model, info = GPTNeoXForCausalLM.from_pretrained(
            folder, dtype=torch.float32, attn_implementation="eager", output_loading_info=True,
            ignore_mismatched_sizes=True)  # reported in info["mismatched_keys"] instead of raised
    except Exception as e:  # shapes that contradict the config, unreadable files, bad config values
        fail(f"from_pretrained({folder}) raised {type(e).__name__}: {e}")
    problems = []
    for kind in ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs"):
        entries = info.get(kind) or []
        if entries:
            problems.append(f"{kind} = {sorted(map(str, entries))}")
    if problems:
        fail(f"from_pretrained({folder}) reported " + "; ".join(problems))
    model = model.eval()
    config = model.config
    # from_pretrained drops some names without reporting them (the buffers of 2023 checkpoints:
    # attention.bias, attention.masked_bias, rotary_emb.inv_freq); an export has none of them.
    stored = file_tensors(folder)
    expected = saved_names(model)
    if set(stored) != expected:
        fail(f"the checkpoint's tensor names differ from what save_pretrained writes: "
             f"extra {sorted(set(stored) - expected)}, absent {sorted(expected - set(stored))}")
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        fail(f"parameters loaded as {dtypes}, expected float32")

    vocab = config.vocab_size
    bad = sorted({t for row in tokens for t in row if not 0 <= t < vocab})
    if bad:
        fail(f"token ids {bad[:10]} are outside the vocabulary [0, {vocab})")
    if len(tokens[0]) > config.max_position_embeddings:
        fail(f"T = {len(tokens[0])} exceeds max_position_embeddings = {config.max_position_embeddings}")

    with torch.no_grad():
        logits = model(torch.tensor(tokens, dtype=torch.long)).logits.float().contiguous()
    if not torch.isfinite(logits).all():
        fail("transformers produced non-finite logits")
    out = folder / "transformers_logits.safetensors"
    safetensors.torch.save_file({"logits": logits}, out, metadata={
        "generator": "tests/golden/check_neox_export.py", "transformers": transformers.__version__,
        "torch": torch.__version__})
    max_logit = logits.abs().max().item()
    assert math.isfinite(max_logit)
    print(f"check_neox_export: {folder}: loaded with no missing/unexpected keys "
          f"({sum(p.numel() for p in model.parameters())} parameters, tie_word_embeddings="
          f"{config.tie_word_embeddings}, stored as {'/'.join(sorted(set(stored.values())))}); logits {list(logits.shape)}, max |logit| {max_logit:.6g}; "
          f"wrote {out} (transformers {transformers.__version__}, torch {torch.__version__})")


if __name__ == "__main__":
    main()
