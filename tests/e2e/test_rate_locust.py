"""Rate stages in the standalone locustfile (`locust -f ... --stages 20/s:3`), against the stub vLLM: each
arrival of the seeded schedule is sent once, at its time, whatever is outstanding; user and rate stages mix;
max_in_flight holds arrivals (counted, and never sent ones recorded), in all the processes together; --processes 2
split the schedule."""
from __future__ import annotations

import json

import numpy as np
import pytest
from test_locustfile import _free_port, _group_is_empty, _rows, _run_locust, _start_stub, _stop

from lookahead_runner.contracts.records import NOT_SENT_ERROR, STAGE_COLUMNS
from lookahead_runner.workload.arrivals import ArrivalProcess, stage_offsets

pytestmark = pytest.mark.e2e

RATE = 20.0


@pytest.fixture
def stub(tmp_path):
    server = _start_stub(tmp_path / "stub.log")  # 50 ms to the first token, then 16 tokens 3 per 10 ms
    try:
        yield server
    finally:
        _stop(server.process)
        assert _group_is_empty(server.process.pid)


def _schedule(stage: int, rate: float, seconds: float, seed: int = 0) -> np.ndarray:
    return stage_offsets(rate, seconds, ArrivalProcess("poisson", 1.0, seed), stage)


def test_each_scheduled_arrival_goes_out_once_at_its_time_between_user_stages(stub, tmp_path):
    code, log = _run_locust(stub, tmp_path, "--arrival-seed", "5", "--stop-timeout", "10",
                            stages=f"2:2,{RATE:g}/s:3,3:2")
    assert code == 0, log.read_text()[-3000:]
    header, stages = _rows(tmp_path / "stages.csv")
    assert header == list(STAGE_COLUMNS)
    assert [(s["stage"], s["users"], s["rate"]) for s in stages] == [("0", "2", ""), ("1", "0", "20.0"),
                                                                       ("2", "3", "")]
    rate_stage = stages[1]
    assert float(rate_stage["t_end_s"]) - float(rate_stage["t_start_s"]) == pytest.approx(3.0)
    _, rows = _rows(tmp_path / "requests.csv")
    sent = [r for r in rows if r["stage"] == "1"]
    expected = _schedule(1, RATE, 3.0, seed=5)
    assert sorted(int(r["arrival"]) for r in sent) == list(range(len(expected)))  # each once, none invented
    assert all(r["ok"] == "1" and r["users"] == "0" for r in sent), [r["error"] for r in sent if r["ok"] != "1"]
    start = float(rate_stage["t_start_s"])
    for row in sent:
        assert float(row["t_scheduled_s"]) == pytest.approx(start + expected[int(row["arrival"])], abs=1e-5)
    late_ms = [(float(r["t_send_s"]) - float(r["t_scheduled_s"])) * 1000 - float(r["held_ms"]) for r in sent]
    assert min(late_ms) >= 0 and float(np.percentile(late_ms, 50)) < 50, late_ms
    # open loop: requests overlap (each takes ~100 ms at 20 req/s), as no closed loop would let them
    spans = sorted((float(r["t_send_s"]), float(r["t_done_s"])) for r in sent)
    assert any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
    closed = [r for r in rows if r["stage"] in ("0", "2")]
    assert closed and all(r["t_scheduled_s"] == "" and r["arrival"] == "" for r in closed)
    # each kind's stage opens on a drained server: the rate stage after the users' last request, the users
    # stage after the last arrival's request
    assert float(rate_stage["t_start_s"]) >= max(float(r["t_done_s"]) for r in rows if r["stage"] == "0")
    assert float(stages[2]["t_start_s"]) >= max(float(r["t_done_s"]) for r in sent)


def test_max_in_flight_holds_arrivals_and_records_those_never_sent(stub, tmp_path):
    code, log = _run_locust(stub, tmp_path, "--max-in-flight", "1", "--stop-timeout", "10", stages=f"{RATE:g}/s:2")
    assert code == 0, log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    assert len(rows) == len(_schedule(0, RATE, 2.0))                  # every arrival has its row
    held = [r for r in rows if float(r["held_ms"]) > 0]
    not_sent = [r for r in rows if r["error"] == NOT_SENT_ERROR]
    # one request in flight at a time, ~100 ms each: about 10 of the ~40 arrivals go out, the rest wait
    assert len(held) > len(rows) / 2 and not_sent and all(r["ok"] == "0" and r["t_send_s"] == "nan" for r in not_sent)
    sent = sorted((float(r["t_send_s"]), float(r["t_done_s"])) for r in rows if r["error"] != NOT_SENT_ERROR)
    assert all(later[0] >= earlier[1] - 0.002 for earlier, later in zip(sent, sent[1:]))   # never two at once
    # Locust's own count: its --json-file, written after the runner quit (its failures CSV is a snapshot taken
    # once a second, so the arrivals dropped as the stage ends may miss the last one)
    entries = json.loads((tmp_path / "final.json").read_text())
    counted = {(e["name"], e["num_failures"]) for e in entries}
    assert ("not sent (max_in_flight full until the stage ended)", len(not_sent)) in counted, entries


