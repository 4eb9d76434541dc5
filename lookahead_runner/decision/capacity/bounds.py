"""The high end of a capacity's interval within the SLO: the lowest load the data show it fails at, by test inversion.

Claim: with the attainment non-increasing in the load, the capacity C (the first load at which the attainment falls
below the target) is at or below U with probability at least 1 - (1 - level) / 2, U the lowest load measured that
falls behind or whose attainment's interval lies wholly below the target (every load above it misses too). Each
point's interval is Wilson's on its arrivals over their design effect (cells/arrival_correlation.py) at a level that
splits that error over every point and SLO tested (Bonferroni): U lands below C only where a point below C, whose
true attainment reaches the target, reads as failing beyond doubt.
Why this end needs it: a bootstrap of the crossing (each point's attainment drawn around what it read, the first
load that fails in the draw ending the range) takes the first of many chances to fail. Where several loads sit near
the target, as a capacity search's probes do by design, one of them reads below it by chance in most draws, and the
crossing was drawn there every time (benchmarks/calibration: 78 % of 399 capacity searches held the truth at a
stated 95 %, the truth above the interval in 33 of 37 misses). The same first failure only lowers the draws' low
end (the last load holding before it), so that end stays the draws' (capacity/estimate.py) and errs low. A high end
no load settles is unbounded.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from ..cells.arrival_correlation import Effective
from ..cells.stats import wilson


class Measured(Protocol):
    """One load's figures (estimate.Point)."""

    x: float
    good: int
    n: int
    behind: bool
    design_effect: float
    df: float


def point_level(level: float, tests: int) -> float:
    """Each point's interval level where `tests` points (and SLOs) share an error of 1 - level."""
    return 1 - (1 - level) / max(tests, 1)


def fails_beyond_doubt(point: Measured, target: float, level: float) -> bool:
    """It falls behind, or its attainment's interval at `level` lies below the target."""
    if point.behind:
        return True
    if point.n <= 0:
        return False
    deff = Effective(point.n, point.n / point.design_effect, point.df).design_effect_at(level)
    return wilson(point.good, point.n, level, deff).high < target


def lowest_failing(points: Sequence[Measured], target: float, level: float, tests: int | None = None) -> float:
    """U of the module's docstring for one SLO's points (`tests`: the points tested with the other SLOs', default
    these); +inf where no point fails beyond doubt."""
    each = point_level(level, len(points) if tests is None else tests)
    return min((p.x for p in points if fails_beyond_doubt(p, target, each)), default=math.inf)
