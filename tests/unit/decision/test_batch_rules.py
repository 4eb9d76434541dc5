"""decision/gates/batch_rules.py: the point rule over every resample at once picks, resample by resample, what
rules.choose and rules.stop_at pick on each resample alone (NaN readings, failures, SLOs and ties included)."""
from types import SimpleNamespace

import numpy as np
import pytest

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.cells.evidence import LATENCY_COLUMNS
from lookahead_runner.decision.cells.measure import QUANTILES, CellStats
from lookahead_runner.decision.cells.resample import CellDraws
from lookahead_runner.decision.gates import batch_rules, rules

SIGNALS = ("running_mean", "waiting_mean", "kv_usage_mean", "kv_usage_peak", "preemptions", "acceptance_rate",
           "gpu_mem_peak_mib", "gpu_mem_total_mib", "kv_pool_tokens")


class FixedRequests:
    """The request side of CellDraws with given percentiles (resamples x columns x quantiles) and SLO counts."""

    resampler = SimpleNamespace(columns=LATENCY_COLUMNS, qs=QUANTILES)

    def __init__(self, quantiles, slo_met):
        self.quantiles, self.slo_met = quantiles, slo_met

    def at(self, j, q):
        return self.quantiles[:, j, QUANTILES.index(q)]

    def all_columns(self):
        return self.quantiles


def nan_some(rng, values, share=0.15):
    return np.where(rng.random(len(values)) < share, np.nan, values)


def synthetic(k: int, count: int, rng: np.random.Generator, slos: int) -> CellDraws:
    """Random figures on the scales the rules compare (ties and NaN readings included), one resample each."""
    requests = rng.integers(0, 400, count)
    failures = rng.binomial(np.maximum(requests, 1), rng.choice([0.0, 0.01, 0.2], count))
    quantiles = np.sort(rng.lognormal(6, 0.3, (count, len(LATENCY_COLUMNS), len(QUANTILES))), axis=2)
    quantiles[rng.random(count) < 0.1] = np.nan
    request_draws = FixedRequests(quantiles, rng.binomial(requests + failures, 0.9, (slos, count)).T.astype(float))
    rate = nan_some(rng, np.round(rng.normal(10 + k / 4, 1.0, count), 1), 0.03)   # rounded: ties in the band
    signals = {
        "running_mean": nan_some(rng, rng.uniform(20, 60, count)), "waiting_mean": rng.choice([0.0, 0.5, 3.0], count),
        "kv_usage_mean": nan_some(rng, rng.uniform(0.2, 0.9, count)),
        "kv_usage_peak": nan_some(rng, np.where(rng.random(count) < 0.1, 0.5, rng.uniform(0.0, 1.0, count))),
        "preemptions": nan_some(rng, rng.choice([0.0, 0.0, 2.0], count)), "acceptance_rate": rng.uniform(0, 1, count),
        "gpu_mem_peak_mib": nan_some(rng, rng.choice([60000.0, 75000.0, 81920.0], count)),
        "gpu_mem_total_mib": rng.choice([81920.0, 0.0, np.nan], count), "kv_pool_tokens": np.full(count, np.nan)}

    def stats_of(draws: CellDraws, b: int) -> CellStats:
        return CellStats(k=k, users=32, repeats=1, requests=int(draws.requests[b]),
                         finished=int(draws.finished[b]), failures=int(draws.failures[b]),
                         timeouts=int(draws.timeouts[b]), duration_s=1.0, req_per_s=float(draws.req_per_s[b]),
                         output_tok_per_s=0.0, goodput=float(draws.goodput[b]), quantiles=draws.quantiles[b],
                         slo_met=tuple(int(v) for v in draws.slo_met[b]), throughput_units=1,
                         **{name: float(draws.signals[name][b]) for name in SIGNALS})

    return CellDraws(k=k, users=32, picks=np.zeros((count, 1), dtype=int), requests=requests, failures=failures,
                     timeouts=rng.binomial(failures, 0.5), duration_s=np.ones(count), req_per_s=rate,
                     output_tok_per_s=np.zeros(count), goodput=rate * rng.uniform(0.8, 1, count),
                     factor=np.ones(count), request_draws=request_draws, signals=signals, throughput_units=1,
                     stats_of=stats_of)