def test_two_processes_split_the_schedule_between_them(stub, tmp_path):
    port = str(_free_port())
    code, log = _run_locust(stub, tmp_path, "--processes", "2", "--master-port", port, "--master-bind-port", port,
                            "--stop-timeout", "5", stages=f"{RATE:g}/s:3")
    assert code == 0, log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    expected = _schedule(0, RATE, 3.0)
    assert sorted(int(r["arrival"]) for r in rows) == list(range(len(expected)))
    by_client: dict[str, list[int]] = {}
    for row in rows:
        by_client.setdefault(row["client"], []).append(int(row["arrival"]))
    assert len(by_client) == 2                                    # both workers sent, the master none
    # every other arrival each: worker 0 the even ones, worker 1 the odd ones
    assert sorted(sorted({a % 2 for a in arrivals}) for arrivals in by_client.values()) == [[0], [1]]
    _, stages = _rows(tmp_path / "stages.csv")
    start = float(stages[0]["t_start_s"])
    for row in rows:  # each worker sent on the master's schedule
        assert float(row["t_scheduled_s"]) == pytest.approx(start + expected[int(row["arrival"])], abs=1e-5)


def _most_in_flight(rows: list[dict[str, str]]) -> int:
    """The most requests in flight at once across every process: each sent request from its send to its end (a
    slot is taken before the send and given back after the end; one host, one clock)."""
    events = sorted([(float(r["t_send_s"]), 1) for r in rows] + [(float(r["t_done_s"]), -1) for r in rows])
    most = in_flight = 0
    for _t, step in events:   # at a tie an end (-1) sorts first: a slot given back is taken again
        in_flight += step
        most = max(most, in_flight)
    return most


def test_max_in_flight_is_the_cap_of_all_the_processes_together(stub, tmp_path):
    # 40 req/s of ~110 ms requests: about 4.4 in flight offered; a cap of 2 over 4 processes must hold 2 in all
    port = str(_free_port())
    code, log = _run_locust(stub, tmp_path, "--processes", "4", "--master-port", port, "--master-bind-port", port,
                            "--max-in-flight", "2", "--stop-timeout", "10", stages="40/s:3")
    assert code == 0, log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    assert sorted(int(r["arrival"]) for r in rows) == list(range(len(_schedule(0, 40.0, 3.0))))  # each has a row
    sent = [r for r in rows if r["error"] != NOT_SENT_ERROR]
    assert sent and all(r["ok"] == "1" for r in sent), [r["error"] for r in sent if r["ok"] != "1"]
    assert _most_in_flight(sent) == 2
    # the processes without a slot were given no arrivals: they would only have waited
    assert len({r["client"] for r in rows}) == 2


def test_a_users_stage_after_a_rate_stage_opens_once_the_arrivals_requests_have_ended(tmp_path):
    # 2.5 s to each first token: the rate stage's requests outlast it, the users stage waits for them
    slow = _start_stub(tmp_path / "stub.log", "--first-token-ms", "2500")
    try:
        code, log = _run_locust(slow, tmp_path, "--stop-timeout", "10", stages="8/s:1,1:1")
    finally:
        _stop(slow.process)
    assert code == 0, log.read_text()[-3000:]
    _, stages = _rows(tmp_path / "stages.csv")
    _, rows = _rows(tmp_path / "requests.csv")
    arrivals = [r for r in rows if r["stage"] == "0"]
    assert arrivals and all(r["ok"] == "1" for r in arrivals), [r["error"] for r in arrivals]
    last_done = max(float(r["t_done_s"]) for r in arrivals)
    assert last_done > float(stages[0]["t_end_s"]) + 2.0                 # they did outlast their stage
    assert float(stages[1]["t_start_s"]) >= last_done                   # and the users came after them
    users = [r for r in rows if r["stage"] == "1"]
    assert users and min(float(r["t_send_s"]) for r in users) >= last_done
