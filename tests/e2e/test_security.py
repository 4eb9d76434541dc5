"""Security rows of the reliability matrix: argv lists only (shell metacharacters stay one literal
argument), the API key only from the environment (sent as a bearer header, written nowhere), and the
report escapes every string that came from the config or the server."""
import html
import json
import os
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pandas as pd
import pytest

from fault_kit import (FINISHED, cli, faults_at_k, kill_all, life_line, no_traceback, only_run_dir, survivors, sweep_toml,
                       write_config)
from lookahead_runner.config import config_from_dict
from lookahead_runner.config import ResolvedServer
from lookahead_runner.run.life.server import RunningServer
from lookahead_runner.telemetry.memory import NoMemory
from lookahead_runner.telemetry.sampler import Sampler

pytestmark = pytest.mark.e2e

XSS = "<img src=x onerror=alert(1)>"
SHELL = "$(touch PWNED1) `touch PWNED2`; touch PWNED3 | cat && echo > PWNED4 * ' \""


def test_shell_metacharacters_reach_the_server_as_one_argument_and_the_report_escapes(tmp_path):
    """The model name carries shell metacharacters and HTML: the server gets it as one argv element
    (its requests only succeed if the name arrives byte for byte), no shell ever runs it, and the
    report shows it, and a server error line carrying HTML, escaped."""
    model = f"sim/sec-{uuid.uuid4().hex[:8]} {SHELL} {XSS}"
    work = tmp_path / "cwd"
    work.mkdir()
    # K=2's server rejects a flag value that is HTML: its error line reaches the report as the reason
    toml = sweep_toml(model, [0, 2], stages=((2, 3),), name=f"../../escape {SHELL}",
                      env=faults_at_k({2: ["--max-num-seqs", XSS]}))
    config = write_config(tmp_path, toml)
    try:
        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), cwd=work, timeout=180)
        no_traceback(done.stdout, done.stderr)
        assert done.returncode in FINISHED, done.stderr[-2000:]
        run_dir = only_run_dir(tmp_path / "runs")
        assert run_dir.parent == tmp_path / "runs" and ".." not in run_dir.name
        server = json.loads((run_dir / "k0/r0/server.json").read_text())
        assert server["argv"][server["argv"].index("serve") + 1] == model  # one element, untouched
        requests = pd.read_csv(run_dir / "k0/r0/requests.csv")
        assert requests["ok"].sum() > 0, "the server answered only because the name arrived literally"
        assert f"invalid int value: '{XSS}'" in life_line(done.stdout, "k2/r0")
        assert list(work.iterdir()) == [], "nothing may be written outside the run folder"
        assert not [p for p in tmp_path.rglob("PWNED*")], "a shell ran a config value"
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "runs", "sweep.toml"]

        report = (run_dir / "report.html").read_text()
        for payload in (XSS, model):
            assert payload not in report, "an unescaped string from the config or the server"
        assert html.escape(XSS, quote=False) in report or html.escape(XSS) in report
        assert "<script>alert" not in report
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_all(model)


def test_api_key_from_the_environment_is_sent_and_never_written(tmp_path):
    """server.api_key_env names the variable (here VLLM_API_KEY, which vLLM itself reads): the server
    requires the key, Locust sends it as a bearer header, and no file of the run holds it. K=2's server
    wants another key: the check before its first stage ends the run in one line saying what to check (exit 2;
    K=2 is left for --resume), and the report rendered from the folder holds no key either."""
    secret = f"sk-{uuid.uuid4().hex}"
    model = f"sim/sec-key-{uuid.uuid4().hex[:8]}"
    toml = sweep_toml(model, [0, 2], stages=((2, 3),), server={"api_key_env": "VLLM_API_KEY"},
                      env=faults_at_k({2: ["--api-key", "another-key"]}))
    config = write_config(tmp_path, toml)
    try:
        dry = cli("sweep", "--config", str(config), "--dry-run", env={"VLLM_API_KEY": secret}, timeout=60)
        assert dry.returncode == 0 and secret not in dry.stdout + dry.stderr
        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), env={"VLLM_API_KEY": secret},
                   timeout=180)
        no_traceback(done.stdout, done.stderr)
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        run_dir = only_run_dir(tmp_path / "runs")
        requests = pd.read_csv(run_dir / "k0/r0/requests.csv")
        assert requests["ok"].all() and len(requests) > 0, "the key was not sent or not accepted"
        assert done.stderr.strip().splitlines()[-1] == (
            "lookahead-runner: the server refused the load's API key (POST /v1/completions answered HTTP 401: "
            "Unauthorized); check the key in the environment variable VLLM_API_KEY (server.api_key_env)")
        assert secret not in done.stdout + done.stderr
        rendered = cli("report", str(run_dir), env={"VLLM_API_KEY": secret}, timeout=120)
        assert rendered.returncode == 0, rendered.stderr[-2000:]
        files = [p for p in run_dir.rglob("*") if p.is_file()]
        assert {"plan.json", "report.html", "summary.csv", "server.log", "locust.log", "requests.csv"} <= {
            p.name for p in files}
        leaked = [str(p.relative_to(run_dir)) for p in files if secret.encode() in p.read_bytes()]
        assert leaked == [], f"the API key was written to {leaked}"
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_all(model)


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def do_GET(self):  # noqa: N802 - http.server's name
        self.seen.append((self.path, self.headers.get("Authorization", "")))
        body = b"vllm:num_requests_running 0\n" if self.path == "/metrics" else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_bearer_header_reaches_health_and_metrics_too(tmp_path, monkeypatch):
    """vLLM's --api-key guards /v1/* only (the e2e above checks that path); behind an authenticating
    proxy /health and /metrics need the key too, so the runner sends it there as well."""
    monkeypatch.setenv("MY_KEY", "sk-test-123")
    config = config_from_dict({"server": {"api_key_env": "MY_KEY"}})
    headers = ResolvedServer.resolve(config.server).headers
    assert headers == {"Authorization": "Bearer sk-test-123"}
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{httpd.server_address[1]}"
        assert RunningServer(base, tmp_path / "server.log", headers)._health_ok()
        Sampler(base + "/metrics", NoMemory(), tmp_path, headers=headers).sample_once()
    finally:
        httpd.shutdown()
    assert ("/health", "Bearer sk-test-123") in _Recorder.seen
    assert ("/metrics", "Bearer sk-test-123") in _Recorder.seen
    assert os.environ["MY_KEY"] not in (tmp_path / "server_metrics.csv").read_text()
