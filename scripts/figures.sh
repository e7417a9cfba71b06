#!/usr/bin/env bash
# `make figures`: the paper's synthetic figures at the sizes this machine runs in about an hour
# (docs/reproduce.md gives each command alone, its time and its output). Run folders are reused:
# a rerun skips finished runs and resumes unfinished ones.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p runs/figures
STEPS=${STEPS:-10000} bash scripts/sparsity_sweep.sh 8
./build/ca_context_length --sizes 8 16 32 --seeds 0 --bias 5 --steps 2000 --out runs/ca_context_length
/usr/bin/python3 scripts/plot.py sparsity --out runs/figures/sparsity.png runs/sparsity_S8
/usr/bin/python3 scripts/plot.py plateau --out runs/figures/ca_plateau.png runs/ca_context_length/results.jsonl
./build/architectures --seeds 0 1 --steps 2000 --automaton-steps 1000 --out runs/architectures
/usr/bin/python3 scripts/plot.py architectures --out runs/figures/architectures.png runs/architectures/results.jsonl
