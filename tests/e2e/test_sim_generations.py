"""Each emulated vLLM generation as the runner meets it: probed as a process, started with the argv
the runner's knob writes for it, scraped and parsed by the runner's telemetry."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from lookahead_runner.telemetry.prometheus import parse
from lookahead_runner.vllm.knob import KnobError, Setting, check_raw_mode, server_argv
from lookahead_runner.vllm.metrics import POSITION_SIGNAL
from lookahead_runner.vllm.probe import run_probe
from test_sim_server import MODEL, free_port, get, stop, stream_completion, wait_healthy

pytestmark = pytest.mark.e2e

COMMON = {"running", "waiting", "kv_usage", "preemptions_total", "prompt_tokens_total", "generation_tokens_total",
          "requests_success_total", "kv_pool_tokens"}
CASES = {  # version: (generation, spec_style, lookahead_flag, method, spec signals after one request)
    "0.6.6": ("v0", "legacy-flags", "effective", "draft_model",
              {"spec_draft_tokens_total", "spec_accepted_total", "spec_emitted_total"}),
    "0.10.2": ("v1", "config-json", "ignored", "eagle",
               {"spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_total"}),
    "0.32.0": ("v1-no-slots", "shorthand", "absent", "draft_model",
               {"spec_drafts_total", "spec_draft_tokens_total", "spec_accepted_total"}),
}

SCHEDULE = {"0.6.6": (False, None), "0.10.2": (False, None), "0.32.0": (True, "list")}  # asked, not looked up


def sim_command(version: str) -> list[str]:
    return [sys.executable, "-m", "lookahead_runner.sim", "--sim-version", version]


def start_argv(tmp_path: Path, argv: list[str]):
    import os
    import subprocess

    log_path = tmp_path / "server.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                env=os.environ | {"PYTHONUNBUFFERED": "1"}, start_new_session=True)
    return proc, log_path


@pytest.mark.parametrize("version", sorted(CASES))
def test_probe_knob_serve_and_scrape(tmp_path, version):
    generation, spec_style, lookahead_flag, method, spec_signals = CASES[version]
    caps = run_probe(sim_command(version), timeout_s=60)
    assert (caps.version, caps.generation, caps.spec_style, caps.lookahead_flag) == (
        version, generation, spec_style, lookahead_flag)
    schedule = caps.schedule_capability
    assert (schedule.supported, schedule.form, schedule.source) == (*SCHEDULE[version], "asked"), schedule.detail
    port = free_port()
    argv = server_argv(caps, sim_command(version), MODEL, "127.0.0.1", port,
                       ["--max-num-seqs", "32", "--sim-set", "startup_s=0.3"], Setting(k=3), method, "sim/llama-68m")
    proc, log_path = start_argv(tmp_path, argv)
    try:
        wait_healthy(proc, port, log_path)
        events = stream_completion(port, 24)
        assert events[-1] == "[DONE]" and events[-2]["usage"]["completion_tokens"] == 24
        status, text = get(port, "/metrics")
        assert status == 200
        signals = parse(text.decode())
        # the accepted tokens per draft position are checked in test_sim_metrics / test_prometheus
        assert {s for s in signals if not s.startswith(POSITION_SIGNAL)} == COMMON | spec_signals
        assert signals["generation_tokens_total"] == 24
        assert json.loads(get(port, "/version")[1])["version"] == version
    finally:
        stop(proc)
    log = log_path.read_text()
    assert ("# GPU blocks:" if generation == "v0" else "GPU KV cache size:") in log


def test_raw_slots_sweep_runs_on_v0_and_is_refused_elsewhere(tmp_path):
    for version in ("0.10.2", "0.32.0"):
        with pytest.raises(KnobError):
            check_raw_mode(run_probe(sim_command(version), timeout_s=60))
    caps = run_probe(sim_command("0.6.6"), timeout_s=60)
    check_raw_mode(caps)
    port = free_port()
    argv = server_argv(caps, sim_command("0.6.6"), MODEL, "127.0.0.1", port, ["--sim-set", "startup_s=0.3"],
                       Setting(k=64, raw_slots=True), "draft_model", "sim/llama-68m")
    assert argv[-2:] == ["--num-lookahead-slots", "64"]
    proc, log_path = start_argv(tmp_path, argv)
    try:
        wait_healthy(proc, port, log_path)
        assert stream_completion(port, 8)[-1] == "[DONE]"
    finally:
        stop(proc)
    assert "num_lookahead_slots=64" in log_path.read_text()


def test_the_environment_variable_selects_the_profile_too(tmp_path, monkeypatch):
    monkeypatch.setenv("LOOKAHEAD_SIM_VLLM_VERSION", "0.6.6")
    caps = run_probe([sys.executable, "-m", "lookahead_runner.sim"], timeout_s=60)
    assert (caps.version, caps.generation) == ("0.6.6", "v0")
    assert (caps.schedule_capability.supported, caps.schedule_capability.source) == (False, "asked")
    t0 = time.monotonic()
    proc, log_path = start_argv(tmp_path, [sys.executable, "-m", "lookahead_runner.sim", "serve", MODEL,
                                           "--speculative-config", "{}", "--port", str(free_port())])
    try:
        assert proc.wait(30) == 2                       # V0 has no --speculative-config
    finally:
        stop(proc)
    assert "unrecognized arguments: --speculative-config" in log_path.read_text()
    assert time.monotonic() - t0 < 30
