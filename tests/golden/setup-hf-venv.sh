#!/usr/bin/env bash
# Makes .venv-torch/ (gitignored) able to run tests/golden/make_neox_golden.py and
# benchmarks/compare_neox_hf.py: PyTorch from PyPI (scripts/setup-pytorch-venv.sh) plus Hugging
# Face transformers, tokenizers and safetensors.
#
#   bash tests/golden/setup-hf-venv.sh      # idempotent: a quick check when all is installed
#
# The check imports the four packages with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (set on
# this machine for old numpy builds), as the scripts that use the venv run them.
set -euo pipefail

cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv-torch}
PY="$VENV/bin/python"

bash scripts/setup-pytorch-venv.sh

check_hf() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" - <<'PYEOF'
import safetensors, tokenizers, torch, transformers
from transformers import GPTNeoXForCausalLM, AttentionInterface
print(f"setup-hf-venv: transformers {transformers.__version__}, tokenizers {tokenizers.__version__}, "
      f"safetensors {safetensors.__version__}, torch {torch.__version__}")
PYEOF
}

if check_hf 2>/dev/null; then
  exit 0
fi
echo "setup-hf-venv: pip install transformers tokenizers safetensors (from PyPI)"
"$PY" -m pip install --quiet transformers tokenizers safetensors
check_hf
