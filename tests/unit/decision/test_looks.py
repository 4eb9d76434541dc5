"""Looks that spend the verdict's error (decision/gates/looks.py) and where they stop: the boundaries of the spending
function at known looks, the error they hold over all looks together, a tie stopped early by equivalence, and
decision.json naming the look it stopped at."""
import json
import time
from types import SimpleNamespace

import numpy as np
import pytest
from scipy import stats

from unit.synthetic import table, window

from lookahead_runner.config import DecisionConfig, config_from_dict
from lookahead_runner.decision import evidence
from lookahead_runner.decision.adaptive import Budget, ModelView, Spent, choose, standing_of
from lookahead_runner.decision.engine import auto_repeats_wanted, early_look
from lookahead_runner.decision.gates.looks import Looks, boundaries, expected_look, spent
from lookahead_runner.decision.gates.stage import tie_confidence
from lookahead_runner.runfolder.price import looks_of
from lookahead_runner.run.verdict.finalize import decide_looked

P = DecisionConfig(resamples=1000)


def test_the_boundaries_are_the_published_obrien_fleming_type_ones():
    # gsDesign(k=5, test.type=1, alpha=0.025, sfu=sfLDOF): 4.8769 3.3570 2.6803 2.2898 2.0310
    z = boundaries(tuple(i / 5 for i in range(1, 6)), 0.025)
    assert z == pytest.approx((4.8769, 3.3570, 2.6803, 2.2898, 2.0310), abs=1e-4)
    assert spent(1.0, 0.1) == pytest.approx(0.1) and spent(0.5, 0.1) < 0.1 / 4  # little spent early


def test_each_looks_bar_falls_as_lives_are_measured_and_the_last_spends_what_is_left():
    looks = Looks(2, 8, 0.1)
    bars = [looks.bar(i) for i in range(2, 9)]
    assert all(a > b for a, b in zip(bars, bars[1:])) and bars[-1] > 0.9   # stricter than one look, always
    assert looks.last_bar(8) == pytest.approx(looks.bar(8))                # the budget's look is the last
    assert looks.last_bar(2) == pytest.approx(0.9)                         # a first look alone: one look's bar
    assert 0.9 < looks.last_bar(5) < looks.bar(5)
    assert Looks(1, 6, 0.1).at(3).text() == "look 3 of at most 6: boundary 98.1 %"
    assert Looks(2, 8, 0.1).at(5).text() == "look 5 of at most 8: boundary 96.9 %"


def test_the_bars_hold_the_error_over_all_looks_together():
    """Measured, not derived: the statistic of a test at the worst truth, followed over looks 2 to 8 of at most 8
    (independent increments, information growing with the lives), crosses some look's bar in 10 % of paths, where
    one look at 90 % at every look would cross in far more."""
    rng = np.random.default_rng(49)
    fractions = np.arange(2, 9) / 8
    increments = rng.normal(0, np.sqrt(np.diff(np.concatenate([[0.0], fractions]))), (200_000, len(fractions)))
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    looks = Looks(2, 8, 0.1)
    bars = stats.norm.ppf([looks.bar(i) for i in range(2, 8)] + [looks.last_bar(8)])
    crossed = (z >= bars).any(axis=1).mean()
    assert crossed == pytest.approx(0.1, abs=0.003)
    assert (z >= stats.norm.ppf(0.9)).any(axis=1).mean() > 0.2   # the first decided look: optional stopping


def _four_k_tied() -> "evidence":
    """K 0/2/4/8 within 1 % of each other, two lives each (8 lives): each other K's gain over K=0 inside the 3 %
    tie band in over 97 % of the resamples, K=0 winning all at once in under 96.7 %."""
    return table({0: {32: 20.0}, 2: {32: 20.15}, 4: {32: 20.05}, 8: {32: 19.9}}, 32, repeats=2, spread=0.012)


def test_a_tie_stops_early_by_equivalence():
    ev, looks = _four_k_tied(), Looks(2, 12, 0.1)
    now = standing_of(ev, P, looks=looks)
    assert now.status == "decided" and now.tie and now.leader == 0
    assert now.shares[0] < looks.bar(8)          # not by the share: every K inside the band, one by one
    choice = choose([0, 2, 4, 8], now, Spent({0: 2, 2: 2, 4: 2, 8: 2}, {0: 2, 2: 2, 4: 2, 8: 2}), ModelView(),
                    Budget(12), 5)
    assert choice.k is None and choice.stop == "decided"
    assert choice.why.startswith("tie at look 8 of at most 12: every other K's gain over K=0 inside the ±3% tie "
                                 "band at 96.7 % (equivalence): keep the smallest K, K=0"), choice.why
    assert standing_of(ev, P).status == "not_decided"   # the fixed early-stop bar would buy more lives


def _adaptive(max_lives: int):
    return config_from_dict({"speculation": {"k": [0, 2, 4, 8]}, "sweep": {"strategy": "adaptive",
                                                                           "max_lives": max_lives},
                             "load": {"stages": [{"users": 32, "duration_s": 20}]},
                             "decision": {"target_users": 32, "resamples": 1000}})


