"""The chat endpoint on the client's side (issue 28): its config and Locust options, the request it sends, how a
chat stream is read (the role-only opening chunk is no token and does not stop TTFT) and how a chat prompt is
calibrated through /tokenize with `messages`. The stream read is checked on real vLLM 0.32 output
(tests/fixtures/chat-stream-sample.txt: tiny-target's chat template, continuous usage)."""
from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lookahead_runner.config.loading import config_from_dict
from lookahead_runner.config.strict import ConfigError
from lookahead_runner.run.life.load import locust_argv
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.prompt import (METHOD_TEXT, METHOD_TOKENIZE, CalibrationFailed, calibrate_chat,
                                              plan_prompt, tokenize_body)
from lookahead_runner.workload.request import chat_payload, completion_payload
from lookahead_runner.workload.sse import DONE, parse_sse_line, scan_chat_chunk, scan_chunk
from lookahead_runner.workload.timeline import TokenTimeline, judge

CHAT_FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "chat-stream-sample.txt"


def data_lines(path: Path) -> list[bytes]:
    return [line for line in path.read_bytes().split(b"\n") if line.startswith(b"data: ")]


def full(line: bytes) -> tuple:
    chunk = parse_sse_line(line)
    usage = chunk.usage
    return (chunk.has_choices, bool(chunk.text), None if usage is None else usage.completion_tokens,
            None if usage is None else usage.prompt_tokens)


# --- reading a chat stream --------------------------------------------------------------------------------------


def test_real_chat_stream_reads_the_same_by_position_and_the_role_chunk_is_no_token():
    lines = [line for line in data_lines(CHAT_FIXTURE) if line != b"data: [DONE]"]
    assert len(lines) == 6
    for line in lines:
        assert scan_chat_chunk(line) is not None, line  # every real chunk takes the fast path
        assert scan_chat_chunk(line) == full(line), line
    assert scan_chat_chunk(lines[0]) == (True, False, 0, 30)  # role only: choices, no text, 0 tokens
    assert scan_chat_chunk(lines[1]) == (True, True, 1, 30)
    assert scan_chat_chunk(lines[-1]) == (False, False, 4, 30)  # the usage-only chunk
    assert scan_chunk(lines[1]) is None  # the completions scanner does not mistake a chat chunk for its own


def test_the_role_chunk_neither_counts_nor_stops_ttft():
    """A role chunk that arrives long before the first content (a queued request) leaves TTFT at the content."""
    lines = [line for line in data_lines(CHAT_FIXTURE)]
    times = [0.100, 0.500, 0.530, 0.560, 0.590, 0.591, 0.592]
    timeline = TokenTimeline()
    for line, t in zip(lines, times):
        parts = scan_chat_chunk(line, timeline.prompt_tokens is None)
        if parts is not None:
            timeline.add_parts(t, *parts)
        else:
            timeline.add(parse_sse_line(line), t)
    result = timeline.result(0.592)
    assert result.ttft_ms == pytest.approx(500.0)
    assert result.output_tokens == 4 and result.prompt_tokens == 30 and result.done
    assert result.itl_samples_s == pytest.approx([0.030, 0.030, 0.030])  # the 3 gaps after the first token
    assert result.tpot_ms == pytest.approx((592 - 500) / 3)
    assert judge(result, 4, 30) is None
    assert judge(result, 4, 31) == "wrong prompt length (prompt_tokens != 31)"


def test_without_usage_on_every_chunk_a_content_delta_is_one_token_and_the_role_chunk_none():
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    role = head + b'"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],' \
                  b'"prompt_token_ids":null,"prompt_text":null}'
    token = head + b'"delta":{"content":" a"},"logprobs":null,"finish_reason":null,"token_ids":null}]}'
    timeline = TokenTimeline()
    for line, t in ((role, 0.2), (token, 0.7), (token, 0.8)):
        assert scan_chat_chunk(line) == full(line)
        timeline.add_parts(t, *scan_chat_chunk(line))
    timeline.add(DONE, 0.81)
    result = timeline.result(0.81)
    assert result.first_token_s == 0.7 and result.output_tokens == 2 and not result.usage_seen


