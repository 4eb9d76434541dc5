"""The vectorized request bootstrap (decision/cells/resample.py): the same statistic as the per-request weights it
replaced, the same draws for the same seed, and every latency column from the same resampled requests."""
import math

import numpy as np
from unit.synthetic import window

from lookahead_runner.decision.cells.evidence import LATENCY_COLUMNS, Cell
from lookahead_runner.decision.cells.measure import QUANTILES, PreparedCell, ThroughputNoise
from lookahead_runner.decision.cells.resample import RequestResampler


def weighted_quantiles(latency: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The former per-request computation (measure.py before issue 39): draws x columns x quantiles of the
    requests weighted by how often each is drawn, the lowest value whose cumulative share reaches q."""
    out = np.full((len(weights), latency.shape[1], len(QUANTILES)), np.nan)
    for j in range(latency.shape[1]):
        values = latency[:, j]
        order = np.argsort(values)[:np.isfinite(values).sum()]
        cumulative = np.cumsum(weights[:, order], axis=1)
        total = cumulative[:, -1]
        for m, q in enumerate(QUANTILES):
            at = (cumulative < np.maximum(np.ceil(q * total), 1)[:, None]).sum(axis=1)
            out[:, j, m] = np.where(total > 0, values[order][np.minimum(at, len(order) - 1)], np.nan)
    return out


def resampler(sizes=(40, 55, 7), seed=3):
    rng = np.random.default_rng(seed)
    latency = rng.lognormal(3, 1, size=(sum(sizes), len(LATENCY_COLUMNS)))
    latency[::9, 2] = np.nan                       # a request too short for an ITL: left out of that column
    latency[5, 3] = latency[6, 3]                  # ties
    meets = (latency[:, [0, 3]] < 30).astype(float)
    return RequestResampler(latency, LATENCY_COLUMNS, sizes, meets, QUANTILES), latency, meets


def test_percentiles_and_slo_counts_are_those_of_the_drawn_requests():
    r, latency, meets = resampler()
    picks = np.random.default_rng(1).integers(3, size=(300, 3))
    counts = r.counts(np.random.default_rng(2), picks)
    # each drawn window adds its size in requests, all from its own
    assert (counts.sum(axis=1) == r.sizes[picks].sum(axis=1)).all()
    original = np.empty_like(counts)            # the counts back in the requests' own order
    layout = np.argsort(latency[:, LATENCY_COLUMNS.index("e2e_ms")], kind="stable")
    original[:, layout] = counts
    expected = weighted_quantiles(latency, original)
    got = np.stack([r.quantiles_of(counts, j) for j in range(len(LATENCY_COLUMNS))], axis=1)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(counts @ r.meets, original @ meets)


def test_a_window_drawn_twice_adds_twice_its_requests_drawn_from_it_alone():
    r, _, _ = resampler(sizes=(30, 20))
    counts = r.counts(np.random.default_rng(0), np.array([[0, 0]] * 200))
    second = r.members[1]
    assert (counts[:, second] == 0).all() and (counts.sum(axis=1) == 60).all()
    # uniform within the window: each of its 30 requests drawn 2 times per resample on average
    assert abs(counts[:, r.members[0]].mean() - 2.0) < 0.1


def test_a_column_asked_for_later_comes_from_the_same_resampled_requests():
    r, _, _ = resampler()
    picks = np.random.default_rng(1).integers(3, size=(500, 3))
    later = r.draw(np.random.default_rng(9), picks)
    at_once = r._pass(np.random.default_rng(9), picks, list(range(len(LATENCY_COLUMNS))))[0]
    for j in range(len(LATENCY_COLUMNS)):
        np.testing.assert_array_equal(later.column(j), at_once[j])


def cell(k=4):
    return PreparedCell(Cell(k, 32, tuple(window(k, 32, 10.0 + r, r, failures=r, timeouts=r // 2)
                                        for r in range(3))), (), 1.0)


def test_the_same_seed_gives_the_same_resamples_and_each_reads_as_a_cell_stats():
    noise = ThroughputNoise(0.05, 4, "repeats")
    a, b = (cell().draws(np.random.default_rng([7, 32]), 400, noise) for _ in range(2))
    for name in ("req_per_s", "failures", "timeouts", "requests", "duration_s"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.quantiles, b.quantiles)
    one = a[17]
    assert one.req_per_s == a.req_per_s[17] and one.failures == a.failures[17]
    assert one.quantile("ttft_ms", 0.9) == a.quantile("ttft_ms", 0.9)[17]
    assert one.finished == one.requests + one.failures and 1 <= one.repeats <= 3
    assert one.running_mean == a.running_mean[17] and len(list(a)) == 400


def test_latencies_are_divided_by_the_throughput_factor():
    """A slower server start stretches every request: the drawn percentiles over the factor."""
    draws = cell().draws(np.random.default_rng(0), 200, ThroughputNoise(0.2, 3, "repeats"))
    raw = draws.request_draws.column(LATENCY_COLUMNS.index("e2e_ms"))[:, QUANTILES.index(0.5)]
    np.testing.assert_allclose(draws.quantile("e2e_ms", 0.5), raw / draws.factor)
    assert not math.isclose(float(draws.factor.std()), 0.0)
