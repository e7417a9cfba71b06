#!/usr/bin/env bash
# Installs, with apt-get, only the Debian packages emergent needs that are not installed yet.
# Idempotent: when everything is present it changes nothing and does not touch the network.
#   bash scripts/install-deps.sh            build, test, examples, benchmarks, plots
#   bash scripts/install-deps.sh --golden   also python3-torch, to regenerate tests/golden/
#   bash scripts/install-deps.sh --fuzz     also clang and its libFuzzer runtime, for make fuzz
#   bash scripts/install-deps.sh --format   also clang-format, for make format / format-check
set -euo pipefail

packages=(
  cmake g++ make              # toolchain (g++ brings libgomp, our OpenMP runtime)
  libeigen3-dev               # Eigen 3.4: the CPU reference ops
  nlohmann-json3-dev          # JSON: configs, metrics rows, HF config.json / tokenizer.json
  zlib1g-dev                  # zlib: the complexity filter of the nca task
  doctest-dev                 # test framework (header-only)
  libcli11-dev                # command lines of the programs (header-only)
  libtomlplusplus-dev         # sweep files in TOML (used header-only)
  libbenchmark-dev            # Google Benchmark
  libthrust-dev               # Thrust (header-only): the device code of include/emergent/cuda/ on
                              # its OpenMP system, where no CUDA toolkit brings a newer one
  python3-matplotlib python3-numpy  # scripts/plot.py
)

for arg in "$@"; do
  case "$arg" in
    --golden) packages+=(python3-torch) ;;  # the external oracle of tests/golden/make_golden.py
    --fuzz) packages+=(clang libclang-rt-14-dev) ;;  # libFuzzer, ASan and UBSan runtimes
    --format) packages+=(clang-format) ;;  # Debian's: the version every machine here formats with
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install-deps: unknown argument '$arg' (known: --golden, --fuzz, --format)" >&2; exit 2 ;;
  esac
done

if ! command -v dpkg >/dev/null 2>&1; then
  echo "install-deps: not a Debian-like system (no dpkg); install by hand: ${packages[*]}" >&2
  exit 0
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: missing ${missing[*]}, and not root and no sudo to install them" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
for pkg in "${missing[@]}"; do
  echo "install-deps: installed $pkg"
done
