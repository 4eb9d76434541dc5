"""The performance model: known parameters come back from synthetic windows made with them, held-out
predictions of such a world are close and trusted, and a world the model does not describe is flagged."""
from __future__ import annotations

import math

import numpy as np
import pytest

from unit.perfmodel_world import SHAPE, World

from lookahead_runner.decision.perfmodel.model import fit_performance_model
from lookahead_runner.decision.perfmodel.fit import stack, step_ms

WORLD = World()
TRUE = WORLD.params
POOL = WORLD.pool


def truth(k: int, users: int):
    return WORLD.truth(k, users)


def world(**options):
    return WORLD.evidence(**options)


def positions(ks=(2, 4, 8)):
    return WORLD.positions(ks)


@pytest.fixture(scope="module")
def model():
    return fit_performance_model(world(), SHAPE, positions(), resamples=30)


def test_known_parameters_come_back(model):
    fitted = model.params
    assert fitted.step_ms[0] == pytest.approx(TRUE.step_ms, rel=0.15)
    assert fitted.step_ms_per_k[0] == pytest.approx(TRUE.step_ms_per_k, rel=0.15)
    assert fitted.step_ms_per_seq[0] == pytest.approx(TRUE.step_ms_per_seq, rel=0.3)
    # the knee sits between measured batches, so it is recovered as the step time it gives, not as a number
    for k, batch in ((0, 10), (2, 40), (4, 25), (8, 30), (4, 55)):
        assert step_ms(fitted, k, np.array([batch]), 0.0)[0] == pytest.approx(
            step_ms(stack([TRUE]), k, np.array([batch]), 0.0)[0], rel=0.05)
    assert fitted.kv_tokens_per_seq_per_k[0] == pytest.approx(TRUE.kv_tokens_per_seq_per_k, abs=0.3)
    assert model.acceptance.source == "per-position counters"
    assert model.acceptance.tokens_per_step(4) == pytest.approx(1 + 0.8 + 0.8**2 + 0.8**3 + 0.8**4)


def test_held_out_predictions_of_a_world_it_describes_are_close_and_trusted(model):
    assert model.trusted, model.trust_reason
    assert model.heldout_error < 0.03
    assert {h.scheme for h in model.held_out} == {"stage", "K"}


def test_an_unseen_concurrency_and_k_are_predicted_with_an_interval(model):
    p = model.predict(6, 48)
    want = float(truth(6, 48).req_per_s[0])
    assert p.requests_per_s == pytest.approx(want, rel=0.05)
    assert p.requests_per_s_low <= p.requests_per_s <= p.requests_per_s_high
    assert p.output_tokens_per_s == pytest.approx(p.requests_per_s * 64, rel=0.02)
    assert any("K=6 not measured" in note for note in p.extrapolated)
    far = model.predict(8, 128)
    assert any("beyond the highest stage" in note for note in far.extrapolated)
    assert any("verified tokens per step, beyond the" in note for note in far.extrapolated)
    assert any(note.startswith("KV usage") for note in far.extrapolated)
    assert model.predict(4, 32).extrapolated == []


def test_best_k_follows_the_true_crossover(model):
    """The best K that the KV pool does not preempt (the gate's rule), within the tie band and the model's error."""
    picked = set()
    for users in (12, 48, 96):
        safe = [k for k in model.ks if float(truth(k, users).kv_usage[0]) * TRUE.kv_peak_ratio < 1.0]
        rates = {k: float(truth(k, users).req_per_s[0]) for k in safe}
        want = max(rates, key=rates.get)
        k, share = model.best_k_at(users)
        picked.add(k)
        assert k in rates and rates[k] >= rates[want] * (1 - 0.03 - 0.02), (users, k, want, rates)
        assert 0.0 < share <= 1.0
    assert len(picked) >= 2  # the crossover is in the range: not one K everywhere


def test_kv_limit_caps_the_real_batch(model):
    p = model.predict(8, 400)
    assert p.real_batch == pytest.approx(p.kv_batch_limit, rel=0.02)
    assert p.kv_batch_limit == pytest.approx(POOL[8] / (TRUE.kv_tokens_per_seq + 8), rel=0.1)
    assert p.preempting


def test_a_world_the_model_does_not_describe_is_not_trusted():
    rng = np.random.default_rng(7)
    bent = {(k, u): rng.uniform(0.55, 1.45) for k in (0, 2, 4, 8) for u in (8, 16, 24, 32, 48, 64)}
    model = fit_performance_model(world(distort=lambda k, u, rate: rate * bent[(k, u)]), SHAPE, positions(),
                                  resamples=10)
    assert not model.trusted
    assert model.trust_reason.startswith("not trusted: held-out req/s error")
    assert model.heldout_error > model.error_bound


def test_one_stage_and_one_k_cannot_be_validated():
    model = fit_performance_model(world(ks=(4,), stages=(32,)), SHAPE, positions((4,)), resamples=5)
    assert not model.trusted
    assert "at least 3 are needed" in model.trust_reason
    assert math.isfinite(model.predict(4, 32).requests_per_s)


