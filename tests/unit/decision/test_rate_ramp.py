"""A ramp over rates (`ramp --rates`, decision/ramp.py) on synthetic rate windows: the knee is the last rate the K
holds before the first where the achieved rate stops following the offered one, the queue grows through the
window, or an SLO's attainment measured falls below its own percentile (the point, as the SLO gate and the
simulator's capacity read it)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from lookahead_runner.config import DecisionConfig, config_from_dict
from lookahead_runner.decision.cells.evidence import Evidence
from lookahead_runner.decision.cells.keeping_up import queue_finding
from lookahead_runner.decision.cells.rate_window import RateWindow
from lookahead_runner.decision.ramp import ramp_decision, rate_knee, rate_step_text
from lookahead_runner.run.strategies.ramp import ramp_config

P = DecisionConfig(slo={"ttft_p99_ms": 500}, resamples=200)
NO_SLO = DecisionConfig(resamples=200)
NO_EVIDENCE = Evidence({}, 0)


def rate_window(rate: float, achieved: float | None = None, good_share: float = 1.0, growth: float = 0.0,
                waiting=(0.0, 0.0), k: int = 0, valid: bool = True, has_slo: bool = True, duration_s: float = 10.0,
                repeat: int = 0) -> RateWindow:
    """`rate` req/s for `duration_s`: exactly rate x duration arrivals, `good_share` of them meeting the SLO; the
    achieved rate and the outstanding requests' growth as given (a K that keeps up: achieved = offered)."""
    arrivals = int(round(rate * duration_s))
    good = np.arange(arrivals) < round(good_share * arrivals)
    return RateWindow(k=k, repeat=repeat, stage=0, rate=rate, duration_s=duration_s,
                      latency_ms=np.full((arrivals, 4), 100.0), ok=np.ones(arrivals, dtype=bool), good=good,
                      late_ms=np.zeros(arrivals), achieved_per_s=rate if achieved is None else achieved,
                      outstanding=(2.0, 2.0 + growth), growth=growth, waiting=waiting, has_slo=has_slo, valid=valid)


def test_the_knee_is_where_the_queue_starts_to_grow():
    windows = [rate_window(1), rate_window(2), rate_window(4),
               rate_window(8, achieved=5.1, growth=29.0, waiting=(3.0, 41.0), good_share=0.4)]
    knee = rate_knee(0, windows, P)
    assert (knee.rate, knee.next_rate) == (4.0, 8.0)
    assert [step.holds for step in knee.steps] == [True, True, True, False]
    broken = knee.steps[-1]
    assert not broken.follows and not broken.keeps_up and not broken.meets_slo
    assert broken.reason.startswith("5.1 of 8.0 req/s served; the queue grows (waiting 3 -> 41); TTFT p99 <= 500 ms "
                                    "met by 40.0% [")
    assert knee.reason.startswith("the knee at K=0 lies between 4 and 8 req/s: it holds 4 (4.0 of 4.0 req/s served, "
                                  "SLO met by 100.0% [")


def test_the_knee_is_where_the_achieved_rate_stops_following_before_the_queue_shows_it():
    # 40 arrivals, 26 served: 14 short, beyond the queue's noise (3 x sqrt(2)); the queue's
    # least-squares growth (the window's own rule) still level
    windows = [rate_window(2, has_slo=False), rate_window(4, achieved=2.6, has_slo=False)]
    (held, broken) = rate_knee(0, windows, NO_SLO).steps
    assert held.holds and broken.keeps_up and not broken.follows and broken.reason == "2.6 of 4.0 req/s served"
    assert broken.attainment is None and broken.meets_slo   # no SLO set: attainment is not judged
    # within that margin it still follows: 40 arrivals, 37 served
    assert rate_knee(0, [rate_window(4, achieved=3.7)], NO_SLO).steps[0].follows


def test_the_knee_is_where_the_slo_attainment_falls_below_its_target():
    # 100 arrivals each: 99 % met holds 99 %; 98 % does not, though Wilson's upper end (99.4 %) still reaches it:
    # the SLO gate (rules.slo_status) and the simulator's capacity truth read the share measured, so does the knee
    windows = [rate_window(10), rate_window(20, good_share=0.99, duration_s=5), rate_window(40, good_share=0.98,
                                                                                           duration_s=2.5)]
    knee = rate_knee(0, windows, P)
    assert [step.meets_slo for step in knee.steps] == [True, True, False]
    assert (knee.rate, knee.next_rate) == (20.0, 40.0)
    fall = knee.steps[2]
    assert fall.follows and fall.keeps_up and fall.attainment == pytest.approx(0.98)
    assert fall.attainment_range.high > 0.99 and fall.reason.endswith(
        "< 99.0% (its interval reaches the percentile: a longer stage would tell)")
    # clearly below: no such remark
    clear = rate_knee(0, [rate_window(40, good_share=0.9, duration_s=2.5)], P).steps[0]
    assert not clear.meets_slo and clear.reason.endswith("] < 99.0%")
    # a stricter percentile moves it: 99 % of 100 is below 99.9 %
    strict = rate_knee(0, windows, DecisionConfig(slo={"ttft_p99.9_ms": 500}, resamples=200))
    assert (strict.rate, strict.next_rate) == (10.0, 20.0)


