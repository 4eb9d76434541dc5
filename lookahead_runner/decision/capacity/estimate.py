"""Capacity within the SLO per K: the highest arrival rate (open loop) and the highest concurrency (closed loop)
at which the share of requests meeting every SLO of decision.slo stays at decision.slo_attainment.

The field's definition: AIPerf's max-concurrency-under-sla / max-goodput-under-slo recipes and GuideLLM's goodput
profile take the largest load whose requests meet every threshold for at least the target share (DistServe's
attainment), found between the highest load that passes and the lowest that fails. Here the loads are the
stages (and the capacity search's probes, run/capacity_sweep.py, each a rate stage): per K, the measured points
sorted by load, their attainments made non-increasing in the load (pool adjacent violators weighed by their
requests, as AIPerf's smooth-isotonic search denoises: the attainment falls as the load rises, so a point reading
higher than the one below it is noise, pooled with it); the first one that does not hold ends the range. A rate
point does not hold when its attainment is below the target or the K falls behind there (its backlog grows:
decision/cells/rate_window.py); a users point when its attainment (requests meeting every SLO over those
finished, failures included) is below the target.

- The estimate: between the last point that holds and the first that does not, where the attainment crosses the
  target on the line between them, kept inside the bracket's middle half (in log): at capacity the attainment
  often falls off a cliff (all met, then a backlog), where the line would sit on the end that holds; the middle
  of the bracket (geometric: rates and users double) where the failing point fails by falling behind alone (its
  attainment still at the target: a backlog only starting).
- Its interval: the same rule on attainments drawn from each point's Jeffreys posterior (Beta(good + 1/2,
  missed + 1/2), which, unlike a bootstrap, knows that 200 of 200 met is not proof of 99 %; both counts over the
  point's design effect, cells/stats.py: arrivals behind one queue miss together), the crossing drawn
  uniformly (in log) inside the bracket each draw lands in: nothing between two loads was measured, so the
  interval is never narrower than the bracket (the capacity search narrows it). A draw whose first point fails is
  below every load measured, one whose every point holds above them: such a side is unbounded when more than its
  tail of draws lands there.
- Without a user stage the concurrency is Little's law at the rate capacity: requests in the system (arrival rate
  x mean time in it), read from the bracketing windows.
Pure numpy: the windows in, `Capacity` rows out; run/rate_verdict.py reads them from a run folder.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ...config import DecisionConfig
from ..cells.evidence import LATENCY_COLUMNS, Evidence
from ..cells.rate_window import RateWindow, met_every_slo
from ..cells.stats import design_effect
from ..schema import Capacity, Range

E2E = LATENCY_COLUMNS.index("e2e_ms")
DRAWS = 2000


@dataclass(frozen=True)
class Point:
    """One load of one K, its windows pooled: `good` of `n` met every SLO; `behind`: the K fell behind there."""

    x: float
    good: int
    n: int
    behind: bool = False
    in_system: float = math.nan      # mean requests in the system (Little's L), rate points only
    design_effect: float = 1.0       # arrivals per independent one (cells/stats.py), rate points only
    smoothed: float | None = None    # the attainment made non-increasing over the loads (`monotone`)

    @property
    def attainment(self) -> float:
        """As measured, or as `monotone` fitted it."""
        if self.smoothed is not None:
            return self.smoothed
        return self.good / self.n if self.n else math.nan


@dataclass(frozen=True)
class Crossing:
    """Where a K's attainment leaves the target: its estimate and interval (None: unbounded on that side), the
    bracket it lies in (None where the first point failed or none did)."""

    value: float | None
    low: float | None
    high: float | None
    bracket: tuple[float | None, float | None]
    measured: tuple[float, float] = (math.nan, math.nan)   # the lowest and highest load measured

    def text(self, unit: str, digits: int = 1) -> str:
        """"14.2 req/s [13.6, 14.9]", "> 24 req/s" (every load measured holds), "< 4 req/s" (none does); an
        unbounded end of the interval: "[below 8 (the lowest measured), 14.9]"."""
        lo, hi = self.bracket
        if self.value is None:
            return f"> {lo:g} {unit}" if hi is None else f"< {hi:g} {unit}"
        low = f"below {self.measured[0]:g} (the lowest measured)" if self.low is None else f"{self.low:.{digits}f}"
        high = f"beyond {self.measured[1]:g} (the highest measured)" if self.high is None \
            else f"{self.high:.{digits}f}"
        return f"{self.value:.{digits}f} {unit} [{low}, {high}]"


def holds(point: Point, target: float) -> bool:
    return not point.behind and point.n > 0 and point.attainment >= target


def non_increasing(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The weighted least-squares non-increasing fit of `values` (pool adjacent violators): a point that reads
    higher than the one below it is pooled with it, weighed by its arrivals."""
    blocks: list[list[float]] = []   # [weighted mean, weight, count]
    for value, weight in zip(values.tolist(), weights.tolist()):
        blocks.append([value, weight, 1])
        while len(blocks) > 1 and blocks[-2][0] < blocks[-1][0]:
            (v2, w2, c2), (v1, w1, c1) = blocks.pop(), blocks.pop()
            total = w1 + w2
            blocks.append([(v1 * w1 + v2 * w2) / total if total else (v1 + v2) / 2, total, c1 + c2])
    return np.array([v for v, _, count in blocks for _ in range(count)], dtype=float)


