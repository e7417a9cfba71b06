#!/usr/bin/python3
"""Golden fixtures for the emergent model (docs/model.md), from an independent PyTorch model.

Run with Debian's python3-torch:  /usr/bin/python3 tests/golden/make_golden.py
Writes tests/golden/<case>/{weights.safetensors, grads.safetensors, case.json}.
Everything is computed in float64 from weights that are exactly representable in float32,
so a C++ reader of the F32 weights sees the very same model. Deterministic: a rerun gives
byte-identical files.
"""
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
torch.set_num_threads(1)

HERE = os.path.dirname(os.path.abspath(__file__))
GENERATOR = "tests/golden/make_golden.py"


# ----------------------------------------------------------------------------- model
class Block(nn.Module):
    def __init__(self, D, H, Fdim):
        super().__init__()
        self.H = H
        self.ln1 = nn.LayerNorm(D, eps=1e-5)
        self.qkv = nn.Linear(D, 3 * D)
        self.out = nn.Linear(D, D)
        self.ln2 = nn.LayerNorm(D, eps=1e-5)
        self.fc = nn.Linear(D, Fdim)
        self.proj = nn.Linear(Fdim, D)

    def attention(self, a, P, c):
        B, T, D = a.shape
        H, dh = self.H, D // self.H
        q, k, v = self.qkv(a).split(D, dim=-1)
        q = q.view(B, T, H, dh).transpose(1, 2)  # [B,H,T,dh]
        k = k.view(B, T, H, dh).transpose(1, 2)
        v = v.view(B, T, H, dh).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(dh) + c * P  # P [T,T] broadcast
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # j > i
        scores = scores.masked_fill(causal, float("-inf"))
        att = torch.softmax(scores, dim=-1)  # [B,H,T,T]
        o = (att @ v).transpose(1, 2).reshape(B, T, D)
        return self.out(o), att

    def forward(self, x, P, c):
        m, att = self.attention(self.ln1(x), P, c)
        x = x + m
        x = x + self.proj(F.gelu(self.fc(self.ln2(x))))  # exact (erf) GELU
        return x, att


class GPT(nn.Module):
    def __init__(self, V, D, H, L, Fdim, max_len):
        super().__init__()
        self.tok = nn.Embedding(V, D)
        self.pos = nn.Embedding(max_len, D)
        self.blocks = nn.ModuleList([Block(D, H, Fdim) for _ in range(L)])
        self.final_ln = nn.LayerNorm(D, eps=1e-5)
        self.head = nn.Linear(D, V, bias=False)

    def forward(self, tokens, P, c):
        B, T = tokens.shape
        x = self.tok(tokens) + self.pos(torch.arange(T))
        atts = []
        for blk in self.blocks:
            x, att = blk(x, P, c)
            atts.append(att)
        return self.head(self.final_ln(x)), atts

    def named(self):
        """(docs/model.md name, parameter) in the contiguous-buffer order of docs/model.md."""
        out = [("embed.token.weight", self.tok.weight), ("embed.position.weight", self.pos.weight)]
        for l, b in enumerate(self.blocks):
            p = f"layers.{l}."
            out += [(p + "ln1.weight", b.ln1.weight), (p + "ln1.bias", b.ln1.bias),
                    (p + "mixer.qkv.weight", b.qkv.weight), (p + "mixer.qkv.bias", b.qkv.bias),
                    (p + "mixer.out.weight", b.out.weight), (p + "mixer.out.bias", b.out.bias),
                    (p + "ln2.weight", b.ln2.weight), (p + "ln2.bias", b.ln2.bias),
                    (p + "mlp.fc.weight", b.fc.weight), (p + "mlp.fc.bias", b.fc.bias),
                    (p + "mlp.proj.weight", b.proj.weight), (p + "mlp.proj.bias", b.proj.bias)]
        out += [("final_ln.weight", self.final_ln.weight), ("final_ln.bias", self.final_ln.bias),
                ("head.weight", self.head.weight)]
        assert len(out) == len(list(self.parameters()))
        return out


def weighted_loss(logits, targets, w):
    B, T, V = logits.shape
    ce = F.cross_entropy(logits.reshape(B * T, V), targets.reshape(B * T), reduction="none")
    return (ce.view(B, T) * w).sum() / (B * w.sum())


