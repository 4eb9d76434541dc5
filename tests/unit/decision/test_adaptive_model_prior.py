"""The performance model as a prior in the adaptive sweep's chooser (decision/adaptive.py): a K it predicts behind the
leader by more than its held-out error at the target, with K measured below and above it, is not run unless the verdict
comes to hang on it, and the stop names it with its prediction. Pure; the hidden-truth sweeps run the chooser over
synthetic windows judged by the engine, each life revealing the truth the model only predicts."""
import dataclasses
import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats
from unit.synthetic import window

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import evidence
from lookahead_runner.decision.adaptive import Budget, ModelView, Prediction, Spent, choose, run_note
from lookahead_runner.decision.standing import Standing, standing_of, valid_lives
from lookahead_runner.decision.engine import contender_share, early_look
from lookahead_runner.decision.perfmodel.prior import ruled_out, skip_bound, skip_text

IN_THE_RUNNING = contender_share(DecisionConfig(), 1000)
# The skip's stated error: the early-stop bar's share of decision.confidence's error (engine.early_look), 1 % at 90 %
SKIP_LEVEL = 1 - early_look(DecisionConfig()).confidence
ROOMY = Budget(max_lives=20)
KS = [0, 4, 8, 12]
FAR_BEHIND = {4: Prediction(52.3, 50.0, 54.6), 8: Prediction(41.2, 38.0, 44.1), 12: Prediction(30.0, 27.0, 33.0)}


# 6 held-out errors whose largest is 1: scaled by `error`, their bound at SKIP_LEVEL is 1.5 x the largest
SPREAD_OF_SIX = (1.0, -0.4, 0.25, -0.15, 0.2, -0.3)


def trusted(predictions, error=0.078, scope="", errors=None) -> ModelView:
    errors = tuple(error * e for e in SPREAD_OF_SIX) if errors is None else errors
    return ModelView(True, predictions, "", heldout_error=error, error_scope=scope, unit="req/s",
                     heldout_errors=errors, skip_level=SKIP_LEVEL)


def standing(status, leader, shares, objective, **rest) -> Standing:
    return Standing(status, leader, shares, objective, **{"contender_share": IN_THE_RUNNING, **rest})


def spent(**lives_by_k) -> Spent:
    lives = {int(k[1:]): n for k, n in lives_by_k.items()}
    return Spent(lives, dict(lives), server_s=0.0)


def test_a_k_predicted_far_behind_between_measured_k_is_skipped_and_named():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 52.3, 12: 30.0})
    lives = spent(k0=2, k4=2, k12=1)
    # without the model, K=8 lies between the K measured around the leader (4 and 12): it would be run
    assert choose(KS, now, lives, ModelView(), ROOMY, 5).k == 8
    stop = choose(KS, now, lives, trusted(FAR_BEHIND), ROOMY, 5)
    assert stop.k is None and stop.stop == "decided" and [s.k for s in stop.skipped] == [8]
    note = run_note(KS, {0: 2, 4: 2, 12: 1}, stop.why, stop.stop, skipped=stop.skipped)
    assert ("K=8 not run: the model predicts 41.2 req/s [38.0, 44.1] against 52.3 for the leader K=4 (measured "
            "52.3), 21% behind, more than the 11.7% its 6 held-out errors at the target allow (a larger miss 1 time in "
            "100; the largest 7.8%)") in note
    assert "none could be the best" not in note   # the only K left out is named with its prediction


def test_the_error_figure_from_every_held_out_prediction_is_said_when_none_is_at_the_target():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 52.3, 12: 30.0})
    model = trusted(FAR_BEHIND, scope="over every held-out prediction, none at the target")
    stop = choose(KS, now, spent(k0=2, k4=2, k12=1), model, ROOMY, 5)
    note = run_note(KS, {0: 2, 4: 2, 12: 1}, stop.why, stop.stop, skipped=stop.skipped)
    assert "its 6 held-out errors (over every held-out prediction, none at the target) allow" in note


