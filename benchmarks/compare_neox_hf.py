#!/usr/bin/env python3
"""GPT-NeoX forward throughput of emergent against Hugging Face transformers, in one run.

    .venv-torch/bin/python benchmarks/compare_neox_hf.py [--binary build/benchmarks/neox_forward]
                           [--threads 2] [--lengths 128,512] [--repeats 5] [--rounds 2]

Both sides run a pythia-160m-shaped GPTNeoXForCausalLM (d 768, 12 heads, 12 layers, MLP 3072,
rotary 16 of 64, vocab 50304) with random weights, in fp32 on the CPU, on one sequence of T
random tokens, returning the logits at every position:
  * transformers: GPTNeoXForCausalLM(config) under torch.inference_mode(), with
    torch.set_num_threads(threads), once with attn_implementation="eager" and once with "sdpa";
    the faster is the reference;
  * emergent: benchmarks/neox_forward.cpp (NeoxModel<pythia_160m>), OMP_NUM_THREADS=threads.
tokens/s = T / median seconds per forward (one warm-up, then `repeats` timed forwards). The
two sides alternate for `rounds` rounds and each reports its best round, so that a burst of
load from other processes on a shared machine hurts both alike; the load average is printed
at the start and the end. Each side runs in its own subprocess (the parent never imports
torch), with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE removed from the environment.

The binary comes from `make bench` (CMake target bench_neox_forward). --build compiles it
directly with g++ -O3 -march=native instead, into build/benchmarks/neox_forward.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from compare_pytorch import torch_env  # noqa: E402  (the thread settings of a PyTorch child)

CONFIG = dict(vocab_size=50304, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
              intermediate_size=3072, rotary_pct=0.25, rotary_emb_base=10000, max_position_embeddings=2048,
              use_parallel_residual=True, hidden_act="gelu", tie_word_embeddings=False)

WORKER = r"""
import json, sys, time, torch, transformers
from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
config, threads, lengths, repeats = json.loads(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(threads)
torch.manual_seed(0)
out = {"torch": torch.__version__, "transformers": transformers.__version__, "threads": torch.get_num_threads(),
       "mkl": torch.backends.mkl.is_available(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
       "results": []}
for attn in ("eager", "sdpa"):
    model = GPTNeoXForCausalLM(GPTNeoXConfig(**config, attn_implementation=attn)).float().eval()
    for T in lengths:
        tokens = torch.randint(0, config["vocab_size"], (1, T))
        with torch.inference_mode():
            model(tokens)
            seconds = []
            for _ in range(repeats):
                start = time.perf_counter()
                logits = model(tokens).logits
                seconds.append(time.perf_counter() - start)
        assert logits.shape == (1, T, config["vocab_size"]) and logits.dtype == torch.float32
        seconds.sort()
        out["results"].append({"attn": attn, "length": T, "seconds_median": seconds[len(seconds) // 2],
                               "tokens_per_s": T / seconds[len(seconds) // 2]})
    del model
print(json.dumps(out))
"""


def run_hf(threads: int, lengths: list[int], repeats: int) -> dict:
    out = subprocess.run([sys.executable, "-c", WORKER, json.dumps(CONFIG), str(threads), json.dumps(lengths),
                          str(repeats)], env=torch_env(threads), cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_emergent(binary: Path, threads: int, lengths: list[int], repeats: int) -> list[dict]:
    out = subprocess.run([str(binary), "--threads", str(threads), "--lengths", ",".join(map(str, lengths)),
                          "--repeats", str(repeats)], env=torch_env(threads), cwd=ROOT, check=True,
                         capture_output=True, text=True)
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def build(binary: Path) -> None:
    binary.parent.mkdir(parents=True, exist_ok=True)
    cmd = ["g++", "-std=c++20", "-O3", "-march=native", "-fopenmp", "-Wall", "-Wextra", "-Wno-maybe-uninitialized",
           "-I", str(ROOT / "include"), "-isystem", "/usr/include/eigen3", str(ROOT / "benchmarks/neox_forward.cpp"),
           "-o", str(binary)]
    print("building:", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", type=Path, default=ROOT / "build/benchmarks/neox_forward")
    parser.add_argument("--build", action="store_true", help="compile the binary with g++ first")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--lengths", default="128,512")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    if args.build:
        build(args.binary)
    if not args.binary.exists():
        sys.exit(f"{args.binary} does not exist: run `make bench`, or pass --build")

    load_start = os.getloadavg()[0]
    hf_best: dict[tuple[str, int], float] = {}
    em_best: dict[int, float] = {}
    versions = {}
    for round_index in range(args.rounds):
        hf = run_hf(args.threads, lengths, args.repeats)
        versions = {k: hf[k] for k in ("torch", "transformers", "threads", "mkl", "cpu_capability")}
        for r in hf["results"]:
            key = (r["attn"], r["length"])
            hf_best[key] = max(hf_best.get(key, 0.0), r["tokens_per_s"])
        for r in run_emergent(args.binary, args.threads, lengths, args.repeats):
            em_best[r["length"]] = max(em_best.get(r["length"], 0.0), r["tokens_per_s"])
        print(f"round {round_index + 1}/{args.rounds} done (load average {os.getloadavg()[0]:.2f})", flush=True)
    load_end = os.getloadavg()[0]

    print(f"\nGPT-NeoX pythia-160m shape, random weights, fp32 forward of one sequence, {args.threads} thread(s)")
    print(f"transformers {versions['transformers']}, torch {versions['torch']} (MKL {versions['mkl']}, "
          f"CPU capability {versions['cpu_capability']}, torch threads {versions['threads']}); "
          f"python {platform.python_version()}; {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs")
    print(f"best of {args.rounds} alternating rounds, each the median of {args.repeats} forwards after a warm-up")
    print(f"{'T':>5} {'HF eager tok/s':>15} {'HF sdpa tok/s':>14} {'emergent tok/s':>15} {'ratio':>7}")
    for T in lengths:
        eager, sdpa = hf_best[("eager", T)], hf_best[("sdpa", T)]
        print(f"{T:>5} {eager:>15.1f} {sdpa:>14.1f} {em_best[T]:>15.1f} {em_best[T] / max(eager, sdpa):>7.2f}")
    print(f"ratio = emergent / the faster HF attention. Load average {load_start:.2f} at start, {load_end:.2f} at end "
          f"(other processes share this machine: compare the two columns of one run, not across runs).")


if __name__ == "__main__":
    main()