def test_decision_json_names_the_look_it_stopped_at_and_its_boundary():
    lives = [window(k, 32, level * (1 + r / 100), r) for k, level, repeats in ((0, 20.0, 2), (2, 26.0, 1),
                                                                                (4, 30.0, 2)) for r in range(repeats)]
    decision = decide_looked(evidence(lives, 32), _adaptive(8), {}, None, None)
    assert decision.status == "decided" and decision.recommended.k == 4
    saved = json.loads(decision.model_dump_json())
    assert saved["looks"]["text"] == "stopped at look 5 of at most 8: boundary 96.9 %", saved["looks"]
    assert saved["looks"]["stopped_by"] == "boundary" and saved["looks"]["rule"].startswith("error spending")
    assert saved["confidence_threshold"] == pytest.approx(Looks(2, 8, 0.1).bar(5))


def test_a_tie_told_by_equivalence_is_the_verdict_decision_json_states():
    decision = decide_looked(_four_k_tied(), _adaptive(12), {}, None, None)
    assert decision.status == "decided" and decision.recommended.k == 0
    assert decision.looks.stopped_by == "tie" and decision.looks.text.startswith("stopped at look 8 of at most 12 "
                                                                                 "on a tie")
    assert decision.confidence >= Looks(2, 12, 0.1).bar(8)    # the least of its one-sided shares
    assert "A tie, told by equivalence" in decision.verdict


def test_auto_repeats_stop_at_the_looks_boundary_not_at_a_fixed_bar():
    ev = table({0: {32: 20.0}, 4: {32: 21.6}}, 32, repeats=3, spread=0.02)    # K=4 in 98 % of the resamples
    looks = looks_of(config_from_dict({"speculation": {"k": [0, 4]}, "load": {
        "stages": [{"users": 32, "duration_s": 20}], "repeats": "auto"}, "decision": {"target_users": 32}}))
    assert (looks.first, looks.at_most, looks.unit) == (2, 5, "repeats")
    assert auto_repeats_wanted([ev], P, looks) == ([], "")                  # look 3 of at most 5: 96.9 % cleared
    assert auto_repeats_wanted([ev], P) == ([0, 4], "decided, short of the 99.0% an early stop needs")
    assert looks_of(config_from_dict({"speculation": {"k": [0, 4]}, "load": {
        "stages": [{"users": 32, "duration_s": 20}], "repeats": 2}, "decision": {"target_users": 32}})) is None


@pytest.mark.parametrize("resamples, at_most", [(1000, 20), (50, 8)])
def test_the_bars_the_engine_judges_by_hold_the_error_where_the_resamples_show_less(resamples, at_most):
    """At decision.confidence = 99 % the early looks' bars pass the highest share the resamples can show (99.75 %
    of 1000, 98.9 % of 50): a look judged at that instead of its bar spends more than its share of the error (the
    looks together were wrong in 1.9 % of paths, not 1 %)."""
    p = DecisionConfig(confidence=0.99, resamples=resamples)
    looks = Looks(2, at_most, 0.01)
    judged = [early_look(p, looks.at(i)).confidence for i in range(2, at_most)]
    judged.append(early_look(p, looks.at(at_most, last=True)).confidence)
    rng = np.random.default_rng(5)
    fractions = np.arange(2, at_most + 1) / at_most
    increments = rng.normal(0, np.sqrt(np.diff(np.concatenate([[0.0], fractions]))), (200_000, len(fractions)))
    z = np.cumsum(increments, axis=1) / np.sqrt(fractions)
    assert (z >= stats.norm.ppf(judged)).any(axis=1).mean() == pytest.approx(0.01, abs=0.001)


def test_a_budget_of_many_looks_is_priced_in_seconds():
    """sweep.max_lives may be 1000: each look's bar was a recursion over every look before it, again for each look
    (the expected look over 150 looks took minutes, over 1000 hours); the looks are one recursion."""
    start = time.process_time()
    looks = Looks(2, 150, 0.1)
    assert 2 < expected_look(looks, 1.0) < 150 and looks.last_bar(149) < looks.bar(149)
    assert time.process_time() - start < 30


def test_a_look_is_numbered_by_the_lives_measured_even_outside_the_planned_looks():
    one = decide_looked(evidence([window(0, 32, 20.0, 0)], 32), _adaptive(8), {}, None, None)
    assert one.looks.look == 1, one.looks       # one life measured: not "look 2"
    assert Looks(2, 8, 0.1).at(10).number == 10 and Looks(2, 8, 0.1).at(10).bar == Looks(2, 8, 0.1).bar(8)


def test_a_draw_whose_gain_is_not_finite_counts_against_a_tie():
    """A resample where the leader's objective is 0 gives the rival an infinite gain: outside the tie band, not
    left out of the share (leaving it out let 10 % of such draws through at a bar of 96 %)."""
    gains = np.r_[np.zeros(900), np.full(100, np.inf)]
    stage = SimpleNamespace(pick=0, ks=[0, 4], stopped_at=None, blocked_by=lambda k: [],
                            relative_draws=lambda k, other, objective: gains)
    assert tie_confidence(stage, P, 0.96) is None
    gains[900:] = 0.0
    assert tie_confidence(stage, P, 0.96) == 1.0
