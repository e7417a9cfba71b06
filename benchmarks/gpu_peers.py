#!/usr/bin/env python3
"""The peers of emergent's device ensemble (benchmarks/gpu.sh): the same model, batch and
optimizer as `emergent train --backend cuda` trains, as an ensemble of E seeds, in

  torch-eager   E torch.nn models, each stepped in turn (torch.optim.AdamW, foreach)
  torch-vmap    torch.func: vmap(grad) over the E stacked parameter sets, AdamW on the stacks
  jax-vmap      jax.jit(jax.vmap(step)): loss, gradient and AdamW of all E seeds in one program

Model (docs/model.md): token + learned position embedding, pre-LN blocks of causal attention
(d_model 128, 8 heads) and a GELU MLP (512), final LayerNorm, a bias-free head; mean
cross-entropy; AdamW (0.9, 0.999, eps 1e-8, weight decay 0.01 on the matrices of the Linear
layers) after clipping each seed's gradient norm to 1. Data: random tokens, fixed per step (the
throughput does not depend on them). Prints one JSON object per (library, precision, E) line,
and writes all of them as a list to --out after each one (so a run stopped by a time limit keeps
what it measured).

Precisions (--runs): each run is library:precision:E list, e.g. jax-vmap:highest:1/16/256.
  torch  fp32   torch.backends.cuda.matmul.allow_tf32 = False (float32 GEMMs)
         tf32   allow_tf32 = True (TF32 tensor-core GEMMs)
  jax    highest  jax_default_matmul_precision = "highest" (float32 dots)
         default  JAX's default (on this GPU, not full float32: TF32-class passes)
Timing: --warmup steps, then --repeats times --steps timed steps; the median repeat is reported
(and each repeat's seconds).
"""
import argparse
import json
import math
import sys
import time


def shapes(vocab, d, heads, layers, ff, length):
    p = {"token": (vocab, d), "position": (length, d), "final_ln.w": (d,), "final_ln.b": (d,),
         "head": (vocab, d)}
    for l in range(layers):
        for name, shape in (("ln1.w", (d,)), ("ln1.b", (d,)), ("qkv.w", (3 * d, d)), ("qkv.b", (3 * d,)),
                            ("out.w", (d, d)), ("out.b", (d,)), ("ln2.w", (d,)), ("ln2.b", (d,)),
                            ("fc.w", (ff, d)), ("fc.b", (ff,)), ("proj.w", (d, ff)), ("proj.b", (d,))):
            p[f"{l}.{name}"] = shape
    return p


def decayed(name):
    return name.endswith((".w", "head")) and not name.endswith(("ln1.w", "ln2.w", "final_ln.w"))


def forward(ops, p, tokens, heads, layers):
    """Loss of one seed. ops: the array library (torch or jax.numpy) with a few helpers."""
    b, t = tokens.shape
    d = p["token"].shape[1]
    dh = d // heads
    x = p["token"][tokens] + p["position"][:t]
    mask = ops.causal(t)

    def ln(x, w, bias):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / ops.sqrt(v + 1e-5) * w + bias

    for l in range(layers):
        a = ln(x, p[f"{l}.ln1.w"], p[f"{l}.ln1.b"]) @ p[f"{l}.qkv.w"].T + p[f"{l}.qkv.b"]
        q, k, v = (ops.heads(a[..., i * d:(i + 1) * d], b, t, heads, dh) for i in range(3))
        s = ops.where(mask, (q @ ops.swap(k)) / math.sqrt(dh), -1e30)
        o = ops.softmax(s) @ v
        x = x + ops.merge(o, b, t, d) @ p[f"{l}.out.w"].T + p[f"{l}.out.b"]
        h = ops.gelu(ln(x, p[f"{l}.ln2.w"], p[f"{l}.ln2.b"]) @ p[f"{l}.fc.w"].T + p[f"{l}.fc.b"])
        x = x + h @ p[f"{l}.proj.w"].T + p[f"{l}.proj.b"]
    logits = ln(x, p["final_ln.w"], p["final_ln.b"]) @ p["head"].T
    return ops.cross_entropy(logits, tokens)


