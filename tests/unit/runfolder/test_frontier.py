"""The frontier's points (runfolder/frontier.py): one per setting and stage of either kind, output tokens/s per GPU
(the life's GPUs: its Ray slot's, else tensor x pipeline parallel) against 1000 / the median TPOT."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.decision import Window
from lookahead_runner.decision.cells.rate_window import RateWindow
from lookahead_runner.runfolder.frontier import RATE, USERS, frontier_points
from lookahead_runner.runfolder.plan import LifeResult, LifeStatus, Plan, PlannedLife
from lookahead_runner.runfolder.read import RunData

STAGES = [{"users": 8, "duration_s": 10}, {"rate": 4.0, "duration_s": 10}]


def users_window(k: int, repeat: int, users: int, tok_per_s: float, tpot_ms, variant: str = "") -> Window:
    tpot = np.asarray(tpot_ms, dtype=float)
    latency = np.column_stack([np.full(len(tpot), 100.0), tpot, tpot * 1.5, np.full(len(tpot), 900.0)])
    return Window(k=k, repeat=repeat, users=users, duration_s=10.0, t_done_s=np.linspace(0, 9, len(tpot)),
                  output_tokens=np.full(len(tpot), 64.0), latency_ms=latency, finished=len(tpot), failures=0,
                  timeouts=0, output_tok_per_s=tok_per_s, variant=variant)


def rate_window(k: int, repeat: int, rate: float, tok_per_s: float, tpot_ms, valid: bool = True,
                growth: float = 0.0) -> RateWindow:
    tpot = np.asarray(tpot_ms, dtype=float)
    ok = np.isfinite(tpot)
    latency = np.column_stack([np.full(len(tpot), 100.0), tpot, tpot * 1.5, np.full(len(tpot), 900.0)])
    return RateWindow(k=k, repeat=repeat, stage=1, rate=rate, duration_s=10.0, latency_ms=latency, ok=ok, good=ok,
                      late_ms=np.zeros(len(tpot)), achieved_per_s=rate, output_tok_per_s=tok_per_s,
                      outstanding=(2.0, 2.0 + growth), growth=growth, valid=valid)


def run_data(windows, rate_windows, statuses=None, extra_args=None, server=None, cluster=None,
             ks=(0, 4)) -> RunData:
    config = config_from_dict({"speculation": {"k": list(ks)}, "load": {"stages": STAGES, "repeats": 2},
                               "server": {"extra_args": extra_args or []} | (server or {}),
                               "cluster": cluster or {}})
    lives = [PlannedLife(setting=f"k{k}", k=k, repeat=r, argv=[], dir=f"k{k}/r{r}") for k in ks for r in (0, 1)]
    lives.append(PlannedLife(setting="confirm", k=4, repeat=0, argv=[], dir="confirm/r0", role="confirm"))
    plan = Plan(run_id="t", probe={}, config=config.model_dump(mode="json"), target_users=8, lives=lives)
    statuses = statuses or {}
    results = [LifeResult(planned=life, status=LifeStatus.model_validate(statuses.get(life.dir, {"state": "done"})))
               for life in lives]
    return RunData(plan, config, pd.DataFrame(), [("", w) for w in windows], lives=results,
                   rate_windows=[("", w) for w in rate_windows])


def test_one_point_per_k_and_stage_of_either_kind_repeats_pooled():
    data = run_data(
        [users_window(0, 0, 8, 400.0, [20.0, 20.0, 30.0]), users_window(0, 1, 8, 500.0, [25.0, 40.0]),
         users_window(4, 0, 8, 700.0, [10.0, 12.0])],
        [rate_window(0, 0, 4.0, 250.0, [15.0, 15.0, np.nan]), rate_window(4, 0, 4.0, 260.0, [8.0, 8.0])])
    points = {(p.k, p.kind, p.load): p for p in frontier_points(data)}
    assert set(points) == {(0, USERS, 8.0), (4, USERS, 8.0), (0, RATE, 4.0), (4, RATE, 4.0)}
    k0 = points[(0, USERS, 8.0)]
    # the median of the repeats' throughputs; the median TPOT over every request of both repeats (20, 20, 25, 30, 40)
    assert (k0.repeats, k0.tokens_per_s_per_gpu, k0.tpot_p50_ms) == (2, 450.0, 25.0)
    assert k0.tokens_per_s_per_user == pytest.approx(40.0) and k0.setting == "k0" and k0.gpus == 1
    rate = points[(0, RATE, 4.0)]
    # a request that did not succeed has no TPOT: it is left out of the median, not counted as 0
    assert rate.tpot_p50_ms == 15.0 and rate.tokens_per_s_per_user == pytest.approx(1000 / 15)
    assert rate.stage_text == "4 req/s" and k0.stage_text == "8 users"


def test_throughput_is_divided_by_the_gpus_each_life_held():
    windows = [users_window(0, 0, 8, 800.0, [20.0]), users_window(4, 0, 8, 900.0, [10.0])]
    rates = [rate_window(0, 0, 4.0, 300.0, [15.0])]
    # here: tensor x pipeline parallel of the server's args (2 x 2)
    tp = run_data(windows, rates, extra_args=["--tensor-parallel-size", "2", "--pipeline-parallel-size=2"])
    points = {(p.k, p.kind): p for p in frontier_points(tp)}
    assert points[(0, USERS)].tokens_per_s_per_gpu == 200.0 and points[(0, USERS)].gpus == 4
    assert points[(0, RATE)].tokens_per_s_per_gpu == 75.0
    # data parallel replicas hold GPUs of their own: -tp 2 -dp 2 is 4 GPUs (vLLM's plot_pareto: TP x PP x DP)
    dp = run_data(windows, rates, extra_args=["-tp", "2", "--data-parallel-size", "2"])
    points = {(p.k, p.kind): p for p in frontier_points(dp)}
    assert (points[(0, USERS)].tokens_per_s_per_gpu, points[(0, USERS)].gpus) == (200.0, 4)
    # on a Ray cluster: the GPUs its slot held, as its status.json names them
    slot = {"state": "done", "slot": "10.0.0.1/ab [GPU-a, GPU-b]", "gpus": ["GPU-a", "GPU-b"], "node": "10.0.0.1"}
    on_slots = run_data(windows, rates, statuses={"k4/r0": slot}, extra_args=["--tensor-parallel-size", "4"])
    points = {(p.k, p.kind): p for p in frontier_points(on_slots)}
    assert (points[(4, USERS)].tokens_per_s_per_gpu, points[(4, USERS)].gpus) == (450.0, 2)
    assert (points[(0, USERS)].tokens_per_s_per_gpu, points[(0, USERS)].gpus) == (200.0, 4)


@pytest.mark.parametrize("server, cluster, ks", [
    ({"url": "http://127.0.0.1:8000"}, {}, (4,)),                           # a running server: its GPUs unknown
    ({}, {"engine": "ray", "gpus": 2, "gpus_per_life": 0}, (0, 4)),         # slots of no GPU (the simulator's)
])
def test_where_a_lifes_gpus_are_not_known_its_points_are_per_server_and_say_so(server, cluster, ks, ray_installed):
    windows = [users_window(k, 0, 8, 800.0 + k * 25, [20.0]) for k in ks]
    data = run_data(windows, [], server=server, cluster=cluster, extra_args=["-tp", "4"], ks=ks)
    points = {p.k: p for p in frontier_points(data)}
    # not dropped (no frontier at all), not divided by a guess: per server life, with its GPUs marked unknown
    assert {k: (p.tokens_per_s_per_gpu, p.gpus) for k, p in points.items()} == {k: (800.0 + k * 25, 0) for k in ks}


def test_invalid_rate_windows_and_windows_without_a_tpot_make_no_point_and_falling_behind_is_kept():
    data = run_data([users_window(0, 0, 8, 400.0, [np.nan, np.nan])],
                    [rate_window(0, 0, 4.0, 250.0, [15.0], valid=False),
                     rate_window(4, 0, 4.0, 260.0, [9.0] * 40, growth=30.0)])
    (point,) = frontier_points(data)
    assert (point.k, point.kind, point.keeps_up) == (4, RATE, False)
    assert math.isclose(point.tokens_per_s_per_user, 1000 / 9)


def test_a_rate_points_keeping_up_is_its_repeats_judged_pooled_and_a_stage_too_short_says_so():
    from dataclasses import replace

    from tests.unit.decision import queue_findings_factory as found

    _, steady, excursion = found.excursion()   # the second repeat reads behind alone; the two pooled do not
    k0 = [replace(rate_window(0, r, 4.0, 250.0, [15.0] * 40), queue=f) for r, f in enumerate((steady, excursion))]
    k4 = [replace(rate_window(4, r, 4.0, 260.0, [9.0] * 40), queue=found.too_short()) for r in (0, 1)]
    points = {p.k: p for p in frontier_points(run_data([], k0 + k4))}
    assert not k0[1].keeps_up and points[0].keeps_up and points[0].too_short == ""
    assert points[4].keeps_up and points[4].too_short == "stage too short for answers of 25 s; lengthen to 50 s"
