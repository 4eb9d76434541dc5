"""The live view and the load, for real: the simulated vLLM server requiring an API key, Locust started with the
runner's own argv and environment (web UI, the key, the sweep's token), and a capture server standing for another
host. A page of another site, another local user without the token, and a form naming another host all fail to
reach it or to move its load; the key reaches the server the life started and nothing else. And the load follows no
redirect with the key."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace

import pytest
from fault_kit import stop_group, wait_for

from lookahead_runner.contracts.auth import LIVE_TOKEN_ENV, LOAD_KEY_ENV
from lookahead_runner.run.life.load import locust_argv
from lookahead_runner.run.life.server import free_port

pytestmark = pytest.mark.e2e

KEY = "sk-LIVE-SECRET-123456"
TOKEN = "tok-live-view-0123456789"
EVIL = "https://evil.example"
SPEC = json.dumps({"method": "draft_model", "model": "d", "num_speculative_tokens": 2})
READY_S = 60.0
LOAD = SimpleNamespace(stages=[SimpleNamespace(users=2, duration_s=40.0)], prompt_tokens=32, output_tokens=16,
                       temperature=0.0, request_timeout_s=30.0, processes=1, locust_extra_args=[])


class _Capture(BaseHTTPRequestHandler):
    """Another host: records what reaches it, answers as a vLLM would; with `redirect_to`, redirects every request."""

    seen: list = []
    redirect_to = ""

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        if self.redirect_to:
            self.send_response(302)
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = b"vllm:num_requests_running 0\n" if self.path == "/metrics" else json.dumps(
            {"data": [{"id": "sim-model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 - http.server's names

    def log_message(self, *args):
        pass


def _serve(redirect_to: str = ""):
    handler = type("Capture", (_Capture,), {"seen": [], "redirect_to": redirect_to})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, handler, f"http://127.0.0.1:{httpd.server_address[1]}"


def _call(url: str, form: dict | None = None, headers: dict | None = None) -> int:
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers or {}), timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:  # nothing listening yet
        return 0


def _ok_rows(path) -> int:
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    if not lines:
        return 0
    ok = lines[0].split(",").index("ok")
    return sum(1 for line in lines[1:] if line.split(",")[ok] in ("1", "True"))


@pytest.fixture
def capture():
    httpd, handler, url = _serve()
    yield handler, url
    httpd.shutdown()


def test_the_live_view_refuses_other_sites_and_other_users_and_the_key_reaches_only_the_life_s_server(tmp_path, capture):
    seen, capture_url = capture
    server_port, web_port = free_port("127.0.0.1"), free_port("127.0.0.1")
    server_url, web = f"http://127.0.0.1:{server_port}", f"http://127.0.0.1:{web_port}"
    started = []
    try:
        with open(tmp_path / "sim.log", "wb") as log:
            started.append(subprocess.Popen(
                [sys.executable, "-m", "lookahead_runner.sim", "serve", "sim-model", "--port", str(server_port),
                 "--speculative-config", SPEC, "--api-key", KEY], stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True))
        wait_for(lambda: _call(server_url + "/health") == 200, READY_S, "the simulated server")
        argv = locust_argv(server_url, tmp_path, "sim-model", LOAD, setting_name="k0/r0", web_port=web_port)
        with open(tmp_path / "locust.log", "wb") as log:
            started.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=os.environ | {LOAD_KEY_ENV: KEY, LIVE_TOKEN_ENV: TOKEN},
                                            start_new_session=True))
        wait_for(lambda: _call(f"{web}/?tab=lookahead&token={TOKEN}") == 200, READY_S, "Locust's web UI")
        wait_for(lambda: _ok_rows(tmp_path / "requests.csv") > 0, READY_S, "requests the server accepted (the key)")

        form = {"user_count": 2, "spawn_rate": 2, "host": capture_url}
        answers = {"a page of another site": _call(web + "/swarm", form, {"Origin": EVIL}),
                   "another local user, without the token": _call(web + "/swarm", form),
                   "the user, naming another host": _call(f"{web}/swarm?token={TOKEN}", form),
                   "a stop without the token": _call(web + "/stop", {}),
                   "the stats without the token": _call(web + "/stats/requests")}
        time.sleep(3.0)  # three scrapes of the live view, and the load's requests, after the attempts
        assert seen.seen == [], "another host was reached"
        assert answers == dict.fromkeys(answers, 403)
        answer = urllib.request.urlopen(urllib.request.Request(f"{web}/lookahead/life.json?token={TOKEN}",
                                                               headers={"Origin": web}), timeout=10)
        assert answer.status == 200 and "Access-Control-Allow-Origin" not in answer.headers
        rows = _ok_rows(tmp_path / "requests.csv")
        wait_for(lambda: _ok_rows(tmp_path / "requests.csv") > rows, READY_S, "the load still running")
    finally:
        for process in reversed(started):
            stop_group(process)
    assert KEY not in (tmp_path / "locust.log").read_text()


def test_the_load_follows_no_redirect_with_the_key(tmp_path, capture):
    """Every request of the load (no --model given: it asks /v1/models first) meets a redirect to another host:
    none of them takes the key there."""
    seen, capture_url = capture
    httpd, redirecting, server_url = _serve(redirect_to=capture_url)
    load = SimpleNamespace(**{**vars(LOAD), "stages": [SimpleNamespace(users=2, duration_s=3.0)]})
    try:
        done = subprocess.run(locust_argv(server_url, tmp_path, "", load), env=os.environ | {LOAD_KEY_ENV: KEY},
                              capture_output=True, text=True, timeout=120)
    finally:
        httpd.shutdown()
    assert {"/v1/models", "/v1/completions"} <= {path for _, path, _ in redirecting.seen}, done.stderr[-2000:]
    assert all(auth == f"Bearer {KEY}" for _, _, auth in redirecting.seen)  # the server itself gets it
    assert [(method, path) for method, path, auth in seen.seen if auth] == [], "the key followed a redirect"
