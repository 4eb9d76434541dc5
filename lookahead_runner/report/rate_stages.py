"""The report's table of rate stages (open loop): one row per K, repeat and rate window, from summary.csv's rate
columns (runfolder/rate_windows.py); and a rate ramp's knee (decision.rate_knee, decision/ramp.py). Pure: the
summary or the decision in, display text out (the template escapes it)."""
from __future__ import annotations

import pandas as pd

from ..decision.schema import Decision
from .cells import MISSING, as_bool, format_cell, is_missing


def rate_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of rate stages (a summary written before issue 37 has none)."""
    if summary.empty or "rate" not in summary.columns:
        return summary.iloc[0:0]
    return summary[pd.to_numeric(summary["rate"], errors="coerce").notna()]


def user_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """The rows of user stages (closed loop): what the users charts and the per-users decision read."""
    if summary.empty or "rate" not in summary.columns:
        return summary
    return summary[pd.to_numeric(summary["rate"], errors="coerce").isna()]


def _pair(record: dict, start: str, end: str) -> str:
    first, last = record.get(start), record.get(end)
    if is_missing(first) or is_missing(last):
        return MISSING
    return f"{float(first):.0f} → {float(last):.0f}"


def _attainment(record: dict) -> str:
    value = record.get("slo_attainment")
    if is_missing(value):
        return "no SLO set"
    low, high = record.get("slo_attainment_low"), record.get("slo_attainment_high")
    bounds = "" if is_missing(low) or is_missing(high) else f" [{float(low):.1%}, {float(high):.1%}]"
    return f"{float(value):.1%}{bounds}"


def rate_stage_view(summary: pd.DataFrame) -> list[dict]:
    """Display rows for the rate stages' table, in K, repeat, stage order."""
    rows = []
    frame = rate_rows(summary)
    for record in frame.sort_values([c for c in ("k", "repeat", "stage") if c in frame.columns],
                                    kind="stable").to_dict("records"):
        keeps_up = as_bool(record.get("keeps_up"))
        held, not_sent = record.get("held"), record.get("not_sent")
        rows.append({
            "k": format_cell("k", record.get("k")), "repeat": format_cell("repeat", record.get("repeat")),
            "variant": "" if is_missing(record.get("variant")) else str(record.get("variant", "")),
            "stage": format_cell("stage", record.get("stage")),
            "rate": format_cell("rate", record.get("rate")),
            "offered": format_cell("offered_per_s", record.get("offered_per_s")),
            "achieved": format_cell("achieved_per_s", record.get("achieved_per_s")),
            "attainment": _attainment(record),
            "goodput": format_cell("goodput_per_s", record.get("goodput_per_s")),
            "late": f"{format_cell('late_p50_ms', record.get('late_p50_ms'))} / "
                    f"{format_cell('late_p99_ms', record.get('late_p99_ms'))}",
            "held": (f"{format_cell('held', held)} held, {format_cell('not_sent', not_sent)} not sent"
                     if not is_missing(held) and float(held) else "none"),
            "outstanding": _pair(record, "outstanding_start", "outstanding_end"),
            "waiting": _pair(record, "waiting_start", "waiting_end"),
            "keeps_up": (f"no: K={format_cell('k', record.get('k'))} {record.get('behind')}" if not keeps_up
                         else f"cannot tell: {record['too_short']}" if not is_missing(record.get("too_short"))
                         and record.get("too_short") else "yes"),
            "valid": as_bool(record.get("valid", True)),
            "invalid_reason": "" if is_missing(record.get("invalid_reason")) else str(record.get("invalid_reason")),
        })
    return rows


def rate_knee_view(decision: Decision) -> dict | None:
    """A rate ramp's knee (decision.rate_knee): its reason and one row per rate."""
    knee = decision.rate_knee
    if knee is None:
        return None
    rows = []
    for step in knee.steps:
        attainment = MISSING if step.attainment is None else (
            f"{step.attainment:.1%}" + ("" if step.attainment_range.low is None or step.attainment_range.high is None
                                        else f" [{step.attainment_range.low:.1%}, {step.attainment_range.high:.1%}]"))
        rows.append({"rate": f"{step.rate:g}", "offered": format_cell("offered_per_s", step.offered_per_s),
                     "achieved": format_cell("achieved_per_s", step.achieved_per_s), "attainment": attainment,
                     "queue": step.queue or MISSING, "holds": step.holds,
                     "status": "yes" if step.holds else f"no: {step.reason}"})
    return {"k": str(knee.k), "rate": MISSING if knee.rate is None else f"{knee.rate:g}", "reason": knee.reason,
            "steps": rows}
