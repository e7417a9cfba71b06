#!/usr/bin/env python3
"""Golden fixtures for the token mixers that had no outside oracle: the forward output and every
gradient of one layer on small random inputs, from code nobody here wrote (Hugging Face
transformers, from PyPI), or plain PyTorch where the mixer is one matrix product.

  mamba           transformers' MambaMixer (models/mamba), its pure-PyTorch slow_forward: the
                  layer of state-spaces/mamba's mamba_simple.py and selective_scan_ref.
  rwkv            transformers' RwkvSelfAttention (models/rwkv), RWKV-4 time mixing with its CPU
                  WKV (rwkv_linear_attention_cpu, the running-maximum form of RWKV-LM's kernel).
  rwkv_channel    transformers' RwkvFeedForward, RWKV-4 channel mixing.
  gated_deltanet  transformers' torch_recurrent_gated_delta_rule and Qwen3NextRMSNormGated
                  (models/qwen3_next: the gated delta rule with l2-normalised q and k, as
                  flash-linear-attention's naive_recurrent_gated_delta_rule), inside the layer of
                  flash-linear-attention's GatedDeltaNet written out below in PyTorch.
  mlp_mixer       plain PyTorch: tril(W)[:T, :T] @ X + b.
Where fla-core is installed, the script also asserts that flash-linear-attention's own
naive_recurrent_gated_delta_rule gives transformers' recurrence (they agreed to 1.2e-7).

Where our layer differs from theirs on purpose, the fixture bridges it, and says so here:
  - Mamba: conv1d.weight is stored [E, K] here, [E, 1, K] there (squeezed).
  - RWKV: time_mix_* are [D] here, [1, 1, D] there (flattened).
  - Gated DeltaNet: flash-linear-attention's layer is not on a CPU path (its kernels are Triton),
    and transformers' Qwen3-Next layer fuses projections and shares one conv over q|k|v, so the
    layer around the two transformers functions (the recurrence and the gated RMSNorm) is written
    here as FLA builds it with expand_v = 1 (mixers/gated_deltanet.hpp): q/k/v projections,
    causal depthwise conv 4 + SiLU on each, beta = sigmoid(b_proj x),
    g = -exp(A_log) softplus(a_proj x + dt_bias), o_norm gated by SiLU(g_proj x), o_proj.
  - MLP-Mixer: our weight is the packed lower triangle; the fixture stores it packed.
The oracles compute parts in float32 even in a float64 run (transformers' Mamba casts A_log,
its RWKV the keys and WKV state, its gated delta rule and gated norm their inputs), so the
fixtures are good to float32 rounding, not beyond: tests/mixer_golden.hpp says the
tolerances.

Every input and weight is drawn in float64, rounded to float32 and used as such, so the F32
tensors in the files are exactly what produced the outputs; outputs and gradients are float64
results rounded once to F32. B = 2, T = 21 (past the 16-token chunks of Mamba's scan and the
gated delta rule, not a multiple of anything), D = 16, 2 heads, d_ff = 24, max_len = 24.

    bash tests/golden/setup-hf-venv.sh
    .venv-torch/bin/pip install einops && .venv-torch/bin/pip install --no-deps fla-core   # the cross-check
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv-torch/bin/python tests/golden/make_mixer_golden.py
"""
import json
import math
import struct
from pathlib import Path

import torch
import torch.nn.functional as F
import transformers
from transformers import MambaConfig, RwkvConfig
from transformers.models.mamba.modeling_mamba import MambaMixer
from transformers.models.qwen3_next.modeling_qwen3_next import (Qwen3NextRMSNormGated,
                                                                torch_recurrent_gated_delta_rule)
from transformers.models.rwkv.modeling_rwkv import RwkvFeedForward, RwkvSelfAttention

OUT = Path(__file__).resolve().parent / "mixers"
B, T, D, H, FF, MAX_LEN = 2, 21, 16, 2, 24, 24
torch.set_num_threads(1)


def f32(t):
    """float64 tensor holding float32-representable values."""
    return t.to(torch.float32).to(torch.float64)


def write_safetensors(path, tensors, metadata):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def run_case(name, params, layer, generator, grad_source=None):
    """params: {our name: float64 leaf tensor}; layer(x) -> y. Writes x, dy, y, dx, param.*, grad.*.
    grad_source: {our name: the tensor whose .grad is that parameter's gradient}, where not itself."""
    x = f32(torch.randn(B, T, D, generator=generator, dtype=torch.float64)).requires_grad_(True)
    dy = f32(torch.randn(B, T, D, generator=generator, dtype=torch.float64))
    y = layer(x)
    assert y.shape == (B, T, D), y.shape
    y.backward(dy)
    tensors = {"x": x, "dy": dy, "y": y, "dx": x.grad}
    for n, p in params.items():
        grad = (grad_source or {}).get(n, p).grad
        assert grad is not None, n
        tensors["param." + n] = p
        tensors["grad." + n] = grad
    metadata = {"generator": "tests/golden/make_mixer_golden.py", "torch": torch.__version__,
                "transformers": transformers.__version__, "case": name,
                "sizes": json.dumps({"B": B, "T": T, "D": D, "heads": H, "d_ff": FF, "max_len": MAX_LEN})}
    write_safetensors(OUT / f"{name}.safetensors", tensors, metadata)
    print(f"{name}: |y| {y.abs().max().item():.3g}, |dx| {x.grad.abs().max().item():.3g}, {len(params)} tensors")


