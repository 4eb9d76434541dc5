"""Which of the K that pass every gate at an arrival rate to set (decision/rate_decision.py; rules.pick is the
users verdict's): the claim is that the K are told apart by what the data show of their throughput and latency at
that rate, never by a flat figure.

At one rate every K that keeps up serves the offered rate, so its goodput there is the rate itself until one K
saturates: it cannot tell K apart below capacity. The method's throughput at a rate is the capacity within the
SLO, the headroom at the user's rate; after it, the latency at the rate. Among the K no gate fails:
1. capacity within the SLO: a K the data place beyond another by more than the tie band (it holds a rate more than
   decision.tie_tolerance_frac above one where the other does not: their brackets apart) puts the other out.
   Brackets that touch or overlap tell nothing: nothing between two rates was measured (capacity/estimate.py);
2. latency at the rate: among the rest, the lowest e2e at decision.latency_percentile, those within the tie band of
   it kept (without an SLO there is no capacity, and this step is the whole rule);
3. the smallest K of those.
The pick stands only where the capacity cannot set another K over it (`open`: a K whose bracket leaves room for a
capacity beyond the pick's by more than the tie band, `could_exceed`): before this rule, with two K in one
bracket, the latency's K was named wrong in 25.0 % (K=0) and 18.0 % (K=4) of trials with the truth just past the
tie band's edge, at a stated 10 % (benchmarks/calibration's "rate-capacity", 2026-12-06). Where neither fails at
any rate measured, their capacities beyond it are not compared (the verdict is about the rates measured, and says
so): the latency decides between them.
`decided_by` says what set the pick apart from the smaller K: "capacity" or "latency" where a smaller K passed every
gate and that step put it out, "gates" where every smaller K failed a gate, "tie" where the pick is the smallest
K measured (nothing beat it). Each resample applies the same rule to its drawn figures. Pure.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

@dataclass(frozen=True)
class Standing:
    """One K at the rate as the rule reads it: its capacity bracket within the SLO (`holds`, the highest rate it
    holds, -inf where none measured does; `fails`, the lowest it does not, +inf where none does) and its speed
    there (1000 / e2e at decision.latency_percentile in ms: higher is faster; NaN where nothing succeeded)."""

    k: int
    holds: float = -math.inf
    fails: float = math.inf
    speed: float = math.nan


def more_capacity(a: Standing, b: Standing, tie: float) -> bool:
    """`a` holds a rate more than the tie band above one at which `b` does not."""
    return a.holds > b.fails * (1 + tie)


def could_exceed(a: Standing, b: Standing, tie: float) -> bool:
    """The brackets leave room for `a`'s capacity beyond `b`'s by more than the tie band (`a` fails nowhere at or
    below the tie band over the highest rate `b` holds); False where neither fails at any rate measured."""
    if math.isinf(a.fails) and math.isinf(b.fails):
        return False
    return a.fails > b.holds * (1 + tie)


@dataclass(frozen=True)
class Ranked:
    """The pick (None: no K passes), what set it apart ("capacity", "latency", "gates", "tie"; "" without a pick),
    and the K whose capacity could still set them over it (`open`: the pick does not stand where any is)."""

    pick: int | None
    decided_by: str = ""
    open: tuple[int, ...] = ()

    @property
    def standing(self) -> int | None:
        """The pick where it stands (a resample's winner), else None."""
        return None if self.open else self.pick


def rank(standings: Mapping[int, Standing], eligible: Iterable[int], tie: float) -> Ranked:
    """The K to set among `eligible` (those no gate fails), by the module's rule."""
    pool = [standings[k] for k in sorted(set(eligible))]
    if not pool:
        return Ranked(None)
    kept = [s for s in pool if not any(more_capacity(other, s, tie) for other in pool)]
    speeds = [s.speed for s in kept if math.isfinite(s.speed)]
    if speeds:
        fastest = max(speeds)
        kept = [s for s in kept if math.isfinite(s.speed) and s.speed >= fastest / (1 + tie)]
    pick = kept[0].k
    open_ = tuple(s.k for s in pool if s.k != pick and could_exceed(s, standings[pick], tie))
    smaller = [s for s in pool if s.k < pick]
    if not smaller:
        return Ranked(pick, "tie" if pick == min(standings) else "gates", open_)
    out_by_capacity = any(more_capacity(other, s, tie) for s in smaller for other in pool)
    return Ranked(pick, "capacity" if out_by_capacity else "latency", open_)
