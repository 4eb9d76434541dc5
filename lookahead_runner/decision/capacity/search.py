"""The capacity search's chooser (sweep.strategy = "capacity"; run/strategies/capacity_sweep.py runs it): which rate to probe
next for which K, or why to stop, and when a probe is clearly over capacity. Pure.

Every K first runs the config's stages once; each probe after that is one rate stage in a server life of its own.
Per K, from every rate measured so far (estimate.rate_points: windows pooled per rate), as GuideLLM's goodput
profile and AIPerf's monotonic max-concurrency-under-sla search do it (bracket, then bisect):
- every rate holds (every SLO at its own percentile, keeping up; for several SLOs the points of the one that
  fails first, estimate.binding): double the highest;
- none holds: halve the lowest;
- else the bracket [the last rate that holds, the first that does not]: bisect it (its geometric middle) until
  it is sweep.capacity_precision narrow (relative), which ends that K's search. The bracket is of the rates the
  windows were offered (estimate.rate_points), the probe runs the configured rate between its ends' configured
  ones; a K whose stages are too short to tell whether it keeps up there, or whose rate between them was run and
  offered a rate outside the bracket, is left bracketed as it is. Not where a line between the
  bracket's ends crosses the target (regula falsi): the attainment falls off a cliff at capacity (all met, then a
  backlog), so such a guess sits next to the end that holds and narrows the bracket slowly; the capacity itself
  is read on that line inside the final bracket (estimate.py).
The K probed next is the unfinished one with the fewest probes (the budget spread over K), the widest bracket
first. It stops when every K's bracket is narrow enough ("decided"), before a probe would pass sweep.max_lives or
sweep.max_server_minutes ("budget"), or when no rate left in reach could narrow a bracket, or the rate a K needs
gave no valid window in MAX_FAILED_STARTS probes ("exhausted").

Above capacity an open-loop backlog grows without bound, so a probe need not run its whole stage to say it is
over: `clearly_over` reads the server's waiting queue since the warm-up (run/life/probe_watch.py) and says so once it
grows by more than OVER_SHARE of the arrivals meanwhile (the K serves under ~80 % of the rate) and beyond its own
noise (keeping_up.count_growth, the rule a window's queued count is judged by), after at least MIN_OVER_S.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..adaptive import MAX_FAILED_STARTS, Budget, Spent
from ..cells.keeping_up import QUEUE_POINTS, count_growth
from .estimate import Point, fails, holds, monotone

OVER_SHARE = 0.20      # backlog growth beyond this share of the arrivals: clearly over (achieved < ~80 % offered)
MIN_OVER_S = 2.0       # and no sooner than this many seconds past the warm-up (nor 20 % of the stage)
RATE_REACH = 64.0      # probes stay within the config's rates divided or multiplied by this


@dataclass(frozen=True)
class Probe:
    """The next probe (k None: stop, `why` says why; `stop` its kind: decided | budget | exhausted)."""

    k: int | None
    rate: float = 0.0
    why: str = ""
    stop: str = ""


@dataclass(frozen=True)
class Plan:
    """What one K's search wants next: a rate, or done (rate None) with why."""

    k: int
    rate: float | None
    why: str
    width: float        # the bracket's ratio high / low (inf: not bracketed yet)


