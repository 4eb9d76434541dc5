"""The report at each offered rate (open loop): one evidence row per K and rate over its valid windows, and one row
per rate saying which K hold it, which fall behind, and the verdict where the rate is the target one.

The rows read summary.csv's rate windows (runfolder/rate_windows.py) and decision.json; nothing is decided here.
Pooled over a K's windows at a rate: arrivals, failures and preemptions are summed, the share meeting every SLO is
over all their arrivals, every other figure is the median over the windows with [min, max]. Whether a K holds a
rate is its capacity row's (decision.json `capacity`): its bracket, [the highest rate that holds, the lowest that
does not] over the rates its windows were offered, places every measured rate on one side (at the rate it offered);
a K without one (no capacity row) holds where it keeps up in every window. Falling behind is each window's finding (summary.csv `keeps_up`, `behind`). The
verdict at the target rate, with its intervals and resamples, is decision.json's. Pure: frames and the decision
in, display text out (the template escapes it).
"""
from __future__ import annotations

import math

import pandas as pd

from ..decision.schema import Capacity, Decision
from .cells import MISSING, as_bool, format_cell
from .charts import column
from .verdict import DECISION_STATUS_TEXT, candidate_rows


def _rates(rows: pd.DataFrame) -> list[float]:
    return sorted(float(r) for r in column(rows, "rate").dropna().unique())


def _at(rows: pd.DataFrame, rate: float, k: int | None = None) -> pd.DataFrame:
    mine = rows[column(rows, "rate").map(lambda r: math.isclose(r, rate, rel_tol=1e-9))]
    return mine if k is None else mine[column(mine, "k") == k]


def _ks(rows: pd.DataFrame) -> list[int]:
    return sorted(int(k) for k in column(rows, "k").dropna().unique())


def _spread(rows: pd.DataFrame, name: str) -> str:
    """The median over the windows, with [min, max] where they differ."""
    values = column(rows, name).dropna()
    if values.empty:
        return MISSING
    text, low, high = (format_cell(name, v) for v in (values.median(), values.min(), values.max()))
    return text if low == high else f"{text} [{low}, {high}]"


def _sum(rows: pd.DataFrame, name: str) -> float | None:
    values = column(rows, name).dropna()
    return None if values.empty else float(values.sum())


def pooled_attainment(rows: pd.DataFrame) -> float | None:
    """The share of every arrival of the windows that met every SLO (None without an SLO or arrivals)."""
    share, arrivals = column(rows, "slo_attainment"), column(rows, "arrivals")
    known = share.notna() & arrivals.notna() & (arrivals > 0)
    if not known.any():
        return None
    return float((share[known] * arrivals[known]).sum() / arrivals[known].sum())


