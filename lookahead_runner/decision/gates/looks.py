"""Looks that spend the verdict's error: the share a verdict must reach at each look of a sweep that can still buy a
life, so that its stated confidence holds over all its looks together (pure).

The claim: a verdict stated at decision.confidence c, taken at any of the looks a sweep makes (the adaptive sweep
after each life, load.repeats = "auto" after each round of repeats), is wrong at most 1 - c of the time at the
worst truth (a true gain at the tie band's edge), as one look at the end would be.

The rule is an error-spending one (Lan and DeMets 1983) with the O'Brien-Fleming-type spending function
    spent(t) = 2 - 2 Phi(z_{1 - a/2} / sqrt(t)),      a = 1 - c (one-sided), t = look / at_most,
where `at_most` is the most looks the budget allows (sweep.max_lives lives, load.max_repeats repeats) and the
look's number is the lives (repeats) measured so far. Look i may stop where the one-sided test of "the leader is
not better" would be rejected with the error spent(t_i) - spent(t_{i-1}) given the looks before it: its boundary
z_i solves P(Z_1 < z_1, ..., Z_{i-1} < z_{i-1}, Z_i >= z_i) = spent(t_i) - spent(t_{i-1}) at the worst truth, the
looks' statistics jointly normal with corr(Z_i, Z_j) = sqrt(t_i / t_j) (information grows with the lives;
`boundaries` integrates that recursion numerically, Armitage, McPherson and Rowe 1969). A verdict's share is the
share of resamples its K wins, the resampled gain about the measured one: where that is normal, the share past the
tie band's edge is Phi(Z) of that test's Z, so the share bar of look i is Phi(z_i). The last look (the budget spent,
or nothing left to buy) spends all the error left (`last_bar`): 92.7 % at look 8 of at most 8 for c = 90 %,
where one look alone needs 90 %; look 5 of 8 needs 96.9 %, look 2 of 8 99.9 %. The early looks spend little, so a
look counted that could not stop (one K measured) costs the verdict almost nothing.

The intervals reported where the sweep stopped (the gain's, the restart spread's) make the same claim for
decision.interval_level L: each holds the truth in at least L of sweeps over all their looks together. A sweep
stops where the verdict reads far from the tie band's edge on a spread that reads small, so an interval formed as
one look's at L holds less (auto repeats' gain and spread intervals at 95 %: 89 % and 88.5 % of the calibration
suite's trials); formed at its look's `interval_level`, a repeated confidence interval, it holds at L whichever
look the sweep stops at (the suite's "gain (users): auto" and "restart spread: auto").
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize, stats

RULE = "error spending (O'Brien-Fleming type)"
GRID_POINTS = 801   # the score's density per look: boundaries within 1e-4 of gsDesign's (tests/unit/decision)
SCORE_SDS = 10.0    # the score's grid reaches this many of its SDs below zero


def spent(t: float, error: float) -> float:
    """The error spent by information fraction `t` (0-1): the O'Brien-Fleming-type function."""
    if t <= 0 or error <= 0:
        return 0.0
    return float(2 - 2 * stats.norm.cdf(stats.norm.ppf(1 - error / 2) / math.sqrt(min(t, 1.0))))


def boundaries(fractions: tuple[float, ...], error: float, last: bool = False) -> tuple[float, ...]:
    """The z boundary of each look at these information fractions (increasing), each spending its share of
    `error`; `last`: the final look spends all the error left, wherever it falls."""
    planned, as_last = _recursion(tuple(fractions), error)
    return planned[:-1] + as_last[-1:] if last else planned


