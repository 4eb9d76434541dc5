"""Synthetic stage windows for decision stories: a few numbers in, a `Window` with per-request arrays out.

Completions are spread evenly over the window with a little jitter (a closed loop at steady state);
latencies are lognormal around the given medians, e2e by default users / req/s (Little's law). Every window has its own seed, so a story is
deterministic and repeats of one setting differ the way repeats do.
"""
from __future__ import annotations

import math
import zlib

import numpy as np

from lookahead_runner.decision import Window, evidence

SERVER_DEFAULTS = {"running_mean": None, "waiting_mean": 0.0, "kv_usage_mean": 0.5, "kv_usage_peak": 0.6,
                   "preemptions": 0.0, "gpu_mem_peak_mib": 70000.0, "gpu_mem_total_mib": 81920.0,
                   "kv_pool_tokens": math.nan}


def window(k: int, users: int, req_per_s: float, repeat: int = 0, *, duration_s: float = 20.0,
           e2e_ms: float | None = None, ttft_ms: float = 100.0, spread: float = 0.15, failures: int = 0,
           timeouts: int = 0, output_tokens: int = 64, jitter: float = 0.2, not_in_effect: str = "",
           **server) -> Window:
    e2e_ms = 1000.0 * users / req_per_s if e2e_ms is None else e2e_ms  # a closed loop: Little's law
    rng = np.random.default_rng(zlib.crc32(f"{k}/{users}/{repeat}/{req_per_s}/{e2e_ms}/{ttft_ms}".encode()))
    n = int(round(req_per_s * duration_s))
    step = duration_s / max(n, 1)
    t_done = np.clip((np.arange(n) + 0.5 + rng.uniform(-jitter, jitter, n)) * step, 0, duration_s * 0.999)
    ttft = ttft_ms * rng.lognormal(0, spread, n)
    e2e = np.maximum(e2e_ms * rng.lognormal(0, spread, n), ttft + 1)
    tpot = (e2e - ttft) / (output_tokens - 1)
    latency = np.column_stack([ttft, tpot, tpot * 1.6, e2e])
    signals = SERVER_DEFAULTS | {"acceptance_rate": 0.8 if k else math.nan} | server
    if signals["running_mean"] is None:
        signals["running_mean"] = min(users, 60.0)
    return Window(k=k, repeat=repeat, users=users, duration_s=duration_s, t_done_s=t_done,
                  output_tokens=np.full(n, float(output_tokens)), latency_ms=latency, finished=n + failures,
                  failures=failures, timeouts=timeouts, server=signals, not_in_effect=not_in_effect)


def table(spec: dict, target: int, repeats: int = 2, spread: float = 0.01, **common):
    """{k: {users: req_per_s}} -> evidence with `repeats` windows per cell, repeat r at req x (1 + r*spread)."""
    windows = [window(k, users, req * (1 + r * spread), r, **common)
               for k, by_users in spec.items() for users, req in by_users.items() for r in range(repeats)]
    return evidence(windows, target)
