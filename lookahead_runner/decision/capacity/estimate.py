"""Capacity within the SLO per K: the highest arrival rate (open loop) and the highest concurrency (closed loop)
at which every SLO of decision.slo holds its own percentile (`ttft_p90_ms = 500`: 90 % of the requests within
500 ms, cells/slo_attainment.py, as the verdicts read it); below, "the attainment" and "the target" are one SLO's
share met and its percentile, and the first load at which any SLO fails ends the range (`slo_crossing`).

The field's definition: AIPerf's max-concurrency-under-sla / max-goodput-under-slo recipes and GuideLLM's goodput
profile take the largest load whose requests meet every threshold for at least the target share (DistServe's
attainment), found between the highest load that passes and the lowest that fails. Here the loads are the
stages (and the capacity search's probes, run/strategies/capacity_sweep.py, each a rate stage): per K, the measured points
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
- Its interval: from the lower tail of drawn brackets' low ends (each point's attainment drawn from its Jeffreys
  posterior, Beta(good + 1/2, missed + 1/2) on its counts over its design effect, cells/arrival_correlation.py:
  200 of 200 met is no proof of 99 %; made non-increasing; each draw's [last load that holds, first that does
  not]) to the lowest load that fails beyond doubt, by test inversion (bounds.py says why that end is not the
  draws'); an end no data settle is unbounded. Nothing between two loads was measured, so the interval is never
  narrower than the bracket, and holds the truth at its level wherever the truth sits in it.
- Without a user stage no users capacity is measured; what is stated instead is Little's law at the rate capacity:
  the open loop's requests in flight there (arrival rate x mean time in the system), read from the bracketing
  windows, named as such. It is not the users a closed loop holds within the SLO (a closed loop of U users at or
  under the server's slots never waits): measured against that, it sits below it most of the time
  (benchmarks/calibration's users group).
Pure numpy: the windows in, `Capacity` rows out; run/verdict/rate_verdict.py reads them from a run folder.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ...config import DecisionConfig
from ..cells.evidence import LATENCY_COLUMNS, Evidence
from ..cells.rate_window import RateWindow, effective_arrivals, windows_behind, windows_too_short
from ..cells.slo_attainment import meets as slo_meets
from ..schema import Capacity, Range
from .bounds import lowest_failing

E2E = LATENCY_COLUMNS.index("e2e_ms")
DRAWS = 2000


@dataclass(frozen=True)
class Point:
    """One load of one K, its windows pooled: `good` of `n` met every SLO; `behind`: the K fell behind there;
    `unjudged`: whether it kept up could not be told (every window there a stage too short for its answers), so the
    point holds nothing, and fails only where its attainment does."""

    x: float
    good: int
    n: int
    behind: bool = False
    in_system: float = math.nan      # mean requests in the system (Little's L), rate points only
    design_effect: float = 1.0       # arrivals per independent one (cells/arrival_correlation.py), rate points only
    smoothed: float | None = None    # the attainment made non-increasing over the loads (`monotone`)
    unjudged: bool = False
    rate: float = math.nan           # a rate point: the configured rate its windows ran (x: what they offered)
    df: float = math.inf             # degrees of freedom of its independent count (Student's t on it)

    @property
    def configured(self) -> float:
        """The load the config asked for: a rate point's configured rate, else x."""
        return self.x if math.isnan(self.rate) else self.rate

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
        unbounded end of the interval: "[below 8 (the lowest measured), 14.9]"; "not told: ..." where no load
        measured holds or fails."""
        lo, hi = self.bracket
        if lo is None and hi is None:
            return "not told: no load measured holds or fails (keeping up not judged, its stages too short)"
        if self.value is None:
            return f"> {lo:.3g} {unit}" if hi is None else f"< {hi:.3g} {unit}"
        low = f"below {self.measured[0]:.3g} (the lowest measured)" if self.low is None else f"{self.low:.{digits}f}"
        high = f"beyond {self.measured[1]:.3g} (the highest measured)" if self.high is None \
            else f"{self.high:.{digits}f}"
        return f"{self.value:.{digits}f} {unit} [{low}, {high}]"


def holds(point: Point, target: float) -> bool:
    return not point.behind and not point.unjudged and point.n > 0 and point.attainment >= target


def fails(point: Point, target: float) -> bool:
    """The K fell behind there, or its attainment is below the target (an unjudged point whose attainment holds
    neither holds nor fails)."""
    return point.behind or not point.attainment >= target


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


def _ends(attained: np.ndarray, behind: np.ndarray, unjudged: np.ndarray, target: float
          ) -> tuple[int | None, int | None]:
    """The bracket's ends as indexes of the loads (sorted): the last that holds below the first that fails (None:
    none holds there) and that first failing one (None: none fails). An unjudged load is neither."""
    failing = np.flatnonzero(behind | ~(attained >= target))
    j = int(failing[0]) if len(failing) else None
    holding = np.flatnonzero(~unjudged[:j])
    return (int(holding[-1]) if len(holding) else None), j


def _cross(xs: np.ndarray, attained: np.ndarray, behind: np.ndarray, target: float,
           unjudged: np.ndarray | None = None) -> float:
    """The estimate on one set of attainments: -inf below every load that holds, +inf above them; else where the
    attainment crosses the target on the line between the bracket's ends, kept in its middle half, or the bracket's
    geometric middle where its failing end fails by falling behind alone."""
    i, j = _ends(attained, behind, np.zeros(len(xs), dtype=bool) if unjudged is None else unjudged, target)
    if j is None:
        return math.inf
    if i is None:
        return -math.inf
    lo, hi = float(xs[i]), float(xs[j])
    if attained[j] < target < attained[i] and lo > 0:
        line = lo + (attained[i] - target) / (attained[i] - attained[j]) * (hi - lo)
        return min(max(line, lo * (hi / lo) ** 0.25), lo * (hi / lo) ** 0.75)
    return math.sqrt(lo * hi) if lo > 0 else (lo + hi) / 2


def _bracket(xs: np.ndarray, attained: np.ndarray, behind: np.ndarray, target: float,
             unjudged: np.ndarray | None = None) -> tuple[float, float]:
    """[the last load that holds, the first that does not] on one set of attainments (-inf: none holds below it;
    +inf: none fails)."""
    i, j = _ends(attained, behind, np.zeros(len(xs), dtype=bool) if unjudged is None else unjudged, target)
    return (-math.inf if i is None else float(xs[i])), (math.inf if j is None else float(xs[j]))


def _arrays(points: Sequence[Point]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The loads, attainments, behind and unjudged flags of points already sorted (`monotone`)."""
    return (np.array([p.x for p in points], dtype=float), np.array([p.attainment for p in points], dtype=float),
            np.array([p.behind for p in points], dtype=bool), np.array([p.unjudged for p in points], dtype=bool))


