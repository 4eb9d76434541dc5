"""Issue 22's proof: one sweep on the simulator with prompt_tokens = [400, 4000] at 256 users ends in
different verdicts per variant, each matching the simulator's own truth (its engine model in a closed loop of
256 users, lookahead_runner/sim/closed_loop.py), and the report shows both. Prints one JSON line.

    python benchmarks/context_verdicts.py [--repeats 2] [--stage-s 40] [--out DIR]

The published shape (vLLM PR #48944): at 256 users K=3 loses at a 400-token context and gains at 4,000.
One repeat of 40 s stages left a variant "not decided yet" with the truth leading (256 requests that start
together finish in waves, so a window holds few throughput bins): the default runs two, about 6 minutes on
2 cores. It runs by hand (the test suite checks the variant plumbing at 12 users,
tests/e2e/test_workload_variants_sim.py); run it on a quiet machine, a loaded one reads as noise.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from lookahead_runner.sim.closed_loop import best_k

ARGS = ["--max-num-seqs", "256", "--max-num-batched-tokens", "65536", "--max-model-len", "8192",
        "--sim-scenario", "long-context", "--sim-set", "startup_s=0.3"]
VARIANTS = {400: "400-token prompts", 4000: "4,000-token prompts"}
KS, USERS, OUTPUT = (0, 3), 256, 128


def config_toml(repeats: int, stage_s: float) -> str:
    return f"""
name = "context"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(ARGS)}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = {list(KS)}
[load]
stages = [{{ users = {USERS}, duration_s = {stage_s:g} }}]
prompt_tokens = {list(VARIANTS)}
output_tokens = {OUTPUT}
repeats = {repeats}
repeat_mode = "same-server"
warmup_s = 6.0
preflight_s = 0
[decision]
confirm = "off"
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--stage-s", type=float, default=40.0)
    parser.add_argument("--out", type=Path, default=None, help="run folders go here (default: a temporary one)")
    args = parser.parse_args()
    truth = {VARIANTS[p]: best_k(ARGS, KS, p, OUTPUT, 0.0, USERS) for p in VARIANTS}
    out = args.out or Path(tempfile.mkdtemp(prefix="context-verdicts-"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "sweep.toml").write_text(config_toml(args.repeats, args.stage_s))
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(out / "sweep.toml"),
                           "--out", str(out / "runs")], capture_output=True, text=True)
    wall_s = time.monotonic() - t0
    run_dir = max((out / "runs").iterdir())
    decision = json.loads((run_dir / "decision.json").read_text())
    html = (run_dir / "report.html").read_text()
    variants = []
    for d in decision["by_variant"]:
        want, rates = truth[d["variant"]]
        got = d["recommended"]["k"] if d["recommended"] else None
        variants.append({"variant": d["variant"], "truth_k": want,
                         "truth_req_per_s": {str(k): round(v, 2) for k, v in rates.items()},
                         "status": d["status"], "recommended_k": got, "leading_k": d.get("leading_k"),
                         "right": d["status"] == "decided" and got == want, "verdict": d["verdict"],
                         "in_report": f"Workload variant: {d['variant']}" in html})
    ks = [v["recommended_k"] for v in variants]
    print(json.dumps({"exit_code": done.returncode, "wall_s": round(wall_s, 1), "run_dir": str(run_dir),
                      "repeats": args.repeats, "stage_s": args.stage_s, "variants": variants,
                      "different_verdicts_all_right": all(v["right"] for v in variants) and len(set(ks)) == len(ks)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
