#!/usr/bin/env bash
# `make figures`: every sweeps/*-small.toml into runs/figures/<name>/, then every picture it names
# (its "# plot: KIND" lines) into docs/results/<name>.png (<name>-<KIND>.png when it names several).
# A sweep resumes, so a rerun skips finished runs and continues killed ones; the time each sweep
# took is appended to docs/results/figures-times.txt.
#   FIGURES="fig5a fig6" make figures     only the sweep files whose names start so
#   SIZE=full make figures                the -full files instead (hours to days: see each file)
#   SWEEP_JOBS=1 make figures             runs at a time (default: one per core)
set -euo pipefail
cd "$(dirname "$0")/.."
emergent=build/emergent
python=/usr/bin/python3  # Debian's, with python3-matplotlib (scripts/install-deps.sh)
size=${SIZE:-small}
mkdir -p runs/figures docs/results
for file in sweeps/*-"$size".toml; do
  name=$(basename "$file" .toml)
  if [ -n "${FIGURES:-}" ]; then
    wanted=0
    for prefix in $FIGURES; do [[ $name == "$prefix"* ]] && wanted=1; done
    [ $wanted -eq 1 ] || continue
  fi
  dir=runs/figures/$name
  echo "== $file -> $dir"
  started=$(date +%s)
  if grep -q '^task = "corpus"' "$file"; then  # language models: the corpus first
    "$python" scripts/mini_suite.py --emergent "$emergent" corpus
  fi
  "$emergent" sweep "$file" --out "$dir" --quiet ${SWEEP_JOBS:+--jobs "$SWEEP_JOBS"}
  echo "$name: $(($(date +%s) - started)) s ($(date -u +%F), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores)" \
    >> docs/results/figures-times.txt
  kinds=$(sed -n 's/^# plot: \([a-z]*\).*/\1/p' "$file")
  for kind in $kinds; do
    out=docs/results/$name.png
    [ "$(echo "$kinds" | wc -w)" -gt 1 ] && out=docs/results/$name-$kind.png
    targets=("$dir")
    if [ "$kind" = attention ]; then  # one run folder: the sweep's first run
      targets=("$dir/runs/$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["runs"][0]["id"])' "$dir/sweep.json")")
    fi
    if [ "$kind" = spt ]; then  # the transplant stage needs the SPT runs' checkpoints
      started=$(date +%s)
      bash scripts/spt_transplant.sh "$dir"
      echo "$name-transplant: $(($(date +%s) - started)) s" >> docs/results/figures-times.txt
      targets=("$dir" "$dir-transplant")
    fi
    if [ "$kind" = minisuite ]; then  # the suite's checkpoints evaluated by emergent pythia
      started=$(date +%s)
      "$python" scripts/mini_suite.py --emergent "$emergent" evaluate "$dir"
      echo "$name-evaluation: $(($(date +%s) - started)) s" >> docs/results/figures-times.txt
    fi
    "$python" scripts/plot.py "$kind" "${targets[@]}" --out "$out" --emergent "$emergent"
  done
done
