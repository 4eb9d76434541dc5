"""A users window shorter than two request cycles holds one throughput bin: its own noise cannot be measured from
inside it, and with one repeat per K no spread is measured at all. Its throughput was still counted (the requests
completed in the window), and a count has the noise its size implies: the req/s interval is never of no width, and
a K measured that way does not beat another by a few percent in every resample."""
from __future__ import annotations

import math

from scipy import stats

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import evidence
from lookahead_runner.decision.engine import cell_summaries, evaluate_stages
from tests.unit.synthetic import window

USERS, RATE, SECONDS = 64, 5.0, 20.0   # e2e = 64 / 5 = 12.8 s: a 20 s window holds one bin of one request cycle


def _config() -> DecisionConfig:
    return DecisionConfig.model_validate({"confirm": "off", "restart_spread": 0.0})


def test_one_bin_one_repeat_states_a_req_per_s_interval_at_least_as_wide_as_its_count_implies():
    p = _config()
    ev = evidence([window(0, USERS, RATE, duration_s=SECONDS)], USERS)
    stages = evaluate_stages(ev, p)
    assert stages[USERS].prepared[0].throughput_units == 1 and stages[USERS].noise.source == "none"
    (cell,) = cell_summaries(stages, p)
    completions = round(RATE * SECONDS)
    # Poisson: the count's relative standard error is 1 / sqrt(count); its interval at the level, a little less for
    # the Monte Carlo of the draws
    half = stats.norm.ppf((1 + p.interval_level) / 2) / math.sqrt(completions)
    assert cell.req_per_s_range.low <= cell.req_per_s * (1 - 0.9 * half), cell.req_per_s_range
    assert cell.req_per_s_range.high >= cell.req_per_s * (1 + 0.9 * half), cell.req_per_s_range


def test_a_k_measured_with_one_bin_is_not_infinitely_precise_against_another():
    p = _config()
    # K=4 counted 5 % more completions than K=0, each in one window of one bin: 100 against 105 requests
    ev = evidence([window(0, USERS, RATE, duration_s=SECONDS), window(4, USERS, RATE * 1.05, duration_s=SECONDS)],
                  USERS)
    stage = evaluate_stages(ev, p)[USERS]
    assert all(cell.throughput_units == 1 for cell in stage.prepared.values())
    # two Poisson counts of 100 and 105 tell K=4 ahead in about Phi(5 / sqrt(205)) = 64 % of resamples, never all
    assert stage.shares.get(4, 0.0) < p.confidence, stage.shares
