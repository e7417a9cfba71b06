#!/usr/bin/env python3
"""Golden fixtures for the GPT-NeoX loader and forward pass (include/emergent/neox/), made by
the real Hugging Face code: transformers' GPTNeoXForCausalLM, eager attention, fp32.

    bash tests/golden/setup-hf-venv.sh
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python tests/golden/make_neox_golden.py

Writes tests/golden/neox/ (see README.md there, the one file it keeps): tiny GPT-NeoX checkpoint folders with random
weights, saved with save_pretrained (fp32, fp16, fp16 sharded) or by hand in the 2023 Pythia
layout (old config field names, fp16, the attention.bias / masked_bias / rotary_emb.inv_freq
buffers), and expected.safetensors + manifest.json with what transformers computes from each
folder: logits at every position and attention probabilities per layer for a few prompts, and
attention-pattern patching between two models. Every expected value comes from a model that
transformers loaded back from the written folder, in fp32 (fp16 folders: loaded as fp16, then
.float()). Deterministic: seeded, one thread.
"""
from __future__ import annotations

import copy
import hashlib
import json
import shutil
from pathlib import Path

import safetensors
import safetensors.torch
import torch
import transformers
from transformers import AttentionInterface, GPTNeoXConfig, GPTNeoXForCausalLM
from transformers.masking_utils import AttentionMaskInterface, eager_mask
from transformers.models.gpt_neox import modeling_gpt_neox

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()

OUT = Path(__file__).resolve().parent / "neox"
GENERATOR = "tests/golden/make_neox_golden.py"

# Architectures. "parallel" is Pythia-like (parallel residual, erf GELU, rotary_pct 0.25, all
# biases, untied); the others exercise every other option the C++ side supports.
ARCHITECTURES = {
    "parallel": dict(vocab_size=128, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=256, rotary_pct=0.25, rotary_emb_base=10000,
                     max_position_embeddings=128, use_parallel_residual=True, hidden_act="gelu"),
    "sequential": dict(vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                       intermediate_size=96, rotary_pct=0.5, rotary_emb_base=10000,
                       max_position_embeddings=64, use_parallel_residual=False, hidden_act="gelu_new"),
    "tied": dict(vocab_size=80, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                 intermediate_size=64, rotary_pct=1.0, rotary_emb_base=500, max_position_embeddings=64,
                 use_parallel_residual=True, hidden_act="gelu", attention_bias=False,
                 tie_word_embeddings=True),
}

# Prompt lengths per architecture; patterns are stored for prompts up to PATTERN_MAX_T tokens
# (the 80-token prompt spans two 64-query blocks of the C++ attention; its logits are kept).
PROMPT_LENGTHS = {"parallel": [1, 6, 17, 80], "sequential": [5, 13], "tied": [4, 11]}
PATTERN_MAX_T = 20


def new_config(arch: str) -> GPTNeoXConfig:
    return GPTNeoXConfig(**ARCHITECTURES[arch], bos_token_id=0, eos_token_id=0, attn_implementation="eager")


def random_model(arch: str, seed: int) -> GPTNeoXForCausalLM:
    """A model whose weights are large enough for peaked attention and O(1) logits (HF's own
    init, N(0, 0.02), gives nearly uniform patterns that would hide rotary or mask errors)."""
    model = GPTNeoXForCausalLM(new_config(arch)).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            normal = torch.randn(p.shape, generator=gen)
            if "layernorm" in name or "layer_norm" in name:
                p.copy_(1.0 + 0.1 * normal if name.endswith("weight") else 0.1 * normal)
            elif name.endswith("bias"):
                p.copy_(0.1 * normal)
            elif "embed_in" in name:
                p.copy_(normal)
            elif "query_key_value" in name:
                p.copy_(1.5 * normal / p.shape[1] ** 0.5)
            else:  # dense, dense_h_to_4h, dense_4h_to_h, embed_out / lm_head
                p.copy_(normal / p.shape[1] ** 0.5)
    return model


def load_fp32(folder: Path, dtype: torch.dtype, attn: str = "eager") -> GPTNeoXForCausalLM:
    model = GPTNeoXForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation=attn)
    return model.float().eval()


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def folder_sha256(folder: Path) -> str:
    """What emergent::CheckpointFolder::sha256() computes (io/checkpoint_folder.hpp)."""
    single = folder / "model.safetensors"
    if single.exists():
        return sha256_file(single)
    shards = sorted({v for v in json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values()})
    listing = "".join(f"{sha256_file(folder / s)}  {s}\n" for s in shards)
    return hashlib.sha256(listing.encode()).hexdigest()


