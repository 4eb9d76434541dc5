"""The decision at the user's arrival rate (decision.target_rate): which K to set for traffic arriving at R req/s.

At one arrival rate every K that keeps up serves the same requests per second (the offered rate: the same seeded
arrivals for every K), so the requests served, and the goodput of the K that hold the SLO, tell nothing until one
K saturates. The gates (gates/rate_gates.py, and checks.py's failure, memory and latency checks unchanged) carry
their intervals as the user-stage verdict's do; a K that falls behind the rate or misses the SLO loses.

Among the K no gate fails the pick is gates/rate_pick.py's: the capacity within the SLO first (the headroom at the
rate, each K's bracket from every rate it was measured at, capacity/estimate.py), then the e2e latency at
decision.latency_percentile at the rate, then the smallest K; `decided_by` says which; the pick stands only where no
K's capacity bracket leaves room for it beyond the pick's by more than the tie band (`capacity_open`: not decided,
rates between settle it). Its confidence is the share of resamples in which it stands (cells/rate_cell.py draws each
K's arrivals, every window once, and its windows for whether it falls behind, judged pooled: a K behind in a
resample cannot win it; estimate.drawn_brackets each K's capacity bracket; and cells/rate_spread.py a life factor
per K from the restart spread at the rate, measured by a K's repeated lives there or else the config's prior, that
stretches its latencies and shrinks its capacity bracket: one life per K on a server of unknown spread decides only
a gain of about 35 %); it is decided when that share's Monte Carlo interval clears decision.confidence (while it
straddles it, more resamples are drawn, as for the users verdict: gates/stage.py), no gate of the pick, or of a K
the rule would set over it, is unknown, and no capacity is open. A sweep that looked at it as lives ended
(decision/rate_standing.py) has it judged at the bar where it stopped (`looks`). A K none of whose windows at the
rate had its setting in effect cannot be recommended (explanation/rate_text.py says so, as gates/in_effect.py does
for users). Pure: rate windows in, a `Decision` out.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..config import DecisionConfig
from .capacity.estimate import Point, capacities, measured_bracket, of_k, slo_brackets, slo_rate_points
from .cells.evidence import LATENCY_COLUMNS
from .cells.measure import CellStats
from .cells.rate_cell import RateCell, cells_at, same_rate
from .cells.rate_spread import RateSpread, life_factors, lives_of, slower, spread_at
from .cells.rate_window import RateWindow
from .cells.stats import Bounds, interval, wilson
from .engine import early_look
from .explanation import rate_text
from .gates import rules
from .gates.checks import failures_check, latency_check, memory_check, waive_key, waived
from .gates.rate_gates import (attainment_check, keeps_up_check, latency_over_nothing, nothing_to_compare, objective,
                               point_statuses)
from .gates.looks import RULE, Looks
from .gates.rate_pick import Ranked, Standing, rank
from .gates.stage import MAX_RESAMPLE_FACTOR, straddles, share_shortfall
from .schema import Candidate, Check, Decision, LookStop, Range, Recommended, Tradeoff

TRADEOFFS = (("TTFT p99", "ttft_ms", 0.99), ("TPOT p99", "tpot_ms", 0.99), ("e2e p99", "e2e_ms", 0.99),
             ("TTFT p50", "ttft_ms", 0.5), ("e2e p50", "e2e_ms", 0.5))


@dataclass
class RateEval:
    """The target rate judged: each K's figures as measured and resampled, its gates, the pick and its share."""

    rate: float
    cells: dict[int, RateCell]
    stats: dict[int, CellStats]
    draws: dict[int, list[CellStats]]
    base_k: int
    checks: dict[int, list[Check]]
    pick: int | None
    shares: dict[int | None, float]
    share_range: Bounds
    resamples: int
    standings: dict[int, Standing] = field(default_factory=dict)   # as measured: capacity bracket, speed
    eligible: list[int] = field(default_factory=list)              # the K no gate fails on the figures measured
    decided_by: str = ""
    capacity_open: tuple[int, ...] = ()     # K whose capacity could set them over the pick (rate_pick.Ranked.open)
    capacity_text: dict[int, str] = field(default_factory=dict)    # "38.7 req/s [36.0, 48.0]" (the table's)
    status: str = "not_decided"
    why_not: list[str] = field(default_factory=list)
    spread: RateSpread | None = None    # the restart spread at the rate each K's life factor is drawn from
    drawn_picks: Counter = field(default_factory=Counter)   # each K's wins in the `draws` (decision.resamples)
    # per K other than the pick: the share of the `draws` in which the pick did not stand and its capacity was open
    # over the pick (rate_pick.Ranked.open) on the brackets' own draws (each rate's attainment), the life factors left
    # out: the openness narrower brackets could remove (the restart spread's part, more lives at the rate narrow)
    drawn_open: dict[int, float] = field(default_factory=dict)
    drawn_open_share: float = 0.0   # the share of the `draws` where the pick did not stand and one was open so
    # the wins in the i-th batch of `count` more resamples (i from 1; the same draws whichever bar asks for them)
    more_picks: Callable[[int, int], Counter] | None = None

    @property
    def compared(self) -> int | None:
        """The K the pick was set over: the smallest one no gate fails, where it is smaller than the pick."""
        return next((k for k in self.eligible if self.pick is not None and k < self.pick), None)

    @property
    def ks(self) -> list[int]:
        return sorted(self.stats)

    def blocked_by(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.FAIL]

    def unknown(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.UNKNOWN]

    def objective_draws(self, k: int, p: DecisionConfig) -> np.ndarray:
        return np.array([objective(d, p) for d in self.draws[k]])

    def gain(self, k: int, p: DecisionConfig) -> float:
        return rules.rel(objective(self.stats[k], p), objective(self.stats[self.base_k], p))

    def gain_bounds(self, k: int, p: DecisionConfig) -> Bounds:
        with np.errstate(all="ignore"):
            return interval(self.objective_draws(k, p) / self.objective_draws(self.base_k, p) - 1,
                            p.reported_interval_level)

    def difference(self, k: int, column: str, q: float, level: float, other: int | None = None) -> tuple[float, Bounds]:
        """K's latency percentile minus `other`'s (the baseline's), in ms, with its interval."""
        other = self.base_k if other is None else other
        mine, theirs = self.stats[k].quantile(column, q), self.stats[other].quantile(column, q)
        drawn = np.array([a.quantile(column, q) - b.quantile(column, q)
                          for a, b in zip(self.draws[k], self.draws[other])])
        return mine - theirs, interval(drawn, level)


