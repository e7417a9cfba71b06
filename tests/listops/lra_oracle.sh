#!/usr/bin/env bash
# ctest listops_lra_oracle: examples of `emergent listops` at two settings, checked by
# lra_oracle.py against LRA's rules (its serialisation, tokenisation, evaluation and bounds).
#   tests/listops/lra_oracle.sh path/to/emergent
set -euo pipefail
cli=$1
here=$(dirname "$0")
"$cli" listops --min-length 20 --max-length 300 --count 500 | python3 "$here/lra_oracle.py" 20 300 10
"$cli" listops --min-length 20 --max-length 300 --max-depth 4 --max-args 3 --split test \
  --data-seed 5 --count 300 | python3 "$here/lra_oracle.py" 20 300 4
# LRA's own bounds, fewer examples (each is ~1,000 tokens).
"$cli" listops --count 40 | python3 "$here/lra_oracle.py" 500 2000 10
