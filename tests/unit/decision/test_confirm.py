"""The confirmation (issue 16, parts 2 and 3) as stories on synthetic windows: what is confirmed, which
user counts land next to a schedule's boundary, and each verdict the confirmation life can end in."""
import json

import pytest
from unit.synthetic import window

from lookahead_runner.cli import EXIT_NOT_DECIDED, exit_code
from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import Cell, decide, evidence
from lookahead_runner.decision.confirmation.confirm import judge, plan, what_to_confirm, with_confirmation
from lookahead_runner.decision.schema import ConfirmLife, Decision
from lookahead_runner.decision.confirmation.thresholds import (batch_curve, boundaries, confirmation_stages,
                                                               lands_in_band, users_for_batch)

P = DecisionConfig(resamples=300)
SPEC = {"method": "draft_model", "model": "sim/d", "num_speculative_tokens": 4}
ARGV = {0: ["vllm", "serve", "m"], 4: ["vllm", "serve", "m", "--speculative-config", json.dumps(SPEC)]}
STAGES = [(8, 20.0), (32, 20.0)]
BATCH = {8: 7.5, 32: 30.0}
# K=4 doubles req/s at 8 users; at 32 users it verifies 5 tokens a sequence and loses to K=0
SWEEP = {0: {8: 10.0, 32: 32.0}, 4: {8: 20.0, 32: 24.0}}


def sweep_evidence(target=32):
    ws = [window(k, users, req * (1 + 0.01 * r), r, running_mean=BATCH[users])
          for k, by_users in SWEEP.items() for users, req in by_users.items() for r in range(2)]
    return evidence(ws, target)


@pytest.fixture(scope="module")
def decided():
    ev = sweep_evidence()
    decision = decide(ev, P, ARGV, "list")
    assert [(s.users, s.k) for s in decision.per_stage] == [(8, 4), (32, 0)], decision.per_stage
    assert decision.per_batch_size.ranges == [[1, 18, 4], [19, 1_000_000, 0]]
    return ev, decision


def confirm_cells(req_by_users: dict[int, float], batch_by_users: dict[int, float] | None = None, **common):
    batch_by_users = batch_by_users or {}
    return {u: Cell(4, u, (window(4, u, req, 0, running_mean=batch_by_users.get(u, u * 0.93), **common),))
            for u, req in req_by_users.items()}


def run(decided, req_by_users, lives=(ConfirmLife("confirm/r0", "done"),), p=P, **common):
    ev, decision = decided
    the_plan = plan(decision, ev, STAGES, p)
    return the_plan, judge(the_plan, decision, ev, confirm_cells(req_by_users, **common), list(lives),
                           ["argv"], p)


def test_a_schedule_is_confirmed_by_default_and_a_single_k_only_when_asked(decided):
    _, decision = decided
    assert what_to_confirm(decision, "schedule") == "schedule" and what_to_confirm(decision, "off") is None
    single = decision.model_copy(update={"per_batch_size": None})
    assert what_to_confirm(single, "schedule") is None and what_to_confirm(single, "always") == "k"
    assert what_to_confirm(single.model_copy(update={"mode": "ramp"}), "always") is None


def test_threshold_users_land_five_percent_below_and_above_each_boundary(decided):
    ev, decision = decided
    (bound,) = boundaries(decision.per_batch_size.ranges, ev)
    assert (bound.batch, bound.k_below, bound.k_above) == (18, 4, 0)
    # K=4's real batch: 7.5 at 8 users, 30 at 32: 17.1 (18 - 5 %) at 18.2 users; K=0's 19 (past 18) at 20.3;
    # rounded away from the boundary
    assert (bound.users_below, bound.users_above) == (18, 21)
    assert 0.9 * 18 <= bound.expected_batch_below <= 18 < 18 + 1 <= bound.expected_batch_above <= 1.1 * 19
    stages = confirmation_stages(STAGES, 32, "all", [bound])
    assert stages == [{"users": u, "duration_s": 20.0} for u in (8, 18, 21, 32)]
    assert [s["users"] for s in confirmation_stages(STAGES, 32, "target", [bound])] == [18, 21, 32]
    assert lands_in_band(17.0, 18, "below") and not lands_in_band(15.0, 18, "below")
    assert lands_in_band(19.5, 18, "above") and not lands_in_band(18.2, 18, "above")


