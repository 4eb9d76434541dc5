"""A per-batch-size schedule on the simulated server, started with the argv the runner renders: it starts,
answers, and its spec-decode counters count the K each step used; a schedule vLLM refuses stops the start."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from lookahead_runner.vllm.schedule import Schedule, render_argv
from test_sim_server import counters, free_port, start, stop, stream_completion, wait_healthy

pytestmark = pytest.mark.e2e

KEY = "num_speculative_tokens_per_batch_size"
SHORTHAND = {k: ["--spec-method", "draft_model", "--spec-tokens", str(k), "--spec-model", "sim/llama-68m"]
             for k in (1, 4)}


def test_schedule_serves_and_the_counters_count_the_k_used(tmp_path):
    argv = render_argv(Schedule.from_ranges([[1, 2, 4], [3, 64, 1]]), SHORTHAND)
    port = free_port()
    proc, log_path = start(tmp_path, "--host", "127.0.0.1", "--port", str(port), *argv,
                           "--sim-scenario", "roomy-kv", "--sim-set", "startup_s=0.3",
                           "--per-request-spec-decode-metrics", "summary")
    lengths = [16, 24, 32, 40, 48, 96]            # ends one by one: the batch falls from 6 through 2 to 1
    try:
        wait_healthy(proc, port, log_path)
        before = counters(port)
        with ThreadPoolExecutor(len(lengths)) as pool:
            streams = list(pool.map(lambda n: stream_completion(port, n), lengths))
        after = counters(port)
    finally:
        stop(proc)
    finals = [events[-2] for events in streams]
    assert [f["usage"]["completion_tokens"] for f in finals] == lengths
    spec = [f["metrics"]["speculative_decoding"] for f in finals]

    def delta(name: str) -> float:
        return after[f"vllm:{name}_total"] - before[f"vllm:{name}_total"]

    assert delta("generation_tokens") == sum(lengths)
    assert delta("spec_decode_num_draft_tokens") == sum(s["num_draft_tokens"] for s in spec)
    assert delta("spec_decode_num_accepted_tokens") == sum(s["num_accepted_draft_tokens"] for s in spec)
    assert delta("spec_decode_num_drafts") == sum(s["num_spec_steps"] for s in spec)
    # both K ran: fewer draft tokens than 4 per draft, more than 1
    assert delta("spec_decode_num_drafts") < delta("spec_decode_num_draft_tokens") < 4 * delta("spec_decode_num_drafts")
    assert f"'{KEY}': [[1, 2, 4], [3, 64, 1]]" in log_path.read_text()  # the non-default args line


@pytest.mark.parametrize("value, message", [
    ([[2, 8, 4]], "ValueError: The first batch-size range must start at 1"),        # the scheduler's rule
    ({"1-8": 4}, "Input should be a valid list [type=list_type"),                    # pydantic's, on 0.32
])
def test_a_schedule_vllm_refuses_stops_the_start_with_its_message(tmp_path, value, message):
    spec = {"method": "draft_model", "model": "sim/llama-68m", "num_speculative_tokens": 4, KEY: value}
    proc, log_path = start(tmp_path, "--port", str(free_port()), "--speculative-config", json.dumps(spec),
                           "--sim-set", "startup_s=0.3")
    try:
        assert proc.wait(20) == 1
    finally:
        stop(proc)
    assert message in log_path.read_text()