def load(module, values):
    """Copies float64 values into the module's parameters (by its names); returns them by name."""
    named = dict(module.named_parameters())
    for n, v in values.items():
        with torch.no_grad():
            named[n].copy_(v.reshape(named[n].shape))
    return named


def mamba(g):
    config = MambaConfig(hidden_size=D, state_size=16, expand=2, conv_kernel=4, time_step_rank=math.ceil(D / 16),
                         use_bias=False, use_conv_bias=True, hidden_act="silu", use_mambapy=False)
    layer = MambaMixer(config, layer_idx=0).to(torch.float64)
    E, N, R = 2 * D, 16, math.ceil(D / 16)
    rnd = lambda *shape, scale=0.3: f32(scale * torch.randn(*shape, generator=g, dtype=torch.float64))
    values = {"in_proj.weight": rnd(2 * E, D), "conv1d.weight": rnd(E, 1, 4), "conv1d.bias": rnd(E, scale=0.1),
              "x_proj.weight": rnd(R + 2 * N, E), "dt_proj.weight": rnd(E, R), "dt_proj.bias": rnd(E, scale=0.5),
              "A_log": f32(torch.log(torch.arange(1, N + 1, dtype=torch.float64)).repeat(E, 1) + rnd(E, N, scale=0.1)),
              "D": f32(1 + rnd(E, scale=0.1)), "out_proj.weight": rnd(D, E)}
    named = load(layer, values)
    params = {n: named[n] for n in values}
    layer.eval()  # no dropout anyway; the slow path is taken on a CPU tensor
    run_case("mamba", params, lambda x: layer(x), g)
    # the conv weight and its gradient in our [E, K] layout
    fix_shapes(OUT / "mamba.safetensors", {"param.conv1d.weight": [E, 4], "grad.conv1d.weight": [E, 4]})


def fix_shapes(path, shapes):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    for name, shape in shapes.items():
        assert math.prod(header[name]["shape"]) == math.prod(shape)
        header[name]["shape"] = shape
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + raw[8 + n:])


def rwkv(g):
    config = RwkvConfig(hidden_size=D, attention_hidden_size=D, intermediate_size=FF, num_hidden_layers=1)
    layer = RwkvSelfAttention(config, layer_id=0).to(torch.float64)
    rnd = lambda *shape, scale=0.3: f32(scale * torch.randn(*shape, generator=g, dtype=torch.float64))
    uniform = lambda *shape: f32(torch.rand(*shape, generator=g, dtype=torch.float64))
    values = {"time_decay": rnd(D, scale=1.0), "time_first": rnd(D, scale=1.0), "time_mix_key": uniform(D),
              "time_mix_value": uniform(D), "time_mix_receptance": uniform(D), "key.weight": rnd(D, D),
              "value.weight": rnd(D, D), "receptance.weight": rnd(D, D), "output.weight": rnd(D, D)}
    named = load(layer, values)
    ours = {"time_decay": "time_decay", "time_first": "time_first", "time_mix_k": "time_mix_key",
            "time_mix_v": "time_mix_value", "time_mix_r": "time_mix_receptance", "key.weight": "key.weight",
            "value.weight": "value.weight", "receptance.weight": "receptance.weight", "output.weight": "output.weight"}
    run_case("rwkv", {o: named[t] for o, t in ours.items()}, lambda x: layer(x)[0], g)
    fix_shapes(OUT / "rwkv.safetensors", {f"{k}.time_mix_{c}": [D] for k in ("param", "grad") for c in "kvr"})

    channel = RwkvFeedForward(config, layer_id=0).to(torch.float64)
    values = {"time_mix_key": uniform(D), "time_mix_receptance": uniform(D), "key.weight": rnd(FF, D),
              "receptance.weight": rnd(D, D), "value.weight": rnd(D, FF)}
    named = load(channel, values)
    ours = {"time_mix_k": "time_mix_key", "time_mix_r": "time_mix_receptance", "key.weight": "key.weight",
            "receptance.weight": "receptance.weight", "value.weight": "value.weight"}
    run_case("rwkv_channel", {o: named[t] for o, t in ours.items()}, lambda x: channel(x)[0], g)
    fix_shapes(OUT / "rwkv_channel.safetensors", {f"{k}.time_mix_{c}": [D] for k in ("param", "grad") for c in "kr"})


