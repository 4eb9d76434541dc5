"""rules.py's point rule over every resample at once: the K `rules.choose` picks and the K where `rules.stop_at`
fires, for each resample of a stage, from `CellDraws` arrays (one comparison per K pair, none per resample).

Each function mirrors the scalar rule of the same name in rules.py, NaN for NaN (tests/unit/decision/
test_batch_rules.py checks them against the scalar rules resample by resample); None is -1 here.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...config import DecisionConfig
from ..cells.resample import CellDraws
from ..cells.stats import _z
from .rules import KV_ROOM_FRAC, LIMIT_QUEUE_STEPS

NONE = -1


def rel(new: np.ndarray, old: np.ndarray) -> np.ndarray:
    """rules.rel: new / old - 1, NaN where old is 0 or either is NaN."""
    new, old = np.asarray(new, dtype=float), np.asarray(old, dtype=float)
    with np.errstate(all="ignore"):
        out = new / np.where(old == 0, np.nan, old) - 1
    return np.where((old == 0) | np.isnan(old) | np.isnan(new), np.nan, out)


def _wilson(successes: np.ndarray, n: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """stats.wilson's bounds where n > 0."""
    z = _z(level)
    n = np.maximum(n, 1)
    rate, z2 = successes / n, z * z
    center = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * np.sqrt(np.maximum(rate * (1 - rate) / n + z2 / (4 * n * n), 0.0))
    return np.maximum(center - half, 0.0), np.minimum(center + half, 1.0)


def _failures_fail(s: CellDraws, base: CellDraws, p: DecisionConfig) -> np.ndarray:
    """rules.failures_status == FAIL: a rate over the baseline's beyond the slack, its Newcombe interval too."""
    n1, n2 = s.finished, base.finished
    fail = np.zeros(len(s), dtype=bool)
    if s.k == base.k:
        return fail
    both = (n1 > 0) & (n2 > 0)
    safe1, safe2 = np.maximum(n1, 1), np.maximum(n2, 1)
    for mine, theirs in ((s.failures, base.failures), (s.timeouts, base.timeouts)):
        p1, p2 = mine / safe1, theirs / safe2
        a_low, _ = _wilson(mine, safe1, p.interval_level)
        _, b_high = _wilson(theirs, safe2, p.interval_level)
        low = p1 - p2 - np.sqrt((p1 - a_low) ** 2 + (b_high - p2) ** 2)
        fail |= both & (p1 - p2 > p.failure_rate_slack) & (low > p.failure_rate_slack)
    return fail


def _queue_share(s: CellDraws) -> np.ndarray:
    at_server = s.waiting_mean + s.running_mean
    with np.errstate(all="ignore"):
        return np.where(at_server > 0, s.waiting_mean / np.where(at_server > 0, at_server, 1.0), np.nan)


def _queue_steps(s: CellDraws) -> np.ndarray:
    """rules.queue_steps of every resample."""
    acceptance = s.signals["acceptance_rate"]
    step_ms = s.quantile("tpot_ms", 0.5) * np.where((acceptance >= 0) & (s.k != 0), 1 + s.k * acceptance, 1.0)
    with np.errstate(all="ignore"):
        steps = 1000 * s.waiting_mean / s.req_per_s / step_ms
    return np.where((s.req_per_s > 0) & (step_ms > 0), steps, np.nan)


def _server_holds_back(s: CellDraws, p: DecisionConfig) -> np.ndarray:
    room = s.kv_usage_peak <= KV_ROOM_FRAC  # False where NaN: an unmeasured pool may be full
    queued = (s.waiting_mean >= 1.0) & (_queue_share(s) >= p.queue_share_frac)
    queue_is_a_limit = queued & ~room
    if (queued & room).any():   # the steps only where they decide: TPOT's percentile is a search of its own
        queue_is_a_limit |= queued & room & ~(_queue_steps(s) < LIMIT_QUEUE_STEPS)   # NaN steps: the queue counts
    return (s.preemptions > 0) | (s.kv_usage_peak > 1 - p.kv_headroom_frac) | queue_is_a_limit


def _memory_fail(s: CellDraws, p: DecisionConfig) -> np.ndarray:
    with np.errstate(all="ignore"):
        device = np.where(s.gpu_mem_total_mib != 0, s.gpu_mem_peak_mib / s.gpu_mem_total_mib, np.nan)
    return (s.kv_usage_peak > 1 - p.kv_headroom_frac) | (s.preemptions > 0) | (device >= 1.0)


