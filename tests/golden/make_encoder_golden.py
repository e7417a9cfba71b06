#!/usr/bin/env python3
"""Golden fixtures for the encoder of the self-pretraining study (model/encoder.hpp) from
PyTorch's own nn.TransformerEncoderLayer (norm_first=True, GELU, no dropout), which nobody here
wrote: forward losses and the gradient of every tensor.

The model around the layers is written out below as encoder.hpp documents it: token embedding
plus a position table (learned, or the sinusoids of "Attention Is All You Need" computed here),
two encoder layers, a final LayerNorm, a mean over each sequence's real tokens into a linear
classifier, and a per-position linear head for masked reconstruction. Padding and the
per-head attention bias (c + slope_h) * P go into the layer's float src_mask, [B * heads, T, T]:
-inf at padding keys. The loss is 0.7 * (label cross-entropy, mean over sequences) + 1.3 *
(reconstruction cross-entropy, mean over masked positions).

Fixture bridges: torch's in_proj_weight/in_proj_bias are our qkv.weight/qkv.bias (the same
[3D, D] layout, q | k | v), out_proj is our out, linear1/linear2 our mlp.fc/mlp.proj,
norm1/norm2 our ln1/ln2. Integer inputs are stored as F32.

Everything is float64 from values exactly representable in float32.

    bash tests/golden/setup-hf-venv.sh
    .venv-torch/bin/python tests/golden/make_encoder_golden.py
"""
import json
import math
import struct
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

OUT = Path(__file__).resolve().parent / "encoder"
V, D, H, L, FF, MAX_LEN, C = 17, 16, 2, 2, 24, 24, 10
B, T = 3, 13
LENGTHS = [13, 8, 5]
PAD, MASK = 0, 1
LABEL_WEIGHT, RECONSTRUCTION_WEIGHT = 0.7, 1.3
STRENGTH = 0.25
torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)


def f32(t):
    return t.to(torch.float32).to(torch.float64)


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def sinusoids():
    table = torch.zeros(MAX_LEN, D)
    for t in range(MAX_LEN):
        for i in range(0, D, 2):
            angle = t / 10000 ** (i / D)
            table[t, i] = math.sin(angle)
            table[t, i + 1] = math.cos(angle)
    return table


def make_case(name, positions, seed):
    g = torch.Generator().manual_seed(seed)
    layers = nn.ModuleList(
        nn.TransformerEncoderLayer(D, H, FF, dropout=0.0, activation="gelu", batch_first=True,
                                   norm_first=True, layer_norm_eps=1e-5) for _ in range(L))
    embed = nn.Embedding(V, D)
    final_ln, head, classifier = nn.LayerNorm(D, eps=1e-5), nn.Linear(D, V), nn.Linear(D, C)
    slopes = [nn.Parameter(torch.zeros(H)) for _ in range(L)]
    position = nn.Parameter(torch.zeros(MAX_LEN, D))
    ours = {"embed.token.weight": embed.weight, "embed.position.weight": position}
    for l, layer in enumerate(layers):
        p = f"layers.{l}."
        ours |= {p + "ln1.weight": layer.norm1.weight, p + "ln1.bias": layer.norm1.bias,
                 p + "mixer.qkv.weight": layer.self_attn.in_proj_weight,
                 p + "mixer.qkv.bias": layer.self_attn.in_proj_bias,
                 p + "mixer.out.weight": layer.self_attn.out_proj.weight,
                 p + "mixer.out.bias": layer.self_attn.out_proj.bias,
                 p + "ln2.weight": layer.norm2.weight, p + "ln2.bias": layer.norm2.bias,
                 p + "mlp.fc.weight": layer.linear1.weight, p + "mlp.fc.bias": layer.linear1.bias,
                 p + "mlp.proj.weight": layer.linear2.weight, p + "mlp.proj.bias": layer.linear2.bias,
                 p + "proximity.slope": slopes[l]}
    ours |= {"final_ln.weight": final_ln.weight, "final_ln.bias": final_ln.bias,
             "head.weight": head.weight, "head.bias": head.bias,
             "classifier.weight": classifier.weight, "classifier.bias": classifier.bias}
    with torch.no_grad():  # random values everywhere (LayerNorms and slopes too), rounded to f32
        for n, t in ours.items():
            t.copy_(f32(0.4 * torch.randn(t.shape, generator=g)))
        if positions == "sinusoidal":
            position.copy_(f32(sinusoids()))

    tokens = torch.randint(2, V, (B, T), generator=g)
    originals = torch.full((B, T), -1)
    for b, n in enumerate(LENGTHS):
        tokens[b, n:] = PAD
        for t in range(n):
            if torch.rand((), generator=g) < 0.3:
                originals[b, t] = tokens[b, t]
                tokens[b, t] = MASK
    labels = torch.randint(0, C, (B,), generator=g)
    lengths = torch.tensor(LENGTHS)
    offsets = torch.arange(T)
    pattern = -(offsets[None, :] - offsets[:, None]).abs().to(torch.float64)  # -|j - i|

    x = embed(tokens) + position[:T]
    padding = offsets[None, :] >= lengths[:, None]  # [B, T] keys past the end
    for l, layer in enumerate(layers):
        bias = (STRENGTH + slopes[l]).view(1, H, 1, 1) * pattern.view(1, 1, T, T)
        bias = bias.expand(B, H, T, T).masked_fill(padding.view(B, 1, 1, T), float("-inf"))
        x = layer(x, src_mask=bias.reshape(B * H, T, T))
    h = final_ln(x)
    real = (~padding).to(torch.float64)
    pooled = (h * real[..., None]).sum(1) / lengths[:, None]
    label_loss = F.cross_entropy(classifier(pooled), labels)
    masked = originals >= 0
    reconstruction_loss = F.cross_entropy(head(h[masked]), originals[masked])
    total = LABEL_WEIGHT * label_loss + RECONSTRUCTION_WEIGHT * reconstruction_loss
    total.backward()

    tensors = {"tokens": tokens.to(torch.float64), "lengths": lengths.to(torch.float64),
               "labels": labels.to(torch.float64), "originals": originals.to(torch.float64),
               "pattern": pattern,
               "losses": torch.stack([label_loss, reconstruction_loss, total]).detach()}
    for n, t in ours.items():
        tensors["param." + n] = t
        grad = t.grad if t.grad is not None else torch.zeros_like(t)
        if n == "embed.position.weight" and positions == "sinusoidal":
            grad = torch.zeros_like(t)  # fixed sinusoids are not trained
        tensors["grad." + n] = grad
    metadata = {"generator": "tests/golden/make_encoder_golden.py", "torch": torch.__version__,
                "positions": positions, "strength": str(STRENGTH),
                "label_weight": str(LABEL_WEIGHT),
                "reconstruction_weight": str(RECONSTRUCTION_WEIGHT)}
    OUT.mkdir(exist_ok=True)
    write_safetensors(OUT / f"{name}.safetensors", tensors, metadata)
    print(f"{name}: label {label_loss.item():.6f}, reconstruction {reconstruction_loss.item():.6f}, "
          f"{int(masked.sum())} masked, slope grads {[s.grad.tolist() for s in slopes]}")


make_case("learned_positions", "learned", 1)
make_case("sinusoidal_positions", "sinusoidal", 2)
