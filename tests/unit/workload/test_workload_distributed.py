"""Worker -> master rows, master -> worker stages and workload.json, without Locust; and the runner's argv."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from lookahead_runner.run.life.load import locust_argv
from lookahead_runner.contracts.records import REQUEST_COLUMNS
from lookahead_runner.workload.distributed import (
    MSG_ROWS,
    RowForwarder,
    WorkloadRecord,
    rows_from_message,
    stage_from_message,
)

ROW = [str(i) for i in range(len(REQUEST_COLUMNS))]


def test_forwarder_batches_rows_until_flush_then_sends_each_late_row():
    sent = []
    forwarder = RowForwarder(lambda kind, data: sent.append((kind, data)), REQUEST_COLUMNS)
    forwarder.append(ROW)
    forwarder.append(ROW)
    assert sent == []
    forwarder.flush()
    forwarder.flush()  # nothing pending: no empty message
    assert sent == [(MSG_ROWS, {"rows": [ROW, ROW]})]
    forwarder.close()
    forwarder.append(ROW)  # a request cut after the scenario closed its logs
    assert sent[-1] == (MSG_ROWS, {"rows": [ROW]}) and forwarder.rows_sent == 3
    with pytest.raises(ValueError):
        forwarder.append(ROW[:-1])


def test_forwarder_survives_a_master_that_is_gone(caplog):
    def broken(kind, data):
        raise ConnectionError("no master")

    forwarder = RowForwarder(broken, REQUEST_COLUMNS)
    forwarder.append(ROW)
    forwarder.flush()
    assert forwarder.rows_sent == 0 and "Could not send 1 request rows" in caplog.text


def test_master_keeps_only_well_formed_rows():
    assert rows_from_message({"rows": [ROW, ROW[:3], "x"]}, REQUEST_COLUMNS) == [ROW]
    assert rows_from_message({"rows": [[1] * len(REQUEST_COLUMNS)]}, REQUEST_COLUMNS) == [["1"] * len(REQUEST_COLUMNS)]
    assert rows_from_message("nope", REQUEST_COLUMNS) == []


def test_stage_messages():
    assert stage_from_message([2, 64]) == (2, 64)
    assert stage_from_message({"stage": 2}) is None


def test_workload_record_merges_processes(tmp_path):
    path = tmp_path / "life" / "workload.json"
    record = WorkloadRecord(str(path))
    record.add({"prompt_method": "tokenize", "prompt_tokens": 128, "client": "h:2"})
    first = json.loads(path.read_text())
    assert first == {"prompt_method": "tokenize", "prompt_tokens": 128, "clients": {"h:2": "tokenize"}}
    record.add({"prompt_method": "token-ids", "prompt_tokens": 128, "client": "h:1"})
    merged = json.loads(path.read_text())
    assert merged["prompt_method"] == "mixed"
    assert merged["clients"] == {"h:1": "token-ids", "h:2": "tokenize"}
    assert not list(path.parent.glob("*.tmp"))


LOAD = SimpleNamespace(stages=[SimpleNamespace(users=2, duration_s=5.0), SimpleNamespace(users=8, duration_s=2.5)],
                       prompt_tokens=512, output_tokens=64, temperature=0.7, top_p=0.9, seed=7,
                       prompt_file="prompts.jsonl", request_timeout_s=30.0, processes=4,
                       locust_extra_args=["-L", "INFO"])


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_runner_argv_passes_every_load_setting(tmp_path):
    argv = locust_argv("http://127.0.0.1:8000", tmp_path, "m", LOAD)
    assert argv[:3] == [sys.executable, "-m", "locust"]
    assert _value(argv, "--stages") == "2:5,8:2.5"
    assert (_value(argv, "--prompt-tokens"), _value(argv, "--output-tokens")) == ("512", "64")
    assert (_value(argv, "--temperature"), _value(argv, "--top-p"), _value(argv, "--seed")) == ("0.7", "0.9", "7")
    assert _value(argv, "--prompt-file") == str(Path("prompts.jsonl").resolve())
    assert _value(argv, "--workload-json") == str(tmp_path / "workload.json")
    assert _value(argv, "--requests-csv") == str(tmp_path / "requests.csv")
    assert _value(argv, "--processes") == "4"
    port = _value(argv, "--master-port")  # a free one, not Locust's shared default 5557
    assert _value(argv, "--master-bind-port") == port and port != "5557"
    assert argv[-2:] == ["-L", "INFO"]


def test_runner_argv_leaves_out_unset_options_and_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKAHEAD_API_KEY", "sk-secret")
    load = SimpleNamespace(**{**vars(LOAD), "seed": None, "prompt_file": "", "processes": 1, "locust_extra_args": []})
    argv = locust_argv("http://127.0.0.1:8000", tmp_path, "m", load)
    assert "--seed" not in argv and "--prompt-file" not in argv and "--processes" not in argv
    assert "--master-port" not in argv
    assert not any("sk-secret" in arg for arg in argv)
