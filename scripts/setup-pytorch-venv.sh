#!/usr/bin/env bash
# Creates .venv-torch/ (gitignored) with a working CPU PyTorch, for benchmarks/compare_pytorch.py.
#
#   bash scripts/setup-pytorch-venv.sh      # idempotent: does nothing if the venv imports torch
#
# Only PyPI is reachable (no download.pytorch.org, so no +cpu wheel). The Linux x86_64 PyPI
# wheel of torch declares several GB of CUDA runtime packages as dependencies. The lightest
# route that still gives a working torch, tried in this order:
#   1. `pip install --no-deps torch` plus its pure-Python requirements (read from the wheel's
#      metadata) and numpy. Enough wherever the CUDA libraries libtorch links against are
#      found some other way.
#   2. Otherwise the CUDA runtime libraries that the wheel pins (its nvidia-* / cuda-toolkit
#      requirements) are added, but not triton nor cuda-bindings, which `import torch` does not
#      load. They must be the pinned versions: libtorch finds them through its RPATH first, and
#      an older system CUDA (e.g. /usr/local/cuda-*) fails with undefined symbols.
#   3. If PyPI cannot give a working torch at all, the venv is recreated from Debian's python
#      (/usr/bin/python3) with --system-site-packages, so that it uses python3-torch (1.13).
# The import check runs with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (set on this machine
# for old numpy builds; compare_pytorch.py unsets them too).
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-torch}
PY="$VENV/bin/python"
BASE_PYTHON=${PYTHON:-python3}

check_torch() {
  [ -x "$PY" ] || return 1
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" - <<'EOF' >/dev/null 2>&1
import torch
c = torch.randn(2, 2) @ torch.randn(2, 2)
assert c.shape == (2, 2)
EOF
}

describe() {
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE "$PY" -c \
    'import sys, torch; print(f"setup-pytorch-venv: {sys.argv[1]}: torch {torch.__version__} ({torch.__file__})")' "$1"
}

if check_torch; then
  describe "already set up"
  exit 0
fi

# Lists requirements of the installed torch (markers evaluated for this interpreter).
#   pure: requirements that are not CUDA runtime packages;  cuda: the CUDA runtime ones,
#   without triton and cuda-bindings.
torch_requirements() {
  "$PY" - "$1" <<'EOF'
import sys
import importlib.metadata as md
from pip._vendor.packaging.requirements import Requirement

kind = sys.argv[1]
for line in md.requires("torch") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue  # optional extras, other platforms
    name = req.name.lower()
    if name in ("triton", "cuda-bindings", "pytorch-triton"):
        continue
    is_cuda = name.startswith("nvidia-") or name.startswith("cuda-")
    if (kind == "cuda") == is_cuda:
        req.marker = None
        print(str(req))
EOF
}

pypi_route() {
  rm -rf "$VENV"
  "$BASE_PYTHON" -m venv "$VENV"
  echo "setup-pytorch-venv: pip install --no-deps torch (from PyPI)"
  "$PY" -m pip install --quiet --no-deps torch
  mapfile -t pure < <(torch_requirements pure)
  echo "setup-pytorch-venv: pure requirements: ${pure[*]} numpy"
  "$PY" -m pip install --quiet "${pure[@]}" numpy
  if check_torch; then
    describe "PyPI torch without the CUDA packages"
    return 0
  fi
  mapfile -t cuda < <(torch_requirements cuda)
  echo "setup-pytorch-venv: import torch needs its CUDA runtime libraries; installing ${cuda[*]}"
  "$PY" -m pip install --quiet "${cuda[@]}"
  if check_torch; then
    describe "PyPI torch with its CUDA runtime libraries (no triton)"
    return 0
  fi
  return 1
}

if pypi_route; then
  exit 0
fi

echo "setup-pytorch-venv: PyPI torch does not work here; falling back to Debian's python3-torch" >&2
if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  apt-get install -y python3-torch >&2 || true
fi
rm -rf "$VENV"
/usr/bin/python3 -m venv --system-site-packages "$VENV"
if check_torch; then
  describe "FALLBACK to Debian python3-torch (not the current release)"
  exit 0
fi
echo "setup-pytorch-venv: no working torch (neither PyPI nor Debian's python3-torch)" >&2
exit 1