def _bracket(per_slo: Sequence[tuple[float, Sequence[Point]]]) -> tuple[float, float]:
    """One K's capacity bracket as measured: every SLO's at its percentile, the lowest (-inf / +inf unbounded)."""
    ends = [measured_bracket(points, share) for share, points in per_slo if points]
    return (min(e[0] for e in ends), min(e[1] for e in ends)) if ends else (-math.inf, math.inf)


def evaluate(rate: float, cells: Mapping[int, RateCell], p: DecisionConfig,
             capacity: Sequence[tuple[float, Mapping[int, Sequence[Point]]]] = ()) -> RateEval:
    """The K at `rate` judged from their windows there (`cells`) and each K's capacity within the SLO
    (`capacity`: each SLO's percentile and per K its points, one per rate measured, capacity/estimate.slo_rate_points
    over every rate's windows; empty: no K told apart by capacity)."""
    at = int(round(rate * 1000))
    rng = np.random.default_rng([p.seed, 37, at])
    stats = {k: cell.measure(p) for k, cell in sorted(cells.items())}
    spread = spread_at(rate, cells, p)
    mine = {k: [(share, points) for share, points in of_k(capacity, k) if points] for k in stats}
    ends = {k: _bracket(mine[k]) for k in stats}
    factors = life_factors(spread, cells, p, p.resamples)
    draws, drawn_ends, drawn_behind = _drawn(cells, mine, factors, p, rng, p.resamples)
    base_k = min(stats)
    behind = {k: bool(cells[k].behind) for k in stats}
    checks = {}
    for k, s in stats.items():
        ratio = np.array([rules.latency_ratio(d, b, p) for d, b in zip(draws[k], draws[base_k])])
        found = [keeps_up_check(cells[k], rate), *([attainment_check(s, p)] if p.slos else []),
                 failures_check(s, stats[base_k], p), memory_check(s, p),
                 *([] if p.slos else [latency_over_nothing(base_k)
                                      if nothing_to_compare(s, stats[base_k], behind[k], behind[base_k], p)
                                      else latency_check(s, stats[base_k], ratio,
                                                         cells[k].pooled(LATENCY_COLUMNS.index("e2e_ms")), p)])]
        checks[k] = [waived(c) if c.status == rules.UNKNOWN and waive_key(c.name) in p.waive else c for c in found]

    def standings(figures: Mapping[int, CellStats], brackets: Mapping[int, tuple[float, float]]) -> dict:
        return {k: Standing(k, *brackets[k], objective(s, p)) for k, s in figures.items()}

    def eligible(figures: Mapping[int, CellStats], behind_now: Mapping[int, bool]) -> list[int]:
        return [k for k, s in figures.items() if rules.FAIL not in
                point_statuses(s, figures[base_k], behind_now[k], p, behind_now[base_k]).values()]

    def choose(figures: Mapping[int, CellStats], brackets: Mapping[int, tuple[float, float]],
               behind_now: Mapping[int, bool]) -> Ranked:
        return rank(standings(figures, brackets), eligible(figures, behind_now), p.tie_tolerance_frac)

    def ranked(figures: Mapping[int, list[CellStats]], brackets: Mapping[int, tuple[np.ndarray, np.ndarray]],
               behind_drawn: Mapping[int, np.ndarray], count: int) -> list[Ranked]:
        return [choose({k: figures[k][b] for k in stats},
                       {k: (float(brackets[k][0][b]), float(brackets[k][1][b])) for k in stats},
                       {k: bool(behind_drawn[k][b]) for k in stats}) for b in range(count)]

    def wins(*drawn, count: int) -> Counter:
        return Counter(r.standing for r in ranked(*drawn, count))

    more: dict[tuple[int, int], Counter] = {}

    def more_picks(batch: int, count: int) -> Counter:
        if (batch, count) not in more:    # a generator of the batch's own: alike whichever bar asked first
            extra = np.random.default_rng([p.seed, 37, at, batch])
            variances = spread.variances(extra, count)
            factors = {k: spread.factors(lives_of(cells[k], p), extra, count, variances) for k in stats}
            more[(batch, count)] = wins(*_drawn(cells, mine, factors, p, extra, count), count=count)
        return more[(batch, count)]

    chosen = choose(stats, ends, behind)
    first = ranked(draws, drawn_ends, drawn_behind, p.resamples)
    picks = Counter(r.standing for r in first)
    opened, open_draws = Counter(), 0
    if picks[None] and any(mine.values()):   # the brackets' own draws, without the life factors: what probes narrow
        own = {k: (low * factors[k], high * factors[k]) for k, (low, high) in drawn_ends.items()}
        for drawn, bare in zip(first, ranked(draws, own, drawn_behind, p.resamples)):
            if drawn.standing is None and bare.pick == chosen.pick and bare.open:   # each resample once
                opened.update(bare.open)
                open_draws += 1
    out = RateEval(rate, dict(cells), stats, draws, base_k, checks, chosen.pick,
                   {k: n / p.resamples for k, n in picks.items()},
                   wilson(picks[chosen.pick], p.resamples, p.interval_level), p.resamples,
                   standings(stats, ends), eligible(stats, behind), chosen.decided_by, chosen.open, spread=spread,
                   drawn_picks=picks, more_picks=more_picks,
                   drawn_open={k: n / p.resamples for k, n in opened.items()},
                   drawn_open_share=open_draws / p.resamples)
    return judged_at(out, p)


