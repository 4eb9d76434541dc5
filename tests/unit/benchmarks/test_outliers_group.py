"""benchmarks/calibration/outliers.py: the outlier guard's group, its size bands and the one-sided test shown beside
the product's (the suite's CI slice runs its trials: test_calibration_slice.py)."""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import adapters, adapters_findings, outliers  # noqa: E402
from benchmarks.calibration.lives import KS, THIS_WORKLOAD, LedgerEntry, closed_window, life_spread  # noqa: E402
from benchmarks.calibration.regimes import ClosedLoopRegime  # noqa: E402
from benchmarks.calibration.sweeps import sweep_config  # noqa: E402
from benchmarks.calibration.tally import Tallies  # noqa: E402


def _regime(outlier: float, spread: float = 0.03) -> ClosedLoopRegime:
    return ClosedLoopRegime(gain=0.0, spread=spread, window_s=60.0, base_rate=20.0, outlier=outlier, ledger="alike")


def test_the_outliers_size_is_banded_against_the_lives_true_spread():
    r = _regime(0.0)
    spread = life_spread(r)
    sizes = [outliers.outlier_size(dataclasses.replace(r, outlier=x * spread)) for x in (1.5, 3.0, 6.0)]
    assert sizes == [label for _, label in outliers.SIZE_EDGES]


def test_the_guard_flags_a_life_far_off_either_way_and_the_one_sided_test_the_slow_one_alone():
    r = _regime(0.0)
    p = sweep_config(r).decision
    rng = np.random.default_rng(0)
    # K=0's one life 40 % slow, K=4's 40 % fast, against levels an earlier run measured at a 3 % spread (8 df)
    windows = [closed_window(0, r.users, 12.0, 0, r.window_s, rng), closed_window(4, r.users, 28.0, 0, r.window_s, rng)]
    entry = LedgerEntry(users=r.users, workload=THIS_WORKLOAD, squares=8 * 0.03 ** 2, df=8, lives=10,
                        window_squares=8 / (20.0 * 60.0), window_df=10 * 59, levels={str(k): 20.0 for k in KS})
    check = adapters_findings.outlier_check(adapters.users_evidence(windows, r.users),
                                   adapters.with_ledger(p, entry, r.users, THIS_WORKLOAD))
    assert check.flagged == {0, 4} and check.slow_flagged == {0}
    assert check.deviation[0] < -0.3 and check.deviation[4] > 0.3 and round(check.false_alarm, 9) == 0.025


def test_each_trial_scores_one_outlier_life_and_one_false_alarm_chance():
    tallies = Tallies()
    rng = np.random.default_rng(3)
    for _ in range(3):
        outliers.run_trial(rng, tallies)
    assert tallies.claims["outlier guard: caught, every size"].trials == 3
    assert tallies.claims["outlier guard: false alarm, the other K"].trials == 3
