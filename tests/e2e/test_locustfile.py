"""The real locustfile, headless, through two stages against a vLLM-shaped server on 127.0.0.1.

Two servers: the stub (tests/e2e/stub_vllm.py, known timing, so the TTFT/ITL definitions can be
checked) and, when ``python -m lookahead_runner.sim --version`` works, the simulated vLLM server.
Then the stub alone: prompts as token ids when it has no /tokenize, and an API key that must reach
every route and no file. The helpers here are shared with test_distributed.py.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_kit import stop_group as _stop

from lookahead_runner.run.life.server import free_port as _free_port

from lookahead_runner.contracts.records import REQUEST_COLUMNS, STAGE_COLUMNS

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locustfiles" / "completions.py"
STUB = Path(__file__).with_name("stub_vllm.py")
SERVER_READY_TIMEOUT_S = 30.0
LOCUST_TIMEOUT_S = 60.0
STAGES = "2:3,4:3"
STAGE_USERS = {0: 2, 1: 4}
OUTPUT_TOKENS = 16
PROMPT_TOKENS = 32


@dataclass
class Server:
    url: str
    model: str
    process: subprocess.Popen


def _group_is_empty(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def _wait_healthy(url: str, process: subprocess.Popen, log: Path) -> str | None:
    """None once /health answers 200, else why not (the server exited, or the deadline passed)."""
    deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return f"server exited with {process.returncode}:\n{log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return None
        except OSError:
            pass
        time.sleep(0.2)
    return f"server not healthy within {SERVER_READY_TIMEOUT_S} s:\n{log.read_text()[-2000:]}"


def _sim_available() -> bool:
    try:
        done = subprocess.run([sys.executable, "-m", "lookahead_runner.sim", "--version"],
                              capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and done.stdout.strip() == "0.32.0"


def _start_stub(log: Path, *extra: str) -> Server:
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, str(STUB), "--port", "0", "--first-token-ms", "50",
                                    "--chunk-interval-ms", "10", "--tokens-per-chunk", "3", *extra],
                                   stdout=subprocess.PIPE, stderr=out, start_new_session=True)
    assert process.stdout is not None
    line = process.stdout.readline().decode()  # the stub prints LISTENING <port> first, or dies
    if not line.startswith("LISTENING "):
        _stop(process)
        pytest.fail(f"stub did not start: {line!r} {log.read_text()[-2000:]}")
    url = f"http://127.0.0.1:{int(line.split()[1])}"
    problem = _wait_healthy(url, process, log)
    if problem is not None:
        _stop(process)
        pytest.fail(problem)
    return Server(url, "stub-model", process)


def _start_sim(log: Path) -> Server:
    port = _free_port()
    spec = json.dumps({"method": "ngram", "num_speculative_tokens": 2})
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "lookahead_runner.sim", "serve", "sim-model",
                                    "--port", str(port), "--speculative-config", spec],
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        problem = _wait_healthy(url, process, log)
    except BaseException:
        _stop(process)
        raise
    if problem is not None:
        # The sim has its own tests; this one is about the locustfile, which the stub run covers.
        _stop(process)
        pytest.skip(f"the simulated vLLM server did not start: {problem}")
    return Server(url, "sim-model", process)


@pytest.fixture(params=["stub", "sim"])
def server(request, tmp_path) -> Iterator[Server]:
    if request.param == "sim" and not _sim_available():
        pytest.skip("the simulated vLLM server (python -m lookahead_runner.sim) is not available")
    start = _start_stub if request.param == "stub" else _start_sim
    started = start(tmp_path / f"{request.param}.log")
    try:
        yield started
    finally:
        _stop(started.process)
        assert _group_is_empty(started.process.pid), "server processes left behind"


def _run_locust(server: Server, tmp_path: Path, *extra: str, stages: str = STAGES,
                env: dict[str, str] | None = None) -> tuple[int, Path]:
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", server.url,
            "--stages", stages, "--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(OUTPUT_TOKENS),
            "--requests-csv", str(tmp_path / "requests.csv"), "--stages-csv", str(tmp_path / "stages.csv"),
            "--workload-json", str(tmp_path / "workload.json"),
            "--csv", str(tmp_path / "locust"), "--json-file", str(tmp_path / "final"),
            "--only-summary", *extra]  # no --model: read from /v1/models
    log = tmp_path / "locust.log"
    tmp_path.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True,
                                   env=os.environ | {"PYTHONUNBUFFERED": "1"} | (env or {}))
        try:
            code = process.wait(timeout=LOCUST_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            _stop(process)
            pytest.fail(f"locust ran past {LOCUST_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
    assert _group_is_empty(process.pid), "locust left processes behind"
    return code, log


def _rows(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with open(path, newline="") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _check_tagged_run(tmp_path: Path, code: int, log: Path) -> tuple[list[dict[str, str]], dict]:
    """The checks every good run passes; returns the ok rows and workload.json."""
    output = log.read_text()
    assert code == 0, output[-3000:]

    stage_header, stages = _rows(tmp_path / "stages.csv")
    assert stage_header == list(STAGE_COLUMNS)
    assert [(int(s["stage"]), int(s["users"])) for s in stages] == [(0, 2), (1, 4)]
    for stage in stages:
        assert 2.5 < float(stage["t_end_s"]) - float(stage["t_start_s"]) < 5.0
    assert stages[0]["t_end_s"] == stages[1]["t_start_s"]

    header, rows = _rows(tmp_path / "requests.csv")
    assert header == list(REQUEST_COLUMNS)
    ok_rows = [r for r in rows if r["ok"] == "1"]
    cut_rows = [r for r in rows if r["error"] == "cut"]
    failed_rows = [r for r in rows if r["ok"] == "0" and r["error"] != "cut"]
    assert not failed_rows, failed_rows[:3]
    assert all(r["ok"] == "0" for r in cut_rows)
    for row in rows:
        assert STAGE_USERS[int(row["stage"])] == int(row["users"])
        window = stages[int(row["stage"])]
        assert float(window["t_start_s"]) - 0.05 <= float(row["t_send_s"]) <= float(window["t_end_s"]) + 0.5
    for stage in STAGE_USERS:
        assert sum(1 for r in ok_rows if int(r["stage"]) == stage) >= STAGE_USERS[stage], f"stage {stage}"
    for row in ok_rows:
        assert int(row["output_tokens"]) == OUTPUT_TOKENS
        assert int(row["prompt_tokens"]) == PROMPT_TOKENS
        # <=: tokens that reach the socket in one read (a client that read late) share its arrival time
        assert 0 < float(row["ttft_ms"]) <= float(row["e2e_ms"])
        assert float(row["t_send_s"]) < float(row["t_first_token_s"]) <= float(row["t_done_s"])
        assert 1 <= int(row["chunks"]) <= OUTPUT_TOKENS
        assert float(row["itl_p50_ms"]) <= float(row["itl_p99_ms"])
        assert row["error"] == ""
        assert row["client"]
    cpu = [float(r["client_cpu_pct"]) for r in ok_rows if r["client_cpu_pct"]]  # empty in the first second
    assert cpu and all(0 <= value < 250 for value in cpu)
    assert any(r["lag_p99_ms"] for r in ok_rows)

    # Locust counted every request that ended, and no cut one (--json-file is written after the
    # users stopped; _stats.csv is only the stats writer's last once-a-second snapshot).
    final = json.loads((tmp_path / "final.json").read_text())
    assert sum(entry["num_requests"] for entry in final) == len(ok_rows)
    assert sum(entry["num_failures"] for entry in final) == 0
    _, locust_stats = _rows(tmp_path / "locust_stats.csv")
    aggregated = next(r for r in locust_stats if r["Name"] == "Aggregated")
    assert 0 < int(aggregated["Request Count"]) <= len(ok_rows)

    workload = json.loads((tmp_path / "workload.json").read_text())
    assert workload["prompt_tokens"] == PROMPT_TOKENS and workload["output_tokens"] == OUTPUT_TOKENS
    assert set(workload["clients"]) == {r["client"] for r in rows}
    return ok_rows, workload


def test_headless_run_writes_tagged_requests_and_stages(server, tmp_path):
    code, log = _run_locust(server, tmp_path)
    ok_rows, workload = _check_tagged_run(tmp_path, code, log)
    # both servers have /tokenize: real text prompts, calibrated to exactly PROMPT_TOKENS
    assert (workload["prompt_method"], workload["prompt_source"]) == ("tokenize", "built-in"), workload
    assert workload["prompt_unique_head"] is True and workload["tokenize_calls"] > 0

    if server.model == "stub-model":  # known timing: first token after 50 ms, then 3 tokens per 10 ms
        ttfts = sorted(float(r["ttft_ms"]) for r in ok_rows)
        itls = sorted(float(r["itl_p50_ms"]) for r in ok_rows)
        assert 45 <= ttfts[len(ttfts) // 2] < 150
        assert 2.5 <= itls[len(itls) // 2] < 8  # 10 ms / 3 tokens, not one 10 ms gap per chunk
        assert all(int(r["chunks"]) == 6 for r in ok_rows)  # 1 + 3 * 5 tokens


@pytest.fixture
def stub_factory(tmp_path):
    started: list[Server] = []

    def start(*extra: str) -> Server:
        started.append(_start_stub(tmp_path / f"stub{len(started)}.log", *extra))
        return started[-1]

    yield start
    for server in started:
        _stop(server.process)
        assert _group_is_empty(server.process.pid), "server processes left behind"


def test_without_tokenize_prompts_are_token_ids_and_say_so(stub_factory, tmp_path):
    server = stub_factory("--no-tokenize")
    code, log = _run_locust(server, tmp_path, "--temperature", "0.5", "--top-p", "0.9", "--seed", "3",
                            stages="2:2")
    assert code == 0, log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    ok_rows = [r for r in rows if r["ok"] == "1"]
    assert ok_rows and all(int(r["prompt_tokens"]) == PROMPT_TOKENS for r in ok_rows)
    assert not [r for r in rows if r["ok"] == "0" and r["error"] != "cut"]
    workload = json.loads((tmp_path / "workload.json").read_text())
    assert workload["prompt_method"] == "token-ids" and "HTTP 404" in workload["prompt_note"]
    assert (workload["temperature"], workload["top_p"], workload["seed"]) == (0.5, 0.9, 3)
    assert "as token ids" in log.read_text()  # said in the log too


def test_chat_endpoint_calibrates_with_the_template_and_the_role_chunk_does_not_stop_ttft(stub_factory, tmp_path):
    """--endpoint chat (issue 28): the stub writes the role-only chunk at once and the first token after 50 ms."""
    code, log = _run_locust(stub_factory(), tmp_path, "--endpoint", "chat", "--chat-template-kwargs",
                            '{"enable_thinking": false}')
    ok_rows, workload = _check_tagged_run(tmp_path, code, log)
    assert (workload["endpoint"], workload["prompt_method"]) == ("chat", "tokenize")
    assert workload["prompt_chat_template"] is True and workload["chat_template_kwargs"] == {"enable_thinking": False}
    ttfts = sorted(float(r["ttft_ms"]) for r in ok_rows)
    assert ttfts[0] >= 45 and ttfts[len(ttfts) // 2] < 150  # the first content delta, not the role chunk at ~0
    assert all(int(r["chunks"]) == 7 for r in ok_rows)  # the role chunk + 1 + 3 * 5 tokens


def test_the_web_ui_offers_the_endpoint_and_a_swarm_from_its_form_sends_chat(stub_factory, tmp_path):
    """The web UI's form lists --endpoint (a choice) and --chat-template-kwargs; starting from the form with
    endpoint = chat recalibrates through the chat template and streams /v1/chat/completions."""
    server, web_port = stub_factory(), _free_port()
    argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", server.url, "--web-host", "127.0.0.1",
            "--web-port", str(web_port), "--stages", "2:2", "--prompt-tokens", str(PROMPT_TOKENS),
            "--output-tokens", str(OUTPUT_TOKENS), "--requests-csv", str(tmp_path / "requests.csv"),
            "--workload-json", str(tmp_path / "workload.json")]
    log = tmp_path / "locust.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
    web = f"http://127.0.0.1:{web_port}"
    try:
        deadline = time.monotonic() + SERVER_READY_TIMEOUT_S
        while True:
            try:
                page = urllib.request.urlopen(web + "/", timeout=2).read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline and process.poll() is None, log.read_text()[-2000:]
                time.sleep(0.2)
        template = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0].rstrip(";"))
        options = template["extra_options"]
        assert options["endpoint"]["choices"] == ["completions", "chat"]
        assert options["endpoint"]["default_value"] == "completions" and "chat_template_kwargs" in options
        form = urllib.parse.urlencode({"user_count": 2, "spawn_rate": 2, "host": server.url, "endpoint": "chat",
                                       "chat_template_kwargs": '{"enable_thinking": false}'}).encode()
        answer = json.loads(urllib.request.urlopen(web + "/swarm", data=form, timeout=30).read())
        assert answer["success"], answer
        deadline = time.monotonic() + LOCUST_TIMEOUT_S
        while '"endpoint": "chat"' not in _text_or_empty(tmp_path / "workload.json") or \
                _text_or_empty(tmp_path / "requests.csv").count("\n") < 5:
            assert time.monotonic() < deadline and process.poll() is None, log.read_text()[-2000:]
            time.sleep(0.5)
    finally:
        _stop(process)
    workload = json.loads((tmp_path / "workload.json").read_text())
    assert workload["prompt_chat_template"] is True and workload["chat_template_kwargs"] == {"enable_thinking": False}
    ok_rows = [r for r in _rows(tmp_path / "requests.csv")[1] if r["ok"] == "1"]
    assert ok_rows and all(int(r["prompt_tokens"]) == PROMPT_TOKENS and float(r["ttft_ms"]) >= 45 for r in ok_rows)
    assert all(int(r["chunks"]) == 7 for r in ok_rows)  # chat's role chunk + 6 content chunks (completions: 6)


def _text_or_empty(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


API_KEY = "sk-test-0f1e2d3c4b5a"


def test_api_key_reaches_every_route_and_no_file(stub_factory, tmp_path):
    server = stub_factory("--api-key", API_KEY)
    with pytest.raises(urllib.error.HTTPError) as refused:  # the stub does check it
        urllib.request.urlopen(server.url + "/v1/models", timeout=5)
    assert refused.value.code == 401

    code, log = _run_locust(server, tmp_path, stages="2:2", env={"LOOKAHEAD_API_KEY": API_KEY})
    assert code == 0, log.read_text()[-3000:]
    _, rows = _rows(tmp_path / "requests.csv")
    assert any(r["ok"] == "1" for r in rows)
    assert not [r for r in rows if r["ok"] == "0" and r["error"] != "cut"]  # no 401 anywhere
    workload = json.loads((tmp_path / "workload.json").read_text())
    assert workload["prompt_method"] == "tokenize"  # /tokenize answered too
    written = [path for path in tmp_path.rglob("*") if path.is_file() and not path.name.startswith("stub")]
    expected = {"requests.csv", "stages.csv", "workload.json", "locust.log", "locust_stats.csv"}
    assert expected <= {path.name for path in written}
    for path in written:
        assert API_KEY not in path.read_text(errors="replace"), path


def _failures(tmp_path: Path) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """(failed rows of requests.csv, Locust's _failures.csv rows)."""
    _, rows = _rows(tmp_path / "requests.csv")
    _, locust_failures = _rows(tmp_path / "locust_failures.csv")
    return [r for r in rows if r["ok"] == "0" and r["error"] != "cut"], locust_failures


def test_failures_are_named_in_requests_csv_and_locust(stub_factory, tmp_path):
    slow = stub_factory("--chunk-interval-ms", "200", "--tokens-per-chunk", "1")  # 16 tokens: over 3 s
    code, log = _run_locust(slow, tmp_path / "slow", "--request-timeout-s", "1", stages="1:2.5")
    assert code == 0, log.read_text()[-3000:]
    failed, locust_failures = _failures(tmp_path / "slow")
    assert failed and all(r["error"] == "timeout (over 1 s)" for r in failed)
    assert all(900 < float(r["e2e_ms"]) < 1600 for r in failed)  # the whole request is bounded, not each read
    assert {f["Error"] for f in locust_failures} == {"CatchResponseError('timeout')"}  # how Locust names failure()

    code, log = _run_locust(stub_factory(), tmp_path / "wrong", "--model", "no-such-model", stages="1:1.5")
    assert code == 0, log.read_text()[-3000:]
    failed, locust_failures = _failures(tmp_path / "wrong")
    assert failed and all(r["error"].startswith("HTTP 404: ") and "no-such-model" in r["error"] for r in failed)
    assert {f["Error"] for f in locust_failures} == {f"CatchResponseError({failed[0]['error']!r})"}


def test_a_request_set_is_sent_in_the_same_order_every_run_with_natural_lengths(tmp_path):
    """--request-set and --output-tokens natural on the standalone locustfile, against the simulator: one user
    walks the set from its start in every run, each request ending at its end of sequence within its max_tokens."""
    if not _sim_available():
        pytest.skip("the simulated vLLM server (python -m lookahead_runner.sim) is not available")
    requests = tmp_path / "set.jsonl"
    requests.write_text("".join(json.dumps({"prompt": f"question {i} about the sea", "max_tokens": 8 + i % 5,
                                            "category": "sea"}) + "\n" for i in range(25)))
    server = _start_sim(tmp_path / "sim.log")
    try:
        orders = []
        for run in range(2):
            out = tmp_path / f"run{run}"
            code, log = _run_locust(server, out, "--request-set", str(requests), "--output-tokens", "natural",
                                    stages="1:2")
            assert code == 0, log.read_text()[-3000:]
            _, rows = _rows(out / "requests.csv")
            rows = [r for r in rows if r["error"] != "cut"]
            assert rows and all(r["ok"] == "1" and r["category"] == "sea" and r["output_hash"] for r in rows)
            assert all(1 <= int(r["output_tokens"]) <= 8 + int(r["request_index"]) % 5 for r in rows)
            assert {r["finish_reason"] for r in rows} <= {"stop", "length"}
            orders.append([(r["request_index"], r["output_hash"]) for r in rows])
            workload = json.loads((out / "workload.json").read_text())
            assert workload["prompt_method"] == "request-set" and workload["request_set_size"] == 25
        shortest = min(len(order) for order in orders)
        assert orders[0][:shortest] == orders[1][:shortest]                 # same requests, same answers, same order
        assert [int(index) for index, _ in orders[0]] == [j % 25 for j in range(len(orders[0]))]  # user 0 from 0
    finally:
        _stop(server.process)
