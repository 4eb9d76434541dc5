"""What a trusted performance model adds to a decision, and what an untrusted one must not add."""
from __future__ import annotations

import json

import numpy as np
import pytest

from unit.perfmodel_world import SHAPE, World

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.perfmodel.model import fit_performance_model
from lookahead_runner.decision.perfmodel.uses import production_point, refined_schedule, summary
from lookahead_runner.decision.confirmation.schedule import schedule_from_picks
from lookahead_runner.decision.schema import Decision, Recommended, StagePick
from lookahead_runner.report.verdict import per_batch_size

WORLD = World()
STAGES = (8, 16, 24, 32, 48, 64)


def argv(k: int) -> list[str]:
    return ["vllm", "serve", "m"] + (["--speculative-config", json.dumps({"method": "ngram",
                                                                        "num_speculative_tokens": k})] if k else [])


@pytest.fixture(scope="module")
def model():
    return fit_performance_model(WORLD.evidence(stages=STAGES), SHAPE, WORLD.positions(), resamples=20)


@pytest.fixture(scope="module")
def untrusted():
    rng = np.random.default_rng(3)
    bent = {(k, u): rng.uniform(0.5, 1.5) for k in (0, 2, 4, 8) for u in STAGES}
    return fit_performance_model(WORLD.evidence(stages=STAGES, distort=lambda k, u, r: r * bent[(k, u)]), SHAPE,
                                 WORLD.positions(), resamples=5)


def decision_with_stage_picks(picks: dict[int, int], recommended: int, target: int = 64) -> Decision:
    per_stage = [StagePick(users=u, status="decided", k=k, leading_k=k, confidence=0.99,
                           running_mean=float(WORLD.truth(k, u).real_batch[0])) for u, k in picks.items()]
    return Decision(status="decided", verdict="set", baseline_k=0, target_users=target,
                    recommended=Recommended(k=recommended, setting=f"k{recommended}", argv=argv(recommended)),
                    per_stage=per_stage,
                    per_batch_size=schedule_from_picks(per_stage, {k: argv(k) for k in (0, 2, 4, 8)}, "list"))


def test_production_users_beyond_the_stages_is_a_stated_prediction(model):
    assert model.trusted, model.trust_reason
    point = production_point(model, 96, 0)
    k, share = model.best_k_at(96)
    assert point.k == k and point.share == share
    assert point.requests_per_s_low <= point.requests_per_s <= point.requests_per_s_high
    assert point.statement.startswith("Prediction, not a measurement: at 96 users")
    assert "1.5x the highest stage measured (64): an extrapolation" in point.statement
    assert "Beyond the windows: users 96 beyond the highest stage measured (64)" in point.statement
    assert production_point(model, 40, 0).reach == "between the measured stages 32 and 48"


def test_an_untrusted_model_predicts_nothing_at_production(untrusted):
    assert not untrusted.trusted
    point = production_point(untrusted, 96, 0)
    assert point.k is None and point.requests_per_s is None
    assert point.statement.startswith("No prediction at 96 users: the performance model is not trusted")


def test_schedule_boundary_moves_to_the_crossover_and_keeps_the_stage_picks(model):
    picks = {u: 4 for u in STAGES[:-1]} | {64: 2}
    decision = decision_with_stage_picks(picks, recommended=2)
    before = decision.per_batch_size.ranges
    refined, note = refined_schedule(model, decision, {k: argv(k) for k in (0, 2, 4, 8)})
    assert [r[2] for r in refined.ranges] == [r[2] for r in before] == [4, 2]
    boundary = refined.ranges[0][1]
    batch_48, batch_64 = (float(WORLD.truth(k, u).real_batch[0]) for k, u in ((4, 48), (2, 64)))
    assert batch_48 <= boundary < batch_64 and boundary != before[0][1]
    # the true crossover (smaller K within the 3 % tie band) lies at the boundary's concurrency, +-4 users
    crossing = next(u for u in range(48, 65) if WORLD.rate(4, u) < WORLD.rate(2, u) * 1.03)
    at_boundary = next(u for u in range(48, 65) if float(WORLD.truth(4, u).real_batch[0]) >= boundary)
    assert abs(crossing - at_boundary) <= 4, (crossing, at_boundary, boundary)
    assert "crossovers" in note and refined.argv and "num_speculative_tokens_per_batch_size" in refined.argv[-1]
    shown = per_batch_size(decision.model_copy(update={"per_batch_size": refined}))
    assert "Boundaries at the performance model's crossovers" in shown["note"] and str(before) in shown["note"]


def test_an_untrusted_model_leaves_the_schedule_alone(untrusted):
    decision = decision_with_stage_picks({u: 4 for u in STAGES[:-1]} | {64: 2}, recommended=2)
    assert refined_schedule(untrusted, decision, {}) == (decision.per_batch_size, "")


def test_not_the_lever_says_acceptance_bound_with_its_numbers():
    low = World(alpha=0.1)
    model = fit_performance_model(low.evidence(stages=(8, 32, 64)), SHAPE, low.positions(), resamples=5)
    decision = decision_with_stage_picks({64: 0}, recommended=0)
    text = summary(model, decision, DecisionConfig()).diagnosis
    assert model.trusted, model.trust_reason
    assert "not the lever at 64 users, acceptance-bound" in text and "1.11 tokens per step" in text


def test_not_the_lever_says_kv_bound_when_the_pool_caps_the_batch():
    tight = World(pool={0: 22000.0, 2: 6000.0, 4: 5600.0, 8: 5000.0})
    model = fit_performance_model(tight.evidence(stages=(8, 16, 64)), SHAPE, tight.positions(), resamples=5)
    text = summary(model, decision_with_stage_picks({64: 0}, recommended=0), DecisionConfig()).diagnosis
    assert "KV-bound: the pool caps the real batch" in text, (model.trust_reason, text)


def test_no_diagnosis_when_speculation_is_recommended(model):
    decision = decision_with_stage_picks({64: 2}, recommended=2)
    assert summary(model, decision, DecisionConfig()).diagnosis == ""


def test_summary_carries_curves_held_out_and_production(model):
    decision = decision_with_stage_picks({64: 2}, recommended=2)
    s = summary(model, decision, DecisionConfig(), production_users=96)
    assert s.trusted and s.production.k is not None
    assert {c.k for c in s.curves} == set(range(0, 9)) and {c.k for c in s.curves if c.measured_k} == {0, 2, 4, 8}
    assert max(p.users for p in s.curves[0].points) == 96   # 1.5 x the highest stage
    assert {h.scheme for h in s.held_out} == {"stage", "K"}
    assert Decision.model_validate_json(decision.model_copy(update={"performance_model": s}).model_dump_json())