@lru_cache(maxsize=256)
def _recursion(fractions: tuple[float, ...], error: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """One pass over the looks: each look's z boundary as planned, and as the last (all the error left spent there).
    A look's boundaries depend on the looks before it only, so every look's bar comes from the plan's one pass."""
    planned: list[float] = []
    as_last: list[float] = []
    grid = density = None
    before_t = before_spent = 0.0
    for t in fractions:
        root = math.sqrt(t)
        if grid is None:
            crossing = (lambda c: stats.norm.sf(c / root))
        else:
            sd = math.sqrt(t - before_t)
            crossing = (lambda c, g=grid, d=density, s=sd: np.trapezoid(d * stats.norm.sf((c - g) / s), g))

        def solve(target: float) -> float:
            return math.inf if target <= 0 else optimize.brentq(lambda c: crossing(c) - target, -SCORE_SDS * root,
                                                                (SCORE_SDS + 30) * root, xtol=1e-10)
        target = spent(t, error) - before_spent
        c = solve(target)
        planned.append(c / root)
        as_last.append(solve(error - before_spent) / root)
        top = c if math.isfinite(c) else SCORE_SDS * root
        points = np.linspace(-SCORE_SDS * root, top, GRID_POINTS)
        if grid is None:
            density = stats.norm.pdf(points / root) / root
        else:
            sd = math.sqrt(t - before_t)
            density = np.trapezoid(density[None, :] * stats.norm.pdf((points[:, None] - grid[None, :]) / sd) / sd,
                                   grid, axis=1)
        grid = points
        before_t, before_spent = t, before_spent + max(target, 0.0)
    return tuple(planned), tuple(as_last)


@dataclass(frozen=True)
class Looks:
    """The looks a sweep plans: from look `first` (the first where a verdict can be taken) to `at_most`, each
    numbered by the lives (or repeats) measured, judged at decision.confidence = 1 - `error` over all of them."""

    first: int
    at_most: int
    error: float
    unit: str = "lives"        # what a look counts: "lives" (the adaptive sweep) or "repeats" (load.repeats = "auto")

    def _fractions(self, look: int) -> tuple[float, ...]:
        look = min(max(look, self.first), self.at_most)
        return tuple(j / self.at_most for j in range(min(self.first, self.at_most), look + 1))

    def _z(self, look: int, last: bool) -> float:
        """`look`'s boundary from the one pass over every planned look (a look past them: the last planned)."""
        look = min(max(look, self.first), self.at_most)
        planned, as_last = _recursion(self._fractions(self.at_most), round(self.error, 12))
        return (as_last if last else planned)[look - min(self.first, self.at_most)]

    def bar(self, look: int) -> float:
        """The share a verdict needs at `look` where a life could still be bought."""
        if self.error <= 0:
            return 1.0
        return float(stats.norm.cdf(self._z(look, last=False)))

    def last_bar(self, look: int) -> float:
        """The share a verdict needs at `look` when it is the last (all the error left spent there)."""
        if self.error <= 0:
            return 1.0
        return float(stats.norm.cdf(self._z(look, last=True)))

    def interval_level(self, look: int, level: float, last: bool = False) -> float:
        """The level an interval reported at `look` is formed at so that the intervals of every planned look hold
        the truth together at `level` (decision.interval_level), whichever look the sweep stops at: a repeated
        confidence interval (Jennison and Turnbull 1989), each side at `look`'s boundary of the same spending
        function for half the interval's error. 99.9 % at look 2 of at most 5 for 95 %, 99.3 % at look 3, 95.8 %
        at look 5; a look past the plan's last takes the last's. `last`: the sweep ends at `look` (judged at
        `last_bar`), so its side spends all the error the earlier looks left, as the verdict does: `level` itself
        where `look` is the first."""
        if level >= 1:
            return level
        halves = Looks(self.first, self.at_most, (1 - level) / 2, self.unit)
        return 2 * (halves.last_bar(look) if last else halves.bar(look)) - 1

    def at(self, look: int, last: bool = False) -> "Look":
        """`look` (the lives or repeats measured, as they are: below `first` or past `at_most` too) at the bar of
        the nearest planned look."""
        return Look(look, self.at_most, self.last_bar(look) if last else self.bar(look), last, self.unit)


def expected_look(looks: "Looks", drift: float) -> float:
    """The look a sweep stops at on average (the design's average sample number) where its verdict's statistic
    drifts by `drift` at the budget's last look (its distance from the tie band's edge in standard errors of the
    gain measured on the budget's lives): each look before the last stops where the statistic, mean drift * t and
    variance t on the score scale, crosses that look's bar; the rest run to the last look."""
    fractions = looks._fractions(looks.at_most)
    z = [stats.norm.ppf(min(looks.bar(j), 1 - 1e-12)) for j in range(min(looks.first, looks.at_most), looks.at_most)]
    expected, alive = 0.0, 1.0
    grid = density = None
    before_t = 0.0
    for number, t, bound in zip(range(looks.first, looks.at_most), fractions, z):
        c, dt = bound * math.sqrt(t), t - before_t
        if grid is None:
            crossing = stats.norm.sf((c - drift * t) / math.sqrt(t))
            points = np.linspace(drift * t - SCORE_SDS * math.sqrt(t), c, GRID_POINTS)
            density = stats.norm.pdf((points - drift * t) / math.sqrt(t)) / math.sqrt(t)
        else:
            sd = math.sqrt(dt)
            crossing = float(np.trapezoid(density * stats.norm.sf((c - grid - drift * dt) / sd), grid))
            points = np.linspace(drift * t - SCORE_SDS * math.sqrt(t), c, GRID_POINTS)
            density = np.trapezoid(density[None, :] * stats.norm.pdf((points[:, None] - grid[None, :] - drift * dt)
                                                                     / sd) / sd, grid, axis=1)
        grid, before_t = points, t
        expected += number * crossing
        alive -= crossing
    return expected + looks.at_most * max(alive, 0.0)


@dataclass(frozen=True)
class Look:
    """One look: its number, the most there can be, the share its verdict needs, and whether it is the last."""

    number: int
    at_most: int
    bar: float
    last: bool = False
    unit: str = "lives"

    def text(self) -> str:
        """e.g. "look 3 of at most 6: boundary 97.1 %"."""
        return f"look {self.number} of at most {self.at_most}: boundary {self.bar * 100:.1f} %"
