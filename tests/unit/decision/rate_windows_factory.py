"""Synthetic rate windows for the decision at a rate and the capacity tests (not a test module)."""
from __future__ import annotations

import math

import numpy as np

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.cells.rate_window import RateWindow, met_every_slo


def rate_window(k: int, rate: float, arrivals: int, met: int, *, behind: bool = False, duration_s: float | None = None,
                repeat: int = 0, ok: int | None = None, p: DecisionConfig | None = None, valid: bool = True,
                invalid_reason: str = "", fast_ms: float = 100.0, server: dict | None = None,
                burst: bool = False, service_ms: float = 1000.0) -> RateWindow:
    """`arrivals` at `rate`, of which `met` have a TTFT of `fast_ms` and the other succeeded ones 900 ms (over a
    500 ms SLO), each e2e its TTFT + `service_ms`; `ok` of them succeeded (default all); `behind`: the backlog grew
    through the window (`duration_s` long; default: as long as `arrivals` at `rate` take). In arrival order each
    kind is spread evenly through the window, or with `burst` the misses and failures come one after another at its
    end (a queue's burst: correlated arrivals)."""
    p = p or DecisionConfig(slo={"ttft_p99_ms": 500.0})
    if duration_s is None:   # the window offered its rate (10 s without an arrival)
        duration_s = arrivals / rate if arrivals else 10.0
    ok_count = arrivals if ok is None else ok
    latency = np.full((arrivals, 4), np.nan)
    for i in range(ok_count):
        # a jitter of 0-6 ms whose neighbours in arrival order are unalike (no drift a queue would make)
        ttft = fast_ms + (3 * i) % 7 if i < met else 900.0 + (2 * i) % 5
        latency[i] = (ttft, 20.0, 25.0, ttft + service_ms)
    succeeded = np.arange(arrivals) < ok_count
    if not burst:   # each kind (met, missed, failed) spread evenly through the arrivals
        kind = np.where(np.arange(arrivals) < met, 0, np.where(succeeded, 1, 2))
        rank = np.concatenate([(np.arange((kind == c).sum()) + 0.5) / max((kind == c).sum(), 1) for c in (0, 1, 2)])
        order = np.argsort(rank, kind="stable")
        latency, succeeded = latency[order], succeeded[order]
    growth = 0.5 * arrivals if behind else 0.0
    return RateWindow(k=k, repeat=repeat, stage=0, rate=rate, duration_s=duration_s, latency_ms=latency,
                      ok=succeeded, good=met_every_slo(latency, succeeded, p.slos), late_ms=np.ones(arrivals),
                      achieved_per_s=ok_count / duration_s * (0.6 if behind else 1.0), output_tok_per_s=math.nan,
                      outstanding=(3.0, 3.0 + growth), growth=growth, waiting=(0.0, growth),
                      has_slo=bool(p.slos), valid=valid, invalid_reason=invalid_reason,
                      server=server or {"kv_usage_peak": 0.5, "kv_usage_mean": 0.3, "preemptions": 0.0,
                                        "running_mean": 8.0, "waiting_mean": 0.0})
