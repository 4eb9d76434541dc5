"""The restart spread at a rate (decision/cells/rate_spread.py) in the verdict at that rate: one life per K on a
server of unknown spread decides only a large gain, a spread measured small by a repeated life lets a moderate one
decide, each K's lives are kept once per resample (the spread drawn once, as a life factor), and a slower life holds
less of the rate (its capacity bracket scaled)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.cells.rate_cell import _Arrivals, cells_at
from lookahead_runner.decision.cells.rate_spread import RateSpread, spread_at, window_var
from lookahead_runner.decision.rate_decision import decide_at_rate

from .rate_windows_factory import rate_window

RATE = 20.0
ARGV = {0: ["vllm"], 4: ["vllm", "--k4"]}


def _vllm(**kw) -> DecisionConfig:
    return DecisionConfig(slo={"ttft_p99_ms": 500.0}, resamples=400, **kw).for_server("vllm")


def _life(k: int, factor: float, repeat: int = 0, service_ms: float = 1000.0, rate: float = RATE) -> dict:
    """One life's window at the rate: every latency `factor` x the K's (`service_ms` its e2e beyond TTFT)."""
    window = rate_window(k, rate, 400, 400, repeat=repeat, service_ms=service_ms)
    return dataclasses.replace(window, latency_ms=window.latency_ms * factor)


def test_one_life_per_k_on_an_unknown_spread_does_not_decide_a_15_percent_gain_and_says_why():
    # before: "decided, set K=4" at 100 % of the resamples, as if the two lives were the K's true levels
    windows = [_life(0, 1.0, service_ms=1150.0 * 1.15), _life(4, 1.0)]
    decision = decide_at_rate(windows, RATE, _vllm(), ARGV)
    assert decision.status == "not_decided" and decision.leading_k == 4
    assert ("one life per K at 20 req/s: restart spread unknown (taken as 15% per server life: at 90% a single-life "
            "gain in speed over K=0 must be about +35% to set a K") in decision.verdict
    assert any(r.startswith("One life per K at 20 req/s: restart spread unknown, taken as 15% per server life")
               for r in decision.reasons)


def test_a_gain_past_what_the_unknown_spread_explains_is_decided_and_names_the_assumed_spread():
    windows = [_life(0, 1.0, service_ms=2000.0), _life(4, 1.0)]
    decision = decide_at_rate(windows, RATE, _vllm(), ARGV)
    assert decision.status == "decided" and decision.recommended.k == 4
    assert decision.verdict.endswith("One life per K: restart spread at 20 req/s unknown, taken as 15% per server "
                                     "life; the verdict clears it.")


def test_two_lives_of_the_baseline_a_percent_apart_measure_a_small_spread_and_a_moderate_gain_decides():
    one_each = [_life(0, 1.0, service_ms=1300.0), _life(4, 1.0)]
    assert decide_at_rate(one_each, RATE, _vllm(), ARGV).status == "not_decided"
    windows = [_life(0, 1.0, service_ms=1300.0), _life(0, 1.01, repeat=1, service_ms=1300.0), _life(4, 1.0)]
    decision = decide_at_rate(windows, RATE, _vllm(), ARGV)
    assert decision.status == "decided" and decision.recommended.k == 4
    assert "restart spread unknown" not in decision.verdict
    assert "Restart spread at 20 req/s 0.7 % [0.3, 22.5] per server life, from 2 lives of K=0 (1 degree of " \
           "freedom)." in decision.reasons


def test_the_spread_is_the_between_life_sd_of_log_tpot_pooled_over_k():
    windows = [_life(0, 1.0), _life(0, 1.1, repeat=1), _life(4, 1.0), _life(4, 1.2, repeat=1), _life(8, 1.0)]
    spread = spread_at(RATE, cells_at(windows, RATE), _vllm())
    expected = math.sqrt((math.log(1.1) ** 2 / 2 + math.log(1.2) ** 2 / 2) / 2)
    assert spread.measured and spread.df == 2 and spread.ks == (0, 4) and spread.lives == 4
    assert spread.rel_sd == pytest.approx(expected, rel=1e-9)
    assert spread.window_var < 1e-6   # the factory's TPOT is one value per window: its arrivals redraw nothing


def test_same_server_repeats_measure_no_spread_and_a_config_without_lives_takes_its_prior():
    windows = [_life(0, 1.0), _life(0, 1.1, repeat=1), _life(4, 1.0)]
    same_server = DecisionConfig(resamples=100).for_server("vllm", one_life_per_k=True)
    assert spread_at(RATE, cells_at(windows, RATE), same_server).unknown
    assert spread_at(RATE, cells_at(windows[:1], RATE), DecisionConfig(restart_spread=0.04)).source == \
        "decision.restart_spread"
    simulator = spread_at(RATE, cells_at(windows[:1], RATE), DecisionConfig())
    assert simulator.rel_sd == 0.01 and simulator.df == 0 and not simulator.unknown


def test_the_life_factor_is_students_t_over_the_root_of_the_lives_less_the_windows_own_part():
    rng = np.random.default_rng(0)
    spread = RateSpread(RATE, rel_sd=0.10, df=20)
    logs = np.log(spread.factors(4, rng, 200_000))
    assert logs.std() == pytest.approx(0.10 / 2 * math.sqrt(20 / 18), rel=0.02)
    noisy = RateSpread(RATE, rel_sd=0.10, df=2000, window_var=0.06 ** 2)
    assert np.log(noisy.factors(1, rng, 200_000)).std() == pytest.approx(0.08, rel=0.02)
    prior = RateSpread(RATE, rel_sd=0.15, df=0, source="unknown")
    assert np.log(prior.factors(2, rng, 200_000)).std() == pytest.approx(0.15 / math.sqrt(2), rel=0.02)


def test_a_k_with_two_lives_keeps_both_in_every_resample():
    # before: its windows were drawn with replacement as well, one life twice in half of the resamples, adding the
    # between-life spread a second time beside the life factor
    cell = cells_at([_life(0, 1.0), _life(0, 1.3, repeat=1)], RATE)[0]
    draws = cell.draws(_vllm(), np.random.default_rng(1), 200)
    assert {d.repeats for d in draws} == {2}


def _capacity_sweep(k_holds: dict[int, float], rates=(24.0, 30.0, 36.0, 48.0, 60.0)):
    return [rate_window(k, r, int(30 * r), int(30 * r) if r <= k_holds[k] else int(6 * r),
                        behind=r > k_holds[k], duration_s=30.0) for k in k_holds for r in rates]


@pytest.mark.parametrize("k4_holds, decided", [(36.0, False), (60.0, True)])
def test_a_slower_life_holds_less_of_the_rate_so_capacities_on_one_life_are_scaled_apart(k4_holds, decided):
    # K=0 fails 30 req/s; K=4 holds 36 (a ratio 1.17 past the tie band: within what a 15 % spread per life
    # explains) or 60 (1.94: decided); before, both were decided by capacity
    windows = _capacity_sweep({0: 24.0, 4: k4_holds})
    decision = decide_at_rate(windows, 24.0, _vllm(), ARGV)
    assert decision.leading_k == 4 and (decision.status == "decided") is decided
    assert decision.candidates[1].gain == 0.0   # the same latency at the rate: capacity alone tells them apart


def test_a_windows_own_noise_is_the_variance_of_its_median_tpot_over_the_verdicts_resamples_of_its_arrivals():
    # iid lognormal TPOTs (sigma 0.3) over 400 arrivals: the log median varies by pi/2 x 0.09 / 400 (its asymptotic
    # variance); what the lives' spread holds of it is taken off before the life factor is drawn
    window = _life(0, 1.0)
    tpot = np.exp(0.3 * np.random.default_rng(5).standard_normal(window.arrivals)) * 20.0
    noisy = dataclasses.replace(window, latency_ms=np.column_stack([window.latency_ms[:, :1], tpot,
                                                                    window.latency_ms[:, 2:]]))
    arrivals = _Arrivals.of(noisy, _vllm())
    assert arrivals.tau == pytest.approx(1.0, abs=0.2)
    assert window_var(arrivals, np.random.default_rng(6), 2000) == pytest.approx(math.pi / 2 * 0.09 / 400, rel=0.25)


def test_the_gain_between_two_single_life_ks_is_students_t_the_spread_drawn_once_per_resample():
    # the spread is one unknown every K shares: one chi-square per resample makes log(f_4 / f_0) s sqrt(2) x t_df.
    # Before: each K drew a chi-square of its own, a sum of two independent t's (at df 2 its 90 % point 2.15, not
    # t's 1.89; at df 5 its 99 % point 3.24, not 3.36)
    from scipy import stats

    from lookahead_runner.decision.cells.rate_spread import life_factors
    cells = cells_at([_life(0, 1.0), _life(4, 1.0)], RATE)
    for df, q in ((2, 0.9), (5, 0.99)):
        spread = RateSpread(RATE, rel_sd=0.10, df=df)
        factors = life_factors(spread, cells, _vllm(), 400_000)
        ratio = np.log(factors[4] / factors[0]) / (0.10 * math.sqrt(2))
        assert np.quantile(ratio, q) == pytest.approx(stats.t.ppf(q, df), rel=0.02)


def test_a_life_seen_twice_at_the_rate_is_one_life_of_the_spread_and_a_life_with_no_answer_leaves_the_others():
    # a rate stage listed twice gives a life two windows there: they are one life (their mean log speed), not two.
    # Before: df 2 from 2 lives (the windows of one life counted as lives); and K=0's third life, with no arrival
    # that succeeded, dropped the K's other two lives from the spread (the spread then unknown)
    twice = dataclasses.replace(_life(0, 1.2), stage=1)
    spread = spread_at(RATE, cells_at([_life(0, 1.0), twice, _life(0, 1.1, repeat=1), _life(4, 1.0)], RATE), _vllm())
    assert spread.measured and spread.df == 1 and spread.lives == 2
    assert spread.rel_sd == pytest.approx(abs(math.log(1.1) - math.log(1.2) / 2) / math.sqrt(2), rel=1e-9)
    empty = rate_window(0, RATE, 400, 0, repeat=2, ok=0)
    spread = spread_at(RATE, cells_at([_life(0, 1.0), _life(0, 1.1, repeat=1), empty, _life(4, 1.0)], RATE), _vllm())
    assert spread.measured and spread.df == 1 and spread.lives == 2
