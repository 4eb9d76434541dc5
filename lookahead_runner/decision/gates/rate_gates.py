"""The gates of one K at one arrival rate (decision/rate_decision.py), beside the user-stage ones it reuses
(checks.py's failures, memory and latency checks): keeping up with the rate and the SLO attainment.

- keeps up: a K whose backlog grows through a window at the rate (it falls behind: cells/rate_window.py) fails,
  with the finding's figures; that is a K losing at that rate, not a window to drop.
- SLO attainment: the share of arrivals meeting every SLO of decision.slo holds decision.slo_attainment, by its
  Wilson interval on the arrivals over their design effect (cells/stats.py: the requests behind one queue miss
  together): pass above the target, fail below it, unknown across it (too few arrivals to tell; how many would).
No real-batch gate: at one rate a K that serves faster holds fewer requests at once, which is no server limit.
"""
from __future__ import annotations

import math

from ...config import DecisionConfig
from ..cells.measure import CellStats
from ..cells.rate_cell import RateCell
from ..cells.stats import Bounds, wilson
from ..schema import Check
from . import rules
from .checks import _requests_needed, _requests_to_tell

GATE_KEEPS_UP = "keeps up"
GATE_ATTAINMENT = "SLO attainment"


def attainment(s: CellStats) -> float:
    """The share of arrivals meeting every SLO (the cell's goodput over its arrivals)."""
    return s.goodput * s.duration_s / s.finished if s.finished else math.nan


def good_count(s: CellStats) -> int:
    return int(round(s.goodput * s.duration_s)) if s.finished else 0


def objective(s: CellStats, p: DecisionConfig) -> float:
    """Goodput at the rate with an SLO; without one, the inverse of the e2e latency percentile (higher is better,
    so the tie band reads as a relative latency difference)."""
    if p.slos:
        return s.goodput
    latency = s.quantile("e2e_ms", p.latency_percentile / 100)
    return 1000.0 / latency if latency > 0 else math.nan


def nothing_to_compare(s: CellStats, base: CellStats, behind: bool, base_behind: bool, p: DecisionConfig) -> bool:
    """The latency gate has no reference: the baseline fell behind the rate without one e2e time (none of its
    arrivals succeeded, e.g. none sent with load.max_in_flight full) where this K keeps up."""
    q = p.latency_percentile / 100
    return (s.k != base.k and base_behind and not behind and math.isnan(base.quantile("e2e_ms", q))
            and not math.isnan(s.quantile("e2e_ms", q)))


def latency_over_nothing(base_k: int) -> Check:
    return _check(rules.GATE_LATENCY, rules.PASS, f"no reference: K={base_k} falls behind the rate with no "
                                                  "request succeeding (its latency is unbounded); this K keeps up")


def point_statuses(s: CellStats, base: CellStats, behind: bool, p: DecisionConfig,
                   base_behind: bool = False) -> dict[str, str]:
    """Every gate at the rate on point figures (the rule each resample applies)."""
    out = {GATE_KEEPS_UP: rules.FAIL if behind else rules.PASS}
    if p.slos:
        out[GATE_ATTAINMENT] = rules.PASS if attainment(s) >= p.slo_attainment else rules.FAIL
    out[rules.GATE_FAILURES] = rules.failures_status(s, base, p)
    out[rules.GATE_MEMORY] = rules.memory_status(s, p)
    if not p.slos:
        out[rules.GATE_LATENCY] = rules.PASS if nothing_to_compare(s, base, behind, base_behind, p) \
            else rules.latency_status(s, base, p)
    return out


def attainment_bounds(s: CellStats, p: DecisionConfig) -> Bounds:
    """The attainment's Wilson interval, its arrivals counted as s.design_effect times fewer independent ones."""
    return wilson(good_count(s), s.finished, p.interval_level, s.design_effect)


def _correlated(s: CellStats) -> str:
    if s.design_effect <= 1.0:
        return ""
    return (f" (arrivals correlated: missing the SLO in runs, they count as {s.finished / s.design_effect:.0f} "
            "independent ones)")


def _check(name: str, status: str, evidence: str, because: str = "", n: int | None = None) -> Check:
    return Check(name=name, kind="gate", status=status, evidence=evidence,
                 unknown_because=because if status == rules.UNKNOWN else "", n=n)


def keeps_up_check(cell: RateCell, rate: float) -> Check:
    if cell.behind:
        return _check(GATE_KEEPS_UP, rules.FAIL, "; ".join(cell.behind), n=len(cell.windows))
    w = cell.windows[0]
    return _check(GATE_KEEPS_UP, rules.PASS, f"at {rate:g} req/s: {w.achieved_per_s:.1f} served of "
                                             f"{w.offered_per_s:.1f} offered, outstanding {w.outstanding[0]:.0f} -> "
                                             f"{w.outstanding[1]:.0f} through the window", n=len(cell.windows))


def attainment_check(s: CellStats, p: DecisionConfig) -> Check:
    n, good = s.finished, good_count(s)
    if not n:
        return _check(GATE_ATTAINMENT, rules.UNKNOWN, "no arrival in the window", "not measured", 0)
    bounds = attainment_bounds(s, p)
    limits = "; ".join(f"{slo.metric.upper()} <= {slo.max_ms:g} ms" for slo in p.slos)
    text = (f"every SLO ({limits}) met by {good}/{n} arrivals = {good / n:.1%} [{bounds.low:.1%}, {bounds.high:.1%}] "
            f"(needs {p.slo_attainment:.1%}){_correlated(s)}")
    if bounds.low >= p.slo_attainment:
        return _check(GATE_ATTAINMENT, rules.PASS, text, n=n)
    if bounds.high < p.slo_attainment:
        return _check(GATE_ATTAINMENT, rules.FAIL, text, n=n)
    return _check(GATE_ATTAINMENT, rules.UNKNOWN, text + "; too few arrivals to tell: "
                  + _arrivals_to_tell(good, n, s.design_effect, p), "too little data", n)


def _arrivals_to_tell(good: int, n: int, deff: float, p: DecisionConfig) -> str:
    """Arrivals at which the attainment measured would have an interval clear of the target, as correlated as
    these."""
    if deff <= 1.0:
        return _requests_to_tell(good, n, p.slo_attainment, p.interval_level).replace("requests", "arrivals")
    needed = _requests_needed(good / deff, n / deff, p.slo_attainment, p.interval_level)
    if needed is None:
        return "more arrivals than any run gives"
    return f"about {math.ceil(needed * deff):,} arrivals at this attainment, as correlated"