def measured_bracket(points: Sequence[Point], target: float) -> tuple[float, float]:
    """The bracket of the points as measured (their attainments made non-increasing): -inf / +inf where unbounded,
    both where there is no point."""
    points = monotone(points)
    if not points:
        return -math.inf, math.inf
    xs, attained, behind, unjudged = _arrays(points)
    return _bracket(xs, attained, behind, target, unjudged)


def drawn_brackets(points: Sequence[Point], target: float, rng: np.random.Generator,
                   draws: int = DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """The bracket of each of `draws` draws of the points' attainments (each from its Jeffreys posterior on its
    arrivals over their design effect, made non-increasing): its low ends and its high ends, -inf / +inf where
    unbounded. Where the capacity lies as far as the data tell, draw by draw (the interval, and the verdict at a
    rate comparing two K's)."""
    points = monotone(points)
    if not points:
        return np.full(draws, -math.inf), np.full(draws, math.inf)
    xs, _, behind, unjudged = _arrays(points)
    good = np.array([p.good for p in points], dtype=float)
    n = np.array([p.n for p in points], dtype=float)
    deff = np.array([p.design_effect for p in points], dtype=float)
    drawn_attainment = rng.beta(good / deff + 0.5, (n - good) / deff + 0.5, size=(draws, len(points)))
    ends = np.array([_bracket(xs, non_increasing(row, n), behind, target, unjudged) for row in drawn_attainment])
    return ends[:, 0], ends[:, 1]


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _found(value: float, confident: tuple[float, float], bracket: tuple[float, float], xs: Sequence[float]
           ) -> Crossing:
    """The Crossing of an estimate, its interval (the draws' low end, bounds.lowest_failing's high end; never
    narrower than the bracket measured: each end a load measured, or unbounded) and the bracket."""
    (low, high), (lo, hi) = confident, bracket
    return Crossing(_finite(value), _finite(min(low, lo)), _finite(max(high, hi)), (_finite(lo), _finite(hi)),
                    (float(min(xs)), float(max(xs))))


def _low_end(drawn_low: np.ndarray, level: float) -> float:
    """The lower tail of the drawn brackets' low ends: an order statistic, never interpolated (a load measured, or
    -inf)."""
    return float(np.quantile(drawn_low, (1 - level) / 2, method="lower"))


def crossing(points: Sequence[Point], target: float, level: float, rng: np.random.Generator,
             draws: int = DRAWS) -> Crossing | None:
    """Where the attainment of `points` (any order; one per load) leaves `target` (None without a point)."""
    points = monotone(points)
    if not points:
        return None
    xs, attained, behind, unjudged = _arrays(points)
    low = _low_end(drawn_brackets(points, target, rng, draws)[0], level)
    return _found(_cross(xs, attained, behind, target, unjudged), (low, lowest_failing(points, target, level)),
                  measured_bracket(points, target), xs)


def rate_points(windows: Iterable[RateWindow], slo: int | None = None) -> dict[int, list[Point]]:
    """Per K, one point per rate measured: its valid windows pooled (behind where they fall behind judged pooled,
    rate_window.windows_behind; unjudged where every one was a stage too short to tell), placed at the rate they
    were offered (their arrivals per second of window: one draw of Poisson arrivals offers a 30 s window some 6 %
    more or fewer than configured, and the K held what it was offered), the configured rate kept beside it; `good`
    its arrivals meeting SLO number `slo` of decision.slo (from their scheduled arrival), or every SLO (None); its
    design effect and degrees of freedom rate_window.effective_arrivals' for that share."""
    pooled: dict[tuple[int, float], list[RateWindow]] = {}
    for w in windows:
        if w.valid and w.has_slo and w.arrivals:
            pooled.setdefault((w.k, round(w.rate, 9)), []).append(w)
    out: dict[int, list[Point]] = {}
    for (k, rate), ws in sorted(pooled.items()):
        duration = sum(w.duration_s for w in ws)
        in_system = sum(float(np.nansum(w.latency_ms[w.ok, E2E])) / 1000.0 for w in ws) / duration \
            if duration > 0 else math.nan
        met = [w.good if slo is None else w.met(slo) for w in ws]
        arrivals = sum(w.arrivals for w in ws)
        offered = round(arrivals / duration, 6) if duration > 0 else rate
        effective = effective_arrivals(ws, slo)
        out.setdefault(k, []).append(Point(offered, sum(int(m.sum()) for m in met), arrivals,
                                           windows_behind(ws), in_system, effective.design_effect,
                                           unjudged=bool(windows_too_short(ws)), rate=rate, df=effective.df))
    return out


def slo_rate_points(windows: Iterable[RateWindow], p: DecisionConfig,
                    over: Mapping[int, Sequence[float]] | None = None) -> list[tuple[float, dict[int, list[Point]]]]:
    """Each SLO of decision.slo: its percentile, and per K its rate points (`rate_points`, with a failing point at
    each rate a probe ended early at: `with_over`)."""
    windows = list(windows)
    return [(slo.share, with_over(rate_points(windows, i), over or {})) for i, slo in enumerate(p.slos)]


def of_k(per_slo: Sequence[tuple[float, Mapping[int, Sequence[Point]]]], k: int) -> list[tuple[float, list[Point]]]:
    """One K's points of each SLO, with its percentile."""
    return [(share, list(points.get(k, []))) for share, points in per_slo]


def slo_brackets(per_slo: Sequence[tuple[float, Sequence[Point]]], rng: np.random.Generator,
                 draws: int = DRAWS) -> tuple[np.ndarray, np.ndarray]:
    """`drawn_brackets` of every SLO at its percentile (one K's points of each: the same loads), draw by draw the
    lowest: the first load at which one SLO fails ends the range where every SLO holds. One SLO: its own."""
    ends = [drawn_brackets(points, share, rng, draws) for share, points in per_slo]
    return np.min([low for low, _ in ends], axis=0), np.min([high for _, high in ends], axis=0)


def slo_crossing(per_slo: Sequence[tuple[float, Sequence[Point]]], level: float, rng: np.random.Generator,
                 draws: int = DRAWS) -> Crossing | None:
    """`crossing` of every SLO at its own percentile (one K's points of each, over the same loads): the lowest
    estimate and bracket, the low end from the draws' lowest brackets (`slo_brackets`), the high end the lowest
    SLO's, each SLO's points tested with the others' (bounds.py). One SLO: `crossing`."""
    found = [(share, monotone(points)) for share, points in per_slo]
    found = [(share, points) for share, points in found if points]
    if not found:
        return None
    if len(found) == 1:
        return crossing(found[0][1], found[0][0], level, rng, draws)

    def estimate(share: float, points: list[Point]) -> float:
        xs, attained, behind, unjudged = _arrays(points)
        return _cross(xs, attained, behind, share, unjudged)

    value = min(estimate(share, points) for share, points in found)
    ends = [measured_bracket(points, share) for share, points in found]
    tests = sum(len(points) for _, points in found)
    high = min(lowest_failing(points, share, level, tests) for share, points in found)
    return _found(value, (_low_end(slo_brackets(found, rng, draws)[0], level), high),
                  (min(end[0] for end in ends), min(end[1] for end in ends)),
                  [pt.x for _, points in found for pt in points])


def binding(per_slo: Sequence[tuple[float, Sequence[Point]]]) -> tuple[list[Point], float]:
    """One K's points and percentile of the SLO that fails first as the load rises (as measured): its bracket is
    the bracket of every SLO (the capacity search bisects it)."""
    share, points = min(per_slo, key=lambda item: measured_bracket(item[1], item[0])[1])
    return list(points), share


def with_over(points: Mapping[int, Sequence[Point]], over: Mapping[int, Sequence[float]]) -> dict[int, list[Point]]:
    """`points` with a failing point (fell behind) at each rate a capacity probe ended early at, clearly over
    capacity (`over`: per K), where no valid window measured that rate (placed at the configured rate: no window
    says what it offered): a probe cut short at a low rate holds too few arrivals for a valid window, and without
    its point the search would probe that rate again and again."""
    out = {k: list(ps) for k, ps in points.items()}
    for k, rates in over.items():
        for rate in rates:
            if not any(math.isclose(p.configured, rate, rel_tol=1e-9) for p in out.get(k, [])):
                out.setdefault(k, []).append(Point(rate, 0, 1, behind=True, rate=rate))
    return out


def user_points(evidence: Evidence, p: DecisionConfig, slo: int | None = None) -> dict[int, list[Point]]:
    """Per K, one point per users stage: requests meeting SLO number `slo` of decision.slo (None: every SLO) over
    those finished (failures count against)."""
    out: dict[int, list[Point]] = {}
    for (k, users), cell in sorted(evidence.cells.items()):
        good = 0
        for w in cell.windows:
            met = slo_meets(w.latency_ms, np.ones(w.completed, dtype=bool), p.slos, w.output_tokens)
            good += int((met.all(axis=1) if slo is None else met[:, slo]).sum())
        out.setdefault(k, []).append(Point(float(users), good, sum(w.finished for w in cell.windows)))
    return out


def rate_rng(p: DecisionConfig, k: int) -> np.random.Generator:
    """K's own draws of its rate capacity: the same interval wherever it is stated (the table, the verdict)."""
    return np.random.default_rng([p.seed, 37, k])


def in_flight_at_capacity(points: Sequence[Point], rate: float | None) -> float | None:
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
    per_rate = slo_rate_points((w for w in windows if w.variant == variant), p, over)
    per_users = [(slo.share, user_points(evidence, p, i)) for i, slo in enumerate(p.slos)] \
        if evidence is not None else []
    by_rate = per_rate[0][1]    # the loads measured (every SLO's points are at the same loads)
    rows = []
    for k in sorted(set(by_rate) | {k for _, points in per_users for k in points}):
        rate = slo_crossing(of_k(per_rate, k), p.interval_level, rate_rng(p, k))
        users = slo_crossing(of_k(per_users, k), p.interval_level, np.random.default_rng([p.seed, 38, k]))
        little = in_flight_at_capacity(by_rate.get(k, []), rate.value) if users is None and rate is not None else None
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
                        else in_flight_text(little))))
    base = rows[0] if rows else None
    for row in rows:
        if base is not None and row is not base and row.rate is not None and base.rate:
            row.gain = row.rate / base.rate - 1
        row.text = capacity_text(row)
    return rows


