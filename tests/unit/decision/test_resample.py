"""The vectorized request bootstrap (decision/cells/resample.py): the same statistic, drawn from the same
distribution, as the per-request multinomial weights it replaced; the same draws for the same seed."""
import math

import numpy as np
import pytest
from scipy import stats
from unit.synthetic import window

from lookahead_runner.decision.cells.evidence import LATENCY_COLUMNS, Cell
from lookahead_runner.decision.cells.measure import QUANTILES, PreparedCell, ThroughputNoise
from lookahead_runner.decision.cells.resample import RequestResampler

SIZES = (40, 55, 7, 0)


def weighted_quantiles(latency: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The former per-request computation (measure.py before issue 39): resamples x columns x quantiles of the
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


def multinomial_weights(rng, sizes, picks) -> np.ndarray:
    """The former draw: a window picked c times adds a multinomial of c x its size over its own requests."""
    columns = []
    for i, n in enumerate(sizes):
        times = (picks == i).sum(axis=1)
        columns.append(rng.multinomial(n * times, np.full(n, 1 / n)) if n else np.zeros((len(picks), 0)))
    return np.concatenate(columns, axis=1)


@pytest.fixture(scope="module")
def cell_requests():
    rng = np.random.default_rng(3)
    latency = rng.lognormal(3, 1, size=(sum(SIZES), len(LATENCY_COLUMNS)))
    latency[:40] *= 1.5                              # windows differ, as repeats do
    latency[::9, 2] = np.nan                         # a request too short for an ITL: left out of that column
    latency[5, 3] = latency[6, 3]                    # ties
    meets = np.column_stack([latency[:, 0] < 30, latency[:, 3] < 25])
    return latency, meets


def test_percentiles_and_slo_counts_are_drawn_as_the_per_request_weights_drew_them(cell_requests):
    """20,000 resamples each way: every percentile's distribution the same (two-sample KS), the SLO counts'
    means and covariance the same; a resample's p50 <= p90 <= p99 (one resample's requests)."""
    latency, meets = cell_requests
    count = 20000
    picks = np.random.default_rng(1).integers(len(SIZES), size=(count, len(SIZES)))
    weights = multinomial_weights(np.random.default_rng(2), SIZES, picks)
    before = weighted_quantiles(latency, weights)
    resampler = RequestResampler(latency, LATENCY_COLUMNS, SIZES, meets, QUANTILES)
    draws = resampler.draw(np.random.default_rng(4), picks)
    now = draws.all_columns()
    for j in range(len(LATENCY_COLUMNS)):
        for m in range(len(QUANTILES)):
            old, new = before[:, j, m], now[:, j, m]
            assert stats.ks_2samp(old[np.isfinite(old)], new[np.isfinite(new)]).pvalue > 1e-3, (j, m)
            assert abs(np.isnan(old).mean() - np.isnan(new).mean()) < 0.003   # every pick the empty window
        rows = np.isfinite(now[:, j, 0])
        assert (np.diff(now[rows, j, :], axis=1) >= 0).all()
    met_before = weights @ meets.astype(float)
    np.testing.assert_allclose(draws.slo_met.mean(axis=0), met_before.mean(axis=0), rtol=0.01)
    np.testing.assert_allclose(np.cov(draws.slo_met.T), np.cov(met_before.T), rtol=0.06)


def test_the_resampled_percentile_spreads_as_the_request_bootstrap_does(cell_requests):
    """One window drawn once: its p90 over resamples has the spread of a plain bootstrap of its requests."""
    latency, meets = cell_requests
    resampler = RequestResampler(latency[:40], LATENCY_COLUMNS, [40], meets[:40], QUANTILES)
    drawn = resampler.draw(np.random.default_rng(0), np.zeros((20000, 1), dtype=int)).column(3)[:, 1]
    rng = np.random.default_rng(1)
    plain = np.sort(latency[:40, 3][rng.integers(0, 40, (20000, 40))], axis=1)[:, 35]  # ceil(0.9 x 40) = 36th
    assert stats.ks_2samp(drawn, plain).pvalue > 1e-3
    assert set(np.unique(drawn)) <= set(latency[:40, 3])


def cell(k=4):
    return PreparedCell(Cell(k, 32, tuple(window(k, 32, 10.0 + r, r, failures=r, timeouts=r // 2)
                                        for r in range(3))), (), 1.0)


def test_the_same_seed_gives_the_same_resamples_whatever_is_read_first():
    noise = ThroughputNoise(0.05, 4, "repeats")
    a, b = (cell().draws(np.random.default_rng([7, 32]), 400, noise) for _ in range(2))
    e2e_first = b.quantile("e2e_ms", 0.9).copy()
    for name in ("req_per_s", "failures", "timeouts", "requests", "duration_s"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    np.testing.assert_array_equal(a.quantiles, b.quantiles)
    np.testing.assert_array_equal(e2e_first, a.quantile("e2e_ms", 0.9))
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


def test_many_slos_cost_the_patterns_met_not_two_to_their_number():
    """Twelve SLOs (four metrics at three percentiles each are allowed): the SLO counts are drawn over the
    patterns of SLOs the requests meet (13 here: nested thresholds), not all 4,096 possible ones."""
    import tracemalloc

    rng = np.random.default_rng(0)
    sizes = [300, 250, 200, 280]
    e2e = rng.lognormal(6, 0.3, sum(sizes))
    limits = np.quantile(e2e, np.linspace(0.3, 0.95, 12))
    meets = e2e[:, None] <= limits[None, :]                           # nested: meeting one meets every later
    latency = np.column_stack([e2e] * len(LATENCY_COLUMNS))
    resampler = RequestResampler(latency, LATENCY_COLUMNS, sizes, meets, QUANTILES)
    picks = rng.integers(len(sizes), size=(500, len(sizes)))
    tracemalloc.start()
    met = resampler.slo_met(np.random.default_rng(1), picks)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 2 * 2**20, peak                                       # 4,096 patterns: ~66 MB
    assert (np.diff(met, axis=1) >= 0).all()                           # a request meeting one meets the later
    drawn = np.asarray(sizes)[picks].sum(axis=1)
    share = np.array([meets[:, j].mean() for j in range(12)])
    np.testing.assert_allclose((met / drawn[:, None]).mean(axis=0), share, atol=0.02)


@pytest.mark.parametrize("windows, picked", [
    ([[1.0, 2.0, 3.0], [2.0, 5.0]], [0, 1]),                       # a tie across windows
    ([[1.0, math.nan, 3.0], [math.nan, 5.0]], [1, 1]),             # gaps, one window drawn twice
    ([[2.0, 2.0, 2.0], [2.0, 7.0]], [1, 0]),                       # all but one tied
    ([[1.0, 2.0, 3.0, 4.0], [], [9.0, 1.0]], [0, 1, 2]),           # an empty window
], ids=["tie", "gaps", "ties", "empty"])
def test_one_resamples_p50_p90_p99_are_jointly_those_of_every_equally_likely_draw(windows, picked):
    """At a few requests every draw of the multinomial bootstrap can be listed: the (p50, p90, p99) of the
    halving search has the exact joint distribution of the lowest value whose count reaches q x the drawn
    values (a chi-square over every outcome)."""
    import collections
    import itertools

    def percentiles(drawn):
        values = np.sort([v for v in drawn if not math.isnan(v)])
        return tuple(float(values[max(math.ceil(q * len(values)), 1) - 1]) if len(values) else "none"
                     for q in QUANTILES)

    pools = [windows[w] for w in picked for _ in windows[w]]
    exact = collections.Counter(percentiles(drawn) for drawn in itertools.product(*pools))
    count = 20000
    latency = np.array([v for w in windows for v in w])[:, None].repeat(len(LATENCY_COLUMNS), axis=1)
    resampler = RequestResampler(latency, LATENCY_COLUMNS, [len(w) for w in windows],
                                 np.zeros((len(latency), 0)), QUANTILES)
    drawn = resampler.draw(np.random.default_rng(0), np.tile(picked, (count, 1))).column(0)
    seen = collections.Counter(tuple("none" if math.isnan(v) else float(v) for v in row) for row in drawn)
    assert set(seen) <= set(exact)
    outcomes = sorted(exact, key=str)
    expected = np.array([exact[o] for o in outcomes]) / sum(exact.values()) * count
    if len(outcomes) > 1:
        assert stats.chisquare([seen[o] for o in outcomes], expected).pvalue > 1e-3
