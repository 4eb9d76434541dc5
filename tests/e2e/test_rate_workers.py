"""Rate stages over a master and workers started by hand, as across hosts: a worker that quit and one that joined
leave Locust's worker indexes with a gap (it never reuses one), and every arrival of the schedule still goes out
exactly once; a worker that quits during the run hands Locust's dispatcher user to another, which sends nothing
twice."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest
from fault_kit import stop_group
from test_locustfile import (LOCUST_TIMEOUT_S, LOCUSTFILE, OUTPUT_TOKENS, PROMPT_TOKENS, REPO, _free_port,
                             _group_is_empty, _rows, _start_stub)

from lookahead_runner.workload.arrivals import ArrivalProcess, stage_offsets

pytestmark = pytest.mark.e2e

WORKER_READY_TIMEOUT_S = 30.0
RATE, RATE_S = 20.0, 3.0
# a users stage first: long enough for one worker to quit after the start, before the rate stage opens
STAGES = f"1:8,{RATE:g}/s:{RATE_S:g}"


def _locust(argv: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), *argv], cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=os.environ | {"PYTHONUNBUFFERED": "1"})


def _wait_for(log: Path, text: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return
        if process.poll() is not None:
            break
        time.sleep(0.1)
    pytest.fail(f"no {text!r} in the master's log:\n{log.read_text(errors='replace')[-3000:]}")


@contextmanager
def _cluster(tmp_path: Path, stages: str, workers: int) -> Iterator[tuple[subprocess.Popen, list[subprocess.Popen]]]:
    """A headless master (the stub as its host) and `workers` workers, the n-th started with Locust's worker index
    n; every process group stopped on the way out."""
    stub = _start_stub(tmp_path / "stub.log")
    port = str(_free_port())
    processes: list[subprocess.Popen] = []
    try:
        master = _locust(["--headless", "--master", "--expect-workers", str(workers), "--master-bind-port", port,
                          "--host", stub.url, "--stages", stages, "--prompt-tokens", str(PROMPT_TOKENS),
                          "--output-tokens", str(OUTPUT_TOKENS), "--requests-csv", str(tmp_path / "requests.csv"),
                          "--stages-csv", str(tmp_path / "stages.csv"), "--stop-timeout", "5", "--only-summary"],
                         tmp_path / "master.log")
        processes.append(master)
        started = []
        for index in range(workers):  # one at a time, so the n-th to start gets Locust's worker index n
            worker = _locust(["--worker", "--master-host", "127.0.0.1", "--master-port", port],
                             tmp_path / f"worker{index}.log")
            processes.append(worker)
            started.append(worker)
            _wait_for(tmp_path / "master.log", f"(index {index}) reported as ready", master)
        yield master, started
    finally:
        for process in processes:
            stop_group(process)
        stop_group(stub.process)
        assert all(_group_is_empty(process.pid) for process in processes)


def test_a_worker_that_quit_and_one_that_joined_leave_no_arrival_unsent_or_sent_twice(tmp_path):
    master_log = tmp_path / "master.log"
    with _cluster(tmp_path, STAGES, 3) as (master, workers):
        # the users stage runs on workers 0, 1 and 2; worker 1 quits: the rate stage has workers 0 and 2
        _wait_for(master_log, "Stage 0: 1 users", master)
        workers[1].send_signal(signal.SIGTERM)
        _wait_for(master_log, "(index 1) quit", master)
        code = master.wait(timeout=LOCUST_TIMEOUT_S)
    assert code == 0, master_log.read_text()[-3000:]
    _, stages = _rows(tmp_path / "stages.csv")
    assert [(s["stage"], s["rate"]) for s in stages] == [("0", ""), ("1", f"{RATE}")]
    _, rows = _rows(tmp_path / "requests.csv")
    sent = [r for r in rows if r["stage"] == "1"]
    expected = stage_offsets(RATE, RATE_S, ArrivalProcess(), 1)
    assert sorted(int(r["arrival"]) for r in sent) == list(range(len(expected)))   # none twice, none never
    assert all(r["ok"] == "1" for r in sent), [r["error"] for r in sent if r["ok"] != "1"]
    start = float(stages[1]["t_start_s"])
    assert np.allclose([float(r["t_scheduled_s"]) for r in sent],
                       [start + expected[int(r["arrival"])] for r in sent], atol=1e-5)
    assert len({r["client"] for r in sent}) == 2    # both workers that were there when it started sent


def test_a_worker_that_quits_during_the_run_has_no_arrival_sent_twice(tmp_path):
    # Locust moves the quitting worker's dispatcher user to worker 0, which then runs two: it must not send its
    # share again (the quitting worker's arrivals still to come are lost: nobody is told which they were)
    master_log = tmp_path / "master.log"
    with _cluster(tmp_path, f"{RATE:g}/s:4", 2) as (master, workers):
        _wait_for(master_log, f"Stage 0: {RATE:g} req/s", master)
        time.sleep(1.5)
        workers[1].send_signal(signal.SIGTERM)
        _wait_for(master_log, "(index 1) quit", master)
        code = master.wait(timeout=LOCUST_TIMEOUT_S)
    assert code == 0, master_log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    sent = Counter(int(r["arrival"]) for r in rows)
    assert max(sent.values()) == 1, sorted(arrival for arrival, times in sent.items() if times > 1)
    expected = stage_offsets(RATE, 4.0, ArrivalProcess(), 0)
    assert [a for a in range(len(expected)) if a % 2 == 0 and a not in sent] == []   # worker 0's share: all sent
