#!/usr/bin/env python3
"""Training throughput of emergent against PyTorch on this machine, in one run.

    make bench-compare                       # builds, sets up .venv-torch, runs this
    .venv-torch/bin/python benchmarks/compare_pytorch.py [--quick] [--configs a,b] [--threads 1,2] [--repeats 2]

For every configuration and thread count it trains the same model (docs/model.md: pre-LN GPT,
D=128, 8 heads, MLP 512, full-sequence loss, AdamW lr 1e-3 with weight decay 0.01 on the Linear
weights and gradient clipping at 1) on random tokens:
  * in PyTorch, twice: attention with explicit matmuls + masked softmax, and with
    F.scaled_dot_product_attention(is_causal=True); the faster one is reported;
  * with build/benchmarks/train_throughput (benchmarks/train_throughput.cpp, same
    configurations, same FLOP count per token).
Each library runs --repeats times per configuration (alternating with the other) and keeps its
fastest run; every run's tokens/s is kept in the JSON.
It also measures the machine's fp32 GEMM peak for each thread count (torch.mm, the C++
program's Eigen GEMM and emergent's own GEMM kernel, each at 1024 and 2048) and takes the largest
as "peak".

Writes docs/results/performance.json and prints a table. PyTorch runs in worker subprocesses of
this script whose environment has OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed (they are set
on this machine for old numpy builds); the parent never imports torch.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

D_MODEL, HEADS, D_FF = 128, 8, 512

# name -> layers, vocab, batch, length (model positions), steps, warmup. Must match
# benchmarks/train_throughput.cpp. linmap: sequences of 2S tokens, T = 2S - 1 positions,
# batch = tokens / (2S).
CONFIGS = {
    "linmap_S16_4096": dict(layers=1, vocab=2, batch=4096 // 32, length=31, steps=100, warmup=20),
    "linmap_S16_512": dict(layers=1, vocab=2, batch=512 // 32, length=31, steps=400, warmup=50),
    "linmap_S32_4096": dict(layers=1, vocab=2, batch=4096 // 64, length=63, steps=100, warmup=20),
    "linmap_S32_512": dict(layers=1, vocab=2, batch=512 // 64, length=63, steps=400, warmup=50),
    "ca_L4_1024": dict(layers=4, vocab=4, batch=4, length=1024, steps=6, warmup=2),
    # The long contexts of Fig. 5b (S = 128 and 256 at 16 states): not in the default list.
    "ca_L4_2048": dict(layers=4, vocab=4, batch=2, length=2048, steps=3, warmup=1),
    "ca_L4_4096": dict(layers=4, vocab=4, batch=1, length=4096, steps=3, warmup=1),
}
DEFAULT_CONFIGS = [name for name in CONFIGS if name not in ("ca_L4_2048", "ca_L4_4096")]
QUICK = {"linmap": (5, 15), "ca": (1, 2)}  # (warmup, steps) for --quick


def flops_per_token(layers: int, vocab: int, length: int) -> float:
    """Forward + backward matmul FLOPs per trained position (see train_throughput.cpp):
    6 P + 6 L D (T + 1), P = L (4 D^2 + 2 D F) + V D, the attention term over the causal
    triangle."""
    matmul_params = layers * (4 * D_MODEL**2 + 2 * D_MODEL * D_FF) + vocab * D_MODEL
    return 6.0 * matmul_params + 6.0 * layers * D_MODEL * (length + 1)


def torch_env(threads: int) -> dict:
    env = dict(os.environ)
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env["OMP_NUM_THREADS"] = str(threads)
    env["MKL_NUM_THREADS"] = str(threads)
    return env


def run_child(cmd: list[str], env: dict) -> tuple[dict, int]:
    """Runs cmd, returns (its last stdout line parsed as JSON, its own peak RSS in bytes)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env, cwd=ROOT, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited with {proc.returncode}")
    lines = [line for line in out.splitlines() if line.strip()]
    return json.loads(lines[-1]), usage.ru_maxrss * 1024  # ru_maxrss is in KiB on Linux


# --------------------------------------------------------------------------------------------
# PyTorch worker (runs in a subprocess with the cleaned environment)