def test_a_side_the_k_never_reaches_uses_the_other_k_and_says_so():
    flat = evidence([window(4, u, 10, r, running_mean=b) for u, b in ((8, 7.0), (32, 12.0)) for r in range(2)]
                    + [window(0, u, 10, r, running_mean=b) for u, b in ((8, 7.5), (32, 30.0)) for r in range(2)], 32)
    assert users_for_batch(batch_curve(flat, 4), 20.0) is None  # saturated at 12: never 20
    (bound,) = boundaries([[1, 21, 4], [22, 1_000_000, 0]], flat)
    assert bound.users_below is not None and "K=4's real batch never reaches 20" in bound.note
    assert users_for_batch([(0, 0), (8, 7.5)], 11.0) == pytest.approx(11.73, abs=0.01)  # 1.5x past the last stage
    assert users_for_batch([(0, 0), (8, 7.5)], 12.0) is None


def test_confirmed_when_every_stage_and_boundary_delivers_what_the_per_k_lives_showed(decided):
    # a threshold stage expects the line between its K's cells beside it: k4 21.7 at 18 users, k0 21.9 at 21
    the_plan, c = run(decided, {8: 20.1, 18: 21.8, 21: 22.1, 32: 31.9})
    assert c.status == "confirmed", c.verdict
    assert c.verdict.startswith("Confirmed: the per-batch-size schedule (K=4 up to batch 18, K=0 above) ran in a "
                                "life of its own (confirm/r0)") and "across each boundary" in c.verdict
    assert [(s.users, s.role, s.k) for s in c.stages] == [(8, "stage", 4), (18, "below", 4), (21, "above", 0),
                                                        (32, "stage", 0)]
    row = c.stages[0]
    assert row.expected_from == "K=4 at 8 users" and row.difference_range.low < row.difference < row.difference_range.high
    assert c.stages[1].expected_from == "the line between K=4 at 8 and 32 users"
    assert c.stages[1].expected == pytest.approx(21.7, rel=0.02)
    assert len(c.crossings) == 1 and c.crossings[0].startswith("req/s holds crossing batch 18 -> 19 (18 users, batch 16.7, K=4 -> 21 users")
    assert "1 life of every stage of the sweep, plus threshold stages at 18, 21 users" in the_plan.scope


def test_the_schedule_overhead_at_low_batch_is_a_cost_with_its_numbers(decided):
    """vLLM issue #49548: a schedule costs every step, most at a small batch: 8 % less at 8 users."""
    _, c = run(decided, {8: 18.4, 18: 21.8, 21: 22.1, 32: 31.9})
    assert c.status == "confirmed with a cost", c.verdict
    (cost,) = c.costs
    assert cost.startswith("8 users (K=4, real batch 7.4): 18.40 req/s vs 20.10 from K=4 at 8 users (-8%")
    assert "TPOT p50" in cost and cost in c.verdict and "holds at the target" in c.verdict
    assert "restart-to-restart" not in cost  # two lives per K: their spread is in the interval


def test_with_one_life_per_k_a_cost_says_its_interval_lacks_the_restart_to_restart_spread():
    ws = [window(k, users, req, 0, running_mean=BATCH[users]) for k, by_users in SWEEP.items()
          for users, req in by_users.items()]
    ev = evidence(ws, 32)
    decision = decide(ev, P, ARGV, "list")
    _, c = run((ev, decision), {8: 18.4, 18: 21.8, 21: 22.1, 32: 31.9})
    cost = next(s for s in c.stages if s.users == 8)
    assert cost.outcome == "cost", cost.text
    assert cost.text.endswith("its interval holds the noise within the windows only (one life per K: no "
                              "restart-to-restart spread)")