def test_a_k_beyond_every_measured_k_is_never_skipped_on_extrapolation():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 52.3})
    choice = choose(KS, now, spent(k0=2, k4=2), trusted(FAR_BEHIND), ROOMY, 5)
    assert choice.k == 8 and "could be the best" in choice.why   # no K measured above it: the model-free bracket


def test_a_k_behind_by_less_than_the_error_at_the_target_is_run():
    # the leader K=4 measured 50, predicted 52: K=8 at 48 [45, 50] is 7.7 % behind (8 % past the tie band's edge)
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0, 12: 30.0})
    close = {4: Prediction(52.0, 50.0, 54.0), 8: Prediction(48.0, 45.0, 50.0)}
    assert choose(KS, now, spent(k0=2, k4=2, k12=1), trusted(close, error=0.12), ROOMY, 5).k == 8
    told = choose(KS, now, spent(k0=2, k4=2, k12=1), trusted(close, error=0.03), ROOMY, 5)
    assert told.stop == "decided" and [s.k for s in told.skipped] == [8]


def test_an_untrusted_model_or_one_without_an_error_figure_skips_nothing():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 52.3, 12: 30.0})
    untrusted = ModelView(False, FAR_BEHIND, "not trusted: held-out error 31 %", heldout_error=0.078)
    assert choose(KS, now, spent(k0=2, k4=2, k12=1), untrusted, ROOMY, 5).k == 8
    assert choose(KS, now, spent(k0=2, k4=2, k12=1), ModelView(True, FAR_BEHIND, ""), ROOMY, 5).k == 8


def test_the_error_is_relative_to_the_measured_figure_so_a_k_may_reach_its_prediction_over_one_less_the_error():
    # a held-out error is predicted / measured - 1: a K predicted 37, given an error of 30 %, may measure 37 / 0.7 = 52.9,
    # above the leader's 50; 26 % behind is not more than the bound its errors (the largest 30 %) give, 45 %
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 50.0, 12: 30.0})
    model = trusted({4: Prediction(50.0, 48.0, 52.0), 8: Prediction(37.0, 36.0, 38.0)}, error=0.30)
    choice = choose(KS, now, spent(k0=2, k4=2, k12=1), model, ROOMY, 5)
    assert choice.k == 8, [s.behind for s in choice.skipped]


def test_a_prediction_that_is_not_a_number_rules_nothing_out():
    now = standing("decided", 4, {4: 1.0}, {0: 20.0, 4: 52.3, 12: 30.0})
    lives = spent(k0=2, k4=2, k12=1)
    # the leader's prediction infinite: the K is held against the leader's measured 52.3, which it may reach
    endless = trusted({4: Prediction(float("inf"), 50.0, float("inf")), 8: Prediction(48.0, 46.0, 50.0)})
    assert choose(KS, now, lives, endless, ROOMY, 5).k == 8
    # the K's own prediction not a number: nothing is said about it, so it is not left out on it
    unknown = trusted({4: Prediction(52.3, 50.0, 54.6), 8: Prediction(float("nan"), 30.0, 33.0)})
    assert choose(KS, now, lives, unknown, ROOMY, 5).k == 8


def test_a_skipped_k_is_run_when_the_verdict_comes_to_hang_on_it():
    # K=4 and K=12 are not told apart, each at load.max_repeats lives: the sweep would stop not decided; K=8, the
    # leader's neighbour the model ruled out, is run after all
    hanging = standing("not_decided", 4, {4: 0.6, 12: 0.4}, {0: 20.0, 4: 50.0, 12: 49.5}, wanted=(4, 12))
    lives = spent(k0=2, k4=5, k12=5)
    model = trusted({4: Prediction(52.3, 50.0, 54.6), 8: Prediction(41.2, 38.0, 44.1), 12: Prediction(51, 49, 53)})
    after_all = choose(KS, hanging, lives, model, ROOMY, 5)
    assert after_all.k == 8 and "after all" in after_all.why and "not decided" in after_all.why
    # decided as the last look (the verdict if no life follows): nothing hangs on it
    settled = standing("not_decided", 4, {4: 0.95, 12: 0.05}, {0: 20.0, 4: 50.0, 12: 45.0}, wanted=(4, 12),
                       decided_at_last_look=True)
    stop = choose(KS, settled, lives, model, ROOMY, 5)
    assert stop.stop == "exhausted" and [s.k for s in stop.skipped] == [8]
    assert choose(KS, hanging, lives, model, Budget(12), 5).stop == "budget"   # no life left to run it with


