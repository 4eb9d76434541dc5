"""The report's confirmation section: the recommendation's own life against the per-K lives, stage by
stage, each boundary of a schedule crossed. Pure: a `Decision` in, display strings out (the template escapes).
"""
from __future__ import annotations

from ..decision.schema import ConfirmStage, Decision, Range
from .cells import MISSING, relative_href, shell_text

TONE = {"confirmed": "ok", "confirmed with a cost": "warn", "not confirmed": "bad", "not in effect": "bad",
        "pending": "warn"}
ROLE_TEXT = {"stage": "sweep stage", "below": "threshold, below", "above": "threshold, above"}
OUTCOME_TONE = {"as expected": "pass", "better": "pass", "cost": "unknown", "worse than the single K": "unknown",
                "collapse": "fail", "failures": "fail", "not in effect": "fail", "no measurement": "missing",
                "no expectation": "missing"}


# the two ways a schedule fails, told apart: the server ignored it, or it ran and cost throughput
FINDING = {"not in effect": "Finding: the server did not apply the schedule (its drafted tokens per step show another "
                            "K at the measured batch), so the schedule was never measured; this is not the schedule "
                            "costing throughput at its boundary.",
           "not confirmed": "Finding: the server applied the schedule (its drafted tokens per step match it) and it "
                            "cost throughput: at its boundary, at the target, or in failures."}


def _num(value: float | None, digits: int = 2) -> str:
    return MISSING if value is None else f"{value:,.{digits}f}"


def _pct(value: float | None) -> str:
    return MISSING if value is None else f"{value:+.1%}"


def _range(r: Range, fmt) -> str:
    return f"[{'−∞' if r.low is None else fmt(r.low)}, {'∞' if r.high is None else fmt(r.high)}]"


def _row(stage: ConfirmStage) -> dict:
    return {
        "users": str(stage.users), "role": ROLE_TEXT[stage.role], "k": MISSING if stage.k is None else str(stage.k),
        "batch": f"{_num(stage.running_mean, 1)} ({_num(stage.expected_running_mean, 1)})",
        "objective": f"{_num(stage.objective)} {_range(stage.objective_range, _num)}",
        "expected": f"{_num(stage.expected)} {_range(stage.expected_range, _num)}",
        "expected_from": stage.expected_from,
        "difference": "" if stage.difference is None else
                      f"{_pct(stage.difference)} {_range(stage.difference_range, _pct)}",
        "vs_single": "" if stage.vs_single is None else f"{_pct(stage.vs_single)} {_range(stage.vs_single_range, _pct)}",
        "tpot": f"{_num(stage.tpot_p50_ms, 1)} ({_num(stage.expected_tpot_p50_ms, 1)})",
        "drafted": _num(stage.drafted_per_step, 1),
        "outcome": stage.outcome, "tone": OUTCOME_TONE[stage.outcome], "text": stage.text,
    }


def _finding(status: str, kind: str, stages: list[ConfirmStage]) -> str:
    """Which of the two a schedule's failure is; the cost only where the drafts were read and matched."""
    checked = any(stage.drafted_per_step is not None for stage in stages)
    return FINDING.get(status, "") if kind == "schedule" and (status == "not in effect" or checked) else ""


def confirmation_view(decision: Decision) -> dict | None:
    c = decision.confirmation
    if c is None:
        return None
    first_life = c.life.split(", ")[0] if c.life else ""
    schedule_argv = decision.per_batch_size.argv if c.kind == "schedule" and decision.per_batch_size else None
    stands = c.status in ("confirmed", "confirmed with a cost")
    return {
        "status": c.status, "tone": TONE[c.status], "single_k_stands": c.kind == "schedule" and not stands,
        "finding": _finding(c.status, c.kind, c.stages), "kind": c.kind, "verdict": c.verdict, "scope": c.scope,
        "life": c.life, "life_href": relative_href(first_life) + "/" if first_life else "",
        "argv_shell": shell_text(c.argv), "single_k": "" if c.single_k is None else str(c.single_k),
        "use_schedule": shell_text(schedule_argv) if stands and schedule_argv else "",
        "crossings": list(c.crossings), "reasons": list(c.reasons), "costs": list(c.costs),
        "stages": [_row(stage) for stage in c.stages],
        "boundary_notes": [f"batch {b.batch} -> {b.batch + 1}: {b.note}" for b in c.boundaries if b.note],
        "drafted_notes": [f"{s.users} users: {s.drafted_note}" for s in c.stages if s.drafted_note],
    }
