"""Windows of a scenario from the simulator's pure engine model (no HTTP, no Locust, no real time): the
performance model's held-out accuracy in seconds, as a cross-check of the recorded benchmark.

Each (K, users) is decision_scenarios.closed_loop: `users` with no think time on lookahead_runner/sim/model.py,
built from the same server argv the sweep passes; the first 20 % of engine time is the warm-up, the rest one window
whose requests, time-weighted running / waiting / KV usage, preemptions and acceptance counters become a
decision `Window` as the analysis would build it. The HTTP path and the client are left out, so the
client's own overhead and jitter are not in these windows (the recorded benchmark has them).
"""
from __future__ import annotations

import math

import numpy as np

from decision_scenarios import BenchScenario, closed_loop

from lookahead_runner.decision import Evidence, Window, evidence
from lookahead_runner.decision.perfmodel.model import PositionCounts, WorkloadShape

WARM_SHARE = 0.2


def engine_window(s: BenchScenario, k: int, users: int, engine_s: float,
                  seed: int) -> tuple[Window, PositionCounts | None]:
    loop = closed_loop(s, k, users, engine_s, seed, WARM_SHARE)
    done = loop["done"]
    ttft = np.array([d[0] for d in done]) * 1000
    e2e = np.array([d[1] for d in done]) * 1000
    out_tokens = np.array([d[3] for d in done], dtype=float)
    tpot = (e2e - ttft) / np.maximum(out_tokens - 1, 1)
    drafts = loop["drafts"]
    w = Window(k=k, repeat=0, users=users, duration_s=loop["seconds"], t_done_s=np.array([d[2] for d in done]),
               output_tokens=out_tokens, latency_ms=np.column_stack([ttft, tpot, tpot, e2e]), finished=len(done),
               failures=0, timeouts=0,
               server={"running_mean": loop["running"], "waiting_mean": loop["waiting"],
                       "kv_usage_mean": loop["kv_usage"],
                       "kv_usage_peak": loop["kv_peak"], "preemptions": float(loop["preemptions"]),
                       "kv_pool_tokens": loop["kv_pool_tokens"],
                       "mean_acceptance_length": 1 + loop["accepted"] / drafts if drafts else math.nan})
    return w, (PositionCounts(float(drafts), loop["accepted_per_pos"]) if k and drafts else None)


def engine_evidence(s: BenchScenario, stages: list[int], engine_s: float,
                    seed: int) -> tuple[Evidence, dict[int, PositionCounts], WorkloadShape]:
    windows, positions = [], {}
    for k in s.ks:
        for users in stages:
            w, counts = engine_window(s, k, users, engine_s, seed)
            windows.append(w)
            if counts is not None:
                prev = positions.get(k)
                positions[k] = counts if prev is None else PositionCounts(
                    prev.drafts + counts.drafts, tuple(a + b for a, b in zip(prev.accepted, counts.accepted)))
    seqs = next((int(a) for flag, a in zip(s.server_args, s.server_args[1:]) if flag == "--max-num-seqs"), None)
    return evidence(windows, s.users), positions, WorkloadShape(s.prompt_tokens, s.output_tokens, seqs)