# ----------------------------------------------------------------------------- safetensors
def write_safetensors(path, named_arrays):
    """named_arrays: list of (name, float32 numpy array), laid out contiguously in that order."""
    header, blobs, offset = {}, [], 0
    for name, arr in named_arrays:
        data = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"generator": GENERATOR, "torch": torch.__version__}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * (-len(hbytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    base, out = 8 + n, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32"
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(raw[base + b:base + e], dtype="<f4").reshape(info["shape"])
    return out, header


# ----------------------------------------------------------------------------- cases
CASES = [
    dict(name="tiny", V=3, D=12, H=3, L=2, F=20, max_len=9, B=2, T=7, c=1.5, seed=1001),
    dict(name="one_dim_heads", V=5, D=6, H=6, L=1, F=10, max_len=8, B=3, T=8, c=0.5, seed=1002),
    dict(name="single_head_no_bias", V=2, D=8, H=1, L=1, F=16, max_len=16, B=2, T=11, c=0.0,
         seed=1003, zero_pattern=True),
    dict(name="linear_map_like", V=2, D=16, H=4, L=1, F=32, max_len=31, B=2, T=31, c=2.0,
         seed=1004, unit_loss_weights=True),
]


def init_weights(model, gen):
    """std 0.3 normals everywhere; LayerNorm weight 1 + 0.1 N, bias 0.1 N; all rounded to f32."""
    with torch.no_grad():
        for name, p in model.named():
            z = torch.randn(p.shape, generator=gen, dtype=torch.float64)
            if ".ln" in name or name.startswith("final_ln"):
                val = 1.0 + 0.1 * z if name.endswith("weight") else 0.1 * z
            else:
                val = 0.3 * z
            p.copy_(val.to(torch.float32).to(torch.float64))


def compute(model, tokens, targets, w, P, c):
    model.zero_grad(set_to_none=True)
    logits, atts = model(tokens, P, c)
    loss = weighted_loss(logits, targets, w)
    loss.backward()
    return loss.detach(), logits.detach(), [a.detach() for a in atts]


def fd_check(model, case, tokens, targets, w, P, c, gen, n_checks=8, h=1e-6):
    named = model.named()
    grads = {n: p.grad.clone() for n, p in named}
    # Entries: one in each of a few fixed tensors (attention path included), then random ones.
    fixed = ["embed.position.weight", "layers.0.mixer.qkv.weight", "layers.0.ln1.weight", "head.weight"]
    picks = [[n for n, _ in named].index(f) for f in fixed]
    picks += [int(torch.randint(len(named), (1,), generator=gen)) for _ in range(n_checks)]
    worst = 0.0
    for ti in picks:
        name, p = named[ti]
        idx = int(torch.randint(p.numel(), (1,), generator=gen))
        flat = p.data.view(-1)
        orig = flat[idx].item()
        with torch.no_grad():
            flat[idx] = orig + h
            lp = weighted_loss(model(tokens, P, c)[0], targets, w).item()
            flat[idx] = orig - h
            lm = weighted_loss(model(tokens, P, c)[0], targets, w).item()
            flat[idx] = orig
        fd = (lp - lm) / (2 * h)
        ag = grads[name].view(-1)[idx].item()
        assert abs(fd - ag) <= 1e-7 * max(1.0, abs(ag)), (case["name"], name, idx, fd, ag)
        worst = max(worst, abs(fd - ag))
    return worst


def make_case(case):
    gen = torch.Generator().manual_seed(case["seed"])
    torch.manual_seed(case["seed"])
    V, D, H, L, Fd, ML, B, T, c = (case[k] for k in ("V", "D", "H", "L", "F", "max_len", "B", "T", "c"))
    assert D % H == 0 and T <= ML
    model = GPT(V, D, H, L, Fd, ML)
    init_weights(model, gen)

    tokens = torch.randint(V, (B, T), generator=gen)
    targets = torch.randint(V, (B, T), generator=gen)
    if case.get("unit_loss_weights"):
        w = torch.ones(T)
    else:
        w = torch.rand(T, generator=gen, dtype=torch.float64) * 2.0
        w = w.to(torch.float32).to(torch.float64)  # exactly representable in f32 too
        zero = torch.randperm(T, generator=gen)[: max(1, T // 4)]
        w[zero] = 0.0
    assert w.sum() > 0
    if case.get("zero_pattern"):
        P = torch.zeros(T, T)
    else:
        P = torch.randint(2, (T, T), generator=gen).to(torch.float64)

    loss, logits, atts = compute(model, tokens, targets, w, P, c)
    named = model.named()

    # Sanity: causal rows sum to 1, unused position rows have exactly zero gradient.
    for a in atts:
        assert torch.allclose(a.sum(-1), torch.ones(()), atol=1e-12)
        assert (a.triu(1) == 0).all()
    pos_grad = model.pos.weight.grad
    assert (pos_grad[T:] == 0).all()
    fd_err = fd_check(model, case, tokens, targets, w, P, c, gen)
    # fd_check restored the weights exactly; recompute grads for the files.
    loss2, _, _ = compute(model, tokens, targets, w, P, c)
    assert loss2.item() == loss.item()

    out_dir = os.path.join(HERE, case["name"])
    os.makedirs(out_dir, exist_ok=True)
    wpath = os.path.join(out_dir, "weights.safetensors")
    write_safetensors(wpath, [(n, p.detach().numpy().astype(np.float32)) for n, p in named])
    write_safetensors(os.path.join(out_dir, "grads.safetensors"),
                      [(n, p.grad.numpy().astype(np.float32)) for n, p in named])

    # Round trip: re-read the weights file into a fresh model; the loss must reproduce exactly.
    arrays, header = read_safetensors(wpath)
    fresh = GPT(V, D, H, L, Fd, ML)
    with torch.no_grad():
        for n, p in fresh.named():
            p.copy_(torch.from_numpy(arrays[n].astype(np.float64)))
    names = [k for k in header if k != "__metadata__"]
    assert names == [n for n, _ in named]
    loss3, _, _ = compute(fresh, tokens, targets, w, P, c)
    assert loss3.item() == loss.item(), (loss3.item(), loss.item())

    fields = [
        ("shape", {"vocab": V, "d_model": D, "heads": H, "layers": L, "d_ff": Fd, "max_len": ML}),
        ("batch", B),
        ("length", T),
        ("tokens", tokens.reshape(-1).tolist()),
        ("targets", targets.reshape(-1).tolist()),
        ("loss_weights", w.tolist()),
        ("bias_pattern", [int(x) for x in P.reshape(-1).tolist()]),
        ("bias_strength", float(c)),
        ("loss", loss.item()),
        ("attention_layer0_sample0", atts[0][0].reshape(-1).tolist()),
        ("logits_sample0", logits[0].reshape(-1).tolist()),
    ]
    # json.dumps writes floats with repr(): shortest string that round-trips the float64.
    text = "{\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in fields) + "\n}\n"
    with open(os.path.join(out_dir, "case.json"), "w") as f:
        f.write(text)
    print(f"{case['name']}: loss = {loss.item()!r}  (max |finite diff - autograd| = {fd_err:.1e})")


def main():
    for case in CASES:
        make_case(case)


if __name__ == "__main__":
    main()