def plan_for(k: int, points: Sequence[Point], target: float, precision: float, reach: tuple[float, float]) -> Plan:
    """The next rate to probe for K from its points (any order), or None once its bracket is narrow enough or the
    next rate would leave `reach` (lowest, highest rate allowed)."""
    points = monotone(points)
    failing = [i for i, p in enumerate(points) if fails(p, target)]
    low_reach, high_reach = reach
    if not failing:
        top = points[-1]
        rate = top.configured * 2
        return Plan(k, rate if rate <= high_reach else None,
                    f"K={k} holds the SLO at every rate measured, up to {top.x:.4g} req/s: doubling to {rate:g}"
                    if rate <= high_reach
                    else f"K={k} holds the SLO up to {top.x:.4g} req/s, as far as the search reaches", math.inf)
    j = failing[0]
    held = [i for i in range(j) if holds(points[i], target)]
    if not held:
        bottom = points[0]
        rate = bottom.configured / 2
        return Plan(k, rate if rate >= low_reach else None,
                    f"K={k} misses the SLO even at {bottom.x:.4g} req/s: halving to {rate:.3g}" if rate >= low_reach
                    else f"K={k} misses the SLO at every rate the search reaches (down to {bottom.x:.4g} req/s)",
                    math.inf)
    below, above = points[held[-1]], points[j]
    low, high = below.x, above.x
    if high / low <= 1 + precision:
        return Plan(k, None, f"K={k}: its capacity lies in [{low:.4g}, {high:.4g}] req/s, within "
                             f"{precision * 100:g}%", high / low)
    # the rates offered are measured, the configured ones run: the configured rate between the ends' (the ratio of
    # the two moves little between near rates, the same arrival draws scaled)
    ends = sorted((below.configured, above.configured))
    middle = math.sqrt(ends[0] * ends[1])
    rate = round(middle, 3)   # a readable rate, where rounding keeps it inside the bracket
    rate = rate if ends[0] < rate < ends[1] else middle
    if not ends[0] < rate < ends[1]:
        return Plan(k, None, f"K={k}: its capacity lies in [{low:.4g}, {high:.4g}] req/s, too narrow to bisect",
                    high / low)
    if done := next((p for p in points if math.isclose(p.configured, rate, rel_tol=1e-9)), None):
        # not narrowed: stuck, not done
        return Plan(k, None, f"K={k}: its capacity lies in [{low:.4g}, {high:.4g}] req/s; whether it keeps up at "
                             f"{done.x:.4g} req/s cannot be told, the stage too short for its answers (lengthen the "
                             "rate stages: see their too_short)" if done.unjudged else
                             f"K={k}: its capacity lies in [{low:.4g}, {high:.4g}] req/s; the rate between them, "
                             f"{rate:g}, was run and offered {done.x:.4g}, outside it", math.inf)
    offered = "" if below.configured == below.x and above.configured == above.x else " offered"
    return Plan(k, rate, f"K={k}: bisecting [{low:.4g}, {high:.4g}] req/s{offered} at {rate:g}", high / low)


def _given_up(k: int, plan: Plan, points: Sequence[Point], tried: Sequence[float]) -> str:
    """Why K's planned rate is not probed again: MAX_FAILED_STARTS probes there gave no valid window (a probe that
    ended early, clearly over, is a point: estimate.with_over) ("" where it may be)."""
    if plan.rate is None or any(math.isclose(p.configured, plan.rate, rel_tol=1e-9) for p in points):
        return ""
    times = sum(1 for rate in tried if math.isclose(rate, plan.rate, rel_tol=1e-9))
    if times < MAX_FAILED_STARTS:
        return ""
    return f"K={k}'s probes at {plan.rate:g} req/s gave no valid window in {times} lives (their invalid reasons say why)"