def test_reasoning_and_tool_deltas_go_to_the_json_path_where_reasoning_is_a_token():
    head = b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    reasoning = head + b'"delta":{"reasoning":"hmm"},"logprobs":null,"finish_reason":null}]}'
    tool = head + b'"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]},"finish_reason":null}]}'
    empty = head + b'"delta":{},"logprobs":null,"finish_reason":"stop"}]}'
    assert scan_chat_chunk(reasoning) is None and scan_chat_chunk(tool) is None
    assert parse_sse_line(reasoning).text == "hmm" and parse_sse_line(tool).text == ""
    assert scan_chat_chunk(empty) == (True, False, None, None) == full(empty)
    with pytest.raises(ValueError, match="'content' is not a string"):
        parse_sse_line(head + b'"delta":{"content":5}}]}')


# --- the request ------------------------------------------------------------------------------------------------


def test_chat_payload_is_the_completion_request_as_one_user_message():
    raw = completion_payload("m", "Passage 1: text", 24, 0.0, 0.9, 7)
    chat = chat_payload("m", "Passage 1: text", 24, 0.0, 0.9, 7, {"enable_thinking": False})
    assert chat["messages"] == [{"role": "user", "content": "Passage 1: text"}]
    assert "prompt" not in chat and "max_tokens" not in chat and chat["max_completion_tokens"] == 24
    assert chat["chat_template_kwargs"] == {"enable_thinking": False}
    shared = ("model", "min_tokens", "ignore_eos", "temperature", "top_p", "seed", "stream", "stream_options")
    assert {k: chat[k] for k in shared} == {k: raw[k] for k in shared}
    assert chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert chat["min_tokens"] == 24 and chat["ignore_eos"] is True
    assert "chat_template_kwargs" not in chat_payload("m", "x", 2, 0.0)


def test_tokenize_body_counts_a_chat_message_with_the_generation_prompt_and_kwargs():
    assert tokenize_body("m", "hi") == {"model": "m", "prompt": "hi"}
    assert tokenize_body("m", "hi", chat=True, template_kwargs={"enable_thinking": False}) == {
        "model": "m", "messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True,
        "chat_template_kwargs": {"enable_thinking": False}}


# --- calibration through the chat template ----------------------------------------------------------------------


def chat_counter(frame: int):
    """A word tokenizer under a chat template of `frame` tokens (the simulator's kind)."""
    calls = []

    def count(text: str) -> int:
        calls.append(text)
        return frame + len(text.split())

    return count, calls


def test_a_chat_prompt_is_calibrated_to_exactly_p_tokens_template_included():
    count, _ = chat_counter(frame=7)
    plan = plan_prompt(count, 64, "", random.Random(1), chat=True)
    assert plan.method == METHOD_TOKENIZE and plan.chat and not plan.note
    for seed in range(5):
        assert count(plan.make(random.Random(seed))) == 64
    assert plan.describe()["prompt_chat_template"] is True


def test_a_template_that_leaves_no_room_falls_back_to_uncalibrated_text_with_the_reason():
    count, _ = chat_counter(frame=40)
    with pytest.raises(CalibrationFailed, match="the chat template alone makes 40 prompt tokens"):
        calibrate_chat(count, "some words here", 32, random.Random(0))
    plan = plan_prompt(count, 32, "", random.Random(0), chat=True)
    assert plan.method == METHOD_TEXT and plan.chat and "alone makes 40" in plan.note
    assert isinstance(plan.make(random.Random(0)), str)  # never token ids: a chat message is text


# --- config and options -----------------------------------------------------------------------------------------