def adamw(ops, p, g, m, v, step, lr):
    """One AdamW step of one seed's parameter dict, clipped by its own gradient norm."""
    norm = ops.sqrt(sum((x * x).sum() for x in g.values()))
    clip = ops.minimum(1.0, 1.0 / (norm + 1e-12))
    b1, b2 = 0.9, 0.999
    out_p, out_m, out_v = {}, {}, {}
    for k in p:
        gk = g[k] * clip
        out_m[k] = b1 * m[k] + (1 - b1) * gk
        out_v[k] = b2 * v[k] + (1 - b2) * gk * gk
        pk = p[k] * (1 - lr * 0.01) if decayed(k) else p[k]
        out_p[k] = pk - lr / (1 - b1 ** step) * out_m[k] / (ops.sqrt(out_v[k] / (1 - b2 ** step)) + 1e-8)
    return out_p, out_m, out_v


def torch_ops(torch):
    F = torch.nn.functional

    class Ops:
        sqrt = staticmethod(torch.sqrt)
        where = staticmethod(torch.where)
        minimum = staticmethod(lambda a, b: torch.clamp(b, max=a))

        @staticmethod
        def causal(t):
            return torch.ones(t, t, dtype=torch.bool, device=DEVICE).tril()

        @staticmethod
        def heads(a, b, t, h, dh):
            return a.reshape(b, t, h, dh).transpose(1, 2)

        @staticmethod
        def merge(o, b, t, d):
            return o.transpose(1, 2).reshape(b, t, d)

        swap = staticmethod(lambda k: k.transpose(-1, -2))
        softmax = staticmethod(lambda s: s.softmax(-1))
        gelu = staticmethod(F.gelu)

        @staticmethod
        def cross_entropy(logits, tokens):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens.reshape(-1))

    return Ops


def jax_ops(jax, jnp):
    class Ops:
        sqrt = staticmethod(jnp.sqrt)
        where = staticmethod(jnp.where)
        minimum = staticmethod(jnp.minimum)
        causal = staticmethod(lambda t: jnp.tril(jnp.ones((t, t), dtype=bool)))
        heads = staticmethod(lambda a, b, t, h, dh: a.reshape(b, t, h, dh).transpose(0, 2, 1, 3))
        merge = staticmethod(lambda o, b, t, d: o.transpose(0, 2, 1, 3).reshape(b, t, d))
        swap = staticmethod(lambda k: jnp.swapaxes(k, -1, -2))
        softmax = staticmethod(lambda s: jax.nn.softmax(s, axis=-1))
        gelu = staticmethod(lambda x: jax.nn.gelu(x, approximate=False))

        @staticmethod
        def cross_entropy(logits, tokens):
            lse = jax.nn.logsumexp(logits, axis=-1)
            picked = jnp.take_along_axis(logits, tokens[..., None], axis=-1)[..., 0]
            return (lse - picked).mean()

    return Ops


DEVICE = "cpu"


def time_steps(step, sync, steps, warmup, repeats):
    """Seconds of each of `repeats` runs of `steps` steps, after `warmup` steps."""
    for i in range(warmup):
        step(i)
    sync()
    seconds = []
    done = warmup
    for _ in range(repeats):
        start = time.perf_counter()
        for i in range(steps):
            step(done + i)
        sync()
        seconds.append(time.perf_counter() - start)
        done += steps
    return seconds


def bench_torch(args, E, mode, precision):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    torch.manual_seed(0)
    ops = torch_ops(torch)
    sh = shapes(args.vocab, args.d_model, args.heads, args.layers, args.d_ff, args.length)
    batches = [torch.randint(0, args.vocab, (E, args.batch, args.length), device=DEVICE) for _ in range(4)]
    sync = torch.cuda.synchronize if DEVICE == "cuda" else (lambda: None)
    init = {k: torch.randn((E,) + s, device=DEVICE) * 0.02 for k, s in sh.items()}
    if mode == "eager":
        models = [{k: v[e].clone().requires_grad_() for k, v in init.items()} for e in range(E)]
        opts = [torch.optim.AdamW([{"params": [p[k] for k in p if decayed(k)], "weight_decay": 0.01},
                                   {"params": [p[k] for k in p if not decayed(k)], "weight_decay": 0.0}],
                                  lr=1e-3, foreach=True) for p in models]

        def step(i):
            for e in range(E):
                loss = forward(ops, models[e], batches[i % 4][e], args.heads, args.layers)
                opts[e].zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(list(models[e].values()), 1.0)
                opts[e].step()
    else:
        from torch.func import grad_and_value, vmap
        state = {"p": init, "m": {k: torch.zeros_like(v) for k, v in init.items()},
                 "v": {k: torch.zeros_like(v) for k, v in init.items()}}
        loss_and_grad = vmap(grad_and_value(lambda p, x: forward(ops, p, x, args.heads, args.layers)))
        update = vmap(lambda p, g, m, v, t: adamw(ops, p, g, m, v, t, 1e-3), in_dims=(0, 0, 0, 0, None))

        def step(i):
            g, _ = loss_and_grad(state["p"], batches[i % 4])
            state["p"], state["m"], state["v"] = update(state["p"], g, state["m"], state["v"], i + 1)
    return time_steps(step, sync, args.steps, args.warmup, args.repeats)