def monotone(points: Sequence[Point]) -> list[Point]:
    """The points with data, sorted by load, each attainment made non-increasing (`non_increasing`)."""
    points = sorted((p for p in points if p.n > 0), key=lambda p: p.x)
    n = np.array([p.n for p in points], dtype=float)
    fitted = non_increasing(np.array([p.attainment for p in points]), n)
    return [replace(p, smoothed=float(a)) for p, a in zip(points, fitted)]


def _first_failing(xs: np.ndarray, attained: np.ndarray, behind: np.ndarray, target: float) -> int | None:
    failing = np.flatnonzero(behind | ~(attained >= target))
    return int(failing[0]) if len(failing) else None


def _cross(xs: np.ndarray, attained: np.ndarray, behind: np.ndarray, target: float,
           middle: float | None = None) -> float:
    """The crossing on one set of attainments: -inf below every load, +inf above them. `middle` in [0, 1] places
    it in its bracket (geometric); None: where the attainment crosses the target on the line between the bracket's
    ends, or the bracket's geometric middle where its failing end fails by falling behind alone."""
    j = _first_failing(xs, attained, behind, target)
    if j is None:
        return math.inf
    if j == 0:
        return -math.inf
    lo, hi = float(xs[j - 1]), float(xs[j])
    if middle is None and attained[j] < target < attained[j - 1] and lo > 0:
        line = lo + (attained[j - 1] - target) / (attained[j - 1] - attained[j]) * (hi - lo)
        return min(max(line, lo * (hi / lo) ** 0.25), lo * (hi / lo) ** 0.75)
    middle = 0.5 if middle is None else middle
    return lo * (hi / lo) ** middle if lo > 0 else lo + (hi - lo) * middle


def crossing(points: Sequence[Point], target: float, level: float, rng: np.random.Generator,
             draws: int = DRAWS) -> Crossing | None:
    """Where the attainment of `points` (any order; one per load) leaves `target` (None without a point)."""
    points = monotone(points)
    if not points:
        return None
    xs = np.array([p.x for p in points], dtype=float)
    good = np.array([p.good for p in points], dtype=float)
    n = np.array([p.n for p in points], dtype=float)
    deff = np.array([p.design_effect for p in points], dtype=float)
    behind = np.array([p.behind for p in points], dtype=bool)
    attained = np.array([p.attainment for p in points])
    j = _first_failing(xs, attained, behind, target)
    bracket = (None if j == 0 else float(xs[j - 1] if j is not None else xs[-1]),
               None if j is None else float(xs[j]))
    value = _cross(xs, attained, behind, target)
    drawn_attainment = rng.beta(good / deff + 0.5, (n - good) / deff + 0.5, size=(draws, len(points)))
    drawn_attainment = np.array([non_increasing(row, n) for row in drawn_attainment])
    middles = rng.uniform(size=draws)
    drawn = np.array([_cross(xs, drawn_attainment[d], behind, target, middles[d]) for d in range(draws)])
    tail = (1 - level) / 2
    # order statistics, never interpolated: between a finite draw and an unbounded one lies no rate
    low = float(np.quantile(drawn, tail, method="lower"))
    high = float(np.quantile(drawn, 1 - tail, method="higher"))
    return Crossing(value if math.isfinite(value) else None, low if math.isfinite(low) else None,
                    high if math.isfinite(high) else None, bracket, (float(xs[0]), float(xs[-1])))


def rate_points(windows: Iterable[RateWindow]) -> dict[int, list[Point]]:
    """Per K, one point per rate measured: its valid windows pooled (behind where any of them fell behind)."""
    pooled: dict[tuple[int, float], list[RateWindow]] = {}
    for w in windows:
        if w.valid and w.has_slo and w.arrivals:
            pooled.setdefault((w.k, round(w.rate, 9)), []).append(w)
    out: dict[int, list[Point]] = {}
    for (k, rate), ws in sorted(pooled.items()):
        duration = sum(w.duration_s for w in ws)
        in_system = sum(float(np.nansum(w.latency_ms[w.ok, E2E])) / 1000.0 for w in ws) / duration \
            if duration > 0 else math.nan
        out.setdefault(k, []).append(Point(rate, sum(int(w.good.sum()) for w in ws), sum(w.arrivals for w in ws),
                                           any(not w.keeps_up for w in ws), in_system,
                                           design_effect([w.good for w in ws])))
    return out


