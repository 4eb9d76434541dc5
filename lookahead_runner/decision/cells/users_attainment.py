"""A users stage's share of requests meeting an SLO and its goodput, their requests counted by their correlation.

Claim: at a users stage (a closed loop) a request's latency is the queue it met, and consecutive requests meet the
same queue: with more users than the server runs at once, each waits for the completions ahead of it, and the next
one waits for nearly the same ones, so requests meet or miss an SLO in runs as long as the queue. The share meeting
an SLO then varies as that of n / tau independent requests, tau the integrated autocorrelation time of the window's
requests in the order they ended (arrival_correlation.window_time on the met flags and the SLO latency's normal
scores: the estimator the rate windows use), the windows of the cell pooled with their spread a floor
(arrival_correlation.pooled). Its interval (decision.json cells[].slo_attainment) is Wilson's on that count with
Student's t folded in; the goodput's (cells[].goodput_range) is each throughput draw of the cell times a draw of
the share meeting every SLO from its Jeffreys posterior on that count (the throughput's draws alone leave out
which requests met the SLO). Measured against a closed loop whose attainment is exact: benchmarks/calibration's
users group (benchmarks/README.md).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...config.slo import Slo
from . import arrival_correlation
from .arrival_correlation import Effective
from .evidence import LATENCY_COLUMNS, Window
from .slo_attainment import meets
from .stats import Bounds, interval, wilson


def _window_share(w: Window, slos: Sequence[Slo], index: int | None) -> tuple[Effective, int]:
    """One window's requests as independent ones for SLO `index` (None: every SLO), and how many met it."""
    order = np.argsort(w.t_done_s, kind="stable")
    latency = w.latency_ms[order]
    ok = np.ones(len(order), dtype=bool)
    met = meets(latency, ok, slos, np.asarray(w.output_tokens)[order])
    flags = met.all(axis=1) if index is None else met[:, index]
    chosen = slos if index is None else [slos[index]]
    values = [latency[:, LATENCY_COLUMNS.index(slo.column)] for slo in chosen]
    tau = arrival_correlation.window_time(flags, values, ok)
    return arrival_correlation.one(len(flags), tau), int(flags.sum())


def effective(windows: Sequence[Window], slos: Sequence[Slo], index: int | None) -> Effective:
    """The cell's requests as independent ones for SLO `index` (None: every SLO), its windows pooled."""
    return arrival_correlation.pooled([_window_share(w, slos, index) for w in windows])


def attainment_bounds(met: int, finished: int, windows: Sequence[Window], slos: Sequence[Slo], index: int,
                      level: float) -> Bounds:
    """Wilson's interval of `met` of `finished` (failures count against), over the cell's design effect."""
    return wilson(met, finished, level, effective(windows, slos, index).design_effect_at(level))


def goodput_bounds(req_per_s: np.ndarray, windows: Sequence[Window], slos: Sequence[Slo], level: float,
                   rng: np.random.Generator) -> Bounds:
    """The percentile interval of each throughput draw times a draw of the share of completed requests meeting
    every SLO (Jeffreys' Beta on their effective count). Where none met, its low end is 0, and where all did, its
    high end the throughput's: Jeffreys' interval is taken to 0 (1) there, as Brown, Cai and DasGupta (2001)
    advise, since its Beta puts the share's tail just off the end the data cannot exclude."""
    req_per_s = np.asarray(req_per_s, dtype=float)
    shares = [_window_share(w, slos, None) for w in windows]
    completed = sum(e.arrivals for e, _ in shares)
    if not completed:
        return Bounds(None, None)
    good = sum(met for _, met in shares)
    deff = arrival_correlation.pooled(shares).design_effect_at(level)
    drawn = rng.beta(good / deff + 0.5, (completed - good) / deff + 0.5, size=len(req_per_s))
    bounds = interval(req_per_s * drawn, level)
    low = 0.0 if good == 0 else bounds.low
    high = interval(req_per_s, level).high if good == completed else bounds.high
    return Bounds(low, high)
