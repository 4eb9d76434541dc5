"""Arrivals of an open-loop window are not independent trials (cells/stats.py): the design effect by batch means
over runs of consecutive arrivals (the failures' at a rate), and the arrivals a rate resample draws
(cells/rate_cell.py: n / tau of them, tau their correlation time, cells/arrival_correlation.py)."""
from __future__ import annotations

import math

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


def test_wilson_with_none_or_all_met_ends_exactly_at_0_or_1_not_a_rounding_hair_inside():
    # Wilson's low end at 0 successes is 0 and its high end at n of n is 1, exactly; center - half rounds to
    # 1e-17 or 1 - 1e-16 on some counts, an interval that excludes a true share of 0 or 1 (the calibration suite's
    # users group counted such cells as misses)
    for n, deff in [(137, 1.0), (12.3, 2.7), (50, 1.0), (1000, 3.1), (7, 1.0)]:
        assert wilson(0, n, 0.95, deff).low == 0.0, (n, deff)
        assert wilson(n, n, 0.95, deff).high == 1.0, (n, deff)


def test_runs_are_about_sqrt_n_consecutive_arrivals():
    index = batch_index(400)
    assert index[0] == 0 and index[-1] == 19 and np.all(np.diff(index) >= 0) and np.bincount(index).min() == 20
    assert batch_index(15).tolist() == [0] * 15 and len(batch_index(0)) == 0


def test_a_resample_draws_n_over_tau_arrivals_each_counted_alike_and_keeps_the_windows_count():
    window = rate_window(0, 10.0, 410, 400, burst=True)      # its 10 misses in one run: tau well over 1
    arrivals = _Arrivals.of(window, DecisionConfig(slo={"ttft_p99_ms": 500.0}))
    assert arrivals.tau > 1
    distinct = math.ceil(410 / arrivals.tau)
    rng = np.random.default_rng(0)
    for _ in range(20):
        drawn = arrivals.draw(rng)
        assert len(drawn) == 410 and drawn.min() >= 0 and drawn.max() < 410
        _, counts = np.unique(drawn, return_counts=True)
        assert len(counts) <= distinct and counts.min() >= 410 // distinct    # each drawn arrival counted alike
    empty = _Arrivals.of(rate_window(0, 10.0, 0, 0), DecisionConfig(slo={"ttft_p99_ms": 500.0}))
    assert len(empty.draw(rng)) == 0
