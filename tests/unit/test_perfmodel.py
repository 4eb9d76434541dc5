"""The performance model: known parameters come back from synthetic windows made with them, held-out
predictions of such a world are close and trusted, and a world the model does not describe is flagged."""
from __future__ import annotations

import math

import numpy as np
import pytest

from lookahead_runner.decision import evidence
from lookahead_runner.decision.perfmodel import PositionCounts, WorkloadShape, fit_performance_model
from lookahead_runner.decision.perfmodel_fit import Params, predict_draws, stack

from synthetic import window

SHAPE = WorkloadShape(prompt_tokens=128, output_tokens=64, max_num_seqs=128)
ALPHA = 0.8
POOL = {0: 14000.0, 2: 11400.0, 4: 10800.0, 8: 9600.0}   # a draft model and a larger activation peak shrink it
TRUE = Params(step_ms=8.0, step_ms_per_k=1.5, step_ms_per_seq=0.1, step_ms_per_token=0.02, step_ms_per_token_past_knee=0.12,
              knee_tokens=250.0, step_ms_per_prefill_token=0.03, ttft_ms=20.0, ttft_steps=1.5, client_ms=3.0,
              running_share=0.95, kv_tokens_per_seq=200.0, kv_tokens_per_seq_per_k=1.0, kv_peak_ratio=1.1,
              tpot_p50_ratio=1.0, tpot_p90_ratio=1.0, ttft_p50_ratio=1.0, ttft_p90_ratio=1.0)


def tokens_per_step(k: int) -> float:
    return 1.0 + sum(ALPHA ** (i + 1) for i in range(k))


def truth(k: int, users: int):
    return predict_draws(stack([TRUE]), k, users, tokens_per_step(k), SHAPE, 64.0, POOL.get(k, 12000.0 - 300.0 * k))


def world(ks=(0, 2, 4, 8), stages=(8, 16, 32, 64), repeats=2, distort=None):
    """Windows of the true model at every (K, users); `distort(k, users, req_per_s)` bends what was served."""
    windows = []
    for k in ks:
        for users in stages:
            d = truth(k, users)
            rate, batch, queue = float(d.req_per_s[0]), float(d.real_batch[0]), 0.0
            served = distort(k, users, rate) if distort else rate
            e2e = float(d.e2e_ms[0])
            for r in range(repeats):
                windows.append(window(
                    k, users, served, r, duration_s=60.0, e2e_ms=e2e, ttft_ms=float(d.ttft_ms[0]), spread=0.01,
                    running_mean=batch, waiting_mean=queue, kv_usage_mean=float(d.kv_usage[0]),
                    kv_usage_peak=float(d.kv_usage[0]) * 1.1, kv_pool_tokens=POOL[k],
                    mean_acceptance_length=tokens_per_step(k)))
    return evidence(windows, max(stages))


def positions(ks=(2, 4, 8)):
    return {k: PositionCounts(10_000.0, tuple(10_000.0 * ALPHA ** (i + 1) for i in range(k))) for k in ks}


@pytest.fixture(scope="module")
def model():
    return fit_performance_model(world(), SHAPE, positions(), resamples=30)


def test_known_parameters_come_back(model):
    fitted = model.params
    assert fitted.step_ms[0] == pytest.approx(TRUE.step_ms, rel=0.15)
    assert fitted.step_ms_per_k[0] == pytest.approx(TRUE.step_ms_per_k, rel=0.15)
    assert fitted.step_ms_per_seq[0] == pytest.approx(TRUE.step_ms_per_seq, rel=0.3)
    assert fitted.step_ms_per_token_past_knee[0] == pytest.approx(TRUE.step_ms_per_token_past_knee, rel=0.2)
    assert fitted.knee_tokens[0] == pytest.approx(TRUE.knee_tokens, rel=0.25)
    assert fitted.kv_tokens_per_seq_per_k[0] == pytest.approx(TRUE.kv_tokens_per_seq_per_k, abs=0.3)
    assert model.acceptance.source == "per-position counters"
    assert model.acceptance.tokens_per_step(4) == pytest.approx(tokens_per_step(4))


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
    far = model.predict(4, 128)
    assert any("beyond the highest stage" in note for note in far.extrapolated)


def test_best_k_follows_the_true_crossover(model):
    ks = [0, 2, 4, 8]
    for users in (12, 48, 96):
        want = max(ks, key=lambda k: float(truth(k, users).req_per_s[0]))
        k, share = model.best_k_at(users, ks)
        rates = {x: float(truth(x, users).req_per_s[0]) for x in ks}
        assert rates[k] >= rates[want] * (1 - 0.03 - 0.02), (users, k, want, rates)  # tie band + model error
        assert 0.0 < share <= 1.0


def test_kv_limit_caps_the_real_batch(model):
    p = model.predict(8, 400)
    assert p.real_batch == pytest.approx(p.kv_batch_limit, rel=0.02)
    assert p.kv_batch_limit == pytest.approx(POOL[8] / (TRUE.kv_tokens_per_seq + 8), rel=0.1)
    assert p.preempting


def test_a_world_the_model_does_not_describe_is_not_trusted():
    rng = np.random.default_rng(7)
    bent = {(k, u): rng.uniform(0.55, 1.45) for k in (0, 2, 4, 8) for u in (8, 16, 32, 64)}
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
    assert model.acceptance.tokens_per_step(8) == pytest.approx(tokens_per_step(8), rel=0.01)
    assert any("extrapolated" in note for note in model.predict(10, 16).extrapolated)
