#!/usr/bin/env python3
"""The Pythia-like suite trained here (docs/mini-suite.md): its corpus and its evaluation.

    python3 scripts/mini_suite.py corpus [--emergent build/emergent]
        the evaluation prompts (`emergent pythia prompts`: the first 1,000 of each kind, all 896
        IOI prompts) into runs/eval-prompts.jsonl, then the corpus without them into runs/corpus
        (scripts/setup-corpus-venv.sh, scripts/make_corpus.py); skipped when runs/corpus was
        built from the same prompt file

    python3 scripts/mini_suite.py evaluate runs/figures/mini-suite-small [--count 64]
        every finished run of the sweep folder (each a checkpoint suite), with emergent's own
        analysis (`emergent pythia`, docs/pythia.md), over prompt sets of --count prompts a kind:
          curve      mean p(target) and accuracy at every checkpoint
          emergence  the binary search over checkpoints for the first solving one
          patch      for a kind the run learned: the attention patterns of its last checkpoint
                     patched into the last one before the emergence, head by head and top-K
        One JSON row per run into <sweep>/evaluation.jsonl (config, then per kind the search, the
        curve and the patching); a run already there is skipped, so a killed evaluation resumes.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

KINDS = ["repetition", "induction", "pattern", "ioi"]


def run(command):
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"mini_suite: {' '.join(command)} failed:\n{result.stderr.strip()}")
    return result.stdout


def corpus(args):
    prompts = "runs/eval-prompts.jsonl"
    text = run([args.emergent, "pythia", "prompts", "--kinds", "repetition,induction,pattern",
                "--count", "1000"])
    text += run([args.emergent, "pythia", "prompts", "--kinds", "ioi", "--count", "896"])
    os.makedirs("runs", exist_ok=True)
    with open(prompts, "w") as f:
        f.write(text)
    digest = hashlib.sha256(text.encode()).hexdigest()
    try:
        with open("runs/corpus/corpus.json") as f:
            if json.load(f)["exclusion"]["sha256"] == digest:
                print("mini_suite: runs/corpus is built from these prompts already")
                return
    except (OSError, KeyError, ValueError):
        pass
    subprocess.run(["bash", "scripts/setup-corpus-venv.sh"], check=True)
    subprocess.run([".venv-corpus/bin/python", "scripts/make_corpus.py", "--out", "runs/corpus",
                    "--exclude", prompts], check=True)


def pythia_json(args, command, suite, *options):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run([args.emergent, "pythia", command, "--suite", suite, "--kinds", ",".join(KINDS),
             "--count", str(args.count), *options, "--json", out.name])
        with open(out.name) as f:
            return json.load(f)


def evaluate_run(args, suite, config):
    curve = {k["kind"]: k for k in pythia_json(args, "curve", suite)["kinds"]}
    search = {k["kind"]: k for k in pythia_json(args, "emergence", suite)["kinds"]}
    row = {"config": config, "count": args.count, "kinds": {}}
    last_step = max(c["step"] for c in next(iter(curve.values()))["checkpoints"])
    for kind in KINDS:
        s, c = search[kind], curve[kind]
        entry = {
            "outcome": s["outcome"],
            "emergence_step": s["emergence_step"],
            "last_failing_step": s["last_failing_step"],
            "first_solving_step": s["first_solving_step"],
            "evaluations": len(s["evaluations"]),
            "curve_emergence_step": c["emergence_step"],
            "monotone": c["monotone"],
            "curve": [{"step": p["step"], "mean_p_target": p["mean_p_target"],
                       "accuracy": p["accuracy"]} for p in c["checkpoints"]],
        }
        final = c["checkpoints"][-1]
        pre = s["last_failing_step"]
        if pre is not None and final["solved"]:
            patch = run_patch(args, suite, kind, pre, last_step)
            entry["patch"] = patch
        row["kinds"][kind] = entry
    return row


def run_patch(args, suite, kind, pre, post):
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        run([args.emergent, "pythia", "patch", "--suite", suite, "--pre-step", str(pre),
             "--post-step", str(post), "--kinds", kind, "--count", str(args.count),
             "--json", out.name])
        with open(out.name) as f:
            k = json.load(f)["kinds"][0]
    return {"pre_step": pre, "post_step": post, "mean_p_pre": k["mean_p_pre"],
            "mean_p_post": k["mean_p_post"],
            "heads": [{"name": h["name"], "delta_mean_p": h["delta_mean_p"]} for h in k["heads"]],
            "top_k": [{"k": t["k"], "heads": t["heads"], "mean_p_patched": t["mean_p_patched"],
                       "recovery": t["recovery"]} for t in k["top_k"]]}


def evaluate(args):
    sweep = args.sweep
    with open(os.path.join(sweep, "sweep.json")) as f:
        plan = json.load(f)
    out_path = os.path.join(sweep, "evaluation.jsonl")
    done = set()
    if os.path.exists(out_path):
        with open(out_path) as f:
            for line in f:
                try:
                    done.add(json.loads(line)["id"])
                except (ValueError, KeyError):
                    break  # a row cut by a kill: the run is evaluated again
    for planned in plan["runs"]:
        suite = os.path.join(sweep, "runs", planned["id"])
        if planned["id"] in done or not os.path.exists(os.path.join(suite, "summary.json")):
            continue
        row = {"id": planned["id"], **evaluate_run(args, suite, planned["config"])}
        with open(out_path, "a") as f:
            f.write(json.dumps(row) + "\n")
        solved = [k for k, v in row["kinds"].items() if v["emergence_step"] is not None]
        print(f"mini_suite: {planned['label']}: emerged {solved or 'none'}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--emergent", default="build/emergent")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("corpus")
    e = sub.add_parser("evaluate")
    e.add_argument("sweep")
    e.add_argument("--count", type=int, default=64)
    args = parser.parse_args()
    corpus(args) if args.command == "corpus" else evaluate(args)


if __name__ == "__main__":
    main()
