#!/usr/bin/env bash
# Installs what scripts/make_corpus.py needs: the Debian packages whose English text it reads and
# .venv-corpus/ (gitignored) with Hugging Face tokenizers from PyPI.
#
#   bash scripts/setup-corpus-venv.sh      # idempotent: a quick check when all is installed
#
# Debian packages (text only, installed without their recommends):
#   fortunes, fortunes-min   fortune cookies (/usr/share/games/fortunes)
#   jargon-text              the Jargon File 4.4.7 (/usr/share/doc/jargon-text/jargon.txt.gz)
#   bible-kjv                the King James Bible and the `bible` program that decompresses it
# tokenizers is pinned: the trained tokenizer, so the token ids, may change with its version.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-corpus}
PY="$VENV/bin/python"
BASE_PYTHON=${PYTHON:-python3}
TOKENIZERS_VERSION=${TOKENIZERS_VERSION:-0.23.3}
PACKAGES=(fortunes fortunes-min jargon-text bible-kjv)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup-corpus-venv: apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null ||
    { $SUDO apt-get update >/dev/null && $SUDO apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null; }
fi

check() {
  [ -x "$PY" ] && "$PY" -c "import tokenizers, sys; sys.exit(tokenizers.__version__ != '$TOKENIZERS_VERSION')" 2>/dev/null
}
if ! check; then
  [ -x "$PY" ] || "$BASE_PYTHON" -m venv "$VENV"
  echo "setup-corpus-venv: pip install tokenizers==$TOKENIZERS_VERSION (from PyPI)"
  "$PY" -m pip install --quiet "tokenizers==$TOKENIZERS_VERSION"
  check || { echo "setup-corpus-venv: tokenizers $TOKENIZERS_VERSION does not import from $VENV" >&2; exit 1; }
fi
"$PY" -c 'import sys, tokenizers; print(f"setup-corpus-venv: python {sys.version.split()[0]}, tokenizers {tokenizers.__version__}")'
for p in "${PACKAGES[@]}"; do
  echo "setup-corpus-venv: $p $(dpkg-query -W -f='${Version}' "$p")"
done