def _drawn(cells: Mapping[int, RateCell], mine: Mapping[int, list], factors: Mapping[int, np.ndarray],
           p: DecisionConfig, rng: np.random.Generator, count: int
           ) -> tuple[dict[int, list[CellStats]], dict[int, tuple[np.ndarray, np.ndarray]], dict[int, np.ndarray]]:
    """`count` resamples of each K at the rate, each on its life factor: its figures, its capacity bracket's ends
    (unbounded without points), whether it falls behind."""
    ks = sorted(cells)
    figures = {k: [slower(d, f) for d, f in zip(cells[k].draws(p, rng, count), factors[k])] for k in ks}
    ends = {k: tuple(end / factors[k] for end in slo_brackets(mine[k], rng, count)) if mine[k]
            else (np.full(count, -math.inf), np.full(count, math.inf)) for k in ks}
    return figures, ends, {k: cells[k].behind_draws(rng, count) for k in ks}


def _counted(ev: RateEval, p: DecisionConfig) -> RateEval:
    """`ev`'s share counted as the users verdict counts its own (gates/stage.evaluate): over its `draws`, and while
    the share's Monte Carlo interval straddles `p.confidence`, more resamples, doubling, up to MAX_RESAMPLE_FACTOR x
    as many. Counted afresh at every bar from the same batches: the share at a bar does not hang on the bars asked
    before it."""
    picks, total = Counter(ev.drawn_picks), sum(ev.drawn_picks.values())
    if not total or ev.pick is None:
        return ev
    batch, most = 0, MAX_RESAMPLE_FACTOR * total
    while ev.more_picks is not None and straddles(picks[ev.pick], total, p) and total < most:
        batch, more = batch + 1, min(total, most - total)
        picks.update(ev.more_picks(batch, more))
        total += more
    return replace(ev, shares={k: n / total for k, n in picks.items()}, resamples=total,
                   share_range=wilson(picks[ev.pick], total, p.interval_level))