def test_a_collapse_at_the_threshold_is_named_and_the_single_k_stands(decided):
    _, c = run(decided, {8: 20.1, 18: 21.5, 21: 12.0, 32: 31.9})
    assert c.status == "not confirmed", c.verdict
    assert "req/s falls 46% at batch 18 -> 19: 21 users (K=0" in c.verdict
    assert c.crossings[0].startswith("req/s falls 44% crossing batch 18 -> 19 (18 users, batch 16.7, K=4 -> 21 users")
    assert c.verdict.endswith("K=0 alone stands (the command above).")
    above = next(s for s in c.stages if s.role == "above")
    assert above.outcome == "collapse" and above.difference < -P.collapse_frac
    decision = with_confirmation(decided[1], c)
    assert decision.verdict.endswith(c.verdict) and decision.confirmation.status == "not confirmed"
    assert Decision.model_validate_json(decision.model_dump_json()).confirmation == c


def test_both_threshold_stages_collapsing_is_caught_against_the_line_between_the_stages(decided):
    """A boundary the real batch keeps crossing stalls both sides: no fall between them, both far below."""
    _, c = run(decided, {8: 20.1, 18: 11.0, 21: 11.5, 32: 31.9})
    assert c.status == "not confirmed" and "req/s falls 49% at batch 18 -> 19: 18 users" in c.verdict
    assert "req/s falls 48% at batch 18 -> 19: 21 users" in c.verdict


def test_worse_than_the_single_k_at_the_target_is_not_confirmed(decided):
    _, c = run(decided, {8: 20.1, 18: 21.8, 21: 22.1, 32: 27.0})
    assert c.status == "not confirmed" and "32 users" in c.reasons[0] and "vs K=0 alone" in c.reasons[0]


def test_failures_in_the_confirmation_are_not_confirmed(decided):
    _, c = run(decided, {8: 20.1, 18: 21.8, 21: 22.1, 32: 31.9}, failures=60)
    assert c.status == "not confirmed" and "failures" in c.verdict


def test_a_life_that_failed_or_never_ran(decided):
    ev, decision = decided
    the_plan = plan(decision, ev, STAGES, P)
    failed = judge(the_plan, decision, ev, {}, [ConfirmLife("confirm/r0", "failed", "exit code 1: ValueError: ...")], [], P)
    assert failed.status == "not confirmed" and "the server did not run it: exit code 1" in failed.verdict
    pending = judge(the_plan, decision, ev, {}, [ConfirmLife("confirm/r0", "missing", "")], [], P)
    assert pending.status == "pending" and "--resume" in pending.verdict


def test_a_single_k_confirmed_or_not_against_the_runner_up():
    ev = evidence([window(k, 32, req * (1 + 0.01 * r), r) for k, req in ((0, 20), (2, 30), (4, 36))
                   for r in range(2)], 32)
    p = DecisionConfig(resamples=300, confirm="always")
    decision = decide(ev, p, {0: ["a"], 2: ["b"], 4: ["c"]})
    the_plan = plan(decision, ev, [(32, 20.0)], p)
    assert the_plan.kind == "k" and the_plan.k == 4 and the_plan.boundaries == []
    ok = judge(the_plan, decision, ev, {32: Cell(4, 32, (window(4, 32, 35.8, 0),))}, [ConfirmLife("confirm/r0", "done", "")],
               ["c"], p)
    assert ok.status == "confirmed" and ok.verdict.startswith("Confirmed: K=4 ran in a life of its own")
    low = judge(the_plan, decision, ev, {32: Cell(4, 32, (window(4, 32, 28.0, 0),))}, [ConfirmLife("confirm/r0", "done", "")],
                ["c"], p)
    assert low.status == "not confirmed" and "below the runner-up's 30.15" in low.verdict
    told = with_confirmation(decision, low)
    assert told.next_runs[-1].startswith("Add repeats of K=4")
    # a single K its own life did not confirm is not a verdict to act on: "not decided yet", exit 3
    assert (told.status, told.recommended, told.leading_k) == ("not_decided", None, 4)
    assert told.verdict.startswith("Not decided yet at 32 users: the sweep picked K=4, but its own life disagreed. "
                                   "Not confirmed: K=4")
    assert exit_code(told) == EXIT_NOT_DECIDED and exit_code(with_confirmation(decision, ok)) == 0


