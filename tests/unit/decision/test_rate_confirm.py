"""The confirmation of a verdict at a rate (decision/confirmation/rate_confirm.py): planned only when asked
(decision.confirm = "always") and decided; confirmed where its own life keeps up and holds the SLO at the rate, not
confirmed (and no longer decided) where it falls behind, "not in effect" where its drafting says another K ran."""
from __future__ import annotations

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.confirmation.rate_confirm import (is_rate_plan, judge_at_rate, plan_at_rate,
                                                                 with_rate_confirmation)
from lookahead_runner.decision.schema import ConfirmLife, Decision, Recommended

from .rate_windows_factory import rate_window

P = DecisionConfig(slo={"ttft_p99_ms": 500.0}, confirm="always")
AT_RATE = Decision(status="decided", verdict="At 20 req/s: set K=4: ...", target_rate=20.0,
                   recommended=Recommended(k=4, setting="k4", argv=["serve"]), leading_k=4)
DONE = [ConfirmLife("confirm/r0", "done")]


def test_planned_only_when_asked_and_decided_and_runs_the_target_rate_stage_alone():
    plan = plan_at_rate(AT_RATE, P, 30.0)
    assert plan.kind == "k" and plan.k == 4 and plan.stages == [{"rate": 20.0, "duration_s": 30.0}]
    assert is_rate_plan(plan) and plan.scope == "1 life of the target rate stage (20 req/s)"
    assert plan_at_rate(AT_RATE, DecisionConfig(slo={"ttft_p99_ms": 500.0}), 30.0) is None   # "schedule": not a K
    assert plan_at_rate(AT_RATE.model_copy(update={"status": "not_decided"}), P, 30.0) is None


def test_its_own_life_keeping_up_and_the_slo_confirms_it():
    plan = plan_at_rate(AT_RATE, P, 30.0)
    verdict = judge_at_rate(plan, AT_RATE, [rate_window(4, 20.0, 600, 600)], DONE, ["serve"], P)
    assert verdict.status == "confirmed" and verdict.verdict.startswith("Confirmed: K=4 at 20 req/s ran in a life")
    assert with_rate_confirmation(AT_RATE, verdict).status == "decided"


def test_its_own_life_falling_behind_is_not_confirmed_and_not_decided_any_more():
    plan = plan_at_rate(AT_RATE, P, 30.0)
    verdict = judge_at_rate(plan, AT_RATE, [rate_window(4, 20.0, 600, 300, behind=True)], DONE, ["serve"], P)
    assert verdict.status == "not confirmed" and "keeps up: falls behind at 20 req/s" in verdict.verdict
    out = with_rate_confirmation(AT_RATE, verdict)
    assert out.status == "not_decided" and out.recommended is None
    assert out.verdict.startswith("Not decided yet at 20 req/s: the sweep picked K=4, but its own life disagreed.")


def test_a_window_that_drafted_otherwise_is_not_in_effect():
    plan = plan_at_rate(AT_RATE, P, 30.0)
    off = "not in effect: K=4 drafted 0.0 tokens per step (expected 4)"
    verdict = judge_at_rate(plan, AT_RATE, [rate_window(4, 20.0, 600, 600, valid=False, invalid_reason=off)], DONE,
                            ["serve"], P)
    assert verdict.status == "not in effect" and off in verdict.verdict