def judge_at_rate(windows: Sequence[RateWindow], rate: float, p: DecisionConfig, variant: str = "",
                  over: Mapping[int, Sequence[float]] | None = None) -> RateEval | None:
    """The K at `rate` judged from the sweep's rate windows (every rate's: the others place each K's capacity within
    the SLO), as `decide_at_rate` judges them; None where no K has a valid window there."""
    cells = cells_at([w for w in windows if same_rate(w.rate, rate) and w.variant == variant], rate, variant)
    if not cells:
        return None
    ours = [w for w in windows if w.variant == variant]
    return evaluate(rate, cells, p, slo_rate_points(ours, p, over) if p.slos else ())


def lives_at_rate(windows: Sequence[RateWindow], rate: float, variant: str = "") -> dict[int, int]:
    """Per K, its lives (repeats) with a valid window at `rate`."""
    return {k: len({w.repeat for w in cell.windows}) for k, cell in cells_at(windows, rate, variant).items()}


def look_number(windows: Sequence[RateWindow], rate: float, looks: Looks, variant: str = "") -> int:
    """The look the windows stand at (engine.look_number's rule at a rate): the lives with a valid window at `rate`
    summed over K (looks counting lives), or the most of any K (counting repeats)."""
    lives = lives_at_rate(windows, rate, variant).values()
    return sum(lives) if looks.unit == "lives" else max(lives, default=0)


