"""`lookahead-runner report` cold on a large sweep folder, beside the code path of an earlier commit measured in the
same run (issue 39): wall time and peak RSS of each in a new process, each step's time, and whether the two
decisions agree within the resampling's Monte Carlo error (benchmarks/compare_decisions.py). Prints one JSON line.

    python benchmarks/report_speed.py [--settings 10 --stages 8 --repeats 3 --life-s 600 --req-per-user-s 0.15]
                                      [--scale 1] [--runs 2] [--old-ref bc194dd | --old-dir DIR] [--old-runs N]
                                      [--keep DIR] [--seed RUN_DIR]

The folder is benchmarks/report_render.py's (a tiny simulator sweep grown on disk by benchmarks/run_growth.py; the
defaults: 10 settings x 8 stages x 3 repeats, 313k requests); `--scale N` sends N x the requests (N = 10: about 3M).
Each of --runs samples, in this order, each in a new process:
- `old_s`: the earlier commit's code (`git archive --old-ref` into a temporary folder, run from there on this venv;
  "" leaves it out), its decision.json kept;
- `cold_s`: this checkout's, with no .cache anywhere in the folder (a folder written before the cache existed);
- `cached_s`: this checkout's again, with the typed copies and the model's fit the previous step left (as a sweep
  leaves them when its lives end and it finalizes: what a later `report` that changed thresholds costs).
Steps (`--verbose` of the new code) are those of the last `cold` and `cached` runs. `rss_mib`: each process's peak
resident memory (wait4). The machine is shared: the load average before and after is printed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # report_render.py, run_growth.py, compare_decisions.py beside this file

from compare_decisions import compare  # noqa: E402
from report_render import seed_sweep  # noqa: E402
from run_growth import Shape, grow  # noqa: E402

from lookahead_runner.runfolder.results import CACHE_DIR  # noqa: E402

STEP_RE = re.compile(r"^(.+): (\d+\.\d+) s$")


def peak_of(argv: list[str], cwd: Path | None = None, env: dict | None = None) -> tuple[float, float, str]:
    """Wall seconds, this process's own peak RSS (a wrapper child reports it) and stdout."""
    wrapper = "\n".join([
        "import resource, runpy, sys",
        "sys.argv = sys.argv[1:]",
        "try:",
        "    runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)",
        "    code = 0",
        "except SystemExit as stop:",
        "    code = stop.code",
        "print('PEAK_RSS_KB', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)",
        "sys.exit(code or 0)"])
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", wrapper, *argv], cwd=cwd, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr[-1500:]}")
    kb = re.findall(r"PEAK_RSS_KB (\d+)", done.stderr)
    return elapsed, int(kb[-1]) / 1024 if kb else float("nan"), done.stdout + done.stderr


def clear_caches(run_dir: Path) -> None:
    for cache in run_dir.rglob(CACHE_DIR):
        shutil.rmtree(cache, ignore_errors=True)


def steps_of(output: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for line in output.splitlines() if (m := STEP_RE.match(line.strip()))}


def old_checkout(ref: str, into: Path) -> Path:
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=HERE, capture_output=True, text=True,
                          check=True).stdout.strip()
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", ref], cwd=root, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def measure(args: argparse.Namespace, work: Path) -> dict:
    ks = [2 * i for i in range(args.settings)]
    seed = Path(args.seed) if args.seed else seed_sweep(work / "seed", ks)
    grown_s = time.perf_counter()
    full = grow(seed, work / "full", Shape(ks, args.stages, args.repeats, args.life_s,
                                          args.req_per_user_s * args.scale))
    grown_s = time.perf_counter() - grown_s
    requests = sum(len(pd.read_csv(path, usecols=[0])) for path in full.glob("*/r*/requests.csv"))
    old = Path(args.old_dir) if args.old_dir else old_checkout(args.old_ref, work / "old") if args.old_ref else None
    load_before = load()
    samples: dict[str, list[float]] = {"old_s": [], "cold_s": [], "cached_s": []}
    rss: dict[str, list[float]] = {"old": [], "cold": [], "cached": []}
    steps: dict[str, dict[str, float]] = {}
    decisions = {}
    for run in range(args.runs):
        if old is not None and run < (args.old_runs if args.old_runs is not None else args.runs):
            clear_caches(full)
            env = dict(os.environ, PYTHONPATH=str(old))
            seconds, peak, _ = peak_of(["lookahead_runner", "report", str(full)], cwd=old, env=env)
            samples["old_s"].append(round(seconds, 2))
            rss["old"].append(round(peak))
            decisions["old"] = json.loads((full / "decision.json").read_text(encoding="utf-8"))
        clear_caches(full)
        for name in ("cold", "cached"):
            seconds, peak, out = peak_of(["lookahead_runner", "report", str(full), "--verbose"])
            samples[f"{name}_s"].append(round(seconds, 2))
            rss[name].append(round(peak))
            steps[name] = steps_of(out)
        decisions["new"] = json.loads((full / "decision.json").read_text(encoding="utf-8"))
    result = {
        "benchmark": "report_speed", "settings": args.settings, "stages": args.stages, "repeats": args.repeats,
        "windows": int((pd.read_csv(full / "summary.csv")["valid"]).sum()), "requests": requests,
        "scale": args.scale, "grown_s": round(grown_s, 1), "runs": args.runs,
        "old_ref": args.old_ref if old is not None else "",
        **samples, "rss_mib": rss, "steps": steps, "load_before": load_before, "load_after": load(),
        "verdict": decisions["new"].get("verdict"),
    }
    if "old" in decisions:
        c = compare(decisions["old"], decisions["new"])
        result["same_decision"] = not c.differences
        result["decision_checked"] = c.checked
        result["worst_share_difference"] = round(c.worst["share"], 4)
        result["worst_interval_end_difference_of_width"] = round(c.worst["interval_of_width"], 4)
        result["decision_differences"] = c.differences[:10]
        result["speedup_cold"] = round(min(samples["old_s"]) / min(samples["cold_s"]), 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", type=int, default=10, help="settings K = 0, 2, 4, ...")
    parser.add_argument("--stages", type=int, default=8, help="stages of 2, 4, 8, ... users")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--life-s", type=float, default=600.0, help="length of each server life, seconds")
    parser.add_argument("--req-per-user-s", type=float, default=0.15, help="requests a second per user")
    parser.add_argument("--scale", type=float, default=1.0, help="times the requests (10: about 3M)")
    parser.add_argument("--runs", type=int, default=2, help="samples of each measurement")
    parser.add_argument("--old-runs", type=int, help="samples of the earlier code (default: --runs)")
    parser.add_argument("--old-ref", default="bc194dd", help='the earlier commit to measure beside ("": none)')
    parser.add_argument("--old-dir", help="the earlier code already checked out here (instead of --old-ref)")
    parser.add_argument("--keep", help="write the seed and the grown run folder here and keep them")
    parser.add_argument("--seed", help="grow this run folder (a seed sweep kept with --keep) instead of sweeping")
    args = parser.parse_args()
    if min(args.settings, args.stages, args.repeats, args.runs) < 1 or args.scale <= 0:
        parser.error("--settings, --stages, --repeats, --runs >= 1, --scale > 0")
    if args.keep:
        work = Path(args.keep)
        for name in ("full", "old") + (() if args.seed else ("seed",)):
            shutil.rmtree(work / name, ignore_errors=True)
        print(json.dumps(measure(args, work)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(args, Path(tmp))))


if __name__ == "__main__":
    main()
