"""The confirmation of a verdict at an arrival rate (a run of rate stages only, decision.confirm = "always"): the
recommended K started in a life of its own, exactly as the report prints it, running the target rate stage
alone; it is confirmed where that life keeps up with the rate and no SLO's attainment is below its own
percentile beyond its interval (the gates the verdict judged, gates/rate_gates.py), as the user-stage
confirmation holds a K to what the per-K lives showed within the noise. A window whose drafting says the K was
not in effect is "not in effect"; one that falls behind or misses the SLO is "not confirmed", and the verdict is
then not decided (its own life disagreed). Pure: the plan, the decision and the windows in, a `Confirmation` out.
"""
from __future__ import annotations

from collections.abc import Sequence

from ...config import DecisionConfig
from ..cells.rate_cell import RateCell, cells_at, same_rate
from ..cells.rate_window import RateWindow
from ..gates import rules
from ..gates.in_effect import NOT_IN_EFFECT, PREFIX
from ..gates.rate_gates import attainment_check, keeps_up_check
from ..schema import Confirmation, ConfirmLife, ConfirmPlan, Decision


def is_rate_plan(plan: ConfirmPlan | None) -> bool:
    return plan is not None and any(stage.get("rate") is not None for stage in plan.stages)


def plan_at_rate(decision: Decision, p: DecisionConfig, duration_s: float) -> ConfirmPlan | None:
    """What confirms a verdict at a rate: the recommended K, the target rate stage alone (None: nothing to confirm
    unless decision.confirm = "always" and the verdict is decided)."""
    if p.confirm != "always" or decision.status != "decided" or decision.recommended is None \
            or decision.target_rate is None:
        return None
    lives = "life" if p.confirm_repeats == 1 else "lives"
    return ConfirmPlan(kind="k", k=decision.recommended.k, stages=[{"rate": decision.target_rate,
                                                                    "duration_s": duration_s}],
                       repeats=p.confirm_repeats,
                       scope=f"{p.confirm_repeats} {lives} of the target rate stage ({decision.target_rate:g} req/s)")


def judge_at_rate(plan: ConfirmPlan, decision: Decision, windows: Sequence[RateWindow], lives: list[ConfirmLife],
                  argv: list[str], p: DecisionConfig) -> Confirmation:
    rate = plan.stages[0]["rate"]
    out = Confirmation(status="pending", kind="k", life=", ".join(life.folder for life in lives), argv=argv,
                       k=plan.k, single_k=plan.k, scope=plan.scope)
    what = f"K={plan.k} at {rate:g} req/s"
    if not any(life.state == "done" for life in lives):
        failed = [life for life in lives if life.state == "failed"]
        if not failed:
            out.verdict = f"Confirmation of {what} not run yet (continue with --resume)."
            return out
        out.status, out.reasons = "not confirmed", [f"{life.folder}: {life.reason}" for life in failed]
        out.verdict = f"Not confirmed: {what}, run in a life of its own ({out.life}): the server did not run it: " \
                      f"{failed[0].reason}."
        return out
    mine = [w for w in windows if same_rate(w.rate, rate)]
    off = next((w.invalid_reason for w in mine if not w.valid and PREFIX in w.invalid_reason), "")
    cell = cells_at(mine, rate).get(plan.k)
    if cell is None and off:
        out.status, out.reasons = NOT_IN_EFFECT, [off]
        out.verdict = f"K={plan.k} not in effect in its own life ({out.life}) at {rate:g} req/s: {off}."
        return out
    if cell is None:
        out.status = "not confirmed"
        out.reasons = [next((w.invalid_reason for w in mine if w.invalid_reason), "no window at the target rate")]
        out.verdict = f"Not confirmed: {what}, run in a life of its own ({out.life}): no valid window ({out.reasons[0]})."
        return out
    checks = _checks(cell, rate, p)
    failed = [c for c in checks if c.status == rules.FAIL]
    evidence = "; ".join(f"{c.name}: {c.evidence}" for c in checks)
    if failed:
        out.status, out.reasons = "not confirmed", [f"{c.name}: {c.evidence}" for c in failed]
        out.verdict = (f"Not confirmed: {what}, run in a life of its own ({out.life}), "
                       f"{'; '.join(out.reasons)}. The sweep's figures did not hold in a life of their own: add "
                       "repeats before trusting them.")
        return out
    out.status = "confirmed"
    out.verdict = f"Confirmed: {what} ran in a life of its own ({out.life}) and held: {evidence}."
    return out


def _checks(cell: RateCell, rate: float, p: DecisionConfig):
    stats = cell.measure(p)
    return [keeps_up_check(cell, rate), *([attainment_check(stats, p)] if p.slos else [])]


def with_rate_confirmation(decision: Decision, confirmation: Confirmation) -> Decision:
    """The verdict at the rate with its confirmation told; a K its own life contradicted is no verdict to act on."""
    out = decision.model_copy(deep=True)
    out.confirmation = confirmation
    out.verdict = f"{out.verdict} {confirmation.verdict}".strip()
    if confirmation.status in ("not confirmed", NOT_IN_EFFECT):
        out.status, out.recommended = "not_decided", None
        out.verdict = (f"Not decided yet at {out.target_rate:g} req/s: the sweep picked K={confirmation.k}, but its "
                       f"own life disagreed. {confirmation.verdict}")
        out.next_runs.append(f"Add repeats of K={confirmation.k} (load.repeats): its own life disagreed with the "
                             "sweep's.")
    return out
