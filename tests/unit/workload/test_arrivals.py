"""Rate stages' schedule: --stages items, seeded arrival times against their distribution, the split across
dispatchers, and each arrival's request (pure: no Locust)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from lookahead_runner.contracts.records import REQUEST_COLUMNS, RequestRecord
from lookahead_runner.workload.arrivals import Arrival, ArrivalProcess, mine, scheduled, stage_offsets
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


@pytest.mark.parametrize("dispatchers", [1, 2, 3, 7])
def test_dispatchers_share_the_schedule_exactly(dispatchers):
    shares = [list(mine(100, dispatchers, index)) for index in range(dispatchers)]
    together = sorted(i for share in shares for i in share)
    assert together == list(range(100))
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


def test_burstiness_must_be_positive():
    with pytest.raises(ValueError, match="burstiness: must be > 0"):
        ArrivalProcess("poisson", 0.0)


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