def verdict_at_rate_end(ev: RateEval, p: DecisionConfig, looks: Looks, number: int
                        ) -> tuple[DecisionConfig, LookStop]:
    """engine.verdict_at_end at a rate: the config the final verdict is judged by and where the sweep stopped. At a
    look that could still buy a life (before the budget's last) and where the verdict clears its bar: that bar
    ("boundary"); else the bar of this look as the last, all the error the earlier looks left spent ("last look").
    Either way the config forms its gain and restart spread intervals at the look's level (Looks.interval_level)."""
    look, last = looks.at(number), looks.at(number, last=True)
    early = (look.number < looks.at_most and judged_at(ev, early_look(p, last)).status == "decided"
             and judged_at(ev, early_look(p, look)).status == "decided")
    chosen = look if early else last
    where = f"look {chosen.number} of at most {chosen.at_most}"
    text = (f"stopped at {chosen.text()}" if early else
            f"the last look, {where}: boundary {chosen.bar * 100:.1f} % (the error the earlier looks left)")
    reported = looks.interval_level(chosen.number, p.interval_level, last=not early)
    return early_look(p, chosen).model_copy().at_look(reported), LookStop(
        rule=RULE, look=chosen.number, at_most=chosen.at_most, unit=looks.unit, boundary=round(chosen.bar, 4),
        stopped_by="boundary" if early else "last look", confidence=p.confidence, text=text,
        interval_level=reported)


def judged_at(ev: RateEval, p: DecisionConfig) -> RateEval:
    """`ev` with its status judged at `p`'s confidence (a look's bar: engine.early_look), its share counted over
    more resamples while its Monte Carlo interval straddles that bar (`_counted`)."""
    ev = _counted(ev, p)
    status, why_not = _status(ev, p)
    return replace(ev, status=status, why_not=why_not)


def _status(ev: RateEval, p: DecisionConfig) -> tuple[str, list[str]]:
    if ev.pick is None:
        return "no_eligible", []
    if len(ev.stats) < 2:
        return "not_decided", [f"only K={ev.pick} has a valid window at {ev.rate:g} req/s: nothing to compare it "
                               "with (measure another K there; an invalid window says why it does not count)"]
    # the pick, and every K no gate fails that the rule would set over it were its unknown gates to pass
    better = [k for k in ev.ks if k == ev.pick or (not ev.blocked_by(k) and rank(
        ev.standings, {k, ev.pick}, p.tie_tolerance_frac).pick == k)]
    why = [f"K={k}'s {c.name} is unknown ({c.unknown_because}): {c.evidence}" for k in better for c in ev.unknown(k)]
    why += [rate_text.capacity_open(ev, k, p) for k in ev.capacity_open]
    share, bounds = ev.shares.get(ev.pick, 0.0), ev.share_range
    if ev.spread is not None and ev.spread.unknown and share < p.confidence:
        why.append(ev.spread.unknown_text(ev.base_k, p))
    shortfall = share_shortfall(ev.pick, share, ev.resamples, bounds, p)
    return ("not_decided" if why or shortfall else "decided"), why + ([shortfall] if shortfall else [])


def _spread_note(ev: RateEval) -> str:
    """A verdict decided on one life per K with the restart spread at the rate assumed: said, so it is not read as
    measured (the users verdict's words, explanation/reasons.py)."""
    if ev.status != "decided" or ev.spread is None or not ev.spread.unknown:
        return ""
    return (f" One life per K: restart spread at {ev.rate:g} req/s unknown, taken as {ev.spread.rel_sd:.0%} per "
            "server life; the verdict clears it.")


def _range(bounds: Bounds) -> Range:
    return Range(low=bounds.low, high=bounds.high)


def tradeoffs(ev: RateEval, k: int, p: DecisionConfig) -> list[Tradeoff]:
    """K's latency against the baseline's at the rate, each difference with its interval (shown, never a veto)."""
    if k == ev.base_k:
        return []
    out = []
    for label, column, q in TRADEOFFS:
        diff, bounds = ev.difference(k, column, q, p.interval_level)
        if math.isfinite(diff):
            out.append(Tradeoff(metric=label, difference=diff, range=_range(bounds), unit="ms",
                                text=rate_text.latency_change(label, ev.stats[ev.base_k].quantile(column, q),
                                                              ev.stats[k].quantile(column, q), bounds)))
    return out