def write_legacy_folder(model: GPTNeoXForCausalLM, arch: str, folder: Path) -> None:
    """The 2023 Pythia layout: old config names (rotary_pct, rotary_emb_base, torch_dtype), fp16
    weights written by safetensors directly, and the per-layer buffers old transformers saved."""
    cfg = ARCHITECTURES[arch]
    config = {
        "architectures": ["GPTNeoXForCausalLM"], "bos_token_id": 0, "eos_token_id": 0,
        "hidden_act": cfg["hidden_act"], "hidden_size": cfg["hidden_size"], "initializer_range": 0.02,
        "intermediate_size": cfg["intermediate_size"], "layer_norm_eps": 1e-05,
        "max_position_embeddings": cfg["max_position_embeddings"], "model_type": "gpt_neox",
        "num_attention_heads": cfg["num_attention_heads"], "num_hidden_layers": cfg["num_hidden_layers"],
        "rotary_emb_base": cfg["rotary_emb_base"], "rotary_pct": cfg["rotary_pct"],
        "tie_word_embeddings": False, "torch_dtype": "float16", "use_cache": True,
        "use_parallel_residual": cfg["use_parallel_residual"], "vocab_size": cfg["vocab_size"],
    }
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    state = {k: v.detach().half().contiguous() for k, v in model.state_dict().items()}
    state["embed_out.weight"] = state.pop("lm_head.weight", state.get("embed_out.weight"))
    max_pos = cfg["max_position_embeddings"]
    rotary = int(cfg["hidden_size"] // cfg["num_attention_heads"] * cfg["rotary_pct"])
    inv_freq = 1.0 / (cfg["rotary_emb_base"] ** (torch.arange(0, rotary, 2, dtype=torch.float) / rotary))
    for layer in range(cfg["num_hidden_layers"]):
        p = f"gpt_neox.layers.{layer}.attention."
        state[p + "bias"] = torch.tril(torch.ones(1, 1, max_pos, max_pos, dtype=torch.bool))
        state[p + "masked_bias"] = torch.tensor(-1e9)
        state[p + "rotary_emb.inv_freq"] = inv_freq.half()
    safetensors.torch.save_file(state, folder / "model.safetensors", metadata={"format": "pt"})


# ------------------------------------------------------------------------------ patching
# A registered attention function: transformers' own eager attention, except that for the
# (layer, head) in PATCH the probabilities are replaced before they weight the values. It is
# registered with eager's mask builder; the script checks that with PATCH empty it reproduces
# eager bit for bit, and that patching a head with its own pattern changes nothing.
PATCH: dict[int, tuple[int, torch.Tensor]] = {}


def patched_eager(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    out, weights = modeling_gpt_neox.eager_attention_forward(
        module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    if module.layer_idx not in PATCH:
        return out, weights
    head, pattern = PATCH[module.layer_idx]
    weights = weights.clone()
    weights[:, head] = pattern
    out = torch.matmul(weights, value).transpose(1, 2).contiguous()
    return out, weights


AttentionInterface.register("patched_eager", patched_eager)
AttentionMaskInterface.register("patched_eager", eager_mask)  # else no causal mask is built for it


def run(model, tokens: list[int]):
    with torch.no_grad():
        out = model(torch.tensor([tokens]), output_attentions=True)
    logits = out.logits[0].contiguous()
    patterns = torch.stack([a[0] for a in out.attentions]).contiguous()  # [L, H, T, T]
    return logits, patterns


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():  # everything but README.md is generated
        if old.is_dir():
            shutil.rmtree(old)
        elif old.name != "README.md":
            old.unlink()
    gen = torch.Generator().manual_seed(1234)
    prompts = {arch: [torch.randint(0, ARCHITECTURES[arch]["vocab_size"], (n,), generator=gen).tolist()
                      for n in lengths] for arch, lengths in PROMPT_LENGTHS.items()}

    # Checkpoint folders: (case name, architecture, how it is written, dtype transformers loads).
    model_a = random_model("parallel", seed=1)
    model_b = random_model("parallel", seed=2)
    model_a.save_pretrained(OUT / "parallel_f32")
    model_a_f16 = copy.deepcopy(model_a).half()
    model_a_f16.save_pretrained(OUT / "parallel_f16")
    model_a_f16.save_pretrained(OUT / "parallel_f16_sharded", max_shard_size="100KB")
    write_legacy_folder(model_b, "parallel", OUT / "parallel_legacy_f16")
    random_model("sequential", seed=3).save_pretrained(OUT / "sequential_f32")
    random_model("tied", seed=4).save_pretrained(OUT / "tied_f32")
    for folder in OUT.iterdir():
        if folder.is_dir():
            (folder / "generation_config.json").unlink(missing_ok=True)
    shards = sorted((OUT / "parallel_f16_sharded").glob("model-*.safetensors"))
    assert len(shards) >= 2, f"expected at least 2 shards, got {len(shards)}"
    assert json.loads((OUT / "parallel_f16_sharded/config.json").read_text())["dtype"] == "float16"

    cases = [("parallel_f32", "parallel", torch.float32), ("parallel_f16", "parallel", torch.float16),
             ("parallel_f16_sharded", "parallel", torch.float16),
             ("parallel_legacy_f16", "parallel", torch.float16),
             ("sequential_f32", "sequential", torch.float32), ("tied_f32", "tied", torch.float32)]
    expected: dict[str, torch.Tensor] = {}
    manifest = {
        "generator": GENERATOR,
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__,
                     "safetensors": safetensors.__version__},
        "cases": [],
    }
    loaded = {}
    for case, arch, dtype in cases:
        model = load_fp32(OUT / case, dtype)
        loaded[case] = model
        # The sharded folder must compute exactly what the unsharded one does: it shares its
        # expected values instead of storing a copy.
        same_as = "parallel_f16" if case == "parallel_f16_sharded" else case
        entry = {"folder": case, "architecture": arch, "sha256": folder_sha256(OUT / case), "expected": same_as,
                 "prompts": []}
        for i, tokens in enumerate(prompts[arch]):
            logits, patterns = run(model, tokens)
            has_patterns = len(tokens) <= PATTERN_MAX_T
            if same_as != case:
                assert torch.equal(logits, expected[f"{same_as}.prompt{i}.logits"])
            else:
                expected[f"{case}.prompt{i}.logits"] = logits
                if has_patterns:
                    expected[f"{case}.prompt{i}.patterns"] = patterns
            entry["prompts"].append({"tokens": tokens, "patterns": has_patterns})
        manifest["cases"].append(entry)

    # The files are what they claim: HF reads back the in-memory models, shards change nothing.
    model_b_rounded = copy.deepcopy(model_b)  # parameters rounded to fp16; buffers (inv_freq) stay fp32
    with torch.no_grad():
        for p in model_b_rounded.parameters():
            p.copy_(p.half().float())
    for i, tokens in enumerate(prompts["parallel"]):
        ref, _ = run(model_a, tokens)
        assert torch.equal(expected[f"parallel_f32.prompt{i}.logits"], ref)
        ref_b, _ = run(model_b_rounded, tokens)
        assert torch.equal(expected[f"parallel_legacy_f16.prompt{i}.logits"], ref_b)

    # Patching: head (layer, head) of the pre model (A) takes the post model's (B) pattern.
    pre, post = "parallel_f32", "parallel_legacy_f16"
    model_pre = load_fp32(OUT / pre, torch.float32, attn="patched_eager")
    manifest["patching"] = []
    arch = ARCHITECTURES["parallel"]
    for prompt_index in (1, 2):
        tokens = prompts["parallel"][prompt_index]
        target = int(torch.randint(0, arch["vocab_size"], (1,), generator=gen))
        _, post_patterns = run(loaded[post], tokens)
        pre_logits, pre_patterns = run(model_pre, tokens)
        post_logits, _ = run(loaded[post], tokens)
        assert torch.equal(pre_logits, expected[f"{pre}.prompt{prompt_index}.logits"])
        p_pre = torch.softmax(pre_logits[-1], -1)[target].item()
        p_post = torch.softmax(post_logits[-1], -1)[target].item()
        patched = []
        for layer in range(arch["num_hidden_layers"]):
            row = []
            for head in range(arch["num_attention_heads"]):
                PATCH.clear()
                PATCH[layer] = (head, pre_patterns[layer, head])  # own pattern: no change
                own, _ = run(model_pre, tokens)
                assert torch.allclose(own, pre_logits, atol=1e-6, rtol=1e-6)
                PATCH[layer] = (head, post_patterns[layer, head])
                logits, used = run(model_pre, tokens)
                assert torch.equal(used[layer, head], post_patterns[layer, head])
                row.append(torch.softmax(logits[-1], -1)[target].item())
            patched.append(row)
        PATCH.clear()
        manifest["patching"].append({"pre": pre, "post": post, "prompt": prompt_index, "target": target,
                                     "p_pre": p_pre, "p_post": p_post, "p_patched": patched})

    safetensors.torch.save_file({k: v.float().contiguous() for k, v in sorted(expected.items())},
                                OUT / "expected.safetensors", metadata={"generator": GENERATOR})
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(f.stat().st_size for f in OUT.rglob("*") if f.is_file())
    print(f"wrote {OUT} ({total / 1e6:.2f} MB) with transformers {transformers.__version__}, torch {torch.__version__}")


if __name__ == "__main__":
    main()
