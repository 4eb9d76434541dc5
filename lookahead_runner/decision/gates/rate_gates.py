"""The gates of one K at one arrival rate (decision/rate_decision.py), beside the user-stage ones it reuses
(checks.py's failures, memory and latency checks): keeping up with the rate and the SLO attainment.

- keeps up: a K whose backlog grows through a window at the rate (it falls behind: cells/rate_window.py, its
  repeats pooled) fails, with the finding's figures; that is a K losing at that rate, not a window to drop. Where
  every window at the rate was a stage too short for its answers, keeping up cannot be judged: unknown ("cannot be
  judged: stage too short for answers of N s; lengthen to M s"), never a pass, so no verdict rests on it.
- SLO attainment: each SLO of decision.slo holds at its own percentile (`ttft_p90_ms = 500`: 90 % of the arrivals
  get their first token within 500 ms of their scheduled arrival), as the users verdict reads it
  (cells/slo_attainment.py): by each one's Wilson interval on the arrivals over their design effect
  (cells/arrival_correlation.py: the requests behind one queue miss together, for as long as their correlation in
  arrival order shows; rate_window.effective_arrivals over repeats); pass where every SLO's interval lies at or
  above its percentile, fail where one lies below it, unknown otherwise (too few arrivals to tell; how many would).
No real-batch gate: at one rate a K that serves faster holds fewer requests at once, which is no server limit.
"""
from __future__ import annotations

import math

from ...config import DecisionConfig
from ..cells.measure import CellStats
from ..cells.rate_cell import RateCell
from ..cells.rate_window import windows_too_short
from ..cells.slo_attainment import SloAttainment, combined_status
from ..cells.stats import Bounds, wilson
from ..schema import Check
from . import rules
from .checks import _requests_needed, _requests_to_tell

GATE_KEEPS_UP = "keeps up"
GATE_ATTAINMENT = "SLO attainment"


def attainment(s: CellStats) -> float:
    """The share of arrivals meeting every SLO at once (the cell's goodput over its arrivals): shown, not the gate."""
    return s.goodput * s.duration_s / s.finished if s.finished else math.nan


def good_count(s: CellStats) -> int:
    return int(round(s.goodput * s.duration_s)) if s.finished else 0


def objective(s: CellStats, p: DecisionConfig) -> float:
    """The speed at the rate: the inverse of the e2e latency percentile (higher is better, so the tie band reads as
    a relative latency difference). The pick reads it after the capacity within the SLO (gates/rate_pick.py);
    goodput, the rate itself for every K that keeps up and holds the SLO, tells them nothing."""
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
        out[GATE_ATTAINMENT] = rules.PASS if all(a.holds for a in slo_attainments(s, p)) else rules.FAIL
    out[rules.GATE_FAILURES] = rules.failures_status(s, base, p)
    out[rules.GATE_MEMORY] = rules.memory_status(s, p)
    if not p.slos:
        out[rules.GATE_LATENCY] = rules.PASS if nothing_to_compare(s, base, behind, base_behind, p) \
            else rules.latency_status(s, base, p)
    return out


def attainment_bounds(s: CellStats, p: DecisionConfig) -> Bounds:
    """The Wilson interval of the share meeting every SLO at once, its arrivals counted as s.design_effect times
    fewer independent ones."""
    return wilson(good_count(s), s.finished, p.interval_level, s.design_effect)


def slo_attainments(s: CellStats, p: DecisionConfig) -> tuple[SloAttainment, ...]:
    """Each SLO's attainment at the rate: the arrivals meeting it of all arrivals, its Wilson interval on them over
    that SLO's design effect."""
    deffs = s.slo_design_effects or (1.0,) * len(p.slos)
    return tuple(SloAttainment(slo, met, s.finished, wilson(met, s.finished, p.interval_level, deff), deff)
                 for slo, met, deff in zip(p.slos, s.slo_met, deffs))


def missed(s: CellStats, p: DecisionConfig) -> str:
    """The SLOs whose share measured at the rate is below their percentile, with their figures."""
    below = [a.text("arrivals") for a in slo_attainments(s, p) if not a.holds]
    return "; ".join(below) or "every SLO reaches its percentile"


def _correlated(a: SloAttainment) -> str:
    if a.design_effect <= 1.0:
        return ""
    return (f" (arrivals correlated: missing the SLO in runs, they count as {a.n / a.design_effect:.0f} "
            "independent ones)")


def _check(name: str, status: str, evidence: str, because: str = "", n: int | None = None) -> Check:
    return Check(name=name, kind="gate", status=status, evidence=evidence,
                 unknown_because=because if status == rules.UNKNOWN else "", n=n)


def keeps_up_check(cell: RateCell, rate: float) -> Check:
    """Fail where the K falls behind (its repeats pooled), unknown where every window at the rate was a stage too
    short for its answers (nothing judged: no verdict may rest on it), pass otherwise."""
    if cell.behind:
        return _check(GATE_KEEPS_UP, rules.FAIL, "; ".join(cell.behind), n=len(cell.windows))
    if short := windows_too_short(cell.windows):
        count = len(cell.windows)
        return _check(GATE_KEEPS_UP, rules.UNKNOWN, f"cannot be judged at {rate:g} req/s: {short} "
                                                    f"({count} window{'s' if count != 1 else ''})",
                      "too little data", n=count)
    w = next(w for w in cell.windows if not w.too_short)
    return _check(GATE_KEEPS_UP, rules.PASS, f"at {rate:g} req/s: {w.achieved_per_s:.1f} served of "
                                             f"{w.offered_per_s:.1f} offered, outstanding {w.outstanding[0]:.0f} -> "
                                             f"{w.outstanding[1]:.0f} through the window", n=len(cell.windows))


def attainment_check(s: CellStats, p: DecisionConfig) -> Check:
    """Every SLO at its own percentile, each by its interval: "TTFT p90 <= 500 ms met by 950/1000 arrivals = 95.0%
    [93.5%, 96.2%] (needs 90%)", and for one too close to tell, how many arrivals would tell it."""
    if not s.finished:
        return _check(GATE_ATTAINMENT, rules.UNKNOWN, "no arrival in the window", "not measured", 0)
    found = slo_attainments(s, p)
    parts = []
    for a in found:
        part = a.text("arrivals") + _correlated(a)
        if a.status == rules.UNKNOWN:
            part += f"; too few arrivals to tell: {_arrivals_to_tell(a, p.interval_level)}"
        parts.append(part)
    status = combined_status(found)
    return _check(GATE_ATTAINMENT, status, "; ".join(parts), "too little data", s.finished)


def _arrivals_to_tell(a: SloAttainment, level: float) -> str:
    """Arrivals at which the attainment measured would have an interval clear of its percentile, as correlated as
    these."""
    if a.design_effect <= 1.0:
        return _requests_to_tell(a.met, a.n, a.slo.share, level).replace("requests", "arrivals")
    # whole counts: its bisection halves an integer range (a fractional count can step below its low end for ever)
    independent = max(round(a.n / a.design_effect), 1)
    needed = _requests_needed(round(a.share * independent), independent, a.slo.share, level)
    if needed is None:
        return "more arrivals than any run gives"
    return f"about {math.ceil(needed * a.design_effect):,} arrivals at this attainment, as correlated"
