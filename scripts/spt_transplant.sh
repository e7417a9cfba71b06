#!/usr/bin/env bash
# The transplant stage of the self-pretraining study: for every finished SPT run of a sweep
# folder (pretrain_steps > 0), two supervised runs from its checkpoint at the end of pretraining,
# one taking only the query-key projections (take = qk) and one taking everything else
# (all_but_qk), with the rest of the weights fresh from the same seed and the SPT run's label
# budget (steps - pretrain_steps). Writes DIR-transplant.toml and runs it into DIR-transplant/.
#   scripts/spt_transplant.sh runs/figures/self-pretraining-small [--jobs N]
set -euo pipefail
dir=${1:?usage: scripts/spt_transplant.sh SWEEP_DIR [--jobs N]}
shift
emergent=${EMERGENT:-build/emergent}
python3 - "$dir" > "$dir-transplant.toml" <<'PY'
import json, sys
from pathlib import Path
dir = Path(sys.argv[1])
sources = []
for run in sorted((dir / "runs").glob("*")):
    if not (run / "summary.json").exists():
        continue
    c = json.loads((run / "config.json").read_text())
    if c.get("task") == "listops" and c["pretrain_steps"] > 0 and not c["warm_start"]:
        checkpoint = run / f"step_{c['pretrain_steps']:06d}.safetensors"
        if checkpoint.exists():
            sources.append((c, checkpoint.resolve()))
if not sources:
    sys.exit(f"spt_transplant.sh: {dir} has no finished SPT run with its pretraining checkpoint")
base = dict(sources[0][0])
for key in ("seed", "warm_start", "take", "threads"):
    base.pop(key, None)
base["steps"] = base["steps"] - base["pretrain_steps"]
base["pretrain_steps"] = 0
print(f"# Written by scripts/spt_transplant.sh from {dir}: the SPT runs' pretrained weights,")
print("# in part, under supervision alone.")
print("[base]")
for k, v in base.items():
    print(f"{k} = {json.dumps(v)}")
for take in ("qk", "all_but_qk"):
    print(f"\n[[grid]]\ntake = \"{take}\"")
    print("zip = { seed = [" + ", ".join(str(c["seed"]) for c, _ in sources) + "], warm_start = [" +
          ", ".join(json.dumps(str(p)) for _, p in sources) + "] }")
PY
# --extend: the transplant runs only ever grow with the pretraining sweep (its folder refuses a
# file that drops or changes a run: experiment/sweep_folder.hpp).
"$emergent" sweep "$dir-transplant.toml" --out "$dir-transplant" --extend --quiet "$@"
