"""Report render time for a large sweep: 10 settings x 8 stages x 3 repeats, 1 s server and GPU samples over
long server lives (10 min each by default). Times build_view + render_html, the whole page step of
`lookahead-runner report`. Goal: <= 5 s. Prints one JSON line.

    python benchmarks/report_render.py [--settings 10] [--stages 8] [--repeats 3] [--life-s 600] [--runs 3]

The first full render in the process is timed cold (it pays for loading plotly.js and the template, as a
`lookahead-runner report` process does); then baseline and full renders alternate warm. Baseline in the same
run: 1 setting x 1 repeat with the same stages and sample rate, so `ratio` says how the page step scales with
the sweep, independent of the machine.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from lookahead_runner.runfolder.analysis import SUMMARY_COLUMNS
from lookahead_runner.config import SweepConfig
from lookahead_runner.decision import Thresholds, decide
from lookahead_runner.report import build_view, render_html
from lookahead_runner.runfolder.plan import LifeResult, LifeStatus, Plan, PlannedLife, RunRecord

T0_S = 1_760_000_000.0
MAX_NUM_SEQS = 128


def users_levels(stages: int) -> list[int]:
    return [2 ** (i + 1) for i in range(stages)]  # 2, 4, ... 256: past the batch cap, as a real ramp goes


def summary_rows(ks: list[int], users: list[int], repeats: int, rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for k in ks:
        for repeat in range(repeats):
            for stage, n_users in enumerate(users):
                batch = min(n_users, MAX_NUM_SEQS / (1 + 0.05 * k))
                tok_s = 30.0 * batch * (1 + 0.12 * k) / (1 + 0.006 * k * k) * rng.normal(1, 0.01)
                row = {name: np.nan for name in SUMMARY_COLUMNS}
                row |= {"setting": f"k{k}", "k": k, "repeat": repeat, "stage": stage, "users": n_users,
                        "duration_s": 60.0, "requests": int(tok_s * 60 / 64), "req_per_s": tok_s / 64,
                        "output_tok_per_s": tok_s, "ttft_p50_ms": 40 + n_users / 4, "ttft_p90_ms": 60 + n_users / 3,
                        "ttft_p99_ms": 90 + n_users / 2, "itl_p50_ms": 12 + k, "itl_p99_ms": 30 + 2 * k,
                        "e2e_p50_ms": 900.0 + n_users, "e2e_p90_ms": 1200.0 + n_users, "e2e_p99_ms": 1500.0 + n_users,
                        "failures": 0, "failure_rate": 0.0, "timeouts": 0, "timeout_rate": 0.0, "length_mismatches": 0,
                        "acceptance_rate": np.nan if k == 0 else 0.8 * 0.96 ** k,
                        "mean_acceptance_length": np.nan if k == 0 else 1 + 0.6 * k,
                        "running_mean": batch, "running_peak": batch + 2, "waiting_mean": max(n_users - batch, 0),
                        "waiting_peak": max(n_users - batch, 0) + 3, "kv_usage_mean": min(0.2 + batch / 200 + 0.01 * k, 0.97),
                        "kv_usage_peak": min(0.25 + batch / 180 + 0.01 * k, 0.99), "preemptions": 0,
                        "gpu_mem_peak_mib": 70_000.0 + 250 * k, "gpu_mem_total_mib": 81_559.0,
                        "client_lag_p99_ms": 3.0, "valid": True, "invalid_reason": ""}
                rows.append(row)
    return pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))


def life_timeline(users: list[int], life_s: float, rng: np.random.Generator) -> dict[str, pd.DataFrame]:
    t_s = T0_S + np.arange(0.0, life_s, 1.0)  # one sample a second
    stage_s = life_s / len(users)
    level = np.asarray(users)[np.minimum(((t_s - T0_S) // stage_s).astype(int), len(users) - 1)]
    running = np.minimum(level, MAX_NUM_SEQS) * rng.uniform(0.9, 1.0, len(t_s))
    server = pd.DataFrame({"t_s": t_s, "running": running, "waiting": np.maximum(level - running, 0),
                           "kv_usage": running / (MAX_NUM_SEQS * 1.2), "preemptions_total": 0.0,
                           "generation_tokens_total": np.cumsum(running * 30)})
    gpu = pd.DataFrame({"t_s": t_s, "used_mib": 70_000 + 20 * running, "total_mib": 81_559.0})
    stages = pd.DataFrame({"stage": range(len(users)), "users": users,
                           "t_start_s": [T0_S + i * stage_s for i in range(len(users))],
                           "t_end_s": [T0_S + (i + 1) * stage_s for i in range(len(users))]})
    return {"server": server, "gpu": gpu, "stages": stages}


def sweep_inputs(settings: int, stages: int, repeats: int, life_s: float) -> tuple:
    rng = np.random.default_rng(0)
    ks = [2 * i for i in range(settings)]
    users = users_levels(stages)
    summary = summary_rows(ks, users, repeats, rng)
    argv_by_k = {k: ["vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", str(MAX_NUM_SEQS)]
                 + (["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": k})] if k else [])
                 for k in ks}
    target = users[len(users) // 2]
    decision = decide(summary, target, Thresholds(), argv_by_k, version=(0, 33, 0))
    lives = [LifeResult(planned=PlannedLife(setting=f"k{k}", k=k, repeat=r, argv=argv_by_k[k], dir=f"k{k}/r{r}"),
                        status=LifeStatus(state="done"),
                        tokens={"client_output_tokens": 1_000_000, "server_generation_tokens": 1_000_000,
                                "difference": 0, "cut_requests": 0})
             for k in ks for r in range(repeats)]
    config = SweepConfig.model_validate({"load": {"stages": [{"users": u, "duration_s": life_s / stages} for u in users],
                                                  "repeats": repeats}, "decision": {"target_users": target}})
    plan = Plan(run_id="bench", created="2025-01-01T00:00:00+0000", config=config.model_dump(mode="json"),
                probe={"version": "0.33.0", "knob": "--speculative-config", "flags": []},
                lives=[life.planned for life in lives], target_users=target)
    timelines = {life.planned.dir: life_timeline(users, life_s, rng) for life in lives}
    return summary, decision, RunRecord(plan=plan, lives=lives), timelines


def render_s(inputs: tuple, path: Path) -> float:
    started = time.perf_counter()
    render_html(build_view(*inputs), path)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", type=int, default=10)
    parser.add_argument("--stages", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--life-s", type=float, default=600.0, help="length of each server life, seconds")
    parser.add_argument("--runs", type=int, default=3, help="warm renders of each size")
    args = parser.parse_args()
    full = sweep_inputs(args.settings, args.stages, args.repeats, args.life_s)
    baseline = sweep_inputs(1, args.stages, 1, args.life_s)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        cold_s = render_s(full, page)
        full_s, baseline_s = [], []
        for _ in range(args.runs):
            baseline_s.append(render_s(baseline, Path(tmp) / "baseline.html"))
            full_s.append(render_s(full, page))
        page_mib = page.stat().st_size / 2**20
    warm_s, base_s = statistics.median(full_s), statistics.median(baseline_s)
    print(json.dumps({
        "benchmark": "report_render", "settings": args.settings, "stages": args.stages, "repeats": args.repeats,
        "lives": len(full[2]["lives"]), "summary_rows": len(full[0]), "samples_per_life": int(args.life_s),
        "full_cold_s": round(cold_s, 3), "full_warm_s": round(warm_s, 3), "baseline_warm_s": round(base_s, 3),
        "ratio_full_to_baseline": round(warm_s / base_s, 2), "page_mib": round(page_mib, 2),
        "goal_s": 5.0, "meets_goal": cold_s <= 5.0,
    }))


if __name__ == "__main__":
    main()