def test_without_position_counters_acceptance_is_a_geometric_fit():
    model = fit_performance_model(world(stages=(16, 64)), SHAPE, None, resamples=5)
    assert model.acceptance.source == "geometric fit to mean acceptance length"
    assert model.acceptance.tokens_per_step(8) == pytest.approx(WORLD.acceptance(8).tokens_per_step(8), rel=0.01)
    assert any("extrapolated" in note for note in model.predict(10, 16).extrapolated)


def test_predictions_at_many_concurrencies_at_once_are_those_made_one_by_one(model):
    """predict_many solves the closed loop for every users count at once (the report's curves): the same figures."""
    import dataclasses

    users = [1, 3, 16, 64, 200]
    for k in (0, 3, 8):
        for u, many in zip(users, model.predict_many(k, users)):
            one = model.predict(k, u)
            for f in dataclasses.fields(one):
                a, b = getattr(one, f.name), getattr(many, f.name)
                assert a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)), (k, u, f.name)


STEP_COSTS = ("step_ms", "step_ms_per_k", "step_ms_per_seq", "step_ms_per_token", "step_ms_per_token_past_knee",
              "step_ms_per_prefill_token")


def _life(speed: float):
    """The world as one server life at `speed` runs it: every step cost / speed (the simulator's life draw)."""
    return WORLD.with_params(**{name: getattr(TRUE, name) / speed for name in STEP_COSTS})


def _lives_evidence(speeds_by_k, stages=(8, 16, 32, 64)):
    """Windows of each K's lives (repeat = life), each life at its own speed at every stage."""
    from unit.synthetic import window

    from lookahead_runner.decision import evidence

    windows = []
    for k, speeds in speeds_by_k.items():
        for life, speed in enumerate(speeds):
            world_of_life = _life(speed)
            for users in stages:
                d = world_of_life.truth(k, users)
                usage = float(d.kv_usage[0])
                windows.append(window(
                    k, users, float(d.req_per_s[0]), life, duration_s=60.0, e2e_ms=float(d.e2e_ms[0]),
                    ttft_ms=float(d.ttft_ms[0]), spread=0.01, running_mean=float(d.real_batch[0]), waiting_mean=0.0,
                    kv_usage_mean=usage, kv_usage_peak=usage * 1.1, kv_pool_tokens=POOL[k],
                    mean_acceptance_length=WORLD.acceptance(k).tokens_per_step(k),
                    preemptions=1.0 if usage * 1.1 >= 1 else 0.0))
    return evidence(windows, max(stages))


def test_a_ks_interval_holds_both_of_its_lives_when_they_ran_at_different_speeds():
    """Two lives per K, one 6 % slower and one 6 % faster at every stage: the K's level is known only to within
    that life-to-life difference, so the req/s interval at a measured stage holds both lives' curves (refits that
    resampled windows stage by stage averaged the lives away and printed an interval narrower than the gap)."""
    speeds = (0.94, 1.06)
    model = fit_performance_model(_lives_evidence({k: speeds for k in (0, 2, 4, 8)}), SHAPE, positions(),
                                  resamples=80)
    for k in (2, 8):
        slow, fast = (_life(s).rate(k, 64) for s in speeds)
        pred = model.predict(k, 64)
        assert pred.requests_per_s_low <= slow and pred.requests_per_s_high >= fast, (k, slow, fast, pred)


def test_a_k_measured_on_one_life_carries_the_restart_spread():
    """One life per K: its windows cannot show how far the next life lands; given the restart spread the decision
    uses (5 % per life), the refits draw each K's life at it and the interval reaches that far around the point."""
    spread = 0.05
    data = _lives_evidence({k: (1.0,) for k in (0, 2, 4, 8)})
    without = fit_performance_model(data, SHAPE, positions(), resamples=80).predict(4, 64)
    model = fit_performance_model(data, SHAPE, positions(), resamples=80, restart_spread=spread)
    pred = model.predict(4, 64)
    assert pred.requests_per_s_high - pred.requests_per_s_low > without.requests_per_s_high - without.requests_per_s_low
    assert pred.requests_per_s_low <= pred.requests_per_s * (1 - spread)
    assert pred.requests_per_s_high >= pred.requests_per_s * (1 + spread)


def test_same_server_repeats_are_one_life_and_carry_the_restart_spread():
    """Repeats on one server life (load.repeat_mode = same-server) read alike, but show nothing of how far the next
    life lands: each K is one life, drawn at the restart spread as a K measured once, not at its repeats' spread."""
    spread = 0.05
    data = _lives_evidence({k: (1.0, 1.0) for k in (0, 2, 4, 8)})
    model = fit_performance_model(data, SHAPE, positions(), resamples=80, restart_spread=spread, one_life_per_k=True)
    pred = model.predict(4, 64)
    # as two restarted lives that read alike (their level spread nil): the interval less than the spread either side
    lives = fit_performance_model(data, SHAPE, positions(), resamples=80, restart_spread=spread).predict(4, 64)
    assert lives.requests_per_s_high - lives.requests_per_s_low < 2 * spread * lives.requests_per_s
    assert pred.requests_per_s_high - pred.requests_per_s_low >= 2 * spread * pred.requests_per_s
