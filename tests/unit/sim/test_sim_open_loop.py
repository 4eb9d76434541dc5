"""The simulator under open loop (sim/open_loop.py): requests arriving at a rate queue up once it exceeds what
a K serves, the scheduler admits at most --max-num-seqs in arrival order, and each K's capacity within an SLO
is the engine model's own answer (the truth a measured capacity is held against)."""
from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.decision.cells.keeping_up import KEEPS_UP
from lookahead_runner.sim.open_loop import (capacity_within_slo, engine_for, holds, main, run_open_loop,
                                            saturated_per_s)

SERVER = ["--max-num-seqs", "16", "--sim-scenario", "roomy-kv"]
TPOT_SLO = parse_slos((("tpot_p99_ms", 60.0),))


def test_the_queue_grows_above_what_a_k_serves_and_stays_empty_below():
    over = run_open_loop(SERVER, 0, 40.0, 20.0, 32, 16)
    assert over.max_running == 16 and not over.keeps_up()
    during = over.queue_t_s < over.duration_s
    early, late = over.waiting[during][:50].mean(), over.waiting[during][-50:].mean()
    assert late > early + 50                              # arrivals pile up in the waiting queue
    assert np.isnan(over.latency_ms[-1]).all() or over.latency_ms[-1, 0] > over.latency_ms[0, 0] * 10

    under = run_open_loop(SERVER, 0, 10.0, 20.0, 32, 16)
    assert under.keeps_up() and under.waiting.max() <= 16 and np.isfinite(under.done_s).all()
    assert under.attainment(TPOT_SLO) == 1.0
    # speculation serves more: K=4 keeps up where K=0 falls behind
    assert run_open_loop(SERVER, 4, 40.0, 20.0, 32, 16).keeps_up()


def test_a_rate_above_what_the_engine_serves_never_keeps_up_nor_holds_an_slo_queueing_does_not_touch():
    # far over its capacity, the engine serves what it can: its throughput, the most any rate can be served at
    saturated = run_open_loop(SERVER, 0, 60.0, 20.0, 32, 16)
    served_per_s = float(((saturated.done_s >= 5.0) & (saturated.done_s < 20.0)).sum()) / 15.0
    over = 1.08 * served_per_s   # 8 % more than it can ever serve: the backlog grows ~2 req/s, without bound
    run = run_open_loop(SERVER, 0, over, 60.0, 32, 16)
    assert int(run.window().sum()) > 1000 and not run.keeps_up()
    # a TPOT SLO is blind to the queue: only keeping up keeps the capacity below the throughput
    assert not holds(SERVER, 0, over, TPOT_SLO, 32, 16, duration_s=60.0)


def test_the_scheduler_admits_max_num_seqs_in_arrival_order():
    engine = engine_for(SERVER, 0)
    for i in range(40):
        engine.add_request(str(i), 32, 16, min_tokens=16, ignore_eos=True)
    engine.step()
    assert [s.request_id for s in engine.running] == [str(i) for i in range(16)] and engine.num_waiting == 24
    admitted: list[str] = []
    for _ in range(200):
        engine.step()
        admitted += engine.admitted_last_step
        assert engine.num_running <= 16
        if not engine.has_work():
            break
    assert admitted == [str(i) for i in range(16, 40)] and not engine.has_work()


def test_capacity_within_the_slo_is_where_the_attainment_stops_holding():
    capacity = {k: capacity_within_slo(SERVER, k, TPOT_SLO, 32, 16, duration_s=20.0, precision=0.05)
                for k in (0, 4)}
    assert 5.0 < capacity[0] < capacity[4]
    for k, rate in capacity.items():
        assert holds(SERVER, k, rate, TPOT_SLO, 32, 16, duration_s=20.0)
        assert not holds(SERVER, k, rate * 1.1, TPOT_SLO, 32, 16, duration_s=20.0)


def test_the_command_prints_each_ks_capacity_and_refuses_a_bad_slo_in_one_line():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["--k", "0", "--slo", "tpot_p99_ms=60", "--prompt-tokens", "32", "--output-tokens", "16",
                     "--duration-s", "10", "--", *SERVER]) == 0
    answer = json.loads(out.getvalue())
    assert answer["slo"] == {"tpot_p99_ms": 60.0} and answer["capacity_req_per_s"]["0"] > 5.0
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["--slo", "ttft_p999_ms=5", "--", *SERVER]) == 2
    (line,) = err.getvalue().strip().splitlines()
    assert "SLO key 'ttft_p999_ms'" in line


@pytest.mark.parametrize("rate", [0.0, -1.0])
def test_no_rate_sends_nothing(rate):
    run = run_open_loop(SERVER, 0, rate, 5.0, 32, 16)
    assert len(run.arrived_s) == 0 and np.isnan(run.attainment(TPOT_SLO))


LONG = ["--max-num-seqs", "128", "--sim-scenario", "tight-kv"]   # the demo's server: 600-token answers take ~25 s


def test_keeping_up_is_the_models_own_answer_and_the_runners_rule_agrees_with_it_away_from_capacity():
    # issue 46: on the model, K=0 with 600-token answers completes ~2.5 req/s with a backlog (its truth); a 20 s
    # stage at 60 % of that keeps up, though no answer of its window ends inside it: too short to tell, not behind
    served = saturated_per_s(LONG, 0, 128, 600)
    assert 2.0 < served < 3.0
    short = run_open_loop(LONG, 0, 0.6 * served, 20.0, 128, 600)
    assert short.keeps_up() and not short.finding().behind
    assert short.finding().too_short.startswith("stage too short for answers of 2")
    assert run_open_loop(LONG, 0, 0.6 * served, 120.0, 128, 600).finding().status == KEEPS_UP
    # far over it the queue of arrivals not yet started grows, whatever the stage's length
    over = run_open_loop(LONG, 0, 3.0 * served, 20.0, 128, 600)
    assert not over.keeps_up() and over.finding().behind and over.finding().queued.change > 20
    assert run_open_loop(LONG, 0, 1.5 * served, 120.0, 128, 600).finding().behind


def test_keeping_up_and_the_capacity_are_of_the_rate_the_window_was_offered_as_the_runner_states_them():
    # issue 46: seeded Poisson arrivals (stage 0, seed 0) offer a 30 s window some 9 % fewer than configured at
    # 9-12 req/s. K=0 on tight-kv with 256-token answers completes ~9.3 req/s with a backlog: configured at 10, its
    # window offered ~9.1 and it kept up; the runner places that window at 9.1 (capacity/estimate.rate_points)
    from lookahead_runner.workload.arrivals import ArrivalProcess

    served = saturated_per_s(LONG, 0, 128, 256)
    run = run_open_loop(LONG, 0, 10.0, 40.0, 128, 256, process=ArrivalProcess("poisson"))
    assert run.keeps_up()
    assert run.offered_per_s == pytest.approx(run.window().sum() / 30.0) and run.offered_per_s < served < 10.0
    capacity = capacity_within_slo(LONG, 0, parse_slos((("ttft_p99_ms", 2000.0),)), 128, 256, duration_s=40.0,
                                   process=ArrivalProcess("poisson"), precision=0.01)
    stops = run_open_loop(LONG, 0, capacity, 40.0, 128, 256, process=ArrivalProcess("poisson"))
    assert stops.offered_per_s == pytest.approx(served, rel=0.02)   # it stops where its window was offered that
