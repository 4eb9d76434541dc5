"""SSE parsing against a real vLLM 0.32 stream (fixtures stream-sample.txt) and hand-made edge cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lookahead_runner.workload.sse import DONE, Chunk, MalformedChunk, Usage, parse_sse_line


@pytest.fixture
def fixture_lines(fixtures_dir: Path) -> list[bytes]:
    return (fixtures_dir / "stream-sample.txt").read_bytes().splitlines(keepends=True)


def _events(lines: list[bytes]) -> list[Chunk]:
    return [event for event in map(parse_sse_line, lines) if event is not None]


def test_fixture_stream_parses_to_three_text_chunks_a_usage_chunk_and_done(fixture_lines):
    events = _events(fixture_lines)

    assert [e.text for e in events[:3]] == ["]", "]] hefaokok", "okok"]
    assert all(e.has_choices and e.usage is None for e in events[:3])
    assert [e.finish_reason for e in events[:3]] == [None, None, "length"]
    usage_chunk = events[3]
    assert not usage_chunk.has_choices
    assert usage_chunk.usage == Usage(prompt_tokens=8, completion_tokens=8)
    assert events[4] is DONE
    assert len(events) == 5


def test_blank_comment_and_non_data_lines_carry_nothing():
    for line in (b"\n", b"", b": ping\n", b"event: message\n", b"id: 3\n", "\r\n"):
        assert parse_sse_line(line) is None


def test_done_accepts_str_and_missing_space():
    assert parse_sse_line("data: [DONE]\n") is DONE
    assert parse_sse_line(b"data:[DONE]\r\n") is DONE


def test_per_chunk_usage_of_continuous_usage_stats():
    body = {"choices": [{"index": 0, "text": " a b c", "finish_reason": None}],
            "usage": {"prompt_tokens": 128, "total_tokens": 132, "completion_tokens": 4}}
    chunk = parse_sse_line(b"data: " + json.dumps(body).encode() + b"\n")
    assert chunk == Chunk(text=" a b c", has_choices=True, usage=Usage(128, 4))


def test_usage_chunk_with_empty_choices_is_not_indexed():
    chunk = parse_sse_line(b'data: {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}')
    assert chunk is not None and not chunk.has_choices and chunk.text == ""


def test_error_chunk_after_headers():
    new_style = parse_sse_line(b'data: {"error": {"message": "engine dead", "type": "Internal", "code": 500}}')
    old_style = parse_sse_line(b'data: {"object": "error", "message": "too long", "code": 400}')
    assert new_style is not None and new_style.error == "engine dead"
    assert old_style is not None and old_style.error == "too long"


@pytest.mark.parametrize(
    "line",
    [
        b"data: {not json",
        b"data: [1, 2]",
        b'data: {"choices": {"text": "x"}}',
        b'data: {"choices": [{"text": 5}]}',
        b'data: {"choices": [], "usage": {"prompt_tokens": 1}}',
    ],
)
def test_malformed_chunks_raise(line):
    with pytest.raises(MalformedChunk):
        parse_sse_line(line)


def test_malformed_message_is_a_short_excerpt():
    with pytest.raises(MalformedChunk) as info:
        parse_sse_line(b"data: {" + b"x" * 500)
    assert len(str(info.value)) < 120


@pytest.mark.parametrize("body, ids", [
    (b'{"object": "list", "data": [{"id": "served", "object": "model"}, {"id": "lora-a"}]}', ["served", "lora-a"]),
    (b"<html>a web page</html>", []), (b"[]", []), (b'{"data": []}', []), (b'{"data": "m"}', []),
    (b'{"data": [{"id": null}, "m", {"id": 7}, {"id": " "}, {"id": "x"}]}', ["x"]),
])
def test_the_models_a_v1_models_answer_lists_are_names_only(body, ids):
    """One reading of GET /v1/models for the runner (run/life/server_check.py) and the standalone scenario
    (workload/scenario.first_model_id): a page, a list that is not vLLM's, an id that is no name list none."""
    from lookahead_runner.workload.sse import model_ids

    assert model_ids(body) == ids
