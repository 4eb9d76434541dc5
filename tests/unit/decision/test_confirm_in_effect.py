"""A schedule the server ignored (issue 29): the confirmation reads what each stage drafted per step at its real
batch and says "not in effect", told apart from a schedule that ran and cost throughput at its boundary; and a K
whose windows at the target were all not in effect is not recommended (decision/gates/in_effect.py)."""
import math

from unit.synthetic import window
from unit.decision.test_confirm import ARGV, P, STAGES, decided  # noqa: F401  (the fixture)

from lookahead_runner.cli import EXIT_NOT_DECIDED, exit_code
from lookahead_runner.decision import Cell, decide, evidence
from lookahead_runner.decision.confirmation.confirm import judge, plan, with_confirmation
from lookahead_runner.decision.gates.in_effect import WindowFinding, findings_from, with_settings_in_effect
from lookahead_runner.decision.schema import ConfirmLife, Decision
from lookahead_runner.report.confirmation import confirmation_view

REQ = {8: 20.1, 18: 21.8, 21: 22.1, 32: 31.9}
BATCH = {8: 7.4, 18: 16.7, 21: 19.5, 32: 29.8}


def cells(drafted_by_users, off_by_users=None, req=REQ):
    off_by_users = off_by_users or {}
    return {u: Cell(4, u, (window(4, u, r, 0, running_mean=BATCH[u], drafted_per_step=drafted_by_users[u],
                                  not_in_effect=off_by_users.get(u, "")),)) for u, r in req.items()}


def confirm(decided, confirmed):
    ev, decision = decided
    the_plan = plan(decision, ev, STAGES, P)
    return judge(the_plan, decision, ev, confirmed, [ConfirmLife("confirm/r0", "done")], ["argv"], P)


def test_a_schedule_the_server_ignored_is_not_in_effect_and_the_single_k_stands(decided):
    # K=4 drafted at every batch: above the boundary (batch 19 and up) the schedule says K=0
    ignored = {21: "the schedule drafted 4.0 tokens per step at batch 20 (expected no drafts: K=0 at that batch)",
               32: "the schedule drafted 4.0 tokens per step at batch 30 (expected no drafts: K=0 at that batch)"}
    c = confirm(decided, cells({u: 4.0 for u in REQ}, ignored))
    assert c.status == "not in effect", c.verdict
    assert c.verdict.startswith("Schedule not in effect on this server: use the single K. The per-batch-size "
                                "schedule (K=4 up to batch 18, K=0 above) ran in a life of its own (confirm/r0), "
                                "and the server did not apply it: ")
    assert "The schedule's K=0 above batch 18 was not applied: 4.0 drafted tokens per step at batch 30 (32 users)" \
        in c.verdict
    assert "K=0 alone stands (the command above)" in c.verdict and "vLLM #51510" in c.verdict
    assert "not the schedule costing throughput at a boundary" in c.verdict
    assert [(s.users, s.outcome) for s in c.stages if s.outcome == "not in effect"] == [(21, "not in effect"),
                                                                                      (32, "not in effect")]
    view = confirmation_view(with_confirmation(decided[1], c))
    assert view["single_k_stands"] and view["finding"].startswith("Finding: the server did not apply the schedule")
    assert [row["drafted"] for row in view["stages"]] == ["4.0"] * 4


def test_the_same_figures_with_the_schedule_applied_are_judged_on_req_per_s_and_never_say_not_in_effect(decided):
    c = confirm(decided, cells({8: 4.0, 18: 4.0, 21: math.nan, 32: math.nan}))
    assert c.status == "confirmed" and "not in effect" not in c.verdict and "not applied" not in c.verdict
    assert [s.drafted_per_step for s in c.stages] == [4.0, 4.0, None, None]


def test_a_schedule_that_ran_and_collapsed_at_its_boundary_is_a_cost_finding_not_a_server_that_ignored_it(decided):
    c = confirm(decided, cells({8: 4.0, 18: 4.0, 21: math.nan, 32: math.nan}, req=REQ | {21: 12.0}))
    assert c.status == "not confirmed" and "not in effect" not in c.verdict
    view = confirmation_view(with_confirmation(decided[1], c))
    assert view["finding"].startswith("Finding: the server applied the schedule") and view["single_k_stands"]