def _batch_fail(s: CellDraws, base: CellDraws, p: DecisionConfig) -> np.ndarray:
    if s.k == base.k:
        return np.zeros(len(s), dtype=bool)
    dropped = s.running_mean < base.running_mean * (1 - p.batch_drop_frac)   # False where either is NaN
    return dropped & _server_holds_back(s, p)


def latency_ratios(s: CellDraws, base: CellDraws, p: DecisionConfig) -> np.ndarray:
    """rules.latency_ratio of every resample."""
    q = p.latency_percentile / 100
    return rel(s.quantile("e2e_ms", q), base.quantile("e2e_ms", q))


def gate_fails(s: CellDraws, base: CellDraws, p: DecisionConfig) -> np.ndarray:
    """Whether any gate of rules.gate_statuses fails, per resample."""
    fail = _failures_fail(s, base, p) | _memory_fail(s, p) | _batch_fail(s, base, p)
    finished = s.finished
    for index, slo in enumerate(p.slos):
        with np.errstate(all="ignore"):
            fail |= (finished > 0) & ~(s.slo_met[:, index] / np.maximum(finished, 1) >= slo.share)
    if not p.slos and s.k != base.k:
        fail |= latency_ratios(s, base, p) > p.latency_tolerance_frac
    return fail


def memory_rise(s: CellDraws, prev: CellDraws) -> np.ndarray:
    """rules.memory_rise per resample: the clearest rise of the readings both sides have, NaN where none."""
    with np.errstate(all="ignore"):
        device = np.where(s.gpu_mem_total_mib != 0,
                          (s.gpu_mem_peak_mib - prev.gpu_mem_peak_mib) / s.gpu_mem_total_mib, np.nan)
    appeared = (s.preemptions > 0) & ~(prev.preemptions > 0)
    both = ~np.isnan(s.preemptions) & ~np.isnan(prev.preemptions)
    preempted = np.where(appeared, 1.0, np.where(both, 0.0, np.nan))
    rises = np.stack([s.kv_usage_mean - prev.kv_usage_mean, s.kv_usage_peak - prev.kv_usage_peak, device, preempted])
    known = ~np.isnan(rises)
    return np.where(known.any(axis=0), np.where(known, rises, -np.inf).max(axis=0), np.nan)


def stop_at(draws: Mapping[int, CellDraws], p: DecisionConfig) -> np.ndarray:
    """rules.stop_at per resample (NONE where the stop rule does not fire)."""
    ks = sorted(draws)
    count = len(draws[ks[0]]) if ks else 0
    stop = np.full(count, NONE)
    for i, k in enumerate(ks[1:], 1):
        fired = np.zeros(count, dtype=bool)
        for j, prev in enumerate(ks[:i]):
            rise = memory_rise(draws[k], draws[prev])
            gain = rel(draws[k].objective(p.objective), draws[prev].objective(p.objective))
            if i - j <= 1 or not p.memory_rise_frac:
                needed = np.full(count, p.throughput_gain_frac)
            else:
                with np.errstate(all="ignore"):
                    needed = p.throughput_gain_frac * np.maximum(1.0, rise / p.memory_rise_frac)
            fired |= (rise >= p.memory_rise_frac) & ~(gain >= needed)
        stop = np.where((stop == NONE) & fired, k, stop)
    return stop


def choose(draws: Mapping[int, CellDraws], p: DecisionConfig) -> tuple[np.ndarray, np.ndarray]:
    """(rules.choose, rules.stop_at) per resample: the K picked and the K where the stop rule fired (NONE: none)."""
    ks = sorted(draws)
    if not ks:
        return np.empty(0, dtype=int), np.empty(0, dtype=int)
    base = draws[ks[0]]
    stop = stop_at(draws, p)
    objective = np.stack([np.asarray(draws[k].objective(p.objective), dtype=float) for k in ks])   # K x resamples
    eligible = np.stack([((stop == NONE) | (k < stop)) & ~gate_fails(draws[k], base, p) for k in ks])
    eligible &= ~np.isnan(objective)
    best = np.where(eligible, objective, -np.inf).max(axis=0)
    within = eligible & (objective >= best / (1 + p.tie_tolerance_frac))
    chosen = np.where(within.any(axis=0), np.asarray(ks)[within.argmax(axis=0)], NONE)
    return chosen, stop