def in_flight_text(in_system: float) -> str:
    """What a rate-only run states beside its rate capacity: the requests in flight there, never a users count."""
    return (f"about {in_system:.0f} requests in flight at that capacity "
            "(Little's law; not the users a closed loop holds)")


def capacity_text(row: Capacity) -> str:
    """"K=4 19.0 req/s [18.1, 19.8] / 64 users [58, 70] (+34 %)"; without user stages "K=4 19.0 req/s [18.1, 19.8] /
    about 24 requests in flight at that capacity (Little's law; not the users a closed loop holds) (+34 %)"."""
    parts = [part for part in (row.rate_text, row.users_text) if part]
    gain = f" ({row.gain:+.0%})" if row.gain is not None else ""
    return f"K={row.k} " + (" / ".join(parts) or "not measured") + gain


def holds_at(row: Capacity, rate: float) -> bool | None:
    """Whether a capacity row says its K holds the SLO at `rate`: True up to its interval's low end (a load that
    held), False from its high end (one that did not), None inside it or where it was not bracketed that far."""
    low, high = row.rate_range.low, row.rate_range.high
    lo, hi = (row.rate_bracket + [None, None])[:2]
    if (low is not None and rate <= low) or (row.rate is None and lo is not None and hi is None and rate <= lo):
        return True
    if (high is not None and rate >= high) or (row.rate is None and hi is not None and lo is None and rate >= hi):
        return False
    return None