@pytest.mark.parametrize("config", [
    DecisionConfig(),
    DecisionConfig(memory_rise_frac=0.05, throughput_gain_frac=0.08, tie_tolerance_frac=0.05),
    DecisionConfig(slo={"ttft_p90_ms": 500, "e2e_p99_ms": 700}, objective="goodput",
                   memory_rise_frac=0.0),
    DecisionConfig(failure_rate_slack=0.0, latency_tolerance_frac=0.0, batch_drop_frac=0.0),
], ids=["defaults", "steps", "slos", "strict"])
def test_the_batch_rule_picks_what_the_point_rule_picks_on_each_resample(config):
    rng = np.random.default_rng(5)
    count = 1500
    draws = {k: synthetic(k, count, rng, len(config.slos)) for k in (0, 2, 4, 6)}
    chosen, stopped = batch_rules.choose(draws, config)
    for b in range(count):
        one = {k: d[b] for k, d in draws.items()}
        assert chosen[b] == (rules.choose(one, config) if rules.choose(one, config) is not None else -1), b
        assert stopped[b] == (rules.stop_at(one, config) if rules.stop_at(one, config) is not None else -1), b
    base = draws[0]
    np.testing.assert_array_equal(batch_rules.latency_ratios(draws[4], base, config),
                                  [rules.latency_ratio(draws[4][b], base[b], config) for b in range(count)])
    # every outcome is exercised: picks of several K, none, and the stop firing and not
    assert len(set(chosen.tolist())) >= 3 and -1 in stopped and (stopped >= 0).any()


def test_the_batch_gate_agrees_with_the_point_rule_at_its_edges():
    """The real-batch gate alone, resample by resample, on every combination of its edge values: a KV pool
    exactly half full (room), just over, unmeasured; exactly one request waiting; a queue share exactly at the
    limit; nothing at the server at all; preemptions unmeasured; a queue of 1.1 and 3.3 steps, steps unknown
    (no req/s, acceptance unknown). (The pick-level test above only sees a gate that changes a pick, and a
    boundary such as <= against < at KV 0.5 changes none of its picks.)"""
    config = DecisionConfig()
    grid = np.array(np.meshgrid([0.0, 1.0, 9.0, np.nan],              # running_mean
                                [0.0, 0.99, 1.0, 3.0, np.nan],        # waiting_mean (1.0 of 9.0 running: 10 %)
                                [0.0, 0.5, 0.5000001, 0.9, 0.96, np.nan],  # kv_usage_peak
                                [0.0, 2.0, np.nan],                   # preemptions
                                [10.0, 0.0, np.nan],                  # req_per_s
                                [0.5, np.nan]),                       # acceptance_rate
                    dtype=float).reshape(6, -1)
    count = grid.shape[1]
    rng = np.random.default_rng(3)
    s, base = synthetic(4, count, rng, 0), synthetic(0, count, rng, 0)
    for name, values in zip(("running_mean", "waiting_mean", "kv_usage_peak", "preemptions"), grid):
        s.signals[name] = values
    s.signals["acceptance_rate"] = grid[5]
    s.req_per_s = grid[4]
    s.request_draws.quantiles[:, LATENCY_COLUMNS.index("tpot_ms"), QUANTILES.index(0.5)] = 30.0
    # K=4 at acceptance 0.5: a 90 ms step; at 10 req/s one waiting is 100 ms queued (1.1 steps), three 3.3
    base.signals["running_mean"] = np.full(count, 20.0)   # every K=4 figure above is a drop of more than 10 %
    holds = batch_rules._server_holds_back(s, config)
    fails = batch_rules._batch_fail(s, base, config)
    for b in range(count):
        one = s[b]
        assert holds[b] == rules.server_holds_back(one, config), (b, grid[:, b])
        assert fails[b] == (rules.batch_status(one, base[b], config) == rules.FAIL), (b, grid[:, b])
    # the edges are reached: a queue of a step beside a pool exactly half full passes, a hair over it fails
    short = (grid[1] == 1.0) & (grid[0] == 9.0) & (grid[3] == 0.0) & (grid[4] == 10.0) & (grid[5] == 0.5)
    assert not holds[short & (grid[2] == 0.5)].any() and holds[short & (grid[2] == 0.5000001)].all()
    # beside a pool with room, 3.3 steps queued is a limit; steps unknown count as one too
    room = (grid[0] == 9.0) & (grid[3] == 0.0) & (grid[2] == 0.0)
    assert holds[room & (grid[1] == 3.0) & (grid[4] == 10.0)].all()
    assert holds[room & (grid[1] == 1.0) & np.isnan(grid[4])].all()
