"""Serial against Ray slots on the simulator: wall time, GPU-minutes, the verdict, and what N slots would give.

    python benchmarks/cluster_slots.py [--k 0,2,4] [--repeats 2] [--users 2] [--stage-s 12] [--preflight-s 3]
                                       [--slots 2] [--paper-slots 8] [--strategy grid|adaptive]

Runs the same simulator sweep twice through the CLI, once one life at a time (cluster.engine = "local") and
once on a local Ray with `--slots` GPU slots (cluster.gpus; the simulator needs no GPU), and prints one JSON
line: each run's wall seconds (the CLI process, Ray's start and stop included), its GPU-minutes (each life's
server start plus load, from status.json's start_s + measure_s, times the GPUs it held: one here), both
verdicts, the wall-time ratio, and the slots' timeline (each life's start and end, seconds after the first
start: a life running alone while another slot idles shows there). The defaults are the sweep the slots' packing
is judged on: K 0/2/4 x 2 repeats, one 12 s stage at 2 users, the pre-flight on (its default 3 s). Keep the load
small on a 2-core host: every slot's server and Locust share those cores, so a life runs slower beside another
than alone (the ratio says how much of the ideal 1/slots survives that).

On paper: `--paper-slots` slots (8 GPUs) for the issue's example, 4 K x 3 repeats of an 8B model with a
2-minute start, from the inputs --paper-start-s and --paper-stages-s (a life = start + stages; lives queue
in ceil(lives / slots) waves; Ray's own start, measured here as the first life's delay beyond the serial
run's, added once).

Measured 2026-12-06 on the shared 2-core host with the defaults, Ray's stop run beside the report (it ran after
it before), three runs: serial 96.8 / 96.6 / 96.2 s, two slots 58.1 / 57.6 / 57.1 s (ratio 0.600 / 0.596 / 0.594;
Ray's start 5.0 / 4.8 / 4.7 s), the same verdict both ways (K=4, decided), three full rounds. Of the 9.7 s above
the ideal 0.5 in the first run, the largest part is Ray's start (5.0 s: ray.init about 2.6 s, the slots' worker
processes about 1.3 s), paid once a sweep; then the first round, where each slot runs its own pre-flight (19-20 s
lives against 14-15 s later), and the report at the end, paid whole.
Then, the same session, the code before and after in turn (old, new, old, new), on a slower moment of the host
(serial 105-109 s): before 0.618 / 0.618, after 0.619 / 0.590 (Ray's start 7.3 / 7.7 and 7.3 / 5.5 s): the stop
moved (about 1.3 s) is within what Ray's start varies between runs. Goal <= 0.6: met in 4 of the 5 runs after.

Measured 2026-12-05 on the shared 2-core host with the defaults, each slot running its own pre-flight, three runs:
serial 99.6 / 97.2 / 97.0 s, two slots 63.9 / 57.9 / 58.6 s (ratio 0.64 / 0.596 / 0.604; Ray's start 8.0 / 3.8 /
4.5 s, the first run under a load average ~6 from other sweeps), the same verdict both ways (K=4, decided),
GPU-minutes 1.55-1.58 serial, 1.63-1.66 on slots; the slots' timeline in three full rounds (k0/r0 + k4/r0 from 0
to 20 s, the two pre-flights side by side, then k2/r0 + k4/r1, then k0/r1 + k2/r1). The code before, right after
the third run: serial 96.9 s, two slots 72.7 s (ratio 0.75), four rounds where three suffice (k0/r0 alone for
the sweep's one pre-flight while the other slot idled, k2/r0 + k4/r0, k2/r1 + k4/r1, k0/r1 alone). What keeps
the ratio above 0.5 is Ray's own start and stop (about 6.5 s more than serial's) on lives of 15 s.

Measured 2026-12-03 on the shared 2-core host (load average ~5 from other sweeps), one run each,
`--users 2,8 --preflight-s 0 --stage-s 10` (K 0,2,4 x 2 repeats = 6 lives of ~25 s): serial 158.1 s, two
slots 94.9 s (ratio 0.60; the ideal 0.5 plus Ray's start, 10.6 s), GPU-minutes 2.40 / 2.38, the same verdict
(K=4, decided). With 4 s stages (lives of ~14 s) Ray's start ate the gain: 93.5 s against 91.2 s. On paper, 12
lives of 2 + 3 minutes on 8 slots: 60 minutes serial, 10.2 in parallel (two waves), the same 60 GPU-minutes.

`--strategy adaptive` runs the adaptive sweep both ways (sweep.strategy = "adaptive": serial, then up to
`--slots` lives at once); each run also gives its decision.json cost line (GPU-minutes, wall minutes). The
paper figure stays the grid's. Measured 2026-12-03 on the shared 2-core host, `--strategy adaptive --users 2,8
--preflight-s 0 --stage-s 10`, two samples: serial 132.6 / 134.8 s, two slots 105.9 / 113.0 s (ratio 0.80 /
0.84; Ray's start 15.4 / 21.0 s), the cost's wall minutes 2.0 -> 1.3 and 2.1 -> 1.4, GPU-minutes 1.90 -> 1.94
and 1.93 -> 2.00 (serial -> slots), 6 lives each way and the same verdict (K=4, decided) in both. It gains less
than the grid's 0.60: the chooser runs in parallel only what a window in flight cannot change (the baseline with
the first K, then lives as the bracket allows; a repeat waits for every first window).
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SWEEP = """
name = "bench"
[server]
model = "sim/bench-model"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = {k}
[load]
stages = [{stages}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = {preflight_s}
repeats = {repeats}
[sweep]
strategy = "{strategy}"
[decision]
target_users = {target}
max_client_lag_p99_ms = 250
min_requests = 3
confirm = "off"
{cluster}
"""


def run(config_text: str, work: Path, name: str) -> dict:
    config = work / f"{name}.toml"
    config.write_text(config_text)
    started, epoch = time.monotonic(), time.time()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config), "--out",
                           str(work / name)], capture_output=True, text=True, timeout=1800)
    wall_s = time.monotonic() - started
    run_dirs = list((work / name).iterdir()) if (work / name).is_dir() else []
    if len(run_dirs) != 1 or not (run_dirs[0] / "decision.json").is_file():
        said = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["(nothing said)"])[-1]
        sys.exit(f"the {name} sweep exited {done.returncode} with no decision: {said}")
    run_dir = run_dirs[0]
    decision = json.loads((run_dir / "decision.json").read_text())
    gpu_s, first_start, spans = 0.0, None, []
    for status_file in sorted(run_dir.glob("k*/r*/status.json")):
        status = json.loads(status_file.read_text())
        gpu_s += (status.get("start_s") or 0.0) + (status.get("measure_s") or 0.0)
        life_s = (status.get("start_s") or 0.0) + (status.get("measure_s") or 0.0)
        if status.get("t_start_s"):  # a life on Ray: when its server started
            first_start = min(first_start or math.inf, status["t_start_s"])
            spans.append((status["t_start_s"], status["t_s"], "/".join(status_file.parts[-3:-1])))
        else:  # a local life: its end minus its server and load seconds (stop and folder writes left out)
            first_start = min(first_start or math.inf, status["t_s"] - life_s)
    return {"exit": done.returncode, "wall_s": round(wall_s, 1), "gpu_minutes": round(gpu_s / 60, 2),
            "verdict": [decision["status"], (decision["recommended"] or {}).get("k"), decision["leading_k"]],
            "lives": len(list(run_dir.glob("k*/r*/status.json"))), "cost": (decision.get("cost") or {}).get("text"),
            "first_life_after_s": round(first_start - epoch, 1) if first_start else None,
            "timeline": [f"{key} {start - first_start:.0f}-{end - first_start:.0f}"
                         for start, end, key in sorted(spans)]}


def on_paper(lives: int, slots: int, start_s: float, stages_s: float, ray_start_s: float) -> dict:
    life_s = start_s + stages_s
    return {"lives": lives, "slots": slots, "serial_min": round(lives * life_s / 60, 1),
            "parallel_min": round((math.ceil(lives / slots) * life_s + ray_start_s) / 60, 1),
            "gpu_minutes": round(lives * life_s / 60, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", default="0,2,4")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--users", default="2", help="one stage each; the first is the decision's target")
    parser.add_argument("--stage-s", type=float, default=12.0)
    parser.add_argument("--preflight-s", type=float, default=3.0, help="load.preflight_s (0: none)")
    parser.add_argument("--slots", type=int, default=2)
    parser.add_argument("--strategy", choices=["grid", "adaptive"], default="grid")
    parser.add_argument("--paper-slots", type=int, default=8)
    parser.add_argument("--paper-lives", type=int, default=12, help="4 K x 3 repeats")
    parser.add_argument("--paper-start-s", type=float, default=120.0)
    parser.add_argument("--paper-stages-s", type=float, default=180.0, help="3 stages x 60 s")
    args = parser.parse_args()
    k = json.dumps([int(v) for v in args.k.split(",")])
    with tempfile.TemporaryDirectory(prefix="cluster-bench-") as tmp:
        work = Path(tmp)
        users = [int(v) for v in args.users.split(",")]
        stages = ", ".join(f"{{ users = {u}, duration_s = {args.stage_s:g} }}" for u in users)
        sweep = dict(k=k, stages=stages, target=users[0], preflight_s=args.preflight_s, repeats=args.repeats,
                     strategy=args.strategy)
        serial = run(SWEEP.format(**sweep, cluster=""), work, "serial")
        ray = run(SWEEP.format(**sweep, cluster=f"[cluster]\nengine = \"ray\"\ngpus = {args.slots}\n"), work, "ray")
    ray_start_s = (ray["first_life_after_s"] or 0.0) - (serial["first_life_after_s"] or 0.0)
    print(json.dumps({
        "strategy": args.strategy, "serial": serial, "ray": ray | {"slots": args.slots},
        "wall_ratio": round(ray["wall_s"] / serial["wall_s"], 2), "same_verdict": serial["verdict"] == ray["verdict"],
        "ray_start_s": round(ray_start_s, 1),  # Ray's start and the slots': the first life's delay beyond serial's
        "paper": on_paper(args.paper_lives, args.paper_slots, args.paper_start_s, args.paper_stages_s, ray_start_s),
    }))


if __name__ == "__main__":
    main()