USERS = 32
P = DecisionConfig(resamples=200)


def sweep(ks, truth, model, max_repeats=4):
    """The chooser run serially against a hidden truth: each life it asks for reads its K's true req/s (1 % apart
    between lives); returns the K of each life and the stop."""
    order: list[int] = []
    for _ in range(4 * len(ks)):
        count = Counter()
        windows = []
        for k in order:
            windows.append(window(k, USERS, truth[k] * (1 + (0.01 if count[k] % 2 else -0.01)), count[k],
                                  duration_s=5.0))
            count[k] += 1
        ev = evidence(windows, USERS)
        choice = choose(ks, standing_of(ev, P), Spent(dict(count), valid_lives(ev, USERS)), model,
                        Budget(2 * len(ks)), max_repeats, 2, P.tie_tolerance_frac)
        if choice.k is None:
            return order, choice
        order.append(choice.k)
    raise AssertionError(f"the sweep did not stop: {order}")


GRID = [0, 2, 4, 6, 8]


def test_hidden_truth_a_wrong_model_does_not_skip_the_winner():
    """K=6 truly wins (56 against K=4's 50); the model ranks it 8 % behind K=4, inside its 12 % error at the target:
    it is run and the verdict names it. Untrusted, the model skips nothing either."""
    truth = {0: 20.0, 2: 40.0, 4: 50.0, 6: 56.0, 8: 30.0}
    wrong = {0: Prediction(20, 19, 21), 2: Prediction(40, 38, 42), 4: Prediction(52, 50, 54),
             6: Prediction(48, 45, 50), 8: Prediction(31, 29, 33)}
    for model in (trusted(wrong, error=0.12), ModelView(False, wrong, "not trusted: held-out error 12 %")):
        order, stop = sweep(GRID, truth, model)
        assert 6 in order and stop.stop == "decided" and "K=6" in stop.why, (order, stop.why)


def test_hidden_truth_a_right_model_saves_the_life_of_a_k_it_rules_out():
    truth = {0: 20.0, 2: 40.0, 4: 50.0, 6: 44.0, 8: 30.0}
    right = {0: Prediction(20, 19, 21), 2: Prediction(41, 39, 43), 4: Prediction(51, 49, 53),
             6: Prediction(45, 43, 47), 8: Prediction(31, 29, 33)}
    with_model, stop = sweep(GRID, truth, trusted(right))
    without, free_stop = sweep(GRID, truth, ModelView())
    # measured: 0, 4, 6, 4, 0 with the model; 0, 4, 2, 6, 4, 8, 6 without (K=6 in the running kept K=8 in the bracket)
    assert 2 in without and 2 not in with_model and len(with_model) < len(without), (with_model, without)
    assert "K=4" in stop.why and "K=4" in free_stop.why and [s.k for s in stop.skipped] == [2]


def test_the_held_out_error_at_the_target_is_the_largest_there_else_the_largest_of_all_said_so():
    from lookahead_runner.decision.perfmodel.trust import HeldOut, error_at

    results = [HeldOut("stage", 0, 64, 21.0, 20.0), HeldOut("K", 4, 64, 45.0, 50.0), HeldOut("K", 4, 32, 60.0, 40.0)]
    at = error_at(results, 64)
    assert round(at.value, 3) == 0.1 and at.scope == ""   # the larger of 5 % and 10 %; 50 % at 32 users not in it
    elsewhere = error_at(results, 48)
    assert round(elsewhere.value, 3) == 0.5 and elsewhere.scope == "over every held-out prediction, none at 48 users"


