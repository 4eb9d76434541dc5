"""`--processes 2`: forked workers send their raw request rows to the master, which writes the one
requests.csv (and stages.csv, workload.json) exactly as a single process does."""

from __future__ import annotations

import json

import pytest
from test_locustfile import (
    _check_tagged_run,
    _free_port,
    _group_is_empty,
    _rows,
    _run_locust,
    _start_stub,
    _stop,
)

pytestmark = pytest.mark.e2e


def test_processes_send_every_row_to_the_master(tmp_path):
    server = _start_stub(tmp_path / "stub.log", "--api-key", "sk-dist")  # the forked workers must send it too
    try:
        port = str(_free_port())  # not Locust's default 5557, which another run's workers could reach
        code, log = _run_locust(server, tmp_path, "--processes", "2", "--master-port", port, "--master-bind-port", port,
                                "--stop-timeout", "5", env={"LOOKAHEAD_API_KEY": "sk-dist"})
    finally:
        _stop(server.process)
        assert _group_is_empty(server.process.pid)
    ok_rows, workload = _check_tagged_run(tmp_path, code, log)

    _, rows = _rows(tmp_path / "requests.csv")
    # with --stop-timeout the requests in flight at the end finish, and their rows still reach the master
    assert not [r for r in rows if r["error"] == "cut"]
    _, stages = _rows(tmp_path / "stages.csv")
    assert any(float(r["t_done_s"]) > float(stages[-1]["t_end_s"]) for r in ok_rows)
    clients = {r["client"] for r in rows}
    assert len(clients) == 2, clients  # both workers' rows, and none from the master
    for stage, users in ((0, 2), (1, 4)):  # each stage's users were spread over both workers
        assert {r["client"] for r in ok_rows if int(r["stage"]) == stage} == clients, stage
    assert workload["prompt_method"] == "tokenize" and set(workload["clients"]) == clients
    assert "sk-dist" not in (tmp_path / "requests.csv").read_text() + log.read_text()
    final = json.loads((tmp_path / "final.json").read_text())
    assert sum(entry["num_requests"] for entry in final) == len(ok_rows)
