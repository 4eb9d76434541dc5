"""Latency trade-offs of a K against the baseline: each percentile difference with its interval,
shown beside the verdict and never a silent veto (only e2e, or the SLOs, gate).
"""
from __future__ import annotations

import math

from ...config import DecisionConfig
from ..schema import Range, Tradeoff
from ..gates.stage import StageEval
from ..cells.stats import Bounds, interval, quantile_bounds
from .text import pct


TRADEOFFS = (("TTFT p50", "ttft_ms", 0.5, False), ("TTFT p99", "ttft_ms", 0.99, False),
             ("TPOT p50", "tpot_ms", 0.5, False), ("ITL p99-of-request p90", "itl_p99_ms", 0.9, False),
             ("e2e p50", "e2e_ms", 0.5, True), ("e2e p90", "e2e_ms", 0.9, True), ("e2e p99", "e2e_ms", 0.99, True))


def tradeoffs(stage: StageEval, k: int, p: DecisionConfig) -> list[Tradeoff]:
    """Latency of K against the baseline, each difference with its interval (shown, never a silent veto)."""
    if k == stage.base_k:
        return []
    out = []
    for label, column, q, relative in TRADEOFFS:
        mine, theirs = stage.stats[k].quantile(column, q), stage.base.quantile(column, q)
        if math.isnan(mine) or math.isnan(theirs):
            continue
        diff = mine / theirs - 1 if relative else mine - theirs
        bounds = interval(stage.quantile_difference_draws(k, column, q, relative), p.interval_level)
        decisive = all(quantile_bounds(stage.pooled[x][column], q, p.interval_level).bounded for x in (k, stage.base_k))
        out.append(Tradeoff(metric=label, difference=diff, range=Range(low=bounds.low, high=bounds.high), unit="%" if relative else "ms",
                            decisive=decisive, text=tradeoff_text(label, diff, bounds, relative, decisive)))
    return out


def tradeoff_text(label: str, diff: float, bounds: Bounds, relative: bool, decisive: bool) -> str:
    if relative:
        text = f"{label} {pct(diff, signed=True)} [{pct(bounds.low, signed=True)}, {pct(bounds.high, signed=True)}]"
    else:
        low = "?" if bounds.low is None else f"{bounds.low:+.0f}"
        high = "?" if bounds.high is None else f"{bounds.high:+.0f}"
        text = f"{label} {diff:+.0f} ms [{low}, {high}]"
    return text + ("" if decisive else " (too few requests to bound this percentile: shown, not deciding)")


