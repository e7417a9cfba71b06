#!/usr/bin/env python3
"""Golden fixtures for GPT-NeoX training (include/emergent/neox/training_network.hpp): the loss,
the logits and the gradient of every parameter, computed by Hugging Face transformers'
GPTNeoXForCausalLM with torch autograd, in float64, on tiny random models.

    bash tests/golden/setup-hf-venv.sh
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python tests/golden/make_neox_train_golden.py

Writes tests/golden/neox_train/<case>.safetensors and <case>.config.json for the cases of CASES
(see tests/golden/README.md). Deterministic: seeded generators, one thread.

Precision. transformers runs three steps in float32 whatever the model's dtype:
  1. rotary cos/sin: the angle p * inv_freq and its cos/sin are float32, then cast to float64.
     The fixture keeps this (it is the model's definition; neox/rotary.hpp builds the same
     float32 tables and uses them in double);
  2. eager attention: softmax(scores, dtype=float32).to(float64);
  3. the loss: ForCausalLMLoss starts with logits.float().
Steps 2 and 3 would cap the fixture's accuracy at float32's (~1e-7 relative), so the fixture
uses transformers' eager attention with the softmax left in float64 (registered below as
"eager_float64", transformers' eager_attention_forward without the float32 round trip) and the
loss ForCausalLMLoss defines (mean cross-entropy of token t+1 given tokens <= t over the
B*(T-1) positions), computed by F.cross_entropy in float64. The script asserts that the stock
path (attn_implementation="eager", model(input_ids, labels=input_ids).loss) agrees to float32
accuracy and records the worst differences in each file's __metadata__; that SDPA in float64
agrees to ~1e-13; and that the gradients agree with central finite differences.
"""
from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path

import safetensors
import safetensors.torch
import torch
import torch.nn.functional as F
import transformers
from transformers import AttentionInterface, GPTNeoXConfig, GPTNeoXForCausalLM
from transformers.masking_utils import AttentionMaskInterface, eager_mask

torch.set_num_threads(1)
transformers.logging.set_verbosity_error()
transformers.logging.disable_progress_bar()

OUT = Path(__file__).resolve().parent / "neox_train"
GENERATOR = "tests/golden/make_neox_train_golden.py"
BATCH, LENGTH = 3, 7

_PARALLEL = dict(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, rotary_pct=0.5, rotary_emb_base=10000,
                 max_position_embeddings=64, layer_norm_eps=1e-5, use_parallel_residual=True,
                 tie_word_embeddings=False, attention_bias=True, hidden_act="gelu")
CASES = {
    # head 8, rotary on 4 of its 8 dimensions
    "parallel": dict(_PARALLEL),
    # head 16, rotary on 4 of 16
    "sequential": dict(_PARALLEL, use_parallel_residual=False, rotary_pct=0.25, num_attention_heads=2),
    # lm_head shares gpt_neox.embed_in.weight: one tensor, whose gradient sums both uses
    "tied": dict(_PARALLEL, tie_word_embeddings=True, num_hidden_layers=1),
}
SEEDS = {"parallel": 11, "sequential": 12, "tied": 13}


def eager_float64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    """transformers' modeling_gpt_neox.eager_attention_forward, softmax in the input dtype."""
    attn_weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = torch.nn.functional.softmax(attn_weights, dim=-1)
    attn_weights = torch.nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


AttentionInterface.register("eager_float64", eager_float64)
AttentionMaskInterface.register("eager_float64", eager_mask)  # else no causal mask is built for it


