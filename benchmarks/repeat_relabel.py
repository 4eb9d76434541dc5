"""Does a decision depend on how repeats are named? Each run folder is decided as it is and again as a copy
whose repeat folders are renamed (each setting's r0, r1, ... rotated by one: r0's files become r1, ...,
the last's become r0), both through `finalize.read_run` + `decide_all` (what `lookahead-runner report`
runs). Prints one JSON line: per run folder the status, verdict and confidence of both, and whether they
are equal.

    python benchmarks/repeat_relabel.py RUN_DIR [RUN_DIR ...]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from lookahead_runner.run.verdict.finalize import decide_all
from lookahead_runner.runfolder.read import read_run


def rotate_repeats(run_dir: Path) -> int:
    """Rename every setting's repeat folders r0 -> r1 -> ... -> r0 in place; how many settings were rotated."""
    rotated = 0
    for setting in sorted(p for p in run_dir.iterdir() if p.is_dir()):
        repeats = sorted((p for p in setting.iterdir() if p.is_dir() and p.name[1:].isdigit() and p.name[0] == "r"),
                         key=lambda p: int(p.name[1:]))
        if len(repeats) < 2:
            continue
        parked = [p.rename(setting / f"parked-{p.name}") for p in repeats]
        for i, p in enumerate(parked):
            p.rename(setting / repeats[(i + 1) % len(repeats)].name)
        rotated += 1
    return rotated


def decided(run_dir: Path) -> dict:
    decision = decide_all(read_run(run_dir))
    return {"status": decision.status, "verdict": decision.verdict, "confidence": decision.confidence,
            "resamples": decision.resamples}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="+", type=Path)
    args = parser.parse_args()
    out = {}
    for run_dir in args.run_dirs:
        with tempfile.TemporaryDirectory() as tmp:
            copy = Path(tmp) / run_dir.name
            shutil.copytree(run_dir, copy)
            before = decided(copy)
            settings = rotate_repeats(copy)
            after = decided(copy)
        out[str(run_dir)] = {"settings_rotated": settings, "as_named": before, "renamed": after,
                             "same": (before["status"], before["verdict"], before["confidence"])
                             == (after["status"], after["verdict"], after["confidence"])}
        print(f"{run_dir.name}: same={out[str(run_dir)]['same']} ({before['confidence']} vs {after['confidence']})",
              file=sys.stderr)
    print(json.dumps({"benchmark": "repeat_relabel", "runs": out}))


if __name__ == "__main__":
    main()
