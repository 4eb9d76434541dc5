"""Resampling by request (decision/traffic/by_request.py): a bootstrap of the requests, the same draws for every
block, in memory bounded whatever the set's size."""
import tracemalloc

import numpy as np
import pytest

from lookahead_runner.decision.traffic.by_request import resampled_sums


def test_every_block_gets_the_same_draws_and_each_draw_takes_n_requests():
    n = 50
    ones, index = np.ones((n, 1)), np.arange(n, dtype=float)[:, None]
    counted, summed = resampled_sums([ones, index], 400, np.random.default_rng(0))
    assert (counted[:, 0] == n).all()                                 # n requests drawn, with replacement
    assert summed[:, 0].mean() == pytest.approx(index.sum(), rel=0.02)  # uniformly
    assert summed[:, 0].std() > 0
    again = resampled_sums([index, index], 400, np.random.default_rng(0))
    assert (again[0] == again[1]).all()                               # the same draws for every block
    assert (resampled_sums([index], 400, np.random.default_rng(0))[0] == again[0]).all()   # and deterministic


def test_a_large_set_is_resampled_in_bounded_memory():
    """300k requests x 1000 resamples held 256 draws x every request at once twice over (int and float weights):
    1.2 GB, and 57 s of multinomial draws on this machine. The draws held at once are bounded by their size."""
    n = 40_000
    block = np.ones((n, 2))
    tracemalloc.start()
    try:
        sums = resampled_sums([block], 300, np.random.default_rng(0))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (sums[0] == n).all()
    assert peak < 48 * 2 ** 20, f"{peak / 2 ** 20:.0f} MiB for {n} requests"