def bench_jax(args, E, precision):
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_default_matmul_precision", None if precision == "default" else precision)
    ops = jax_ops(jax, jnp)
    sh = shapes(args.vocab, args.d_model, args.heads, args.layers, args.d_ff, args.length)
    key = jax.random.PRNGKey(0)
    p = {k: jax.random.normal(jax.random.fold_in(key, i), (E,) + s) * 0.02 for i, (k, s) in enumerate(sh.items())}
    m = {k: jnp.zeros_like(v) for k, v in p.items()}
    v = {k: jnp.zeros_like(x) for k, x in p.items()}
    batches = [jax.random.randint(jax.random.fold_in(key, 1000 + i), (E, args.batch, args.length), 0, args.vocab)
               for i in range(4)]

    def one(p, m, v, x, t):
        loss, g = jax.value_and_grad(lambda q: forward(ops, q, x, args.heads, args.layers))(p)
        p, m, v = adamw(ops, p, g, m, v, t, 1e-3)
        return p, m, v, loss

    train = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, 0, None)))
    state = {"p": p, "m": m, "v": v, "loss": None}

    def step(i):
        state["p"], state["m"], state["v"], state["loss"] = train(state["p"], state["m"], state["v"],
                                                                  batches[i % 4], jnp.float32(i + 1))

    return time_steps(step, lambda: state["loss"] is not None and state["loss"].block_until_ready(),
                      args.steps, args.warmup, args.repeats)


def main():
    global DEVICE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default="jax-vmap:highest:1/16/256,jax-vmap:default:1/16/256,"
                        "torch-vmap:fp32:1/16,torch-vmap:tf32:1/16,torch-eager:fp32:1/16,torch-eager:tf32:1",
                        help="library:precision:E/E/..., comma-separated, run in this order")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--d-ff", type=int, default=512)
    parser.add_argument("--length", type=int, default=31, help="positions (the linear map at S = 16: 31)")
    parser.add_argument("--batch", type=int, default=128, help="sequences per step per seed (4,096 tokens at S = 16)")
    parser.add_argument("--device", default="cuda", help="cuda, or cpu to try the script")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    DEVICE = args.device
    results = []
    for run in args.runs.split(","):
        library, precision, sizes = run.split(":")
        for E in (int(e) for e in sizes.split("/")):
            began = time.perf_counter()
            try:
                if library == "jax-vmap":
                    seconds = bench_jax(args, E, precision)
                else:
                    seconds = bench_torch(args, E, library.split("-")[1], precision)
                median = sorted(seconds)[len(seconds) // 2]
                r = {"library": library, "precision": precision, "ensemble": E, "steps": args.steps,
                     "repeats": seconds, "seconds": median, "steps_per_s": args.steps / median,
                     "tokens_per_s": args.steps * E * args.batch * (args.length + 1) / median}
            except Exception as e:  # out of memory at E = 256, a missing library: say so, go on
                r = {"library": library, "precision": precision, "ensemble": E,
                     "error": f"{type(e).__name__}: {e}"[:300]}
            # the whole of this run: import, setup, compilation, warm-up and the timed repeats
            r["wall_s"] = time.perf_counter() - began
            print(json.dumps(r), flush=True)
            results.append(r)
            if args.out:
                with open(args.out, "w") as f:
                    json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