def test_the_confirmation_life_runs_the_plan_on_the_grid_value_it_came_from(decided):
    """Runner side: the life's setting carries the schedule (and the grid value whose lives it came from), its
    config the confirmation's stages."""
    import pandas as pd

    from lookahead_runner.config import SweepConfig
    from lookahead_runner.run.strategies.confirm_life import axis_value_of, config_of, setting_of
    from lookahead_runner.runfolder.read import RunData
    from lookahead_runner.runfolder.plan import Plan, PlannedLife

    ev, decision = decided
    config = SweepConfig.model_validate({"grid": {"flag": "--max-num-seqs", "values": ["32", "64"]}})
    lives = [PlannedLife(setting=f"k{k}-max-num-seqs{v}", k=k, repeat=0, axis_flag="--max-num-seqs", axis_value=v,
                         argv=ARGV[k] + ["--max-num-seqs", v], dir=f"k{k}-max-num-seqs{v}/r0")
             for k in (0, 4) for v in ("32", "64")]
    decision = decision.model_copy(update={"recommended": decision.recommended.model_copy(
        update={"argv": ARGV[0] + ["--max-num-seqs", "64"]})})
    plan_doc = Plan(run_id="r", probe={"version": "0.32.0"}, config=config.model_dump(mode="json"), target_users=32,
                    lives=lives)
    data = RunData(plan_doc, config, pd.DataFrame(), [])
    the_plan = plan(decision, ev, STAGES, P, axis_value_of(data, decision))
    setting = setting_of(config, the_plan)
    assert (setting.name, setting.k, setting.axis_flag, setting.axis_value) == ("confirm", 4, "--max-num-seqs", "64")
    assert setting.schedule == ((1, 18, 4), (19, 1_000_000, 0))
    assert [s.users for s in config_of(config, the_plan).load.stages] == [8, 18, 21, 32]


def test_no_confirm_on_a_resumed_run_retires_the_confirmation_planned_before(tmp_path):
    """--resume --no-confirm: the confirmation planned (and maybe half run) before is kept aside, not run."""
    from lookahead_runner.runfolder import results
    from lookahead_runner.run.strategies.confirm_life import switch_off
    from lookahead_runner.runfolder.plan import CONFIRM_ROLE

    plan_doc = {"run_id": "r", "probe": {"version": "0.32.0"}, "config": {}, "target_users": 32,
                "lives": [{"setting": "k0", "dir": "k0/r0", "k": 0, "repeat": 0, "argv": []},
                          {"setting": "confirm", "dir": "confirm/r0", "k": 4, "repeat": 0, "argv": [],
                           "role": CONFIRM_ROLE}],
                "confirm": {"kind": "k", "k": 4, "stages": [{"users": 32, "duration_s": 20.0}]}}
    results.write_json(tmp_path / "plan.json", plan_doc)
    (tmp_path / "confirm" / "r0").mkdir(parents=True)
    said = []
    switch_off(tmp_path, said.append)
    after = results.read_json(tmp_path / "plan.json")
    assert after["confirm"] is None and [life["dir"] for life in after["lives"]] == ["k0/r0"]
    assert (tmp_path / "confirm-stale1" / "r0").is_dir() and not (tmp_path / "confirm").exists()
    assert len(said) == 1 and said[0].startswith('confirmation: off (decision.confirm = "off"); K=4') \
        and said[0].endswith("is kept in confirm-stale1/"), said
    switch_off(tmp_path, said.append)  # nothing planned any more: nothing to say
    assert len(said) == 1
