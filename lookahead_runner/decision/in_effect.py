"""A setting not in effect is not that setting: what the decision says of the K whose windows drafted otherwise.

A window whose drafted tokens per step are off from its K (telemetry/drafting.py) is invalid, with the reason
"not in effect: K=4 drafted 2.1 tokens per step (expected 4)" (runfolder/analysis.py), so it is already out of
that K's evidence like any invalid window. Here the decision says so: a K whose every window at the target was
not in effect cannot be recommended, and the verdict names it with the likely causes; a K with some such windows
gets a diagnosis. Pure: the findings in, the decision out.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..telemetry.drafting import LIKELY_CAUSES
from .schema import Decision

PREFIX = "not in effect: "


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
