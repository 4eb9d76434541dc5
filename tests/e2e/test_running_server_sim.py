"""A running server, as found (issue 37, item 9), through real processes: simulated vLLM servers started by the test
(as someone else's `vllm serve` would be), and `lookahead-runner ramp --url` against them.

- a server started with a model name of its own: `ramp --url URL --users 4` (the demo's config) takes the served
  model from GET /v1/models, as `vllm bench serve` does, instead of sending the demo's `sim/llama-3-8b` (every
  request failed with 404 before); its request set in SpecBench's format is named once, at the start and in the
  report ("ignored keys: question_id (20 requests)");
- a server that refuses the workload ends the run before any stage in one line with its own message and the fix,
  exit 2: a model it does not serve (server.model given), a key it does not take (its --api-key);
- a server that fails every request (HTTP 500, no refusal of the workload): the verdict names the most common
  error instead of only "No valid stage at K=0: no knee to find."
"""
from __future__ import annotations

import html
import json
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pandas as pd
import pytest

from fault_kit import cli, kill_all, no_traceback, only_run_dir, survivors

pytestmark = pytest.mark.e2e

RUN = ["--users", "4", "--stage-s", "4", "--set", "load.preflight_s=0", "--set", "load.warmup_s=1",
       "--set", "decision.max_client_lag_p99_ms=250"]   # a busy host (the parallel test run): not under test here


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_sim(tmp: Path, name: str, model: str, *extra: str) -> tuple[str, subprocess.Popen]:
    port = free_port()
    log = open(tmp / f"{name}.log", "wb")
    process = subprocess.Popen([sys.executable, "-m", "lookahead_runner.sim", "serve", model, "--host", "127.0.0.1",
                                "--port", str(port), "--max-num-seqs", "64", "--sim-set", "startup_s=0.3", *extra],
                               stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    return f"http://127.0.0.1:{port}", process


def wait_healthy(url: str, process: subprocess.Popen, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the simulator at {url} exited with {process.returncode}"
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the simulator at {url} was not healthy within {timeout_s} s")


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Three running simulators: one serving a model of its own name, one wanting an API key, one failing every
    completion with HTTP 500."""
    tmp = tmp_path_factory.mktemp("running")
    tag = uuid.uuid4().hex[:8]
    models = {"served": f"sim/served-{tag}", "keyed": f"sim/keyed-{tag}", "failing": f"sim/failing-{tag}"}
    started = {"served": start_sim(tmp, "served", models["served"]),
               "keyed": start_sim(tmp, "keyed", models["keyed"], "--api-key", f"sk-{tag}"),
               "failing": start_sim(tmp, "failing", models["failing"], "--sim-fault", "http-500=1.0")}
    try:
        for url, process in started.values():
            wait_healthy(url, process)
        yield {name: (url, models[name]) for name, (url, _) in started.items()} | {"tmp": tmp}
    finally:
        for _, process in started.values():
            process.terminate()
        for _, process in started.values():
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
        kill_all(tag)


def spec_bench_set(path: Path) -> Path:
    path.write_text("".join(json.dumps({"question_id": i, "category": "qa", "turns": [f"Name a river, number {i}.",
                                                                                     "And a lake?"]}) + "\n"
                            for i in range(20)))
    return path


def test_ramp_url_takes_the_served_model_and_names_the_sets_ignored_keys(servers, tmp_path):
    url, model = servers["served"]
    requests = spec_bench_set(tmp_path / "question.jsonl")
    done = cli("ramp", "--url", url, *RUN, "--set", f"load.requests={requests}", "--set", "load.endpoint=chat",
               "--out", str(tmp_path / "runs"), timeout=180)
    no_traceback(done.stdout, done.stderr)
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]   # the knee is not under test
    assert f"model: {model} (the first GET /v1/models lists)" in done.stdout
    note = (f"Request set {requests}: 20 requests, read as SpecBench question.jsonl; ignored keys: question_id "
            "(20 requests).")
    assert done.stdout.count(note) == 2, done.stdout   # at the start, and among the diagnoses at the end
    run_dir = only_run_dir(tmp_path / "runs")
    assert json.loads((run_dir / "plan.json").read_text())["config"]["server"]["model"] == model
    sent = pd.read_csv(run_dir / "k0" / "r0" / "requests.csv")
    assert len(sent) >= 4 and sent["ok"].all(), sent["error"].dropna().head().tolist()   # every user answered
    assert note in json.loads((run_dir / "decision.json").read_text())["diagnoses"]
    assert html.escape(note, quote=False) in (run_dir / "report.html").read_text()


@pytest.mark.parametrize("given_by", ["config", "--set"])
def test_a_model_the_server_does_not_serve_ends_the_run_in_one_line_before_any_stage(servers, tmp_path, given_by):
    url, model = servers["served"]
    config = tmp_path / "wrong.toml"
    config.write_text('[server]\nmodel = "sim/not-served"\n')
    named = ["--config", str(config)] if given_by == "config" else ["--set", "server.model=sim/not-served"]
    started = time.monotonic()
    done = cli("ramp", "--url", url, *named, *RUN, "--out", str(tmp_path / "runs"), timeout=120)
    no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "lookahead-runner: the server does not serve the model 'sim/not-served' (POST /v1/completions answered HTTP "
        f"404: The model `sim/not-served` does not exist. Valid aliases: {model}.); set server.model to a model it "
        f"serves ({model}), or leave server.model out: the served model is then taken from GET /v1/models")
    run_dir = only_run_dir(tmp_path / "runs")
    assert not list(run_dir.rglob("stages.csv")), "a stage ran against a server that refuses the workload"
    assert json.loads((run_dir / "k0" / "r0" / "status.json").read_text())["state"] == "failed"  # --resume reruns it
    assert time.monotonic() - started < 60


def test_a_key_the_server_does_not_take_ends_the_run_in_one_line(servers, tmp_path):
    url, _model = servers["keyed"]
    done = cli("ramp", "--url", url, *RUN, "--out", str(tmp_path / "runs"), timeout=120)
    no_traceback(done.stdout, done.stderr)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == (
        "lookahead-runner: the server refused the load's API key (GET /v1/models answered HTTP 401: Unauthorized); "
        "set server.api_key_env to the environment variable holding the key the server takes (its --api-key)")
    assert not (tmp_path / "runs").exists()   # refused before the run folder: nothing started


def test_a_stage_where_every_request_failed_names_the_most_common_error_in_the_verdict(servers, tmp_path):
    url, _model = servers["failing"]
    done = cli("ramp", "--url", url, *RUN, "--out", str(tmp_path / "runs"), timeout=180)
    no_traceback(done.stdout, done.stderr)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]   # no measurement
    run_dir = only_run_dir(tmp_path / "runs")
    verdict = json.loads((run_dir / "decision.json").read_text())["verdict"]
    assert verdict.startswith("No valid stage at K=0: no knee to find. At K=0, 4 users: every request failed, most "
                              "often HTTP 500: simulated internal server error (--sim-fault http-500) ("), verdict
    assert verdict in done.stdout
    assert survivors(str(run_dir)) == []
