"""The API key goes to the server's own address only: every client of the runner and the load that sends it (the
/metrics scrape, /health, /v1/models, /tokenize, the warm-up and the checks) sends no Authorization header on to
wherever a redirect points, whether another port of the same host or another host. (The load's own requests and
its /v1/models, in a Locust process: tests/e2e/test_live_security.py.)"""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from lookahead_runner.contracts.auth import bearer_header
from lookahead_runner.run.life.life import answers
from lookahead_runner.run.life.server import RunningServer
from lookahead_runner.run.life.server_check import served_models
from lookahead_runner.telemetry.prometheus import scrape
from lookahead_runner.workload.prompt import tokenize_counter

KEY = "sk-LIVE-SECRET-123456"


class _Recorder(BaseHTTPRequestHandler):
    """Answers everything as a vLLM would; `redirect_to` (a class attribute): redirect every request there instead."""

    redirect_to = ""
    seen: list = []

    def _answer(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        self.seen.append((self.server.server_address[1], self.path, self.headers.get("Authorization", "")))
        if self.redirect_to:
            self.send_response(302)  # urllib follows it for a GET and, as a GET, for a POST
            self.send_header("Location", self.redirect_to + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = {"/metrics": b"vllm:num_requests_running 0\n",
                "/v1/models": json.dumps({"data": [{"id": "m"}]}).encode(),
                "/tokenize": json.dumps({"count": 3}).encode()}.get(self.path, b"{}")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 - http.server's names

    def log_message(self, *args):
        pass


def _serve(handler):
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture
def redirecting():
    """(the server's URL, which redirects everything; the capture's port, where it points)."""
    capture_handler = type("Capture", (_Recorder,), {"redirect_to": "", "seen": []})
    capture = _serve(capture_handler)
    server_handler = type("Server", (_Recorder,), {"redirect_to": f"http://127.0.0.1:{capture.server_address[1]}",
                                                   "seen": []})
    server = _serve(server_handler)
    yield f"http://127.0.0.1:{server.server_address[1]}", capture_handler, server_handler
    server.shutdown()
    capture.shutdown()


CLIENTS = {
    "metrics scrape": lambda url: scrape(url + "/metrics", 2.0, bearer_header(KEY)),
    "health": lambda url: RunningServer(url, None, bearer_header(KEY))._health_ok(),
    "served models": lambda url: served_models(url, bearer_header(KEY)),
    "tokenize": lambda url: tokenize_counter(url, "m", bearer_header(KEY))("some text"),
    "answers": lambda url: answers(url, "m", bearer_header(KEY), 2.0),
}


@pytest.mark.parametrize("client", CLIENTS)
def test_the_key_follows_no_redirect(redirecting, client):
    url, capture, server = redirecting
    CLIENTS[client](url)
    assert server.seen and server.seen[0][2] == f"Bearer {KEY}", "the server itself gets the key"
    assert capture.seen, "the redirect was followed (the test would prove nothing)"
    assert [auth for _, _, auth in capture.seen] == [""] * len(capture.seen), "the key followed the redirect"
