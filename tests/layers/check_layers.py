#!/usr/bin/env python3
"""The one-way include rule of docs/design.md, checked on the code (ctest `layers`).

Every header of include/emergent/ sits at a level (its folder's, or its own where a folder holds
two layers); it may include headers of its own folder and of lower levels, never higher ones.
The places that break the rule today are listed in KNOWN_BREAKS with their reason: a new break
fails the test, and so does a listed one that is gone (so the list stays true).

    python3 tests/layers/check_layers.py [include/emergent]
"""
import re
import sys
from pathlib import Path

# Lowest first; the levels of docs/design.md's diagram.
LEVELS = {
    "core": 0,
    "settings": 0.5,  # declared settings and the mixer catalog: tasks/ and train/ read them
    "io": 1, "nn": 1, "optim": 1,
    "mixers": 2, "tasks": 2, "neox": 2,
    "model": 3,
    "cuda": 3.5,  # the device model takes its layout from model/'s Model
    "analysis": 4,
    "train": 5,
    "experiment": 6,
    "reference": 1,  # beside the others: it may include core/ only (checked below)
}
# Headers whose folder holds two layers (none today: experiment/'s declarations moved to
# settings/ on 2026-12-05).
FILE_LEVELS: dict[str, float] = {}
# (including header, included folder): why, as docs/design.md says. None today: the two of
# 2026-12-04 (nn/mlp.hpp needing mixers/ for MixerContext, the device trainer in cuda/) are
# gone (nn/mixer_context.hpp, train/ensemble_trainer.cuh).
KNOWN_BREAKS: dict[tuple[str, str], str] = {}

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]((?:\.\./|emergent/)?)([a-z_]+)/([A-Za-z0-9_.]+)[>"]')


def level(path: str) -> int:
    return FILE_LEVELS.get(path, LEVELS[path.split("/")[0]])


def main() -> int:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[2] / "include/emergent")
    breaks, seen_known, unknown_folders = [], set(), []
    for header in sorted(root.rglob("*")):
        if header.suffix not in (".hpp", ".cuh", ".h"):
            continue
        name = header.relative_to(root).as_posix()
        folder = name.split("/")[0]
        if folder not in LEVELS:
            unknown_folders.append(name)
            continue
        for number, line in enumerate(header.read_text().splitlines(), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            prefix, target_folder, target_file = m.groups()
            if not prefix and target_folder != folder:
                continue  # "x/y.hpp" relative to this folder is not another layer
            if target_folder not in LEVELS:
                continue  # <thrust/...>, <CLI/...>, <nlohmann/...>
            target = f"{target_folder}/{target_file}"
            if target_folder == folder:
                continue
            allowed = (target_folder == "core") if folder == "reference" else level(target) < level(name)
            if target_folder == "reference" and folder != "reference":
                allowed = False  # the reference is for tests only
            if allowed:
                continue
            key = (name, target_folder)
            if key in KNOWN_BREAKS:
                seen_known.add(key)
                continue
            breaks.append(f"{name}:{number}: includes {target} (level {level(target)} from level "
                          f"{level(name)}): the one-way rule of docs/design.md")
    for key in sorted(set(KNOWN_BREAKS) - seen_known):
        breaks.append(f"{key[0]} no longer includes {key[1]}/: remove it from KNOWN_BREAKS in "
                      f"{Path(__file__).name} and from docs/design.md")
    for name in unknown_folders:
        breaks.append(f"{name}: its folder has no level in LEVELS ({Path(__file__).name})")
    for line in breaks:
        print(line)
    if breaks:
        return 1
    print(f"layers: ok ({len(KNOWN_BREAKS)} known breaks, listed in {Path(__file__).name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