def candidates(ev: RateEval, p: DecisionConfig) -> list[Candidate]:
    out = []
    for k, s in sorted(ev.stats.items()):
        gain, value = (None if k == ev.base_k else ev.gain(k, p)), objective(s, p)
        out.append(Candidate(
            k=k, objective=value if math.isfinite(value) else 0.0,
            objective_range=_range(interval(ev.objective_draws(k, p), p.interval_level)),
            gain=gain if gain is not None and math.isfinite(gain) else None,
            gain_range=_range(ev.gain_bounds(k, p)) if k != ev.base_k else Range(),
            win_share=ev.shares.get(k, 0.0), gates=ev.checks[k], blocked_by=[c.name for c in ev.blocked_by(k)],
            tradeoffs=tradeoffs(ev, k, p)))
    return out


def decide_at_rate(windows: Sequence[RateWindow], rate: float, p: DecisionConfig,
                   argv_by_k: Mapping[int, list[str]], setting_names: Mapping[int, str] | None = None,
                   variant: str = "", over: Mapping[int, Sequence[float]] | None = None,
                   looks: Looks | None = None) -> Decision:
    """The verdict at `rate` (req/s) from the sweep's rate windows, every rate's (valid or not: an invalid one says
    why a K has no measurement there, and whether its setting was in effect; the other rates place each K's
    capacity within the SLO). `over`: per K, the rates its capacity probes ended early at (estimate.with_over).
    `looks`: the sweep looked at this verdict as lives ended (decision/rate_standing.py): it is judged at the bar
    where it stopped (`verdict_at_rate_end`), and decision.json's `looks` says which."""
    mine = [w for w in windows if same_rate(w.rate, rate) and w.variant == variant]
    off = rate_text.not_in_effect(mine, rate)
    ev = judge_at_rate(windows, rate, p, variant, over)
    stop = None
    if ev is not None and looks is not None:
        p, stop = verdict_at_rate_end(ev, p, looks, look_number(windows, rate, looks, variant))
        ev = judged_at(ev, p)
        if ev.spread is not None:
            ev.spread = replace(ev.spread, level=p.reported_interval_level)
    base = {"objective": rate_text.objective_name(p), "target_rate": rate, "target_users": None,
            "confidence_threshold": p.confidence, "thresholds": p.model_dump(mode="json"), "variant": variant,
            "looks": stop}
    if ev is None:
        return Decision(status="no_measurement", verdict=off + rate_text.no_measurement(rate, mine),
                        resamples=p.resamples, **base)
    ours = [w for w in windows if w.variant == variant]
    ev.capacity_text = {row.k: row.rate_text for row in capacities(ours, None, p, variant, over=over)}
    focus = ev.pick if ev.pick is not None else ev.base_k
    recommended = Recommended(k=ev.pick, setting=(setting_names or {}).get(ev.pick) or f"k{ev.pick}",
                              argv=list(argv_by_k.get(ev.pick, []))) if ev.status == "decided" else None
    return Decision(
        status=ev.status, verdict=off + rate_text.verdict(ev, p) + _spread_note(ev), baseline_k=ev.base_k,
        recommended=recommended,
        leading_k=ev.pick, decided_by=ev.decided_by if ev.status == "decided" else "",
        confidence=ev.shares.get(ev.pick) if ev.pick is not None else None,
        confidence_range=_range(ev.share_range) if ev.pick is not None else Range(), resamples=ev.resamples,
        checklist=ev.checks[focus], candidates=candidates(ev, p),
        reasons=rate_text.reasons(ev, p) + ([f"{ev.spread.text()[0].upper()}{ev.spread.text()[1:]}."]
                                            if ev.spread is not None else []),
        diagnoses=rate_text.diagnoses(ev), next_runs=rate_text.next_runs(ev, p), **base)
