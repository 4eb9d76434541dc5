"""benchmarks/calibration/set_apart.py: its stages are those whose pool sets a pair of lives apart (the suite's CI
slice scores its claim: test_calibration_slice.py)."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from benchmarks.calibration import adapters, adapters_findings, set_apart  # noqa: E402
from benchmarks.calibration.sweeps import sweep_config  # noqa: E402


def test_a_drawn_stage_has_k4_on_one_life_beside_two_pairs_the_f_test_splits_and_the_product_says_so():
    r, windows = set_apart.draw_split_stage(np.random.default_rng(0), 1.0)
    assert sorted((w.k, w.repeat) for w in windows) == [(0, 0), (0, 1), (4, 0), (8, 0), (8, 1)]
    a, b = set_apart._squares(windows, 0), set_apart._squares(windows, 8)
    assert max(a, b) / min(a, b) > stats.f.ppf(0.95, 1, 1)
    decision = adapters.decide_users(adapters.users_evidence(windows, r.users), sweep_config(r).decision)
    assert adapters_findings.spread_set_apart(decision) and "K=4 on one life with the" in decision.restart_spread.text