def gated_deltanet(g):
    Dh = D // H
    rnd = lambda *shape, scale=0.3: f32(scale * torch.randn(*shape, generator=g, dtype=torch.float64))
    p = {"q_proj.weight": rnd(D, D), "k_proj.weight": rnd(D, D), "v_proj.weight": rnd(D, D),
         "a_proj.weight": rnd(H, D), "b_proj.weight": rnd(H, D), "A_log": f32(torch.log(torch.tensor([2.0, 9.0],
                                                                                                      dtype=torch.float64))),
         "dt_bias": rnd(H, scale=0.5), "q_conv1d.weight": rnd(D, 4, scale=0.5), "k_conv1d.weight": rnd(D, 4, scale=0.5),
         "v_conv1d.weight": rnd(D, 4, scale=0.5), "g_proj.weight": rnd(D, D), "o_norm.weight": f32(1 + rnd(Dh, scale=0.1)),
         "o_proj.weight": rnd(D, D)}
    for t in p.values():
        t.requires_grad_(True)
    norm = Qwen3NextRMSNormGated(Dh, eps=1e-5).to(torch.float64)
    norm.weight = torch.nn.Parameter(p["o_norm.weight"].detach().clone())

    def conv_silu(u, w):  # causal depthwise conv, kernel 4, no bias: sum_j w[c, j] u[t - 3 + j, c]
        return F.silu(F.conv1d(u.transpose(1, 2), w[:, None, :], padding=3, groups=D)[..., :T].transpose(1, 2))

    def layer(x):
        q = conv_silu(x @ p["q_proj.weight"].T, p["q_conv1d.weight"]).reshape(B, T, H, Dh)
        k = conv_silu(x @ p["k_proj.weight"].T, p["k_conv1d.weight"]).reshape(B, T, H, Dh)
        v = conv_silu(x @ p["v_proj.weight"].T, p["v_conv1d.weight"]).reshape(B, T, H, Dh)
        beta = torch.sigmoid(x @ p["b_proj.weight"].T)
        gate = -torch.exp(p["A_log"]) * F.softplus(x @ p["a_proj.weight"].T + p["dt_bias"])
        o, _ = torch_recurrent_gated_delta_rule(q, k, v, g=gate, beta=beta, initial_state=None,
                                                output_final_state=False, use_qk_l2norm_in_kernel=True)
        z = norm(o.to(torch.float64), (x @ p["g_proj.weight"].T).reshape(B, T, H, Dh))
        return z.reshape(B, T, D) @ p["o_proj.weight"].T

    # o_norm.weight is the norm module's parameter: its gradient lands there.
    run_case("gated_deltanet", p, layer, g, grad_source={"o_norm.weight": norm.weight})
    cross_check_fla(g)


def cross_check_fla(g):
    """A second outside implementation of the recurrence, where installed: flash-linear-attention's
    naive_recurrent_gated_delta_rule (fla-core, pure PyTorch; loaded from its file, since the fla
    package imports Triton) must give transformers' result on the same l2-normalised q, k."""
    import importlib.util
    spec = importlib.util.find_spec("fla")
    if spec is None:
        print("gated_deltanet: fla-core not installed, cross-check skipped")
        return
    path = Path(spec.submodule_search_locations[0]) / "ops" / "gated_delta_rule" / "naive.py"
    module_spec = importlib.util.spec_from_file_location("fla_gated_delta_naive", path)
    naive = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(naive)
    c = torch.Generator().manual_seed(7)
    Dh = D // H
    q, k, v = (torch.randn(B, T, H, Dh, generator=c, dtype=torch.float64) for _ in range(3))
    beta = torch.rand(B, T, H, generator=c, dtype=torch.float64)
    gate = -torch.rand(B, T, H, generator=c, dtype=torch.float64)
    ours, _ = torch_recurrent_gated_delta_rule(q, k, v, g=gate, beta=beta, initial_state=None, output_final_state=False,
                                               use_qk_l2norm_in_kernel=True)
    unit = lambda x: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)  # transformers' l2norm, eps 1e-6
    theirs, _ = naive.naive_recurrent_gated_delta_rule(unit(q), unit(k), v, beta, gate)
    difference = (ours.double() - theirs.double()).abs().max().item()
    assert difference < 1e-5, difference
    print(f"gated_deltanet: transformers' and fla-core's recurrences agree to {difference:.2g}")


def mlp_mixer(g):
    full = f32(0.3 * torch.randn(MAX_LEN, MAX_LEN, generator=g, dtype=torch.float64))
    rows, cols = torch.tril_indices(MAX_LEN, MAX_LEN)  # row-major lower triangle: the packed order
    packed = full[rows, cols].clone().requires_grad_(True)
    bias = f32(0.3 * torch.randn(MAX_LEN, generator=g, dtype=torch.float64)).requires_grad_(True)

    def layer(x):
        w = torch.zeros(MAX_LEN, MAX_LEN, dtype=torch.float64).index_put((rows, cols), packed)
        return torch.einsum("ij,bjd->bid", w[:T, :T], x) + bias[:T, None]
    run_case("mlp_mixer", {"weight": packed, "bias": bias}, layer, g)


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    for i, case in enumerate([mlp_mixer, mamba, rwkv, gated_deltanet]):
        case(torch.Generator().manual_seed(1000 + i))