def test_endpoint_defaults_to_completions_and_chat_takes_template_kwargs():
    assert config_from_dict({}).load.endpoint == "completions"
    load = config_from_dict({"load": {"endpoint": "chat", "chat_template_kwargs": {"enable_thinking": False}}}).load
    assert load.endpoint == "chat" and load.chat_template_kwargs == {"enable_thinking": False}


@pytest.mark.parametrize("load, message", [
    ({"endpoint": "responses"}, "load.endpoint: Input should be 'completions' or 'chat'"),
    ({"chat_template_kwargs": {"enable_thinking": False}},
     'load.chat_template_kwargs: only a chat request has a chat template; set load.endpoint = "chat"'),
])
def test_a_bad_endpoint_setting_is_one_line_naming_the_field(load, message):
    with pytest.raises(ConfigError) as err:
        config_from_dict({"load": load})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_runner_passes_the_endpoint_and_kwargs_to_locust_as_arguments(tmp_path):
    load = config_from_dict({"load": {"endpoint": "chat", "chat_template_kwargs": {"enable_thinking": False}}}).load
    argv = locust_argv("http://127.0.0.1:8000", tmp_path, "m", load.model_copy(update={"processes": 1}))
    at = argv.index("--endpoint")
    assert argv[at + 1] == "chat"
    assert json.loads(argv[argv.index("--chat-template-kwargs") + 1]) == {"enable_thinking": False}
    plain = locust_argv("http://127.0.0.1:8000", tmp_path, "m", config_from_dict({}).load.model_copy(
        update={"processes": 1}))
    assert plain[plain.index("--endpoint") + 1] == "completions" and "--chat-template-kwargs" not in plain


def test_locust_options_check_the_endpoint_and_the_kwargs_json():
    settings = ScenarioSettings.from_options(SimpleNamespace(endpoint="chat",
                                                             chat_template_kwargs='{"enable_thinking": false}'))
    assert settings.chat and settings.template_kwargs == {"enable_thinking": False}
    assert not ScenarioSettings().chat and ScenarioSettings().template_kwargs == {}
    for options, message in (({"endpoint": "chats"}, "--endpoint: must be one of completions, chat"),
                             ({"endpoint": "chat", "chat_template_kwargs": "{bad"}, "--chat-template-kwargs: not JSON"),
                             ({"endpoint": "chat", "chat_template_kwargs": "[1]"}, "not a JSON object"),
                             ({"chat_template_kwargs": '{"a": 1}'}, "only with --endpoint chat")):
        with pytest.raises(ValueError, match=message):
            ScenarioSettings.from_options(SimpleNamespace(**options))


PIECES = list('ab "{}[]:,\\\n\t\u00e9\U0001f600') + ['"completion_tokens":', '"content":""', '"role":"assistant"',
                                                      '"choices":[]', '"usage":null', '"delta":{']
TEXT = st.lists(st.sampled_from(PIECES), max_size=12).map("".join)


@settings(max_examples=400, deadline=None)
@given(content=st.one_of(st.none(), TEXT), role=st.booleans(), reasoning=st.one_of(st.none(), TEXT),
       usage=st.one_of(st.none(), st.tuples(st.integers(0, 10**6), st.integers(0, 10**6))), choices=st.booleans())
def test_any_compact_chat_chunk_reads_the_same_by_position(content, role, reasoning, usage, choices):
    delta: dict = {}
    if role:
        delta["role"] = "assistant"
    if content is not None:
        delta["content"] = content
    if reasoning is not None:
        delta["reasoning"] = reasoning
    body: dict = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    body["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}] if choices else []
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage[0], "total_tokens": sum(usage), "completion_tokens": usage[1]}
    line = b"data: " + json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    scanned = scan_chat_chunk(line)
    assert scanned is None or scanned == full(line)
    plain = reasoning is None and not any(c in (content or "") for c in '"\\')
    if usage is not None and plain and (not role or content == ""):
        assert scanned is not None  # vLLM's own shapes (role + empty content, content alone) take the fast path
