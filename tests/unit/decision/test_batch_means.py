"""Arrivals of an open-loop window are not independent trials (cells/stats.py): the design effect by batch means
over runs of consecutive arrivals, and the runs a resample draws (cells/rate_cell.py)."""
from __future__ import annotations

import numpy as np

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.cells.rate_cell import _Arrivals
from lookahead_runner.decision.cells.stats import batch_index, design_effect, wilson

from .rate_windows_factory import rate_window


def test_independent_arrivals_have_a_design_effect_near_one_and_runs_of_misses_a_large_one():
    rng = np.random.default_rng(1)
    independent = rng.random(2000) < 0.95
    assert 1.0 <= design_effect([independent]) < 1.5
    runs = np.ones(2000, dtype=bool)
    runs[[*range(100, 150), *range(900, 950)]] = False      # the same 5 % missed, in two bursts
    assert design_effect([runs]) > 10
    assert design_effect([np.ones(500, dtype=bool)]) == 1.0 == design_effect([np.zeros(5, dtype=bool)])
    assert design_effect([]) == 1.0


def test_wilson_on_an_effective_count_is_wilson_on_the_counts_over_the_design_effect():
    assert wilson(950, 1000, 0.95, 10.0) == wilson(95, 100, 0.95)


def test_runs_are_about_sqrt_n_consecutive_arrivals_and_a_resample_draws_whole_runs():
    index = batch_index(400)
    assert index[0] == 0 and index[-1] == 19 and np.all(np.diff(index) >= 0) and np.bincount(index).min() == 20
    assert batch_index(15).tolist() == [0] * 15 and len(batch_index(0)) == 0
    window = rate_window(0, 10.0, 410, 400)
    arrivals = _Arrivals.of(window, DecisionConfig(slo={"ttft_p99_ms": 500.0}))
    rng = np.random.default_rng(0)
    index = batch_index(410)
    for _ in range(20):
        drawn = arrivals.draw(rng)
        assert len(drawn) == 410 and drawn.min() >= 0 and drawn.max() < 410
        at = 0
        while at < 410:   # whole runs one after another, the last one cut
            run = np.flatnonzero(index == index[drawn[at]])
            assert drawn[at:at + len(run)].tolist() == run[:410 - at].tolist()
            at += len(run)
    empty = _Arrivals.of(rate_window(0, 10.0, 0, 0), DecisionConfig(slo={"ttft_p99_ms": 500.0}))
    assert len(empty.draw(rng)) == 0