def test_a_winner_just_beyond_the_largest_of_three_held_out_errors_is_not_ruled_out():
    # held-out errors 3 %, -5 %, 6 % at the target: the largest of 3, which a fourth exceeds 1 time in 4 (half of
    # them on the low side), left K=2 predicted 45 [44, 46] out against the leader's 50; K=2 truly measures 51, its
    # prediction 11.8 % low. Student's t on the 3 errors' scale at SKIP_LEVEL gives it up to 45 / (1 - 22 %)
    model = ModelView(True, {2: Prediction(45.0, 44.0, 46.0)}, "", heldout_error=0.06,
                      heldout_errors=(0.03, -0.05, 0.06), skip_level=SKIP_LEVEL)
    assert 2 not in ruled_out([2], 4, 50.0, [0, 4], model, 0.03)
    assert round(skip_bound(model), 3) == round(math.sqrt((0.03**2 + 0.05**2 + 0.06**2) / 3) * 4.541, 3)
    # a K far enough behind is still ruled out on the same errors, and says on what
    far = dataclasses.replace(model, predictions={2: Prediction(30.0, 29.0, 31.0)})
    skip = ruled_out([2], 4, 50.0, [0, 4], far, 0.03)[2]
    assert (skip.bound, skip.level, skip.count) == (skip_bound(model), SKIP_LEVEL, 3)
    assert ("40% behind, more than the 21.9% its 3 held-out errors at the target allow (a larger miss 1 time in 100; "
            "the largest 6.0%)") in skip_text(skip)


@pytest.mark.parametrize("count", [3, 6])
def test_the_skip_bound_is_exceeded_at_its_stated_level(count):
    """A new error drawn as the held-out ones (normal, any scale) falls below -bound at SKIP_LEVEL: measured on 20,000
    draws, inside the binomial 99.9 % interval (the largest of 3 is passed on the low side 1 time in 8)."""
    rng = np.random.default_rng(count)
    draws = 20_000
    held, new = rng.normal(0, 0.1, (draws, count)), rng.normal(0, 0.1, draws)
    bounds = np.array([skip_bound(ModelView(True, heldout_errors=tuple(h), skip_level=SKIP_LEVEL)) for h in held])
    missed = int(np.sum(new < -bounds))
    low, high = stats.binom.ppf([0.0005, 0.9995], draws, SKIP_LEVEL)
    assert low <= missed <= high, (missed, low, high)
    largest = int(np.sum(new < -np.abs(held).max(axis=1)))
    assert largest > 5 * high     # the rule before: the largest held-out error as the bound


def test_hidden_truth_a_model_wrong_past_its_largest_held_out_error_does_not_skip_the_winner():
    """K=6 truly wins (56 against K=4's 50); the model predicts it 43, 23 % low, past its largest held-out error
    (10 % of 3 at the target), and K=8 ahead of K=4, so K=8 is run and K=6 lies between measured K: the largest as
    the bound ruled K=6 out and named K=4 (0, 8, 4, 4, 0); the bound at SKIP_LEVEL runs it."""
    truth = {0: 20.0, 2: 40.0, 4: 50.0, 6: 56.0, 8: 30.0}
    wrong = {0: Prediction(20, 19, 21), 2: Prediction(40, 38, 42), 4: Prediction(52, 50, 54),
             6: Prediction(43, 41, 45), 8: Prediction(53, 51, 55)}
    model = trusted(wrong, error=0.10, errors=(0.05, -0.08, 0.10))
    order, stop = sweep(GRID, truth, model)
    assert 6 in order and stop.stop == "decided" and "K=6" in stop.why, (order, stop.why)