def worker_torch_info(threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    blas_name = blas.group(1) if blas else None
    if blas_name is None:
        blas_name = "mkl" if "Math Kernel Library" in config else ("openblas" if "OpenBLAS" in config.lower() else "unknown")
    lines = [line.strip() for line in config.splitlines()]
    gflops = {}
    for n, reps in ((1024, 8), (2048, 5)):
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.mm(a, b)
        best = float("inf")
        for _ in range(reps):
            start = time.perf_counter()
            torch.mm(a, b)
            best = min(best, time.perf_counter() - start)
        gflops[f"gflops_{n}"] = 2.0 * n**3 / best / 1e9
    return {
        "torch_version": torch.__version__,
        "torch_file": torch.__file__,
        "blas": blas_name,
        "mkl_available": torch.backends.mkl.is_available(),
        "mkldnn_available": torch.backends.mkldnn.is_available(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else None,
        "config_summary": [line for line in lines if "Math Kernel" in line or "MKL-DNN" in line or "OpenBLAS" in line
                           or "CPU capability" in line or "OpenMP" in line],
        "threads": torch.get_num_threads(),
        **gflops,
        "gflops": max(gflops.values()),
    }


def worker_train(config: str, threads: int, steps: int, warmup: int, attentions: list[str]) -> dict:
    """Times each attention variant in turn (fresh model and optimizer each), in one process."""
    return {attention: train_variant(config, threads, steps, warmup, attention) for attention in attentions}


def train_variant(config: str, threads: int, steps: int, warmup: int, attention: str) -> dict:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    c = CONFIGS[config]
    L, V, B, T = c["layers"], c["vocab"], c["batch"], c["length"]
    D, H, FF = D_MODEL, HEADS, D_FF
    Dh = D // H

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(D)
            self.qkv = nn.Linear(D, 3 * D)
            self.out = nn.Linear(D, D)
            self.ln2 = nn.LayerNorm(D)
            self.fc = nn.Linear(D, FF)
            self.proj = nn.Linear(FF, D)

        def forward(self, x, mask):
            b, t, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=-1)
            q = q.view(b, t, H, Dh).transpose(1, 2)
            k = k.view(b, t, H, Dh).transpose(1, 2)
            v = v.view(b, t, H, Dh).transpose(1, 2)
            if attention == "sdpa":
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                s = (q @ k.transpose(-2, -1)) * (1.0 / Dh**0.5)
                s = s.masked_fill(mask, float("-inf"))
                o = s.softmax(dim=-1) @ v
            x = x + self.out(o.transpose(1, 2).reshape(b, t, D))
            return x + self.proj(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token = nn.Embedding(V, D)
            self.position = nn.Embedding(T, D)
            self.layers = nn.ModuleList(Block() for _ in range(L))
            self.final_ln = nn.LayerNorm(D)
            self.head = nn.Linear(D, V, bias=False)
            self.register_buffer("mask", torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1))

        def forward(self, tokens):
            x = self.token(tokens) + self.position.weight[: tokens.shape[1]]
            for block in self.layers:
                x = block(x, self.mask)
            return self.head(self.final_ln(x))

    model = GPT()
    decay = [p for n, p in model.named_parameters() if p.dim() == 2 and not n.startswith(("token", "position"))]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() == 2 and not n.startswith(("token", "position")))]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3)
    batches = [(torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))) for _ in range(4)]

    loss = None

    def step(i):
        nonlocal loss
        inputs, targets = batches[i % len(batches)]
        logits = model(inputs)
        loss = F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    for i in range(warmup):
        step(i)
    start = time.perf_counter()
    for i in range(steps):
        step(warmup + i)
    elapsed = time.perf_counter() - start
    tokens_per_step = B * T
    tokens_per_s = tokens_per_step * steps / elapsed if steps else 0.0
    fpt = flops_per_token(L, V, T)
    return {
        "config": config, "threads": torch.get_num_threads(), "attention": attention,
        "tokens_per_step": tokens_per_step, "warmup": warmup, "steps": steps, "seconds": elapsed,
        "tokens_per_s": tokens_per_s, "flops_per_token": fpt, "gflops": fpt * tokens_per_s / 1e9,
        "final_loss": loss.item(),
        "parameter_count": sum(p.numel() for p in model.parameters()),
    }


# --------------------------------------------------------------------------------------------
# Driver


def machine_info() -> dict:
    fields = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    flags = fields.get("flags", "").split()
    # A VM may name only the vendor ("AMD EPYC"): family and model tell the generation.
    cpu = f'{fields.get("model name")} (family {fields.get("cpu family")}, model {fields.get("model")})'
    isa = "avx512f" if "avx512f" in flags else "avx2" if "avx2" in flags else "neither avx2 nor avx512f"
    return {"cpu": cpu, "isa": isa, "logical_cpus": os.cpu_count(), "platform": platform.platform(),
            "loadavg_start": os.getloadavg()}


def steps_for(name: str, args) -> tuple[int, int]:
    c = CONFIGS[name]
    warmup, steps = c["warmup"], c["steps"]
    if args.quick:
        warmup, steps = QUICK["ca" if name.startswith("ca") else "linmap"]
    if args.warmup is not None:
        warmup = args.warmup
    if args.steps is not None:
        steps = args.steps
    return warmup, steps


