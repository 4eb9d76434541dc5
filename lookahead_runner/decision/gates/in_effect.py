"""A setting not in effect is not that setting: what the decision says of the K whose windows drafted otherwise.

A window whose drafted tokens per step are off from its K (telemetry/drafting.py) is invalid, with the reason
"not in effect: K=4 drafted 2.1 tokens per step (expected 4)" (runfolder/analysis.py), so it is already out of
that K's evidence like any invalid window. Here the decision says so: a K whose every window at the target was
not in effect cannot be recommended, and the verdict names it with the likely causes; a K with some such windows
gets a diagnosis. And the confirmation's words for a schedule (or K) its own life did not run (confirm.py).
Pure: the findings in, the decision out.
"""
from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from ...telemetry.drafting import CLAMPED, CUT_AT_MAX_MODEL_LEN, DATA_PARALLEL, LIKELY_CAUSES, SCHEDULE_IGNORED
from ...vllm.schedule import Schedule
from ..schema import Confirmation, ConfirmStage, Decision

PREFIX = "not in effect: "
NOT_IN_EFFECT = "not in effect"  # a confirmation stage's outcome and the confirmation's status


@dataclass(frozen=True)
class WindowFinding:
    """One window of a per-K life: where it ran, and why it was not in effect ("" = in effect)."""

    k: int
    users: int
    reason: str = ""


def findings_from(rows: Iterable[dict]) -> list[WindowFinding]:
    """Summary rows (of the sweep's lives) -> what each window says of its K; rows the check never ran say in effect."""
    out = []
    for row in rows:
        reason = next((part[len(PREFIX):] for part in str(row.get("invalid_reason") or "").split("; ")
                       if part.startswith(PREFIX)), "")
        out.append(WindowFinding(int(row["k"]), int(row["users"]), reason))
    return out


def with_settings_in_effect(decision: Decision, findings: list[WindowFinding]) -> Decision:
    """The decision, telling which K were not in effect: a K none of whose target windows was cannot be
    recommended (the verdict names it and the likely causes); any other such window is a diagnosis."""
    target = decision.target_users
    off = [f for f in findings if f.reason]
    if not off:
        return decision
    decision = decision.model_copy(deep=True)
    lines = []
    for k in sorted({f.k for f in off}):
        mine = [f for f in findings if f.k == k]
        at_target = [f for f in mine if f.users == target]
        reason = next(f.reason for f in mine if f.reason)
        if at_target and all(f.reason for f in at_target):
            lines.append(f"K={k} cannot be recommended: none of its {len(at_target)} "
                         f"{'window' if len(at_target) == 1 else 'windows'} at the target ({target} users) had it in "
                         f"effect ({reason}), so they were left out of its evidence")
        else:
            count = sum(1 for f in mine if f.reason)
            decision.diagnoses.append(f"K={k} was not in effect in {count} of {len(mine)} windows ({reason}): "
                                      "those windows were left out of its evidence.")
    if lines:
        causes = "; ".join(LIKELY_CAUSES)
        decision.verdict = f"{'. '.join(lines)}. Likely causes: {causes}. {decision.verdict}".strip()
        decision.reasons.insert(0, f"{'. '.join(lines)} (drafted tokens per step: summary.csv drafted_per_step "
                                   f"against drafted_expected).")
    return decision


def not_applied(schedule: Schedule | None, k: int, drafted: float, batch: float) -> str:
    """"The schedule's K=0 above batch 84 was not applied: 4.0 drafted tokens per step at batch 91"."""
    at = f" at batch {batch:.0f}" if math.isfinite(batch) else ""
    if schedule is None:
        return f"K={k} was not applied: {drafted:.1f} drafted tokens per step{at}"
    ranges = sorted(schedule.ranges, key=lambda r: r.lo)
    size = max(1, round(batch)) if math.isfinite(batch) else 1
    index = max((i for i, r in enumerate(ranges) if r.lo <= size), default=0)
    r = ranges[index]
    where = (f"above batch {r.lo - 1}" if index == len(ranges) - 1 and index > 0 else
             f"up to batch {r.hi}" if index == 0 else f"for batch {r.lo}-{r.hi}")
    return f"The schedule's K={min(r.k, k)} {where} was not applied: {drafted:.1f} drafted tokens per step{at}"


def not_in_effect_verdict(out: Confirmation, what: str, decision: Decision,
                          ignored: list[ConfirmStage]) -> Confirmation:
    """The server did not run what was confirmed: its figures are not the schedule's (nor the K's), whatever they
    show, so it is not judged on them at all; the single K stands."""
    out.status = NOT_IN_EFFECT
    out.reasons = [r.text.split("; ")[0] + f" ({r.users} users)" for r in sorted(ignored, key=lambda r: r.users)]
    why = "; ".join(out.reasons)
    causes = "Likely causes: " + "; ".join((SCHEDULE_IGNORED, DATA_PARALLEL) if out.kind == "schedule"
                                         else (CLAMPED, CUT_AT_MAX_MODEL_LEN)) + "."
    if out.kind == "schedule":
        stands = (f"K={decision.recommended.k} alone stands (the command above)" if decision.recommended
                  else "no single K stands either (not decided at the target)")
        out.verdict = (f"Schedule not in effect on this server: use the single K. {what[0].upper() + what[1:]} ran "
                       f"in a life of its own ({out.life}), and the server did not apply it: {why}. This is not the "
                       f"schedule costing throughput at a boundary: the server ran another K. "
                       f"{stands[0].upper() + stands[1:]}. {causes}")
    else:
        out.verdict = (f"K={out.k} not in effect in its own life ({out.life}): {why}. Its figures there are not "
                       f"K={out.k}'s. {causes}")
    return out