def test_a_single_k_not_in_effect_in_its_own_life_leaves_the_verdict_not_decided(decided):
    ev, decision = decided
    single = decision.model_copy(update={"per_batch_size": None})
    the_plan = plan(single, ev, STAGES, P.model_copy(update={"confirm": "always"}))
    off = "K=0 drafted 4.0 tokens per step (expected no drafts: K=0)"
    confirmed = {u: Cell(0, u, (window(0, u, 31.9, 0, drafted_per_step=4.0, not_in_effect=off),)) for u in (8, 32)}
    c = judge(the_plan, single, ev, confirmed, [ConfirmLife("confirm/r0", "done")], ["argv"], P)
    assert c.status == "not in effect" and c.verdict.startswith("K=0 not in effect in its own life (confirm/r0): K=0 "
                                                                "was not applied: 4.0 drafted tokens per step")
    after = with_confirmation(single, c)
    assert after.recommended is None and exit_code(after) == EXIT_NOT_DECIDED


# --- decision/gates/in_effect.py: a K whose target windows were all not in effect --------------------------------------
def test_a_k_with_every_target_window_not_in_effect_is_named_in_the_verdict_with_the_causes():
    # K=4's windows drafted 2 tokens a step: left out, so only K=0 is left at the target
    ev = evidence([window(0, u, 10.0 * u / 8, r) for u in (8, 32) for r in range(2)], 32)
    decision = decide(ev, P, ARGV, "list")
    reason = "K=4 drafted 2.0 tokens per step (expected 4)"
    rows = ([{"k": 0, "users": u, "invalid_reason": ""} for u in (8, 32) for _ in range(2)]
            + [{"k": 4, "users": u, "invalid_reason": f"not in effect: {reason}"} for u in (8, 32) for _ in range(2)])
    findings = findings_from(rows)
    assert WindowFinding(4, 32, reason) in findings and WindowFinding(0, 8, "") in findings
    after = with_settings_in_effect(decision, findings)
    assert after.verdict.startswith("K=4 cannot be recommended: none of its 2 windows at the target (32 users) had it "
                                    f"in effect ({reason}), so they were left out of its evidence. Likely causes: K "
                                    "clamped by num_speculative_tokens")
    for cause in ("max_model_len", "vLLM #51510", "data parallelism"):
        assert cause in after.verdict
    assert after.recommended is None and exit_code(after) == EXIT_NOT_DECIDED  # only K=0 left: nothing to compare
    assert Decision.model_validate_json(after.model_dump_json()).verdict == after.verdict


def test_some_windows_off_is_a_diagnosis_and_none_off_leaves_the_decision_alone():
    ev = evidence([window(k, u, 10.0 + k, r) for k in (0, 4) for u in (8, 32) for r in range(2)], 32)
    decision = decide(ev, P, ARGV, "list")
    some = [WindowFinding(4, 8, "K=4 drafted 3.0 tokens per step (expected 4)"), WindowFinding(4, 32)]
    after = with_settings_in_effect(decision, some)
    assert after.verdict == decision.verdict
    assert after.diagnoses[-1].startswith("K=4 was not in effect in 1 of 2 windows (K=4 drafted 3.0")
    assert with_settings_in_effect(decision, [WindowFinding(4, 32)]) is decision


def test_the_evidence_table_shows_each_cells_drafted_tokens_per_step_beside_acceptance():
    from lookahead_runner.report.verdict import evidence_rows
    ev = evidence([window(k, u, 10.0 + k, r, **({"drafted_per_step": 3.9 + 0.2 * r} if k else {}))
                   for k in (0, 4) for u in (8, 32) for r in range(2)], 32)
    decision = decide(ev, P, ARGV, "list")
    by_k = {(c.k, c.users): c.drafted_per_step for c in decision.cells}
    assert by_k[(4, 32)] == 4.0 and by_k[(0, 32)] is None       # the mean over its two windows; K=0: none
    rows = {(r["k"], r["users"]): r["drafted"] for r in evidence_rows(decision)}
    assert rows[("4", "32")] == "4.00" and rows[("0", "32")] == "–"