def test_no_knee_in_the_rates_run_says_which_rates_to_add():
    held = rate_knee(0, [rate_window(1), rate_window(2)], P)
    assert held.rate is None and held.next_rate is None
    assert held.reason.endswith("add higher rates to find it, e.g. --rates 4,8")
    first = rate_knee(0, [rate_window(8, achieved=3.0, growth=40.0), rate_window(16, achieved=3.0, growth=90.0)], P)
    assert first.rate is None and first.next_rate == 8.0
    assert "does not hold even the lowest rate, 8 req/s" in first.reason and "--rates 2,4" in first.reason


def test_repeats_pool_and_invalid_windows_and_other_ks_are_left_out():
    windows = [rate_window(4, repeat=0), rate_window(4, repeat=1, achieved=3.9),
               rate_window(8, valid=False, achieved=1.0, growth=70.0), rate_window(8, k=4, achieved=1.0, growth=70.0)]
    (step,) = rate_knee(0, windows, P).steps
    assert (step.rate, step.arrivals, step.achieved_per_s) == (4.0, 80, pytest.approx(3.95))


def test_a_rate_ramp_is_a_decision_in_rate_terms():
    windows = [rate_window(2), rate_window(4), rate_window(8, achieved=5.0, growth=25.0, waiting=(1.0, 30.0))]
    decision = ramp_decision(NO_EVIDENCE, 0, "k0", ["vllm", "serve"], P, windows, user_stages=False)
    assert decision.mode == "ramp" and decision.status == "decided" and decision.recommended.k == 0
    assert decision.verdict.startswith("The knee at K=0 lies between 4 and 8 req/s")
    assert decision.target_users is None and decision.knee is None and decision.rate_knee.rate == 4.0
    assert decision.reasons[0].startswith("2 req/s: 2.0 of 2.0 served, SLO met by 100.0% [")
    assert decision.reasons[2].endswith("waiting 1 -> 30; does not hold: 5.0 of 8.0 req/s served; the queue grows "
                                        "(waiting 1 -> 30).")
    flat = ramp_decision(NO_EVIDENCE, 0, "k0", [], P, windows[:2], user_stages=False)
    assert flat.status == "not_decided" and flat.verdict.startswith("No knee up to 4 req/s at K=0")
    invalid = [rate_window(2, valid=False)]
    object.__setattr__(invalid[0], "invalid_reason", "dispatcher late")
    none = ramp_decision(NO_EVIDENCE, 0, "k0", [], P, invalid, user_stages=False)
    assert none.status == "no_measurement" and none.verdict == ("No valid rate window at K=0: no knee to find. "
                                                                "Invalid windows: 2 req/s: dispatcher late.")


def test_ramp_rates_become_rate_stages_of_one_k():
    config = ramp_config(config_from_dict({}), 2, None, 4.0, [1.0, 2.0, 4.0, 8.0])
    assert [(s.rate, s.users, s.duration_s) for s in config.load.stages] == [(r, None, 4.0) for r in (1, 2, 4, 8)]
    assert config.speculation.k == [2] and config.load.repeats == 1 and config.target_users == 0
    assert not config.load.user_stages


def _too_short(rate: float) -> RateWindow:
    """`rate` req/s through a 20 s stage whose answers take 25 s, on a server with room for all (issue 46)."""
    arrived = 1000.0 + (np.arange(int(rate * 20)) + 0.5) / rate
    finding = queue_finding(arrived, arrived + 0.07, arrived + 25.07, 1005.0, 1020.0, 1000.0)
    return replace(rate_window(rate, achieved=0.0, growth=finding.judged.change, duration_s=15.0, has_slo=False),
                   queue=finding, outstanding=(10.0, 10.0 + 1.5 * rate * 10))


def test_a_stage_shorter_than_its_answers_cannot_be_judged_and_never_reads_as_not_held_or_behind():
    knee = rate_knee(0, [_too_short(2.0), _too_short(4.0)], NO_SLO)
    first = knee.steps[0]
    assert first.keeps_up and not first.holds and first.too_short == ("stage too short for answers of 25 s; "
                                                                      "lengthen to 50 s")
    assert knee.rate is None and knee.next_rate is None
    assert knee.reason == ("K=0 cannot be judged at 2 req/s, the lowest rate: stage too short for answers of 25 s; "
                           "lengthen to 50 s")
    assert rate_step_text(first) == ("2 req/s: ? of 2.0 served, waiting 0 -> 0; cannot be judged: stage too short "
                                     "for answers of 25 s; lengthen to 50 s.")
    for text in (knee.reason, rate_step_text(first)):
        assert "behind" not in text and "does not hold" not in text and "queue grows" not in text
    # after a rate that holds: the knee lies above it, not found
    later = rate_knee(0, [rate_window(1.0, has_slo=False), _too_short(4.0)], NO_SLO)
    assert later.rate is None and later.reason.startswith("no knee found above 1 req/s at K=0: it holds 1 (1.0 of "
                                                          "1.0 req/s served); at 4 req/s it cannot be judged: stage")
    # a rate above that clearly does not hold is named too
    over = rate_knee(0, [_too_short(2.0), rate_window(8, achieved=3.0, growth=40.0)], NO_SLO)
    assert over.reason.endswith("lengthen to 50 s; at 8 req/s it does not hold: 3.0 of 8.0 req/s served; the queue "
                                "grows (waiting 0 -> 0)")
