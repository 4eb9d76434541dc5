"""sse.scan_chunk, the per-position read of vLLM's compact chunks, must agree with the full JSON parse
on every line it accepts, and hand everything else (errors, other spacing, cut lines) to that parse."""
from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lookahead_runner.sim.protocol import ChunkWriter
from lookahead_runner.workload.sse import parse_sse_line, scan_chunk

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "stream-sample.txt"  # real vLLM 0.32 output


def full(line: bytes) -> tuple:
    chunk = parse_sse_line(line)
    usage = chunk.usage
    return (chunk.has_choices, bool(chunk.text), None if usage is None else usage.completion_tokens,
            None if usage is None else usage.prompt_tokens)


def test_real_vllm_stream_reads_the_same_by_position():
    lines = [line for line in FIXTURE.read_bytes().split(b"\n") if line.startswith(b"data: {")]
    assert len(lines) == 4
    for line in lines:
        assert scan_chunk(line) == full(line), line
    assert scan_chunk(lines[-1]) == (False, False, 8, 8)  # the usage chunk, with nested metrics after it
    assert scan_chunk(b"data: [DONE]") is None


def test_simulator_chunks_read_the_same_and_a_garbled_one_is_left_to_the_parser():
    writer = ChunkWriter("cmpl-1", 1_700_000_000, "sim/llama")
    content = writer.content(" a \"b\" {c}", None, {"prompt_tokens": 128, "total_tokens": 131, "completion_tokens": 3})
    usage = writer.final_usage({"prompt_tokens": 128, "total_tokens": 192, "completion_tokens": 64}, "fp", None)
    for raw in (content, usage, writer.content("", "length")):
        line = raw.rstrip(b"\n")
        assert scan_chunk(line) == full(line)
    assert scan_chunk(writer.garbled().rstrip(b"\n")) is None
    assert scan_chunk(content.rstrip(b"\n"), want_prompt=False) == (True, True, 3, None)


def test_error_chunks_and_other_spellings_go_to_the_full_parse():
    for line in (b'data: {"error":{"object":"error","message":"engine dead","code":500}}',
                 b'data: {"object":"error","message":"too long","code":400}',
                 b'data: {"choices": [{"text": "a"}], "usage": {"completion_tokens": 1}}',  # spaces
                 b'data: {"choices":[{"index":0,"text":"a"}],"usage":{"completion_tokens":1',  # cut short
                 b'data: {"choices":[{"index":0,"text":"a"}],"usage":{"completion_tokens":"1"}}'):
        assert scan_chunk(line) is None, line


PIECES = list('ab "{}[]:,\\\n\t\u00e9\U0001f600') + ['"completion_tokens":', '"text":""', '"choices":[]', '"usage":null']
TEXT = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(st.none(), TEXT), usage=st.one_of(st.none(), st.tuples(st.integers(0, 10**6),
                                                                           st.integers(0, 10**6))),
       choices=st.booleans(), usage_null=st.booleans())
def test_any_compact_chunk_reads_the_same_by_position(text, usage, choices, usage_null):
    body: dict = {"id": "cmpl-x", "object": "text_completion", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "text": text, "logprobs": None, "finish_reason": None}] if choices else []
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "total_tokens": sum(usage), "completion_tokens": usage[1]}
    elif usage_null:
        body["usage"] = None
    line = b"data: " + json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    scanned = scan_chunk(line)
    assert scanned is None or scanned == full(line)
    if usage is not None and "\\" not in (text or "") and '"' not in (text or ""):
        assert scanned is not None  # the plain cases take the fast path