def with_over(points: Mapping[int, Sequence[Point]], over: Mapping[int, Sequence[float]]) -> dict[int, list[Point]]:
    """`points` with a failing point (fell behind) at each rate a capacity probe ended early at, clearly over
    capacity (`over`: per K), where no valid window measured that rate: a probe cut short at a low rate holds too
    few arrivals for a valid window, and without its point the search would probe that rate again and again."""
    out = {k: list(ps) for k, ps in points.items()}
    for k, rates in over.items():
        for rate in rates:
            if not any(math.isclose(p.x, rate, rel_tol=1e-9) for p in out.get(k, [])):
                out.setdefault(k, []).append(Point(rate, 0, 1, behind=True))
    return out


def user_points(evidence: Evidence, p: DecisionConfig) -> dict[int, list[Point]]:
    """Per K, one point per users stage: requests meeting every SLO over those finished (failures count against)."""
    out: dict[int, list[Point]] = {}
    for (k, users), cell in sorted(evidence.cells.items()):
        good = sum(int(met_every_slo(w.latency_ms, np.ones(w.completed, dtype=bool), p.slos).sum())
                   for w in cell.windows)
        out.setdefault(k, []).append(Point(float(users), good, sum(w.finished for w in cell.windows)))
    return out


def littles_users(points: Sequence[Point], rate: float | None) -> float | None:
    """Requests in the system at the rate capacity (Little's law), read between the windows around it."""
    known = sorted((p for p in points if math.isfinite(p.in_system) and not p.behind), key=lambda p: p.x)
    if rate is None or not known:
        return None
    xs = [p.x for p in known]
    return float(np.interp(rate, xs, [p.in_system for p in known]))


def _range(crossing_: Crossing | None) -> Range:
    return Range() if crossing_ is None else Range(low=crossing_.low, high=crossing_.high)


def capacities(windows: Sequence[RateWindow], evidence: Evidence | None, p: DecisionConfig, variant: str = "",
               probes: dict[int, int] | None = None, over: Mapping[int, Sequence[float]] | None = None
               ) -> list[Capacity]:
    """Each K's capacity within the SLO (no rows without an SLO: there is nothing to hold). `probes`: per K, the
    capacity search's probes among the windows; `over`: per K, the rates its probes ended early at (`with_over`)."""
    if not p.slos:
        return []
    rng = np.random.default_rng([p.seed, 37])
    by_rate = with_over(rate_points(w for w in windows if w.variant == variant), over or {})
    by_users = user_points(evidence, p) if evidence is not None else {}
    rows = []
    for k in sorted(set(by_rate) | set(by_users)):
        rate = crossing(by_rate.get(k, []), p.slo_attainment, p.interval_level, rng)
        users = crossing(by_users.get(k, []), p.slo_attainment, p.interval_level, rng)
        little = littles_users(by_rate.get(k, []), rate.value) if users is None and rate is not None else None
        probed = (probes or {}).get(k, 0)
        rows.append(Capacity(
            variant=variant, k=k, rate=None if rate is None else rate.value, rate_range=_range(rate),
            rate_bracket=list(rate.bracket) if rate is not None else [],
            rate_from=("" if rate is None else f"{len(by_rate[k])} rates" + (f" ({probed} probed)" if probed else "")),
            users=users.value if users is not None else little, users_range=_range(users),
            users_bracket=list(users.bracket) if users is not None else [],
            users_from="user stages" if users is not None else "Little's law" if little is not None else "",
            rate_text="" if rate is None else rate.text("req/s"),
            users_text=("" if users is None and little is None else users.text("users", 0) if users is not None
                        else f"~{little:.0f} users")))
    base = rows[0] if rows else None
    for row in rows:
        if base is not None and row is not base and row.rate is not None and base.rate:
            row.gain = row.rate / base.rate - 1
        row.text = capacity_text(row)
    return rows


def capacity_text(row: Capacity) -> str:
    """"K=4 19.0 req/s [18.1, 19.8] / 64 users [58, 70] (+34 %)"."""
    little = " (Little's law)" if row.users_from == "Little's law" else ""
    parts = [part for part in (row.rate_text, row.users_text + little if row.users_text else "") if part]
    gain = f" ({row.gain:+.0%})" if row.gain is not None else ""
    return f"K={row.k} " + (" / ".join(parts) or "not measured") + gain


def holds_at(row: Capacity, rate: float) -> bool | None:
    """Whether a capacity row says its K holds the SLO at `rate`: True below its interval, False above it, None
    inside it or where it was not bracketed that far."""
    low, high = row.rate_range.low, row.rate_range.high
    lo, hi = (row.rate_bracket + [None, None])[:2]
    if (low is not None and rate < low) or (row.rate is None and lo is not None and hi is None and rate <= lo):
        return True
    if (high is not None and rate > high) or (row.rate is None and hi is not None and lo is None and rate >= hi):
        return False
    return None
