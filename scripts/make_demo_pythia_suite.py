#!/usr/bin/env python3
"""Trains a tiny GPT-NeoX with Hugging Face transformers and saves a Pythia-style checkpoint suite.

    bash tests/golden/setup-hf-venv.sh     # .venv-torch with torch, transformers, tokenizers
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python \
        scripts/make_demo_pythia_suite.py --out runs/demo_pythia_suite

The suite is what `emergent pythia curve | emergence | patch` reads (docs/pythia.md):

    <out>/tokenizer.json          a small byte-level BPE made like GPT-NeoX's (NFC, ByteLevel, GPT-2
                                  split), trained here so that "0".."9" and " 0".." 9" are tokens
    <out>/step0/ ... <out>/stepN/ save_pretrained folders (config.json + model.safetensors),
                                  on Pythia's schedule shape: 0, 1, 2, 4, ..., 512, then every
                                  --every steps

The task is the paper's string repetition: 8 random digits, then the same 8 again ("0 7 3 1 2 0
2 3 0 7 3 1 2 0 2 3"), next-token loss on every position. Only the second half is predictable,
and only by copying from 8 positions back, so the model must learn a previous-token head and an
induction head; in-context copying appears abruptly after a plateau, which is what the
emergence search and the patching are meant to find. Deterministic for a given --seed.
"""
import argparse
import json
import os
import shutil
import sys
import time

import torch
import transformers
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

CORPUS = [" ".join(str((7 * i + j) % 10) for j in range(16)) for i in range(50)] + [
    "the quick brown fox jumps over the lazy dog", "Then, Mary and John went to the store.",
    "a b c a b c a b c", "river apple stone cloud paper green music table light horse water chair"]


def train_tokenizer(path):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=True)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, min_frequency=1, show_progress=False,
                                  special_tokens=["<|endoftext|>", "<|padding|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    tokenizer.save(path)
    return tokenizer


def pythia_schedule(steps, every):
    out = [0] + [2**i for i in range(10) if 2**i < min(steps, 1000)]
    out += list(range(every, steps + 1, every))
    return sorted(set(s for s in out if s <= steps))


def digit_ids(tokenizer):
    """Token ids of "0".."9" (first position) and " 0".." 9" (after a space)."""
    first = [tokenizer.encode(str(d)).ids for d in range(10)]
    spaced = [tokenizer.encode(" " + str(d)).ids for d in range(10)]
    for ids in first + spaced:
        if len(ids) != 1:
            sys.exit("make_demo_pythia_suite: every digit must be one token (tokenizer training changed?)")
    return torch.tensor([i[0] for i in first]), torch.tensor([i[0] for i in spaced])


def batch(generator, size, first, spaced, block=8):
    digits = torch.randint(0, 10, (size, block), generator=generator)
    seq = torch.cat([digits, digits], dim=1)  # the block, then the same block
    ids = spaced[seq]
    ids[:, 0] = first[seq[:, 0]]
    return ids


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/demo_pythia_suite")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--every", type=int, default=50, help="checkpoint spacing after step 512")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if os.path.exists(args.out):
        shutil.rmtree(args.out)
    os.makedirs(args.out)
    tokenizer = train_tokenizer(os.path.join(args.out, "tokenizer.json"))
    first, spaced = digit_ids(tokenizer)
    vocab = tokenizer.get_vocab_size()
    config = transformers.GPTNeoXConfig(
        vocab_size=vocab, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
        rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=64, use_parallel_residual=True,
        hidden_act="gelu", layer_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=0, eos_token_id=0)
    model = transformers.GPTNeoXForCausalLM(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(args.seed + 1)
    schedule = set(pythia_schedule(args.steps, args.every))

    started = time.time()
    log = []
    for step in range(args.steps + 1):
        if step in schedule:
            model.save_pretrained(os.path.join(args.out, f"step{step}"), safe_serialization=True)
        if step == args.steps:
            break
        ids = batch(generator, args.batch, first, spaced)
        logits = model(input_ids=ids).logits
        # Next-token loss on every position; the second block is the learnable part.
        loss = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, vocab), ids[:, 1:].reshape(-1))
        copy_loss = torch.nn.functional.cross_entropy(logits[:, 8:-1].reshape(-1, vocab), ids[:, 9:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            log.append({"step": step, "loss": loss.item(), "copy_loss": copy_loss.item()})
            print(f"step {step:5d}  loss {loss.item():.4f}  copy-part loss {copy_loss.item():.4f}  "
                  f"{time.time() - started:.0f}s", flush=True)
    with open(os.path.join(args.out, "training_log.json"), "w") as f:
        json.dump({"torch": torch.__version__, "transformers": transformers.__version__, "args": vars(args),
                   "checkpoints": sorted(schedule), "log": log}, f, indent=1)
    print(f"wrote {len(schedule)} checkpoints to {args.out} in {time.time() - started:.0f}s")


if __name__ == "__main__":
    main()
