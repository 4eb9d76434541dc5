"""Report time for a large sweep: 10 settings x 8 stages x 3 repeats, 1 s server and GPU samples over long server
lives (10 min each by default), through the same read path as `lookahead-runner report RUN_DIR`. Goal: the page
step (build the view, render report.html) <= 5 s. Prints one JSON line.

    python benchmarks/report_render.py [--settings 10] [--stages 8] [--repeats 3] [--life-s 600] [--runs 3]
                                       [--req-per-user-s 0.15] [--keep DIR] [--seed RUN_DIR]

The run folder is the product's own: one tiny real sweep on the simulator (`python -m lookahead_runner sweep`,
the roomy-kv scenario, one life per setting K = 0, 2, 4 ..., 2 stages of 3 s; about 10 s a life) is grown on
disk (benchmarks/run_growth.py): its plan.json gets --stages stages (2, 4, 8 ... users) of --life-s / --stages
seconds and --repeats repeats (through the typed Plan and SweepConfig), each setting's life folder is copied to
every repeat, and every timeline in it (any CSV with a `t_s` column: server metrics, GPU samples, per-position
acceptance) is stretched to --life-s seconds of 1 s samples, each grown stage looping over the seed stage of its
rank. Requests are drawn (with replacement, a Poisson count per stage, one random draw per life) from that seed
stage's measured requests, --req-per-user-s per user for K=0 and each other setting at its measured speed over
K=0 in the seed, and sent evenly over the stage; the default 0.15 is a 256-token completion at about 25 ms a
token, about 310k requests in the default folder. Counters (`*_total`) keep the seed's rate times the grown
stage's request rate over the seed's. What is not a large sweep's: the server-side values are those of the seed's
2-4 users, and each life's token check reads a few per cent short (the seed's stage edges), so the page flags
it; sizes, shapes and code paths are the large sweep's. `--keep DIR` keeps the folders (open DIR/full/report.html);
`--seed DIR/seed/runs/<run>` grows a kept seed again without sweeping.

Figures: `report_cold_s` is `python -m lookahead_runner report FULL` in a new process (imports, reading every
file, the decision, decision.json, the page: what a user waits for). Then, in this process, the page step
(report/render.py write_report over what read_run gives back) is timed cold once (`full_cold_s`: it pays for
loading plotly.js and the template), then baseline and full alternate warm, for the page step (`full_warm_s`,
`baseline_warm_s`) and for the whole of `report` (run/verdict/finalize.finalize: `report_warm_s`,
`report_baseline_warm_s`); medians of --runs. The baseline, grown from the same seed in the same run, is 1 setting
(K=0) x 1 repeat with the same stages and sample rate, so the ratios say how the report scales with the sweep,
independent of the machine. `meets_goal`: `full_cold_s` <= 5 s.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run_growth.py beside this file

from run_growth import Shape, grow  # noqa: E402

from lookahead_runner.decision.schema import Decision  # noqa: E402
from lookahead_runner.report.render import write_report  # noqa: E402
from lookahead_runner.run.verdict.finalize import finalize  # noqa: E402
from lookahead_runner.runfolder.read import read_run  # noqa: E402

GOAL_S = 5.0
SEED_TOML = """name = "report-render-seed"
[server]
model = "sim/report-render-seed"
extra_args = ["--max-num-seqs", "128", "--sim-set", "startup_s=0.3", "--sim-scenario", "roomy-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = {ks}
[load]
stages = [{{ users = 2, duration_s = 3 }}, {{ users = 4, duration_s = 3 }}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 0.5
preflight_s = 0
[decision]
target_users = 2
min_requests = 3
max_client_lag_p99_ms = 250
confirm = "off"
"""


def seed_sweep(folder: Path, ks: list[int]) -> Path:
    """One tiny real sweep on the simulator, every setting once: the run folder the large one is grown from."""
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "seed.toml"
    config.write_text(SEED_TOML.format(ks=json.dumps(ks)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                           "--out", str(folder / "runs"), "--no-early-stop"], capture_output=True, text=True)
    if done.returncode not in (0, 3):  # a verdict, or "not decided yet": a few seconds of load usually is
        sys.exit(f"the seed sweep failed (exit {done.returncode}): {done.stderr[-1000:] or done.stdout[-1000:]}")
    (run_dir,) = [path for path in (folder / "runs").iterdir() if path.is_dir()]
    return run_dir


def report_command_s(run_dir: Path) -> float:
    """`lookahead-runner report RUN_DIR` in a new process, as a user runs it."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "report", str(run_dir)],
                          capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"`lookahead-runner report` failed (exit {done.returncode}): {done.stderr[-1000:]}")
    return elapsed


def report_s(run_dir: Path) -> float:
    """The whole of `lookahead-runner report` in this process: read, decide, decision.json, the page."""
    started = time.perf_counter()
    finalize(run_dir)
    return time.perf_counter() - started


def page_s(run_dir: Path) -> float:
    """The page step alone: report.html from the folder read back and the decision.json `report` wrote."""
    data = read_run(run_dir)
    decision = Decision.model_validate_json((run_dir / "decision.json").read_text(encoding="utf-8"))
    started = time.perf_counter()
    write_report(run_dir, data.summary, decision, data.record(), data.timelines)
    return time.perf_counter() - started


def measure(args: argparse.Namespace, work: Path) -> dict:
    ks = [2 * i for i in range(args.settings)]
    seed = Path(args.seed) if args.seed else seed_sweep(work / "seed", ks)
    full = grow(seed, work / "full", Shape(ks, args.stages, args.repeats, args.life_s, args.req_per_user_s))
    baseline = grow(seed, work / "baseline", Shape([0], args.stages, 1, args.life_s, args.req_per_user_s))
    command_s = report_command_s(full)
    report_command_s(baseline)  # its decision.json, for the page step
    cold_s = page_s(full)
    times: dict[str, list[float]] = {"baseline": [], "full": [], "page_baseline": [], "page_full": []}
    for _ in range(args.runs):
        times["baseline"].append(report_s(baseline))
        times["full"].append(report_s(full))
        times["page_baseline"].append(page_s(baseline))
        times["page_full"].append(page_s(full))
    med = {name: statistics.median(values) for name, values in times.items()}
    requests = sum(len(pd.read_csv(path, usecols=[0])) for path in full.glob("*/r*/requests.csv"))
    return {
        "benchmark": "report_render", "settings": args.settings, "stages": args.stages, "repeats": args.repeats,
        "lives": len(list(full.glob("*/r*/status.json"))), "lives_measured": len(list(full.glob("*/r*/stages.csv"))),
        "summary_rows": len(pd.read_csv(full / "summary.csv")),
        "samples_per_life": int(args.life_s), "requests": requests,
        "report_cold_s": round(command_s, 3), "report_warm_s": round(med["full"], 3),
        "report_baseline_warm_s": round(med["baseline"], 3),
        "report_ratio_full_to_baseline": round(med["full"] / med["baseline"], 2),
        "full_cold_s": round(cold_s, 3), "full_warm_s": round(med["page_full"], 3),
        "baseline_warm_s": round(med["page_baseline"], 3),
        "ratio_full_to_baseline": round(med["page_full"] / med["page_baseline"], 2),
        "page_mib": round((full / "report.html").stat().st_size / 2**20, 2),
        "goal_s": GOAL_S, "meets_goal": cold_s <= GOAL_S,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", type=int, default=10, help="settings K = 0, 2, 4, ...")
    parser.add_argument("--stages", type=int, default=8, help="stages of 2, 4, 8, ... users")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--life-s", type=float, default=600.0, help="length of each server life, seconds")
    parser.add_argument("--runs", type=int, default=3, help="warm reports of each size")
    parser.add_argument("--req-per-user-s", type=float, default=0.15, help="requests a second per user")
    parser.add_argument("--keep", help="write the seed and the grown run folders here and keep them")
    parser.add_argument("--seed", help="grow this run folder (a seed sweep kept with --keep) instead of sweeping")
    args = parser.parse_args()
    if min(args.settings, args.stages, args.repeats, args.runs) < 1 or args.life_s < args.stages \
            or args.req_per_user_s <= 0:
        parser.error("--settings, --stages, --repeats, --runs >= 1, --life-s >= --stages, --req-per-user-s > 0")
    if args.keep:
        work = Path(args.keep)
        for name in ("full", "baseline") + (() if args.seed else ("seed",)):
            shutil.rmtree(work / name, ignore_errors=True)
        print(json.dumps(measure(args, work)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(measure(args, Path(tmp))))


if __name__ == "__main__":
    main()
