"""The pure parts of one request: prompt ids, payload, failure classification and its requests.csv record."""

from __future__ import annotations

import random
import socket

from lookahead_runner.contracts.auth import bearer_header
from lookahead_runner.contracts.records import REQUEST_COLUMNS
from lookahead_runner.workload.prompt import prompt_token_ids
from lookahead_runner.workload.request import (
    StreamFailure,
    completion_payload,
    to_record,
    transport_failure,
)
from lookahead_runner.workload.sse import DONE, Chunk, Usage
from lookahead_runner.workload.timeline import TokenTimeline


def test_prompt_has_exactly_the_asked_tokens_and_a_unique_head():
    rng = random.Random(7)
    for count in (1, 3, 4, 5, 128, 4096):
        ids = prompt_token_ids(count, rng)
        assert len(ids) == count
        assert all(100 <= i < 1100 for i in ids)
    heads = {tuple(prompt_token_ids(128, rng)[:4]) for _ in range(200)}
    assert len(heads) == 200  # no two prompts share a prefix-cache block


def test_payload_asks_for_a_fixed_length_stream_with_usage_on_every_chunk():
    payload = completion_payload("m", [1, 2, 3], 64, 0.0)
    assert payload == {
        "model": "m", "prompt": [1, 2, 3], "max_tokens": 64, "min_tokens": 64, "ignore_eos": True,
        "temperature": 0.0, "top_p": 1.0, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }


def test_payload_carries_sampling_options_and_text_prompts():
    payload = completion_payload("m", "Passage 00000001:\nsome text", 8, 0.7, top_p=0.9, seed=42)
    assert payload["prompt"] == "Passage 00000001:\nsome text"
    assert (payload["temperature"], payload["top_p"], payload["seed"]) == (0.7, 0.9, 42)
    assert "seed" not in completion_payload("m", [1], 8, 0.7)


def test_auth_header_only_with_a_key():
    assert bearer_header("") == {}
    assert bearer_header("sk-1") == {"Authorization": "Bearer sk-1"}


class RetriesExceeded(ConnectionError):
    """Shaped like geventhttpclient's: the real error sits in .original."""

    def __init__(self, original: BaseException) -> None:
        super().__init__("retries exceeded")
        self.original = original


def test_transport_failures_are_classified():
    assert transport_failure(socket.timeout("timed out"), mid_stream=True).reason == "timeout"
    assert transport_failure(RetriesExceeded(TimeoutError()), mid_stream=False).reason == "timeout"
    assert transport_failure(ConnectionResetError(104, "reset"), mid_stream=True).reason == "disconnect mid-stream"
    refused = transport_failure(ConnectionRefusedError(111, "Connection refused"), mid_stream=False)
    assert refused.reason == "connection error: ConnectionRefusedError"
    assert "Connection refused" in str(refused)


def test_failure_text_keeps_detail_for_the_csv_only():
    failure = StreamFailure("short output (completion_tokens != 64)", "12 tokens, 4 chunks")
    assert failure.reason == "short output (completion_tokens != 64)"
    assert str(failure) == "short output (completion_tokens != 64) (12 tokens, 4 chunks)"
    assert str(StreamFailure("missing usage")) == "missing usage"


def test_record_turns_offsets_into_unix_times():
    timeline = TokenTimeline()
    timeline.add(Chunk(text="a", has_choices=True, usage=Usage(8, 1)), 0.050)
    timeline.add(Chunk(text="b c", has_choices=True, usage=Usage(8, 3)), 0.070)
    timeline.add(DONE, 0.071)
    record = to_record(2, 32, 1000.0, timeline.result(0.071), "", 1.5, "host:12", 37.5)
    row = dict(zip(REQUEST_COLUMNS, record.as_row()))
    assert (row["client"], row["client_cpu_pct"]) == ("host:12", "37.5")
    assert (row["stage"], row["users"], row["ok"], row["error"]) == ("2", "32", "1", "")
    assert float(row["t_first_token_s"]) == 1000.05
    assert float(row["t_done_s"]) == 1000.071
    assert float(row["ttft_ms"]) < float(row["e2e_ms"])
    assert (row["prompt_tokens"], row["output_tokens"], row["chunks"], row["lag_p99_ms"]) == ("8", "3", "2", "1.5")

    cut = to_record(2, 32, 1000.0, TokenTimeline().result(0.01), "cut", None)
    row = dict(zip(REQUEST_COLUMNS, cut.as_row()))
    assert (row["ok"], row["error"], row["output_tokens"]) == ("0", "cut", "0")
    assert row["t_first_token_s"] == row["ttft_ms"] == ""
