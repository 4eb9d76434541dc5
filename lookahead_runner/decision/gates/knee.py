"""The knee of one K's concurrency ramp: the stage after which more users buy little throughput
(gain per doubling of users, with its interval, below a stated share) at a real latency or KV cost.

Used by `lookahead-runner ramp` and by the checklist's concurrency-scaling item.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ...config import DecisionConfig
from . import rules
from ..cells.measure import CellStats
from ..cells.resample import CellDraws
from ..schema import Check, Knee, KneeStep, Range
from ..cells.stats import interval
from ..explanation.text import pct


def _per_doubling(ratio: float | np.ndarray, u1: int, u2: int):
    return (ratio - 1) / math.log2(u2 / u1)


def _cost(s1: CellStats, s2: CellStats, p: DecisionConfig) -> tuple[str, bool]:
    parts, costly = [], False
    for column, label in (("ttft_ms", "TTFT p50"), ("e2e_ms", "e2e p50")):
        a, b = s1.quantile(column, 0.5), s2.quantile(column, 0.5)
        rise = rules.rel(b, a)
        if not math.isnan(rise):
            parts.append(f"{label} {a:.0f} -> {b:.0f} ms ({pct(rise, signed=True)})")
            costly |= rise > p.knee_latency_rise_frac
    if not math.isnan(s2.kv_usage_peak):
        parts.append(f"KV usage peak {pct(s2.kv_usage_peak, digits=1)}")
        costly |= s2.kv_usage_peak > 1 - p.kv_headroom_frac
    if s2.preemptions > 0:
        parts.append(f"{s2.preemptions:.0f} preemptions")
        costly = True
    return "; ".join(parts), costly


def find_knee(k: int, stats: Mapping[int, CellStats], draws: Mapping[int, CellDraws],
              p: DecisionConfig) -> Knee:
    """stats/draws keyed by users, for one K."""
    users = sorted(stats)
    steps = []
    for u1, u2 in zip(users, users[1:]):
        s1, s2 = stats[u1], stats[u2]
        point = _per_doubling(s2.objective(p.objective) / s1.objective(p.objective), u1, u2) \
            if s1.objective(p.objective) else math.nan
        with np.errstate(all="ignore"):
            ratio = np.asarray(draws[u2].objective(p.objective)) / np.asarray(draws[u1].objective(p.objective))
        bounds = interval(_per_doubling(ratio, u1, u2), p.interval_level)
        cost, costly = _cost(s1, s2, p)
        steps.append(KneeStep(users_from=u1, users_to=u2, gain_per_doubling=None if math.isnan(point) else point,
                              gain_range=Range(low=bounds.low, high=bounds.high), cost=cost, costly=costly))
    for step in steps:
        little = step.gain_range.high is not None and step.gain_range.high < p.knee_gain_per_doubling
        if little and step.costly:
            reason = (f"the knee at K={k} is {step.users_from} users: {step.users_to} users buy "
                      f"{_gain_text(step)} {p.objective.replace('_', '/')} per doubling (below "
                      f"{pct(p.knee_gain_per_doubling)}) at a cost: {step.cost}")
            return Knee(k=k, users=step.users_from, next_users=step.users_to, steps=steps, reason=reason)
    if not steps:
        return Knee(k=k, steps=steps, reason=f"one stage only at K={k}: no ramp to judge")
    last = steps[-1]
    unsure = [s for s in steps if s.costly and s.gain_per_doubling is not None
              and s.gain_per_doubling < p.knee_gain_per_doubling]
    if unsure:
        s = unsure[0]
        reason = (f"no knee proven at K={k}: {s.users_from} -> {s.users_to} users buys {_gain_text(s)} per doubling "
                  f"at a cost ({s.cost}), but its interval reaches {pct(p.knee_gain_per_doubling)}: repeat the ramp "
                  "or lengthen its stages")
    else:
        reason = (f"no knee up to {last.users_to} users at K={k}: every doubling still buys at least "
                  f"{pct(p.knee_gain_per_doubling)} or costs no latency or KV ({last.users_from} -> {last.users_to}: "
                  f"{_gain_text(last)}; {last.cost or 'no cost measured'}); add higher stages to find it")
    return Knee(k=k, steps=steps, reason=reason)


def _gain_text(step: KneeStep) -> str:
    return (f"{pct(step.gain_per_doubling, signed=True)} [{pct(step.gain_range.low, signed=True)}, "
            f"{pct(step.gain_range.high, signed=True)}]")


def scaling_check(knee: Knee, target_users: int, p: DecisionConfig) -> Check:
    """Checklist item 4 (advice): above the target, throughput keeps growing instead of falling back at
    once; the knee's position says what the next users cost."""
    name = "concurrency scaling"
    above = [s for s in knee.steps if s.users_from >= target_users]
    if not above:
        return Check(name=name, kind="advice", status="unknown", unknown_because="not applicable",
                     evidence=f"no stage above the target ({target_users} users) at K={knee.k}: scaling not "
                              "checked; add a stage above it")
    first = above[0]
    falls = first.gain_range.high is not None and first.gain_range.high < -p.tie_tolerance_frac
    knee_text = knee.reason if knee.users is not None and knee.users >= target_users else ""
    evidence = (f"{target_users} -> {first.users_to} users: {_gain_text(first)} per doubling"
                + (f"; {first.cost}" if first.cost else "") + (f"; {knee_text}" if knee_text else ""))
    if falls:
        return Check(name=name, kind="advice", status="fail", evidence="throughput falls back above the target: "
                     + evidence)
    if first.gain_range.low is None or first.gain_range.low < -p.tie_tolerance_frac:
        return Check(name=name, kind="advice", status="unknown", unknown_because="too little data", evidence=evidence)
    return Check(name=name, kind="advice", status="pass", evidence=evidence)