def build(case: str, attn: str) -> GPTNeoXForCausalLM:
    config = GPTNeoXConfig(**CASES[case], bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    return GPTNeoXForCausalLM(config).double().eval()


def randomize(model: GPTNeoXForCausalLM, seed: int) -> None:
    """Weights far from HF's N(0, 0.02) init so that every gradient is clearly non-zero."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied weights are listed once
            normal = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if "layernorm" in name or "layer_norm" in name:
                p.copy_(1.0 + 0.1 * normal if name.endswith("weight") else 0.1 * normal)
            elif name.endswith("bias"):
                p.copy_(0.1 * normal)
            else:  # embed_in, query_key_value, dense, dense_h_to_4h, dense_4h_to_h, lm_head
                p.copy_(0.2 * normal)


def loss_float64(logits: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """ForCausalLMLoss with labels = input_ids, in the logits' dtype."""
    vocab = logits.shape[-1]
    return F.cross_entropy(logits[:, :-1].reshape(-1, vocab), tokens[:, 1:].reshape(-1))


def forward_backward(model, tokens, stock: bool = False):
    model.zero_grad(set_to_none=True)
    if stock:
        out = model(tokens, labels=tokens)
        loss = out.loss
    else:
        out = model(tokens)
        loss = loss_float64(out.logits, tokens)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return loss.detach(), out.logits.detach(), grads


def saved_names(model: GPTNeoXForCausalLM, folder: Path) -> dict[str, str]:
    """in-memory parameter name -> the name save_pretrained writes (lm_head.weight is saved as
    embed_out.weight; a tied lm_head is not saved), checked against the written file."""
    model.save_pretrained(folder)
    with safetensors.safe_open(folder / "model.safetensors", "pt") as f:
        on_disk = {k: f.get_tensor(k) for k in f.keys()}
    names = {}
    for name, p in model.named_parameters():
        target = "embed_out.weight" if name == "lm_head.weight" else name
        assert target in on_disk, f"{name}: {target} is not in save_pretrained's file {sorted(on_disk)}"
        assert torch.equal(on_disk[target], p.detach()), name
        names[name] = target
    assert sorted(names.values()) == sorted(on_disk), (sorted(names.values()), sorted(on_disk))
    return names


def save_deterministic(tensors: dict[str, torch.Tensor], path: Path, metadata: dict[str, str]) -> None:
    """safetensors.torch.save with the __metadata__ entries in sorted order (the library writes
    them in hash-map order, which changes from run to run), so that reruns are byte-identical."""
    blob = safetensors.torch.save(tensors, metadata=metadata)
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    header["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + blob[8 + n:])


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-300))


def finite_differences(model, tokens, grads, gen, per_tensor: int = 3, h: float = 1e-6) -> float:
    """Worst |central difference - autograd| / max(1, |autograd| of the tensor), over the
    largest-gradient entry and per_tensor - 1 random entries of every parameter."""
    worst = 0.0
    with torch.no_grad():
        for name, p in model.named_parameters():
            flat = p.view(-1)
            g = grads[name].view(-1)
            picks = [int(g.abs().argmax())] + torch.randint(0, flat.numel(), (per_tensor - 1,), generator=gen).tolist()
            for i in picks:
                saved = flat[i].item()
                flat[i] = saved + h
                up = loss_float64(model(tokens).logits, tokens).item()
                flat[i] = saved - h
                down = loss_float64(model(tokens).logits, tokens).item()
                flat[i] = saved
                numeric = (up - down) / (2 * h)
                worst = max(worst, abs(numeric - g[i].item()) / max(1.0, g.abs().max().item()))
    return worst


