"""The simulator as its own process, started exactly like `vllm serve`."""
from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV

pytestmark = pytest.mark.e2e

MODEL = "sim/llama-3-8b"
SPEC = '{"method":"draft_model","model":"sim/llama-68m","num_speculative_tokens":4}'
READY_DEADLINE_S = 15.0


def free_port() -> int:
    """A port that was free a moment ago (another process may take it before the server binds)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    log_path = tmp_path / "server.log"
    env = os.environ | {SIM_GPU_FILE_ENV: str(tmp_path / "gpu.json"), "PYTHONUNBUFFERED": "1"}
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "lookahead_runner.sim", "serve", MODEL, *args],
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return proc, log_path


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def get(port: int, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def wait_healthy(proc: subprocess.Popen, port: int, log_path: Path) -> None:
    deadline = time.monotonic() + READY_DEADLINE_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"server exited {proc.returncode}:\n{log_path.read_text()[-2000:]}"
        try:
            if get(port, "/health")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"no /health within {READY_DEADLINE_S} s:\n{log_path.read_text()[-2000:]}")


def stream_completion(port: int, max_tokens: int) -> list:
    body = json.dumps({"model": MODEL, "prompt": "the keeper climbs the stairs at night", "max_tokens": max_tokens,
                       "ignore_eos": True, "temperature": 0.0, "stream": True,
                       "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        events = []
        for raw in response:
            line = raw.decode().strip()
            if line.startswith("data: "):
                payload = line[len("data: "):]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events
    finally:
        conn.close()


def counters(port: int) -> dict[str, float]:
    status, text = get(port, "/metrics")
    assert status == 200
    return {s.name: s.value for f in text_string_to_metric_families(text.decode()) for s in f.samples
            if s.name.startswith("vllm:") and s.name.endswith("_total") and "position" not in s.labels}


def test_serve_stream_metrics_and_sigterm(tmp_path):
    port = free_port()
    proc, log_path = start(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--speculative-config", SPEC,
                           "--sim-set", "startup_s=0.5")
    try:
        wait_healthy(proc, port, log_path)
        before = counters(port)
        events = stream_completion(port, 48)
        assert events[-1] == "[DONE]"
        content, final = events[:-2], events[-2]
        assert content and all(c["object"] == "text_completion" and c["model"] == MODEL for c in content)
        assert content[-1]["choices"][0]["finish_reason"] == "length"
        assert sum(len(c["choices"][0]["text"].split()) for c in content) == 48
        assert final["choices"] == [] and final["usage"]["completion_tokens"] == 48
        after = counters(port)
        assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 48
        assert after["vllm:spec_decode_num_drafts_total"] > before["vllm:spec_decode_num_drafts_total"]
        gpu = json.loads((tmp_path / "gpu.json").read_text())
        assert gpu["pid"] == proc.pid and 0 < gpu["used_mib"] <= gpu["total_mib"]

        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 0
        assert time.monotonic() - t0 < 3
        log = log_path.read_text()
        for line in ("GPU KV cache size:", "Maximum concurrency for", "Application startup complete.",
                     '"POST /v1/completions HTTP/1.1" 200 OK', "Shutting down"):
            assert line in log, line
    finally:
        stop(proc)


def test_no_room_for_the_kv_cache_fails_at_startup(tmp_path):
    proc, log_path = start(tmp_path, "--port", str(free_port()), "--speculative-config", SPEC,
                           "--gpu-memory-utilization", "0.7", "--sim-set", "startup_s=0.3")
    try:
        assert proc.wait(10) == 1
        assert "ValueError: No available memory for the cache blocks" in log_path.read_text()
    finally:
        stop(proc)


def test_version_help_and_unknown_flag():
    run = [sys.executable, "-m", "lookahead_runner.sim"]
    assert subprocess.run([*run, "--version"], capture_output=True, text=True, timeout=30).stdout.strip() == "0.32.0"
    help_all = subprocess.run([*run, "serve", "--help=all"], capture_output=True, text=True, timeout=30).stdout
    assert "--speculative-config" in help_all and "--num-lookahead-slots" not in help_all
    bad = subprocess.run([*run, "serve", MODEL, "--num-lookahead-slots", "4"], capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --num-lookahead-slots" in bad.stderr


def listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False


def test_fault_die_mid_run(tmp_path):
    port = free_port()
    proc, log_path = start(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--sim-set", "startup_s=0.3",
                           "--sim-fault", "die-after=0.5")
    try:
        wait_healthy(proc, port, log_path)
        assert proc.wait(10) == 1
        assert "EngineDeadError" in log_path.read_text()
    finally:
        stop(proc)


def test_fault_unresponsive_accepts_connections_and_never_answers(tmp_path):
    port = free_port()
    proc, log_path = start(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--sim-set", "startup_s=0.3",
                           "--sim-fault", "unresponsive-after=0")
    try:
        deadline = time.monotonic() + READY_DEADLINE_S
        while not listening(port):
            assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()[-2000:]
            time.sleep(0.1)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=0.5)
        with pytest.raises(TimeoutError):
            conn.request("GET", "/health")
            conn.getresponse()
        conn.close()
        assert proc.poll() is None
    finally:
        stop(proc)


def test_fault_hang_keeps_health_but_stalls_streams_and_slow_start_delays_readiness(tmp_path):
    port = free_port()
    t0 = time.monotonic()
    proc, log_path = start(tmp_path, "--host", "127.0.0.1", "--port", str(port), "--sim-fault", "slow-start=2",
                           "--sim-fault", "hang-after=0")
    try:
        wait_healthy(proc, port, log_path)
        assert time.monotonic() - t0 >= 2.0
        time.sleep(0.3)
        body = json.dumps({"model": MODEL, "prompt": "a b c", "max_tokens": 8, "stream": True})
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
        conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        response = conn.getresponse()
        assert response.status == 200
        with pytest.raises(TimeoutError):
            response.read(1)
        conn.close()
        assert get(port, "/health")[0] == 200
    finally:
        stop(proc)
