"""benchmarks/spread_calibration.py: the restart draw it gives each life and one small study through the product's
decision engine and adaptive chooser (the benchmark itself is run by hand)."""
from __future__ import annotations

import argparse

import numpy as np

from .scripts import load

bench = load("spread_calibration")


def test_each_life_is_drawn_as_the_simulator_draws_it_mean_one_with_the_spread_as_relative_sd():
    speeds = bench.life_speeds(np.random.default_rng(1), 0.08, 200_000)
    assert abs(speeds.mean() - 1) < 0.002
    assert abs(speeds.std() - 0.08) < 0.002


def test_a_trials_lives_land_at_the_true_gain_and_differ_from_life_to_life():
    s = next(s for s in bench.SPREAD_SCENARIOS if s.restart_spread == 0.08 and s.gain == 0.40)
    windows = bench.trial_windows(s, np.random.default_rng(2), 40, 0)
    rate = {k: np.array([w.completed / w.duration_s for w in windows if w.k == k]) for k in s.ks}
    assert len(rate[0]) == len(rate[4]) == 40
    assert 1.25 < rate[4].mean() / rate[0].mean() < 1.55
    assert rate[0].std() / rate[0].mean() > 0.04          # each life its own draw, not one speed for all


def test_a_small_study_scores_every_trial_once_per_strategy():
    s = next(s for s in bench.SPREAD_SCENARIOS if s.restart_spread == 0.03 and s.gain == 0.40)
    out = bench.study(s, argparse.Namespace(trials=3, lives=4, seed=0))
    for name in bench.STRATEGIES:
        row = out[name]
        assert row["right"] + row["not_decided"] + row["wrong"] == 3
    assert out["grid_repeats_2"]["right"] == 3            # +40 % over a 3 % spread: two lives each decide it
    assert out["grid_repeats_2"]["lives_median"] == 4


def test_with_the_ledger_every_trial_decides_with_an_earlier_runs_spread_and_needs_no_repeat():
    # +40 % over a 3 % spread: with the spread unknown the adaptive sweep repeats a life to measure it (4 lives of 2
    # K); with an earlier run of this server in the ledger it stops at one life per K, as the product does
    s = next(s for s in bench.SPREAD_SCENARIOS if s.restart_spread == 0.03 and s.gain == 0.40)
    alone = bench.study(s, argparse.Namespace(trials=3, lives=4, seed=0))
    ledgered = bench.study(s, argparse.Namespace(trials=3, lives=4, seed=0, ledger=True))
    assert alone["adaptive"]["lives_median"] == 4 and ledgered["adaptive"]["lives_median"] == 2
    assert ledgered["trials_without_a_ledger_spread"] == 0 and "trials_without_a_ledger_spread" not in alone
    for name in bench.STRATEGIES:
        assert ledgered[name]["right"] == 3, (name, ledgered[name])