def make_case(case: str, tmp: Path) -> dict:
    seed = SEEDS[case]
    model = build(case, "eager_float64")
    randomize(model, seed)
    if CASES[case]["tie_word_embeddings"]:
        assert model.lm_head.weight is model.gpt_neox.embed_in.weight, "HF did not tie lm_head to embed_in"
        assert "lm_head.weight" not in dict(model.named_parameters())
    gen = torch.Generator().manual_seed(1000 + seed)
    tokens = torch.randint(0, CASES[case]["vocab_size"], (BATCH, LENGTH), generator=gen)

    loss, logits, grads = forward_backward(model, tokens)

    # The stock transformers path (float32 softmax and loss) and SDPA, on the same weights.
    stock = build(case, "eager")
    stock.load_state_dict(model.state_dict())
    stock_loss, stock_logits, stock_grads = forward_backward(stock, tokens, stock=True)
    sdpa = build(case, "sdpa")
    sdpa.load_state_dict(model.state_dict())
    sdpa_loss, sdpa_logits, sdpa_grads = forward_backward(sdpa, tokens)
    diffs = {
        "stock_loss_rel": abs(stock_loss.item() - loss.item()) / loss.item(),
        "stock_logits_rel": max_rel(stock_logits, logits),
        "stock_grad_rel": max(max_rel(stock_grads[n], grads[n]) for n in grads),
        "sdpa_loss_rel": abs(sdpa_loss.item() - loss.item()) / loss.item(),
        "sdpa_logits_rel": max_rel(sdpa_logits, logits),
        "sdpa_grad_rel": max(max_rel(sdpa_grads[n], grads[n]) for n in grads),
    }
    assert stock_loss.dtype == torch.float32, stock_loss.dtype  # transformers' loss is float32
    assert diffs["stock_loss_rel"] < 1e-6 and diffs["stock_logits_rel"] < 1e-6, diffs
    assert diffs["stock_grad_rel"] < 1e-5, diffs
    assert diffs["sdpa_loss_rel"] < 1e-12 and diffs["sdpa_logits_rel"] < 1e-12, diffs
    assert diffs["sdpa_grad_rel"] < 1e-11, diffs
    diffs["finite_difference"] = finite_differences(model, tokens, grads, gen)
    assert diffs["finite_difference"] < 1e-7, diffs

    names = saved_names(stock, tmp / case)
    tensors: dict[str, torch.Tensor] = {}
    for n, p in model.named_parameters():
        tensors[names[n]] = p.detach().clone()
    tensors["tokens"] = tokens.to(torch.int64)
    tensors["loss"] = loss.reshape(1)
    tensors["logits"] = logits
    for n in grads:
        tensors["grad." + names[n]] = grads[n]
    tensors = {k: v.contiguous() for k, v in tensors.items()}
    for k, v in tensors.items():
        assert v.dtype == (torch.int64 if k == "tokens" else torch.float64), (k, v.dtype)

    # Summary; every gradient clearly non-zero.
    print(f"== {case}: loss {loss.item():.15g}, B={BATCH} T={LENGTH}")
    zero_rows = 0
    for n in grads:
        g = grads[n]
        print(f"   grad.{names[n]:55s} {str(list(g.shape)):10s} max|g| {g.abs().max().item():.3e}  "
              f"exact zeros {int((g == 0).sum())}/{g.numel()}")
        assert g.abs().max().item() > 1e-3, f"{case}: gradient of {n} is (nearly) zero"
    attn_max = []
    with torch.no_grad():
        for pattern in model(tokens, output_attentions=True).attentions:
            attn_max.append(pattern.max(-1).values.mean().item())
    print("   " + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items())
          + f"; mean max attention per layer {[round(a, 2) for a in attn_max]}")

    metadata = {
        "generator": GENERATOR,
        "case": case,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "safetensors": safetensors.__version__,
        "batch": str(BATCH),
        "length": str(LENGTH),
        "loss": "ForCausalLMLoss(labels=input_ids) in float64: mean over B*(T-1) next-token positions",
        "attention": "eager with the softmax in float64 (eager_float64)",
        **{k: f"{v:.3e}" for k, v in diffs.items()},
    }
    path = OUT / f"{case}.safetensors"
    save_deterministic(dict(sorted(tensors.items())), path, metadata)
    config = json.loads((tmp / case / "config.json").read_text())
    assert config["model_type"] == "gpt_neox" and config["architectures"] == ["GPTNeoXForCausalLM"], config
    (OUT / f"{case}.config.json").write_text((tmp / case / "config.json").read_text())

    # The file reproduces the loss bit for bit from a fresh model fed the stored parameters.
    fresh = build(case, "eager_float64")
    with safetensors.safe_open(path, "pt") as f:
        stored = {k: f.get_tensor(k) for k in f.keys()}
        assert f.metadata()["case"] == case
    with torch.no_grad():
        for n, p in fresh.named_parameters():
            p.copy_(stored[names[n]])
    again, again_logits, again_grads = forward_backward(fresh, stored["tokens"])
    assert torch.equal(again.reshape(1), stored["loss"]) and torch.equal(again_logits, stored["logits"])
    assert all(torch.equal(again_grads[n], stored["grad." + names[n]]) for n in again_grads)
    # The config written next to it builds the same architecture.
    reread = GPTNeoXConfig.from_json_file(OUT / f"{case}.config.json")
    for key in ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "use_parallel_residual", "tie_word_embeddings", "attention_bias", "hidden_act",
                "max_position_embeddings", "layer_norm_eps"):
        assert getattr(reread, key) == CASES[case][key], (key, getattr(reread, key))
    assert math.isclose(reread.rope_parameters["partial_rotary_factor"], CASES[case]["rotary_pct"])
    return {name: list(t.shape) for name, t in sorted(tensors.items())}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.iterdir():
        if old.suffix in (".safetensors", ".json"):
            old.unlink()
    with tempfile.TemporaryDirectory() as tmp:
        for case in CASES:
            make_case(case, Path(tmp))
    total = sum(f.stat().st_size for f in OUT.iterdir() if f.is_file())
    print(f"wrote {OUT} ({total / 1e3:.0f} kB) with transformers {transformers.__version__}, "
          f"torch {torch.__version__}, safetensors {safetensors.__version__}")


if __name__ == "__main__":
    main()
