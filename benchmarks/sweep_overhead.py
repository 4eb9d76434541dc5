"""Sweep overhead on the simulator: the share of wall time spent neither in stages nor in the
server's own start-to-ready time (probe, memory-stability wait, warm-up, Locust start/stop,
server stop, analysis, report). Goal: <= 10 %. Prints one JSON line.

    python benchmarks/sweep_overhead.py [--k 0,2,4] [--stage-s 20] [--stages 3] [--repeats 1]
                                        [--repeat-mode restart|same-server]

The defaults are the product's default load (3 stages x 20 s per life). Each server life has a
fixed cost of a few seconds (Locust start, draining the requests in flight after the last stage,
warm-up, stop), so shorter stages raise the fraction; `same-server` pays the server's part of it
once per setting instead of once per repeat.

Baseline in the same run: the stage time itself (the part that is pure measurement), so the
figure is a ratio of times measured together, not an absolute speed.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="0,2,4")
    parser.add_argument("--stage-s", type=float, default=20.0)
    parser.add_argument("--stages", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--repeat-mode", choices=("restart", "same-server"), default="restart")
    args = parser.parse_args()
    users = [8, 32, 96, 128, 192][: args.stages]
    stages = ", ".join(f"{{ users = {u}, duration_s = {args.stage_s:g} }}" for u in users)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "bench.toml"
        config.write_text(f"""
name = "overhead"
[server]
extra_args = ["--max-num-seqs", "128", "--sim-scenario", "tight-kv"]
memory_stable_window_s = 1.0
[speculation]
k = [{args.k}]
[load]
stages = [{stages}]
repeats = {args.repeats}
repeat_mode = "{args.repeat_mode}"
[decision]
min_requests = 1
""")
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                               "--out", tmp, "--no-early-stop"], capture_output=True, text=True)
        wall_s = time.monotonic() - started
        if done.returncode != 0:
            sys.exit(f"sweep failed: {done.stderr[-500:]}")
        (run_dir,) = [p for p in Path(tmp).iterdir() if p.is_dir()]
        stage_s = ready_s = window_s = 0.0
        plan = json.loads((run_dir / "plan.json").read_text())
        for life in plan["lives"]:
            stages_df = pd.read_csv(run_dir / life["dir"] / "stages.csv")
            stage_s += float((stages_df["t_end_s"] - stages_df["t_start_s"]).sum())
            server_json = run_dir / life["dir"] / "server.json"  # same-server: only in the first repeat
            if server_json.exists():
                ready_s += json.loads(server_json.read_text())["ready_s"]
        window_s = float(pd.read_csv(run_dir / "summary.csv")["duration_s"].sum())
    overhead_s = wall_s - stage_s - ready_s
    print(json.dumps({
        "benchmark": "sweep_overhead", "lives": len(plan["lives"]), "repeat_mode": args.repeat_mode,
        "stage_s_each": args.stage_s, "wall_s": round(wall_s, 1),
        "stage_s": round(stage_s, 1), "server_ready_s": round(ready_s, 1), "overhead_s": round(overhead_s, 1),
        "overhead_frac": round(overhead_s / wall_s, 3), "goal_frac": 0.10,
        "measured_window_s": round(window_s, 1),
        "outside_measured_windows_frac": round((wall_s - window_s - ready_s) / wall_s, 3),
    }))


if __name__ == "__main__":
    main()
