"""The decision at the user's arrival rate (decision.target_rate): which K to set for traffic arriving at R req/s.

At one arrival rate every K that keeps up serves the same requests per second (the offered rate: the same seeded
arrivals for every K), so throughput decides nothing; what decides is how many of those requests meet the SLO.
The objective is goodput at the rate, the arrivals meeting every SLO of decision.slo per second (the offered
rate being the same, it ranks as the SLO attainment); without an SLO, the e2e latency at
decision.latency_percentile. The gates (gates/rate_gates.py, and checks.py's failure, memory and latency checks
unchanged) carry their intervals as the user-stage verdict's do; a K that falls behind the rate loses.

The pick is rules.pick's: the best objective among K no gate fails, the smallest within the tie band (where
several K keep the SLO at the rate, the smallest). Its confidence is the share of resamples picking it
(cells/rate_cell.py draws each K's windows and arrivals); it is decided when that share reaches
decision.confidence and no gate of the pick, or of a K beyond the tie band, is unknown. A K none of whose
windows at the rate had its setting in effect cannot be recommended (explanation/rate_text.py says so, as
gates/in_effect.py does for users). Pure: rate windows in, a `Decision` out.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..config import DecisionConfig
from .cells.evidence import LATENCY_COLUMNS
from .cells.measure import CellStats
from .cells.rate_cell import RateCell, cells_at, same_rate
from .cells.rate_window import RateWindow
from .cells.stats import Bounds, interval, wilson
from .explanation import rate_text
from .gates import rules
from .gates.checks import failures_check, latency_check, memory_check, waive_key, waived
from .gates.rate_gates import (attainment_check, keeps_up_check, latency_over_nothing, nothing_to_compare, objective,
                               point_statuses)
from .schema import Candidate, Check, Decision, Range, Recommended, Tradeoff

TRADEOFFS = (("TTFT p99", "ttft_ms", 0.99), ("TPOT p99", "tpot_ms", 0.99), ("e2e p99", "e2e_ms", 0.99),
             ("TTFT p50", "ttft_ms", 0.5), ("e2e p50", "e2e_ms", 0.5))


@dataclass(frozen=True)
class _Scored:
    """CellStats as rules.pick reads them: `objective` the rate's."""

    stats: CellStats
    value: float

    def objective(self, _name: str) -> float:
        return self.value


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
    status: str = "not_decided"
    why_not: list[str] = field(default_factory=list)

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
            return interval(self.objective_draws(k, p) / self.objective_draws(self.base_k, p) - 1, p.interval_level)

    def difference(self, k: int, column: str, q: float, level: float, other: int | None = None) -> tuple[float, Bounds]:
        """K's latency percentile minus `other`'s (the baseline's), in ms, with its interval."""
        other = self.base_k if other is None else other
        mine, theirs = self.stats[k].quantile(column, q), self.stats[other].quantile(column, q)
        drawn = np.array([a.quantile(column, q) - b.quantile(column, q)
                          for a, b in zip(self.draws[k], self.draws[other])])
        return mine - theirs, interval(drawn, level)


def evaluate(rate: float, cells: Mapping[int, RateCell], p: DecisionConfig) -> RateEval:
    rng = np.random.default_rng([p.seed, 37, int(round(rate * 1000))])
    stats = {k: cell.measure(p) for k, cell in sorted(cells.items())}
    draws = {k: cells[k].draws(p, rng, p.resamples) for k in stats}
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

    def choose(figures: Mapping[int, CellStats]) -> int | None:
        gates = {k: point_statuses(s, figures[base_k], behind[k], p, behind[base_k]) for k, s in figures.items()}
        return rules.pick({k: _Scored(s, objective(s, p)) for k, s in figures.items()}, gates, None, p)

    chosen = choose(stats)
    picks = Counter(choose({k: draws[k][b] for k in stats}) for b in range(p.resamples))
    out = RateEval(rate, dict(cells), stats, draws, base_k, checks, chosen,
                   {k: n / p.resamples for k, n in picks.items()},
                   wilson(picks[chosen], p.resamples, p.interval_level), p.resamples)
    out.status, out.why_not = _status(out, p)
    return out


def _status(ev: RateEval, p: DecisionConfig) -> tuple[str, list[str]]:
    if ev.pick is None:
        return "no_eligible", []
    if len(ev.stats) < 2:
        return "not_decided", [f"only K={ev.pick} has a valid window at {ev.rate:g} req/s: nothing to compare it "
                               "with (measure another K there; an invalid window says why it does not count)"]
    mine = objective(ev.stats[ev.pick], p)
    better = [k for k in ev.ks if k == ev.pick or (objective(ev.stats[k], p) > mine * (1 + p.tie_tolerance_frac)
                                                   and not ev.blocked_by(k))]
    why = [f"K={k}'s {c.name} is unknown ({c.unknown_because}): {c.evidence}" for k in better for c in ev.unknown(k)]
    share, bounds = ev.shares.get(ev.pick, 0.0), ev.share_range
    if share < p.confidence:
        why.append(f"K={ev.pick} wins in {share:.1%} of {ev.resamples} resamples (needs {p.confidence:.0%}; "
                   f"Monte Carlo interval [{bounds.low:.1%}, {bounds.high:.1%}])")
    return ("not_decided" if why else "decided"), why


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
                   variant: str = "") -> Decision:
    """The verdict at `rate` (req/s) from the sweep's rate windows (valid or not: an invalid one says why a K has
    no measurement there, and whether its setting was in effect)."""
    base = {"objective": rate_text.objective_name(p), "target_rate": rate, "target_users": None,
            "confidence_threshold": p.confidence, "thresholds": p.model_dump(mode="json"), "variant": variant}
    mine = [w for w in windows if same_rate(w.rate, rate) and w.variant == variant]
    cells = cells_at(mine, rate, variant)
    off = rate_text.not_in_effect(mine, rate)
    if not cells:
        return Decision(status="no_measurement", verdict=off + rate_text.no_measurement(rate, mine),
                        resamples=p.resamples, **base)
    ev = evaluate(rate, cells, p)
    focus = ev.pick if ev.pick is not None else ev.base_k
    recommended = Recommended(k=ev.pick, setting=(setting_names or {}).get(ev.pick) or f"k{ev.pick}",
                              argv=list(argv_by_k.get(ev.pick, []))) if ev.status == "decided" else None
    return Decision(
        status=ev.status, verdict=off + rate_text.verdict(ev, p), baseline_k=ev.base_k, recommended=recommended,
        leading_k=ev.pick, confidence=ev.shares.get(ev.pick) if ev.pick is not None else None,
        confidence_range=_range(ev.share_range) if ev.pick is not None else Range(), resamples=ev.resamples,
        checklist=ev.checks[focus], candidates=candidates(ev, p), reasons=rate_text.reasons(ev, p),
        diagnoses=rate_text.diagnoses(ev), next_runs=rate_text.next_runs(ev, p), **base)