def _behind(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[~rows["keeps_up"].map(as_bool)] if "keeps_up" in rows.columns else rows.iloc[0:0]


def _too_short(rows: pd.DataFrame) -> pd.DataFrame:
    """Windows too short to tell a growing queue from a steady one (summary.csv `too_short`: why)."""
    if "too_short" not in rows.columns:
        return rows.iloc[0:0]
    return rows[rows["too_short"].map(lambda text: isinstance(text, str) and bool(text.strip()))]


def _keeps_up(windows: pd.DataFrame) -> str:
    behind, short = _behind(windows), _too_short(windows)
    if not behind.empty:
        return f"no: falls behind in {len(behind)} of {len(windows)} windows"
    if not short.empty:
        return f"cannot tell in {len(short)} of {len(windows)} windows: {short['too_short'].iloc[0]}"
    return "yes"


def rate_evidence_rows(valid_rates: pd.DataFrame) -> list[dict]:
    """One row per K and rate, in K then rate order, over the valid rate windows."""
    rows = []
    for k in _ks(valid_rates):
        for rate in _rates(valid_rates[column(valid_rates, "k") == k]):
            windows = _at(valid_rates, rate, k)
            attained = pooled_attainment(windows)
            rows.append({
                "k": str(k), "rate": f"{rate:g}", "windows": str(len(windows)),
                "arrivals": format_cell("arrivals", _sum(windows, "arrivals")),
                "offered": _spread(windows, "offered_per_s"), "achieved": _spread(windows, "achieved_per_s"),
                "goodput": _spread(windows, "goodput_per_s"),
                "attainment": "no SLO set" if attained is None else format_cell("slo_attainment", attained),
                "ttft_p50": _spread(windows, "ttft_p50_ms"), "ttft_p99": _spread(windows, "ttft_p99_ms"),
                "itl_p50": _spread(windows, "itl_p50_ms"), "e2e_p99": _spread(windows, "e2e_p99_ms"),
                "failures": format_cell("failures", _sum(windows, "failures")),
                "running": _spread(windows, "running_mean"), "waiting": _spread(windows, "waiting_mean"),
                "kv_peak": format_cell("kv_usage_peak", column(windows, "kv_usage_peak").max()),
                "preemptions": format_cell("preemptions", _sum(windows, "preemptions")),
                "acceptance": _spread(windows, "acceptance_rate"), "drafted": _spread(windows, "drafted_per_step"),
                "keeps_up": _keeps_up(windows),
            })
    return rows


def verdict_at_rate(decision: Decision) -> Decision | None:
    """The decision made at the target rate: the run's own (rate stages only), or `at_rate` beside a users one."""
    if decision.at_rate is not None:
        return decision.at_rate
    return decision if decision.target_rate is not None else None


def offered_rate(windows: pd.DataFrame, rate: float) -> float:
    """The rate a K's windows at a configured rate were offered, pooled (their arrivals over their seconds, rounded
    as the capacity's points are: capacity/estimate.rate_points); `rate` where they do not say."""
    arrivals, seconds = _sum(windows, "arrivals"), _sum(windows, "duration_s")
    return round(arrivals / seconds, 6) if arrivals is not None and seconds else rate


def holds_measured(row: Capacity | None, rate: float) -> bool | None:
    """Whether a capacity row's bracket puts a measured `rate` among those its K holds (None: no bracket)."""
    if row is None or not row.rate_bracket:
        return None
    lo, hi = (list(row.rate_bracket) + [None, None])[:2]
    if hi is not None and rate >= hi - 1e-9 * hi:
        return False
    return lo is not None and rate <= lo + 1e-9 * lo


def _k_state(windows: pd.DataFrame, k: int, rate: float, capacity: Capacity | None) -> tuple[str, str]:
    """("holds" | "behind" | "short", the text) of one K at one rate: a K that falls behind says so with its
    finding, one that keeps up and still does not hold misses the SLO."""
    behind = _behind(windows)
    if not behind.empty:
        finding = str(behind["behind"].iloc[0]) if "behind" in behind.columns else f"falls behind at {rate:g} req/s"
        return "behind", f"K={k} {finding} (in {len(behind)} of {len(windows)} windows)"
    if holds_measured(capacity, offered_rate(windows, rate)) is False:
        attained = pooled_attainment(windows)
        met = "" if attained is None else f": every SLO met by {attained:.1%} of its arrivals"
        return "short", f"K={k} (capacity {capacity.rate_text or MISSING}{met})"
    return "holds", f"K={k}"


def per_rate_rows(valid_rates: pd.DataFrame, decision: Decision, capacity: list[Capacity] | None = None) -> list[dict]:
    """One row per rate: which K hold it, fall behind or miss the SLO there, and the verdict at the target rate.
    `capacity`: the run's capacity rows where `decision` (a workload variant's) does not carry them."""
    at_rate = verdict_at_rate(decision)
    rows_by_k = {row.k: row for row in (decision.capacity or capacity or []) if row.variant == decision.variant}
    rows = []
    for rate in _rates(valid_rates):
        states: dict[str, list[str]] = {"holds": [], "behind": [], "short": []}
        for k in _ks(_at(valid_rates, rate)):
            state, text = _k_state(_at(valid_rates, rate, k), k, rate, rows_by_k.get(k))
            states[state].append(text)
        is_target = at_rate is not None and math.isclose(at_rate.target_rate, rate, rel_tol=1e-9)
        row = {"rate": f"{rate:g}", "offered": _spread(_at(valid_rates, rate), "offered_per_s"), "target": is_target,
               "holds": ", ".join(states["holds"]) or "none", "behind": "; ".join(states["behind"]),
               "short": "; ".join(states["short"]), "status": "", "status_text": MISSING, "k": MISSING,
               "confidence": MISSING, "objective": MISSING,
               "reason": (f"not judged here: the verdict is made at the target rate, {at_rate.target_rate:g} req/s "
                          "(decision.target_rate)" if at_rate is not None else
                          "not judged: no target rate (set decision.target_rate to one of the rates)")}
        if is_target:
            row |= _verdict_cells(at_rate)
        rows.append(row)
    return rows


def _verdict_cells(at_rate: Decision) -> dict:
    shown_k = at_rate.recommended.k if at_rate.recommended is not None else at_rate.leading_k
    chosen = next((c for c in candidate_rows(at_rate) if c["leading"]), None)
    decided = at_rate.recommended is not None
    return {"status": at_rate.status, "status_text": DECISION_STATUS_TEXT[at_rate.status],
            "k": MISSING if shown_k is None else (str(shown_k) if decided else f"({shown_k} leads)"),
            "confidence": MISSING if at_rate.confidence is None else f"{math.floor(at_rate.confidence * 100):.0f}%",
            "objective": MISSING if chosen is None else f"{chosen['objective']} {chosen['objective_range']}",
            "reason": "the verdict at the target rate, above"}
