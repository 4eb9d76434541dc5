"""Rate stages' schedule: --stages items, seeded arrival times against their distribution, the split across
dispatchers, and each arrival's request (pure: no Locust)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import special, stats

from lookahead_runner.contracts.records import REQUEST_COLUMNS, RequestRecord
from lookahead_runner.workload.arrivals import (Arrival, ArrivalProcess, arrival_shares, scheduled, slots_per_process,
                                               stage_offsets, worker_share)
from lookahead_runner.workload.request_set import RequestSet, SetRequest
from lookahead_runner.workload.stages import Stage, parse_stages, rate_run, stage_start_s


def test_rate_and_user_stages_mix_in_one_stages_option():
    stages = parse_stages("8:20, 2/s:30,0.5/s:10,16:5")
    assert stages == [Stage(8, 20.0), Stage(0, 30.0, 2.0), Stage(0, 10.0, 0.5), Stage(16, 5.0)]
    assert [s.label for s in stages] == ["8 users", "2 req/s", "0.5 req/s", "16 users"]
    assert parse_stages(",".join(s.arg() for s in stages)) == stages
    assert list(rate_run(stages, 1)) == [1, 2] and list(rate_run(stages, 0)) == []
    assert stage_start_s(stages, 2) == 50.0


@pytest.mark.parametrize("item", ["-1/s:10", "0/s:10", "nan/s:10", "inf/s:10", "x/s:10", "2/s:0", "2/s", "/s:3"])
def test_a_bad_rate_stage_is_refused_naming_the_option(item):
    with pytest.raises(ValueError, match=r"--stages: bad stage .*RATE/s:SECONDS"):
        parse_stages(f"4:10,{item}")


def _gaps(times: np.ndarray) -> np.ndarray:
    return np.diff(np.concatenate([[0.0], times]))


@pytest.mark.parametrize("burstiness", [1.0, 0.5, 3.0])
def test_poisson_arrivals_have_gamma_gaps_of_the_rate(burstiness):
    rate = 200.0
    times = stage_offsets(rate, 60.0, ArrivalProcess("poisson", burstiness, seed=7), stage=3)
    gaps = _gaps(times)
    assert times[0] > 0 and np.all(np.diff(times) > 0) and times[-1] < 60.0
    assert len(times) == pytest.approx(rate * 60, rel=0.05)
    # as vllm bench serve draws them: gamma(shape=burstiness, scale=1 / (rate * burstiness))
    assert stats.kstest(gaps, "gamma", args=(burstiness, 0, 1 / (rate * burstiness))).pvalue > 0.01
    # and not an exponential when they are not one: the test can tell the shape
    if burstiness != 1.0:
        assert stats.kstest(gaps, "expon", args=(0, 1 / rate)).pvalue < 0.01


def test_constant_arrivals_are_evenly_spaced():
    times = stage_offsets(4.0, 3.0, ArrivalProcess("constant"), stage=0)
    assert times.tolist() == [0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75]


def test_the_schedule_is_the_same_for_a_seed_and_stage_and_differs_otherwise():
    process = ArrivalProcess(seed=1)
    first = stage_offsets(10.0, 20.0, process, 2)
    assert np.array_equal(first, stage_offsets(10.0, 20.0, process, 2))
    assert not np.array_equal(first[:50], stage_offsets(10.0, 20.0, process, 3)[:50])
    assert not np.array_equal(first[:50], stage_offsets(10.0, 20.0, ArrivalProcess(seed=2), 2)[:50])


@pytest.mark.parametrize("worker_ids", [(0,), (0, 1), (0, 1, 2), (0, 2, 3), (1, 2), (0, 2), (3, 5, 6, 9)])
def test_dispatchers_share_the_schedule_exactly_whatever_their_worker_indexes(worker_ids):
    # after a worker quits and another joins, Locust's worker indexes have gaps (it never reuses one)
    shares = [list(worker_share(100, worker_ids, index)) for index in worker_ids]
    together = sorted(i for share in shares for i in share)
    assert together == list(range(100))          # each arrival once: none twice, none never
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize("cap", [0, 1, 2, 3, 5, 8, 64])
@pytest.mark.parametrize("worker_ids", [(0,), (0, 2, 3), (1, 4), (3, 5, 6, 9)])
@pytest.mark.parametrize("count", [0, 1, 7, 1000])
def test_a_capped_schedule_is_shared_once_each_and_in_proportion_to_the_slots(cap, worker_ids, count):
    slots = slots_per_process(cap, worker_ids)
    shares = arrival_shares(count, list(reversed(worker_ids)), cap)   # the order they are listed in does not matter
    assert sorted(np.concatenate(list(shares.values())).tolist()) == list(range(count))
    assert all(np.all(np.diff(share) > 0) for share in shares.values())   # each in schedule order
    for worker in worker_ids:
        if cap and not slots[worker]:
            assert len(shares[worker]) == 0          # a process without a slot would only hold its arrivals
        elif cap:   # one share per slot of each period of `cap` arrivals
            assert abs(len(shares[worker]) - count * slots[worker] / cap) <= slots[worker]


def test_a_worker_not_among_the_runs_workers_sends_nothing_and_ids_are_given_once():
    assert len(worker_share(100, (0, 2), 3)) == 0            # it joined after the run started
    assert slots_per_process(4, (0, 2)).get(3, 0) == 0
    with pytest.raises(ValueError, match="dispatchers: give each process's worker id once"):
        slots_per_process(4, (0, 0))


def test_burstiness_must_be_positive():
    with pytest.raises(ValueError, match="burstiness: must be >= "):
        ArrivalProcess("poisson", 0.0)


def test_a_burstiness_below_its_floor_is_refused_naming_the_field():
    # 1e-7 drew up to 913k arrivals for a stage of 40 expected: gaps that bunch without bound
    with pytest.raises(ValueError, match=r"burstiness: must be >= 5\.4e-06"):
        ArrivalProcess("poisson", 1e-7)


def test_the_count_of_a_stages_arrivals_follows_the_gamma_law_the_floor_is_derived_from():
    # the n-th arrival is the sum of n gamma(k) gaps: P(count >= n) = P(Gamma(n k, 1) < rate k duration); at
    # k = 0.01 and 40 expected, P(count >= 200) = gammainc(2, 0.4) = 0.0616, measured over 4000 seeded stages
    shape, rate, duration_s, n = 0.01, 4.0, 10.0, 200
    counts = np.array([len(stage_offsets(rate, duration_s, ArrivalProcess("poisson", shape, seed), 0))
                       for seed in range(4000)])
    expected = special.gammainc(n * shape, rate * shape * duration_s)
    assert np.mean(counts >= n) == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / 4000))


def test_at_the_floor_no_valid_stage_draws_past_the_bound_but_once_in_a_billion():
    from lookahead_runner.workload.arrivals import BURSTINESS_FLOOR, MAX_DRAWN_ARRIVALS
    from lookahead_runner.workload.stages import MAX_STAGE_ARRIVALS

    # the worst valid stage: rate x duration_s = MAX_STAGE_ARRIVALS; exactly, not the Chernoff bound the floor uses
    worst = special.gammainc(MAX_DRAWN_ARRIVALS * BURSTINESS_FLOOR, MAX_STAGE_ARRIVALS * BURSTINESS_FLOOR)
    assert worst <= 1e-9
    # and the floor is not far below what that needs: half of it would pass the bound 1000 times as often
    assert special.gammainc(MAX_DRAWN_ARRIVALS * BURSTINESS_FLOOR / 2, MAX_STAGE_ARRIVALS * BURSTINESS_FLOOR / 2) > 1e-6


def test_a_schedule_is_never_drawn_past_its_bound():
    # refused before anything is drawn (a constant or Poisson schedule of 1e8 arrivals: 800 MB per process)
    for kind in ("poisson", "constant"):
        with pytest.raises(ValueError, match="arrivals in one stage"):
            stage_offsets(1e8, 1.0, ArrivalProcess(kind), 0)
    # the bunched gaps of a low burstiness (bursts of ~1000 arrivals, 40 expected) stop at the bound, or the stage
    # holds no more than it
    passed = []
    for seed in range(20):
        process = ArrivalProcess("poisson", 0.001, seed=seed)
        try:
            assert len(stage_offsets(40.0, 1.0, process, 0, max_arrivals=100)) <= 100
        except ValueError as exc:
            assert "more than 100 arrivals in one stage (burstiness 0.001 bunched the gaps)" in str(exc)
            passed.append(len(stage_offsets(40.0, 1.0, process, 0)))
    assert passed and min(passed) > 100


def test_the_seed_must_not_be_negative():   # numpy's seed sequence refuses one when the schedule is drawn
    with pytest.raises(ValueError, match="arrival_seed: must be >= 0"):
        ArrivalProcess("poisson", 1.0, seed=-1)


def test_a_stage_of_more_arrivals_than_a_schedule_holds_is_refused():
    assert len(parse_stages("1000/s:10")) == 1
    with pytest.raises(ValueError, match=r"--stages: bad stage '1e\+06/s:1000'.*at most 10000000 arrivals"):
        parse_stages("1e+06/s:1000")


def test_an_arrival_picks_the_same_request_in_every_life():
    arrival = Arrival(stage=2, index=5, t_scheduled_s=100.0, number=12, seed=3)
    assert arrival.rng().random() == Arrival(2, 5, 999.0, 12, 3).rng().random()
    assert arrival.rng().random() != Arrival(2, 6, 100.0, 13, 3).rng().random()
    requests = RequestSet(path="set.jsonl", requests=tuple(SetRequest(index=i, prompt=f"p{i}", messages=None,
                                                                      max_tokens=None) for i in range(5)))
    request, rounds = arrival.pick(requests)
    assert (request.index, rounds) == (2, 2)  # the 13th request of the rate stages: the set's third, third time


def test_a_record_carries_its_arrivals_schedule():
    record = RequestRecord(stage=1, users=0, t_send_s=100.0125, t_first_token_s=None, t_done_s=101.0, ttft_ms=None,
                           e2e_ms=987.5, itl_p50_ms=None, itl_p99_ms=None, tpot_ms=None, prompt_tokens=None,
                           output_tokens=0, chunks=0, ok=False, error="x", lag_p99_ms=None)
    assert scheduled(record, None) is record and record.late_ms is None
    with_schedule = scheduled(record, Arrival(1, 4, 100.0, 4, held_ms=10.0))
    assert (with_schedule.t_scheduled_s, with_schedule.held_ms, with_schedule.arrival) == (100.0, 10.0, 4)
    assert with_schedule.late_ms == pytest.approx(2.5)
    row = dict(zip(REQUEST_COLUMNS, with_schedule.as_row()))
    assert (row["t_scheduled_s"], row["held_ms"], row["arrival"]) == ("100.0", "10.0", "4")