def next_probe(ks: Sequence[int], points: Mapping[int, Sequence[Point]], probes: Mapping[int, int], spent: Spent,
               budget: Budget, target: float | Mapping[int, float], precision: float, reach: tuple[float, float],
               tried: Mapping[int, Sequence[float]] | None = None, bracketed_first: bool = False,
               lives_named: str = "sweep.max_lives") -> Probe:
    """The next probe over every K (`target`: the percentile its points hold, one for all or per K; `probes`:
    probes run per K so far; `spent`: lives per K and server time; `tried`: per K, the rate of every probe run so
    far; `bracketed_first`: a K whose bracket has two ends before one that holds or misses at every rate, whatever
    their probes so far: the adaptive sweep's probes, where a bracket narrowed apart settles the verdict and a
    doubling rarely does; `lives_named`: what its budget of lives is called, in a stop)."""
    plans, done, stuck = [], [], []
    for k in ks:
        mine = points.get(k, [])
        if not mine:
            if spent.lives.get(k, 0) >= MAX_FAILED_STARTS:
                stuck.append(f"K={k} gave no valid rate window in {spent.lives[k]} lives")
                continue
            lowest = reach[0] * RATE_REACH
            plans.append(Plan(k, lowest, f"K={k}: no valid rate window yet; probing the lowest rate, {lowest:g}",
                              math.inf))
            continue
        plan = plan_for(k, mine, target[k] if isinstance(target, Mapping) else target, precision, reach)
        if given_up := _given_up(k, plan, mine, (tried or {}).get(k, [])):
            stuck.append(given_up)
        elif plan.rate is not None:
            plans.append(plan)
        else:
            (done if math.isfinite(plan.width) else stuck).append(plan.why)
    if not plans:
        if not stuck:
            return Probe(None, why="every K's capacity is bracketed: " + "; ".join(done), stop="decided")
        return Probe(None, why="no probe left could narrow a bracket: " + "; ".join(stuck + done), stop="exhausted")
    plan = min(plans, key=lambda pl: (bracketed_first and math.isinf(pl.width), probes.get(pl.k, 0), -pl.width,
                                      pl.k))
    return within(Probe(plan.k, plan.rate, plan.why), spent, budget, lives_named)


def within(probe: Probe, spent: Spent, budget: Budget, lives_named: str = "sweep.max_lives") -> Probe:
    """`probe`, or the stop where it would pass a budget (`lives_named`: what the budget of lives is called)."""
    if spent.total >= budget.max_lives:
        return Probe(None, why=f"budget: {lives_named} = {budget.max_lives} lives run (next would have been "
                               f"{probe.why})", stop="budget")
    if budget.max_server_s is not None and spent.server_s + spent.next_life_s > budget.max_server_s:
        return Probe(None, why=f"budget: another life (~{spent.next_life_s / 60:.1f} min) would pass "
                               f"sweep.max_server_minutes = {budget.max_server_s / 60:g} ({spent.server_s / 60:.1f} "
                               f"spent; next would have been {probe.why})", stop="budget")
    return probe


def clearly_over(times_s: np.ndarray, waiting: np.ndarray, rate: float, since_s: float, stage_s: float) -> str:
    """Why a probe at `rate` is clearly over capacity ("" while it is not): the server's waiting queue sampled at
    `times_s`, from `since_s` (its warm-up's end) on, grew by more than OVER_SHARE of the arrivals meanwhile (its
    least-squares gain) and beyond its own noise (keeping_up.count_growth), at least max(MIN_OVER_S, 20 % of the
    stage) in."""
    times_s, waiting = np.asarray(times_s, dtype=float), np.asarray(waiting, dtype=float)
    keep = (times_s >= since_s) & np.isfinite(waiting)
    times_s, waiting = times_s[keep], waiting[keep]
    if len(times_s) < 5 or float(np.ptp(times_s)) < max(MIN_OVER_S, 0.2 * stage_s):
        return ""
    span = float(np.ptp(times_s))
    # read at equally spaced times (each the last sample by then), no more of them than samples: repeated
    # readings of one sample would hide its noise from count_growth
    points = min(QUEUE_POINTS, len(times_s) - (1 - len(times_s) % 2))
    grid = np.linspace(times_s[0], times_s[-1], points)
    queue = count_growth(waiting[np.searchsorted(times_s, grid, side="right") - 1])
    growth = queue.gained
    if not queue.grows or not growth > OVER_SHARE * rate * span:
        return ""
    return (f"clearly over capacity at {rate:g} req/s: waiting {waiting[0]:.0f} -> {waiting[-1]:.0f} in "
            f"{span:.1f} s (served about {max(rate - growth / span, 0.0):.1f} of {rate:g} req/s): the probe ended "
            "early")