def kernel_of(result: dict) -> str:
    """The kernels emergent's runs used ("avx512", "avx2" or "eigen", core/simd.hpp) and the GEMM
    blocking this CPU chose (nn/gemm.hpp)."""
    kinds = {r["emergent"].get("gemm", r["emergent"].get("kernel", "?")) for r in result["rows"]}
    return ", ".join(sorted(kinds)) or "none run"


def mib(n: float) -> str:
    return f"{n / 2**20:.0f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", default=",".join(DEFAULT_CONFIGS),
                        help="comma-separated configuration names (also ca_L4_2048, ca_L4_4096)")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--steps", type=int, help="measured steps for every configuration")
    parser.add_argument("--warmup", type=int, help="warmup steps for every configuration")
    parser.add_argument("--quick", action="store_true", help="smoke run: very few steps, one repeat")
    parser.add_argument("--repeats", type=int, default=2,
                        help="runs of each library per configuration, alternating; the fastest is kept")
    parser.add_argument("--binary", default=str(ROOT / "build" / "benchmarks" / "train_throughput"))
    parser.add_argument("--output", default=str(ROOT / "docs" / "results" / "performance.json"))
    parser.add_argument("--worker", choices=["info", "train"], help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--attention", default="explicit,sdpa", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker == "info":
        print(json.dumps(worker_torch_info(int(args.threads))))
        return 0
    if args.worker == "train":
        print(json.dumps(worker_train(args.config, int(args.threads), args.steps, args.warmup,
                                      args.attention.split(","))))
        return 0

    if args.quick:
        args.repeats = 1
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    configs = [c for c in args.configs.split(",") if c]
    for c in configs:
        if c not in CONFIGS:
            parser.error(f"unknown configuration {c}; known: {', '.join(CONFIGS)}")
    thread_counts = [int(t) for t in args.threads.split(",") if t]
    binary = Path(args.binary)
    if not binary.exists():
        parser.error(f"{binary} does not exist: build it with `make build BENCHMARKS=ON`")
    me = [sys.executable, str(Path(__file__).resolve())]
    started = time.time()

    result = {"machine": machine_info(), "settings": {}, "torch": None, "peak": {}, "rows": []}
    for threads in thread_counts:
        env_torch = torch_env(threads)
        env_emergent = dict(os.environ, OMP_NUM_THREADS=str(threads))
        info, _ = run_child(me + ["--worker", "info", "--threads", str(threads)], env_torch)
        cpp_gemm, _ = run_child([str(binary), "--gemm-peak", "--threads", str(threads)], env_emergent)
        if result["torch"] is None:
            result["torch"] = {k: info[k] for k in ("torch_version", "torch_file", "blas", "mkl_available",
                                                     "mkldnn_available", "cpu_capability", "config_summary")}
        result["peak"][str(threads)] = {
            "torch_mm_gflops_1024": info["gflops_1024"], "torch_mm_gflops_2048": info["gflops_2048"],
            "eigen_gflops_1024": cpp_gemm["gflops_1024"], "eigen_gflops_2048": cpp_gemm["gflops_2048"],
            "emergent_gflops_1024": cpp_gemm["emergent_gflops_1024"],
            "emergent_gflops_2048": cpp_gemm["emergent_gflops_2048"],
            "peak_gflops": max(info["gflops"], cpp_gemm["gflops"]),
        }
        print(f"[threads {threads}] GEMM: torch.mm {info['gflops']:.1f} GFLOP/s, Eigen and emergent's kernel "
              f"{cpp_gemm['gflops']:.1f} GFLOP/s", file=sys.stderr, flush=True)
        for name in configs:
            warmup, steps = steps_for(name, args)
            result["settings"][name] = {"warmup": warmup, "steps": steps, **CONFIGS[name], "d_model": D_MODEL,
                                        "heads": HEADS, "d_ff": D_FF}
            # Both attention variants in one worker process (one torch import); its peak RSS
            # is the larger of the two.
            # Each library runs `repeats` times, alternating, and keeps its fastest run: on a
            # shared VM a run is only ever slowed down by the neighbours, never sped up.
            torch_runs, em_runs = [], []
            for _ in range(args.repeats):
                variants, torch_rss = run_child(me + ["--worker", "train", "--config", name, "--threads",
                                                      str(threads), "--steps", str(steps), "--warmup", str(warmup),
                                                      "--attention", "explicit,sdpa"], env_torch)
                torch_runs.append((max(variants.values(), key=lambda r: r["tokens_per_s"]), variants, torch_rss))
                em, em_rss = run_child([str(binary), "--config", name, "--threads", str(threads),
                                        "--steps", str(steps), "--warmup", str(warmup)], env_emergent)
                em["peak_rss_bytes_rusage"] = em_rss
                em_runs.append(em)
            best, variants, torch_rss = max(torch_runs, key=lambda run: run[0]["tokens_per_s"])
            em = max(em_runs, key=lambda run: run["tokens_per_s"])
            em_rss = em["peak_rss_bytes_rusage"]
            peak = result["peak"][str(threads)]["peak_gflops"]
            row = {
                "config": name, "threads": threads, "tokens_per_step": em["tokens_per_step"],
                "pytorch_tokens_per_s": best["tokens_per_s"], "pytorch_attention": best["attention"],
                "emergent_tokens_per_s": em["tokens_per_s"],
                "ratio_emergent_over_pytorch": em["tokens_per_s"] / best["tokens_per_s"],
                "emergent_gflops": em["gflops"], "pytorch_gflops": best["gflops"],
                "peak_gflops": peak, "emergent_share_of_peak": em["gflops"] / peak,
                "pytorch_share_of_peak": best["gflops"] / peak,
                "emergent_peak_rss_bytes": em_rss, "emergent_estimated_bytes": em["estimated_bytes"],
                "pytorch_peak_rss_bytes": torch_rss,
                "pytorch": variants, "emergent": em,
                "pytorch_tokens_per_s_runs": [run[0]["tokens_per_s"] for run in torch_runs],
                "emergent_tokens_per_s_runs": [run["tokens_per_s"] for run in em_runs],
            }
            assert em["tokens_per_step"] == best["tokens_per_step"], "token counts differ"
            result["rows"].append(row)
            print(f"[threads {threads}] {name}: pytorch {best['tokens_per_s']:.0f} tok/s ({best['attention']}), "
                  f"emergent {em['tokens_per_s']:.0f} tok/s", file=sys.stderr, flush=True)

    result["machine"]["loadavg_end"] = os.getloadavg()
    result["elapsed_s"] = time.time() - started
    result["quick"] = bool(args.quick)
    result["repeats"] = args.repeats
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2) + "\n")

    t = result["torch"]
    print(f"torch {t['torch_version']}, BLAS {t['blas']} (MKL {t['mkl_available']}, oneDNN {t['mkldnn_available']}, "
          f"CPU capability {t['cpu_capability']}); {result['machine']['cpu']}, {result['machine']['isa']}, "
          f"{result['machine']['logical_cpus']} CPUs; emergent's kernels: {kernel_of(result)}")
    for threads, p in result["peak"].items():
        print(f"fp32 GEMM peak, {threads} thread(s): torch.mm 1024 {p['torch_mm_gflops_1024']:.1f} / "
              f"2048 {p['torch_mm_gflops_2048']:.1f}, Eigen 1024 {p['eigen_gflops_1024']:.1f} / "
              f"2048 {p['eigen_gflops_2048']:.1f}, emergent 1024 {p['emergent_gflops_1024']:.1f} / "
              f"2048 {p['emergent_gflops_2048']:.1f} -> peak {p['peak_gflops']:.1f} GFLOP/s")
    header = (f"{'config':<16} {'thr':>3} {'pytorch tok/s':>13} {'attn':>8} {'emergent tok/s':>14} {'ratio':>6} "
              f"{'em GFLOP/s':>10} {'em %peak':>8} {'pt %peak':>8} {'em RSS MiB':>10} {'est MiB':>7} {'pt RSS MiB':>10}")
    print(header)
    print("-" * len(header))
    for r in result["rows"]:
        print(f"{r['config']:<16} {r['threads']:>3} {r['pytorch_tokens_per_s']:>13.0f} {r['pytorch_attention']:>8} "
              f"{r['emergent_tokens_per_s']:>14.0f} {r['ratio_emergent_over_pytorch']:>6.2f} "
              f"{r['emergent_gflops']:>10.1f} {100 * r['emergent_share_of_peak']:>7.1f}% "
              f"{100 * r['pytorch_share_of_peak']:>7.1f}% {mib(r['emergent_peak_rss_bytes']):>10} "
              f"{mib(r['emergent_estimated_bytes']):>7} {mib(r['pytorch_peak_rss_bytes']):>10}")
    print(f"ratio = emergent / pytorch tokens per second (PyTorch: the faster of explicit and SDPA attention; "
          f"each library's fastest of {args.repeats} alternating runs). "
          f"Load average {result['machine']['loadavg_start'][0]:.2f} at start, "
          f"{result['machine']['loadavg_end'][0]:.2f} at end; {result['elapsed_s']:.0f} s in all. "
          f"Written to {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
