"""A users stage's SLO attainment and goodput intervals (decision.json's cells[]) count its requests by their
correlation: requests that meet or miss the SLO in runs (a queue shared by the users behind consecutive requests)
are worth fewer independent ones than requests whose outcomes are shuffled, with the same counts."""
from __future__ import annotations

import numpy as np

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import Window, evidence
from lookahead_runner.decision.engine import cell_summaries, evaluate_stages

LIMIT_MS = 1000.0
SLO_KEY = "e2e_p90_ms"


def _window(e2e_ms: np.ndarray, repeat: int = 0) -> Window:
    n = len(e2e_ms)
    t_done = np.linspace(0.05, 59.95, n)            # a steady stream of completions: the throughput barely varies
    ttft = np.full(n, 50.0)
    tpot = (e2e_ms - ttft) / 63
    return Window(k=0, repeat=repeat, users=16, duration_s=60.0, t_done_s=t_done, output_tokens=np.full(n, 64.0),
                  latency_ms=np.column_stack([ttft, tpot, tpot * 1.6, e2e_ms]), finished=n, failures=0, timeouts=0,
                  server={"running_mean": 16.0, "waiting_mean": 0.0})


def _cell(e2e_ms: np.ndarray):
    p = DecisionConfig.model_validate({"confirm": "off", "slo": {SLO_KEY: LIMIT_MS}})
    ev = evidence([_window(e2e_ms)], 16)
    (cell,) = cell_summaries(evaluate_stages(ev, p), p)
    return cell


def _runs_and_shuffled() -> tuple[np.ndarray, np.ndarray]:
    """600 requests, half within the limit: in runs of 30 (met together, then missed together), and shuffled."""
    runs = np.where((np.arange(600) // 30) % 2 == 0, 500.0, 2000.0)
    return runs, np.random.default_rng(3).permutation(runs)


def _width(r) -> float:
    return r.high - r.low


def test_a_share_met_in_runs_states_a_wider_attainment_interval_than_the_same_share_shuffled():
    runs, shuffled = _runs_and_shuffled()
    in_runs, apart = _cell(runs), _cell(shuffled)
    assert in_runs.slo_attainment[SLO_KEY].low < 0.5 < in_runs.slo_attainment[SLO_KEY].high
    # runs of 30 make 600 requests worth about 600 / 30 independent ones: the interval at least twice as wide
    assert _width(in_runs.slo_attainment[SLO_KEY]) > 2 * _width(apart.slo_attainment[SLO_KEY])


def test_a_share_met_in_runs_states_a_wider_goodput_interval_than_the_same_share_shuffled():
    runs, shuffled = _runs_and_shuffled()
    in_runs, apart = _cell(runs), _cell(shuffled)
    assert in_runs.goodput_range.low < in_runs.goodput < in_runs.goodput_range.high
    assert _width(in_runs.goodput_range) > 2 * _width(apart.goodput_range)


def test_the_goodput_interval_carries_the_share_mets_own_noise_beside_the_throughputs():
    # the requests' outcomes shuffled (independent): the goodput's relative width is at least the share's
    _, shuffled = _runs_and_shuffled()
    cell = _cell(shuffled)
    share = cell.slo_attainment[SLO_KEY]
    assert _width(cell.goodput_range) / cell.goodput >= 0.9 * _width(share) / 0.5


def test_where_no_request_met_the_slo_the_goodput_interval_reaches_zero():
    # 600 requests all over the limit: no data exclude a goodput of 0 (Jeffreys' Beta alone would put its tail
    # just above it, and a closed loop whose true share is 1e-9 would read outside the interval)
    cell = _cell(np.full(600, 2000.0))
    assert cell.goodput == 0.0 and cell.goodput_range.low == 0.0 < cell.goodput_range.high


def test_where_every_request_met_the_slo_the_goodput_interval_reaches_the_throughputs_high_end():
    cell = _cell(np.full(600, 500.0))
    assert cell.goodput_range.high == cell.req_per_s_range.high
    assert cell.goodput_range.low <= cell.req_per_s_range.low
