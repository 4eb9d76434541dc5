"""benchmarks/calibration/capacity_verdicts.py: the truths of the verdict at a rate where the capacity within the SLO
decides (each K's capacity, the rule on the true figures, the edge its latency contradicts) and how its edge trial
is scored."""
from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import adapters, capacity_verdicts as cv, tally  # noqa: E402
from benchmarks.calibration.lives import mmc_attainment  # noqa: E402
from lookahead_runner.decision.capacity import estimate  # noqa: E402
from benchmarks.calibration.regimes import TIE  # noqa: E402
from benchmarks.calibration.verdicts import edge_claim  # noqa: E402


def _regimes(count: int) -> list[cv.CapacityVerdictRegime]:
    rng = np.random.default_rng(7)
    return [cv.draw(rng) for _ in range(count)]


def test_each_ks_true_capacity_is_the_rate_at_which_its_attainment_falls_to_the_slos_percentile():
    for r in _regimes(6):
        for k in (0, 4):
            at = mmc_attainment(r.servers[k], r.capacity[k], r.service_mean_s[k], r.limit_s, "e2e")
            assert at == pytest.approx(r.target, abs=1e-6)
            # both K hold the SLO at the target rate, with the margin the trials are drawn with
            held = mmc_attainment(r.servers[k], r.rate, r.service_mean_s[k], r.limit_s, "e2e")
            assert held >= 1 - (1 - r.target) / 2
        assert r.ramp[0] == pytest.approx(r.rate) and max(r.ramp) > r.rate


def test_the_truth_is_the_pick_rule_on_the_true_figures_capacity_first_then_latency():
    r = _regimes(1)[0]
    beyond = replace(r, capacity={0: 10.0, 4: 10.0 * (1 + TIE) * 1.001})
    assert cv.truth(beyond) == (4, "capacity")
    below = replace(r, capacity={0: 10.0 * (1 + TIE) * 1.001, 4: 10.0})
    assert cv.truth(below) == (0, "capacity")
    tied = replace(r, capacity={0: 10.0, 4: 10.0 * (1 + TIE)})     # on the edge: the capacity ties
    assert cv.truth(tied)[1] == "latency"


@pytest.mark.parametrize("seed", range(4))
def test_the_edge_trial_puts_k4s_capacity_on_the_edge_its_latency_contradicts(seed):
    r = _regimes(4)[seed]
    edge = cv.at_the_edge(r, np.random.default_rng(seed))
    assert edge.capacity_gain == pytest.approx(TIE if edge.named.factors["edge"] == "+3%" else cv.LOW_EDGE, abs=1e-6)
    k, decides = cv.truth(edge)
    past = 4 if edge.capacity_gain > 0 else 0
    assert decides == "latency" and k != past      # the worst truth: the latency's K there, the capacity's past it


def test_at_the_edge_either_k_named_is_an_error_stated_at_one_minus_the_confidence(monkeypatch):
    said = iter([(True, 0, 0.97), (True, 4, 0.95), (False, None, 0.5)])
    monkeypatch.setattr(adapters, "verdict", lambda decision: next(said))
    r = _regimes(1)[0]
    tallies = tally.Tallies()
    decision = SimpleNamespace(confidence_threshold=0.9)
    for _ in range(3):
        cv.score_edge(cv.CapacityVerdictTrial(r, decision, truth=0, decides="latency", past_edge=4), tallies)
    named0, named4 = (tallies.claims[edge_claim(cv.WHAT, k)] for k in (0, 4))
    assert (named0.kind, named0.stated, named0.hits, named0.trials) == (tally.ERROR, pytest.approx(0.1), 1, 3)
    assert (named4.hits, named4.trials) == (1, 3)
    # where the latency names the capacity's K too, that K is right on both sides of the edge: no error
    said = iter([(True, 4, 0.97)])
    agree = tally.Tallies()
    cv.score_edge(cv.CapacityVerdictTrial(r, decision, truth=4, decides="latency", past_edge=4), agree)
    assert agree.claims[edge_claim(cv.WHAT, 4)].hits == 0


def test_the_capacity_search_pass_narrows_the_bracket_the_ramp_leaves_both_k_in(monkeypatch):
    # long stages (20,000 arrivals at the target rate: the offered rate's Poisson noise, about 0.7 %, well under the
    # search's precision; at the drawn 300-1,000 it is 3-6 % and the search stops short of it) on one life of little
    # spread: the ramp leaves K=0 and K=4 in one bracket (either's capacity could pass the other's by more than the
    # tie band), the search narrows each K's to SEARCH_PRECISION, and the second verdict is on the ramp and probes
    decided_on = []
    monkeypatch.setattr(adapters, "decide_rate", lambda windows, rate, p: decided_on.append(list(windows)) or
                        len(decided_on))
    r = _regimes(5)[4]
    r = replace(r, lives=1, spread=0.01, stage_s=20_000 / r.rate)
    trial = cv.capacity_verdict_trial(r, np.random.default_rng(0))
    ramp, searched = decided_on
    assert (trial.decision, trial.searched) == (1, 2)
    assert searched[:len(ramp)] == ramp and trial.probes == len(searched) - len(ramp) > 0

    def brackets(windows):
        points = estimate.rate_points(windows)
        return {k: estimate.measured_bracket(points[k], r.target) for k in (0, 4)}

    before, after = brackets(ramp), brackets(searched)
    assert before[0][1] > before[4][0] * (1 + TIE) and before[4][1] > before[0][0] * (1 + TIE)   # one bracket
    assert all(high / low <= 1 + cv.SEARCH_PRECISION for low, high in after.values())


def test_after_the_capacity_search_its_verdict_is_scored_under_claims_of_its_own(monkeypatch):
    said = {"ramp": (False, None, 0.5), "searched": (True, 4, 0.97)}
    monkeypatch.setattr(adapters, "verdict", lambda decision: said[decision.name])
    monkeypatch.setattr(adapters, "decided_by", lambda decision: "capacity")
    r = _regimes(1)[0]
    ramp, searched = (SimpleNamespace(name=n, confidence_threshold=0.9) for n in said)
    trial = cv.CapacityVerdictTrial(r, ramp, truth=0, decides="latency", past_edge=4, searched=searched, probes=7)
    tallies = tally.Tallies()
    cv.score_edge(trial, tallies)
    cv.score_trial(trial, tallies)
    claims = tallies.claims
    assert claims[edge_claim(cv.WHAT, 4)].hits == 0 and claims[edge_claim(cv.WHAT, 4) + f", {cv.AFTER}"].hits == 1
    assert claims[f"decided share: {cv.WHAT}"].hits == 0 and claims[f"decided share: {cv.WHAT}, {cv.AFTER}"].hits == 1
    probes = claims[f"probes per trial (mean): {cv.WHAT}, {cv.AFTER}"]
    assert (probes.kind, probes.measured, probes.outcome) == (tally.MEAN, 7, tally.MEAN)
    assert "7.00" in tally.table([probes])
