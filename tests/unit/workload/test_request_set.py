"""The user's request set (load.requests): reading JSONL and ShareGPT into typed requests, the one-line errors a bad
file gets at config load (exit 2, nothing started), and the per-user order every K and repeat sends."""
import json
import subprocess
import sys

import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.request import OutputCapture, chat_payload, set_payload, to_record
from lookahead_runner.workload.request_set import (RequestSetError, SetCursor, read_request_set, text_hash,
                                                   user_offset)
from lookahead_runner.workload.sse import parse_sse_line
from lookahead_runner.workload.timeline import StreamResult, judge


def write_lines(path, items):
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    return path


def two_categories(n=20):
    return ([{"prompt": f"write code {i}", "max_tokens": 40, "category": "code"} for i in range(n)]
            + [{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"hi {i}"}],
                "category": "chat"} for i in range(n)])


def test_jsonl_reads_prompts_and_messages_with_their_caps_and_categories(tmp_path):
    path = write_lines(tmp_path / "set.jsonl", two_categories() + [""])
    request_set = read_request_set(path)
    assert len(request_set) == 40 and request_set.categories == {"code": 20, "chat": 20} and request_set.has_chat
    first, chat = request_set.requests[0], request_set.requests[20]
    assert (first.index, first.prompt, first.messages, first.cap(), first.category) == (0, "write code 0", None, 40,
                                                                                         "code")
    assert chat.is_chat and chat.messages[1].role == "user" and chat.cap(99) == 99 and chat.line == 21
    assert chat.text == "be brief\nhi 0" and chat.content_words == 4


def test_sharegpt_conversations_become_chat_requests_up_to_the_last_human_turn(tmp_path):
    path = tmp_path / "share.json"
    path.write_text(json.dumps([
        {"conversations": [{"from": "system", "value": "sys"}, {"from": "human", "value": "q1"},
                           {"from": "gpt", "value": "a1"}, {"from": "human", "value": "q2"},
                           {"from": "gpt", "value": "a2"}]},
        {"conversations": [{"from": "gpt", "value": "no question"}]},
        {"conversations": [{"from": "human", "value": "only"}], "max_tokens": 7},
    ]))
    request_set = read_request_set(path)
    assert [[(m.role, m.content) for m in r.messages] for r in request_set.requests] == [
        [("system", "sys"), ("user", "q1"), ("assistant", "a1"), ("user", "q2")], [("user", "only")]]
    assert request_set.requests[1].max_tokens == 7 and request_set.requests[1].index == 1


@pytest.mark.parametrize("lines, expected", [
    (['{"prompt": "a"}', "{not json"], "set.jsonl: line 2 is not JSON"),
    (['{"prompt": "a"}', '{"text": "b"}'], "set.jsonl: line 2 is in no request format read here (its keys: text)"),
    (['{"prompt": "a", "messages": []}'], "set.jsonl: line 1 has both"),
    (['{"messages": [{"content": "x"}]}'], "set.jsonl: line 1: message 1 has no \"role\""),
    (['{"messages": [{"role": "robot", "content": "x"}]}'], "line 1: message 1 has role 'robot'"),
    (['{"prompt": "a", "max_tokens": 0}'], "line 1: \"max_tokens\" must be a whole number >= 1"),
    (['[1, 2]'], None),  # a JSON list: read as ShareGPT, whose items lack conversations
    (["", "  "], "the file is empty"),
])
def test_a_bad_file_gets_one_line_naming_the_file_and_the_line(tmp_path, lines, expected):
    path = write_lines(tmp_path / "set.jsonl", lines)
    with pytest.raises(RequestSetError) as err:
        read_request_set(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    assert (expected or "conversation 1 has no \"conversations\"") in message


def test_a_category_with_fewer_requests_than_a_window_needs_is_refused_at_its_first_line(tmp_path):
    items = two_categories(20) + [{"prompt": "x", "category": "rare"}] * 3
    path = write_lines(tmp_path / "set.jsonl", items)
    with pytest.raises(RequestSetError, match=r"line 41: category 'rare' has 3 request\(s\), fewer than the 20"):
        read_request_set(path)
    assert len(read_request_set(write_lines(tmp_path / "plain.jsonl", [{"prompt": "x"}] * 3))) == 3  # no categories


def test_a_category_named_as_the_whole_mix_is_refused_at_config_load(tmp_path):
    """The report and decision.json call every category together "the mix": a category of that name would have its
    figures overwritten by the mix's (its verdict "within the tie band of the mix's" gain, whatever it measured)."""
    items = [{"prompt": f"p {i}", "category": "code" if i < 20 else "the mix"} for i in range(40)]
    path = write_lines(tmp_path / "set.jsonl", items)
    with pytest.raises(ConfigError) as err:
        config_from_dict(config(tmp_path, requests=str(path)), "t.toml")
    assert str(err.value) == (f"t.toml: load.requests: {path}: line 21: category 'the mix' is the report's name for "
                              "every category together; rename it")


def test_every_user_walks_the_set_from_its_own_offset_the_same_in_every_life(tmp_path):
    request_set = read_request_set(write_lines(tmp_path / "s.jsonl", [{"prompt": f"p{i}"} for i in range(10)]))
    walks = []
    for _life in range(2):
        cursors = [SetCursor(request_set, u) for u in range(4)]
        walks.append([[(c.next()[0].index) for _ in range(12)] for c in cursors])
    assert walks[0] == walks[1]
    assert len({walk[0] for walk in walks[0]}) == 4  # users at once start on different requests
    first = walks[0][1]
    assert first[:10] == [(user_offset(1, 10) + j) % 10 for j in range(10)] and first[10:] == first[:2]
    cursor = SetCursor(request_set, 3)
    rounds = [cursor.next()[1] for _ in range(21)]
    assert rounds == [0] * 10 + [1] * 10 + [2]


def test_payloads_exact_and_natural():
    from lookahead_runner.workload.request_set import Message, SetRequest

    request = SetRequest(0, "hello world", None, 33, "code")
    exact = set_payload("m", request, 16, 0.0)
    assert exact["max_tokens"] == exact["min_tokens"] == 16 and exact["ignore_eos"] is True
    natural = set_payload("m", request, None, 0.0, seed=5)
    assert natural["max_tokens"] == 33 and "min_tokens" not in natural and "ignore_eos" not in natural
    assert natural["seed"] == 5 and natural["stream_options"]["include_usage"] is True
    chat = chat_payload("m", (Message("user", "hi"),), 20, 0.0, exact=False)
    assert chat["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in chat
    assert chat["max_completion_tokens"] == 20 and "ignore_eos" not in chat and chat["stream"] is True


def test_the_capture_hashes_the_text_and_reads_the_per_request_spec_metrics():
    capture = OutputCapture()
    capture.add_line(b'data: {"id":"x","choices":[{"index":0,"text":" a \\"b\\"","finish_reason":null}],'
                     b'"usage":{"prompt_tokens":3,"completion_tokens":1}}')
    capture.add_line(b'data: {"id":"x","choices":[{"index":0,"text":" c","finish_reason":"stop"}]}')
    final = parse_sse_line(
        'data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"total_tokens":5,"completion_tokens":2},'
        '"metrics":{"speculative_decoding":{"mean_acceptance_length":2.5,"draft_acceptance_rate":0.375,'
        '"acceptance_histogram":[1,0,1,0,0],"num_spec_steps":2,"num_accepted_draft_tokens":3,'
        '"num_draft_tokens":8,"num_spec_tokens":4}}}')
    capture.add_chunk(final)
    assert capture.output_hash == text_hash(' a "b" c') and capture.finish_reason == "stop"
    from lookahead_runner.workload.request_set import SetRequest

    result = StreamResult(0.1, 0.5, [], 3, 2, True, 2, True)
    record = to_record(0, 4, 100.0, result, "", 1.0, "h:1", 5.0, (SetRequest(7, "p", None, None, "code"), 2),
                       capture)
    assert (record.request_index, record.category, record.set_round, record.finish_reason) == (7, "code", 2, "stop")
    assert (record.spec_acceptance_length, record.spec_acceptance_rate, record.spec_steps, record.spec_draft_tokens,
            record.spec_accepted_tokens) == (2.5, 0.375, 2, 8, 3)
    assert len(record.as_row()) == len(record.__dataclass_fields__)


def test_natural_lengths_are_never_short_output():
    result = StreamResult(0.1, 0.5, [], 3, 7, True, 7, True)
    assert judge(result, None) is None
    assert judge(result, 8).startswith("short output")


def test_the_locust_options_take_the_set_and_natural(tmp_path):
    path = write_lines(tmp_path / "s.jsonl", [{"prompt": "a"}])
    settings = ScenarioSettings(request_set=str(path), output_tokens="natural")
    settings.validate()
    assert settings.exact_output_tokens is None and ScenarioSettings().exact_output_tokens == 64
    with pytest.raises(ValueError, match="needs --request-set"):
        ScenarioSettings(output_tokens="natural").validate()


def config(tmp_path, **load):
    return {"server": {"model": "m"}, "load": load}


def test_config_reads_the_set_at_load_and_refuses_what_cannot_run(tmp_path):
    good = write_lines(tmp_path / "good.jsonl", [{"prompt": f"p {i}", "max_tokens": 12} for i in range(5)])
    loaded = config_from_dict(config(tmp_path, requests=str(good), output_tokens="natural"), "t.toml")
    (variant,) = loaded.load.variants
    assert variant.natural_output and variant.set_prompts and variant.output_setting == "natural"
    assert variant.expected_output_tokens == 0 and variant.expected_prompt_tokens == 0
    exact = config_from_dict(config(tmp_path, requests=str(good), output_tokens=32), "t.toml").load.variants[0]
    assert exact.expected_output_tokens == 32 and exact.expected_prompt_tokens == 0
    bad = write_lines(tmp_path / "bad.jsonl", ['{"prompt": "a"}', "{oops"])
    with pytest.raises(ConfigError) as err:
        config_from_dict(config(tmp_path, requests=str(bad)), "t.toml")
    assert str(err.value).startswith(f"t.toml: load.requests: {bad}: line 2 is not JSON; a request set is one of "
                                     "this tool's JSONL ({\"prompt\": ...} or {\"messages\": [...]}")
    with pytest.raises(ConfigError, match="output_tokens = \"natural\" needs a request set"):
        config_from_dict(config(tmp_path, output_tokens="natural"), "t.toml")
    with pytest.raises(ConfigError, match="does not exist"):
        config_from_dict(config(tmp_path, requests=str(tmp_path / "missing.jsonl")), "t.toml")


def test_a_bad_set_stops_the_sweep_before_anything_starts(tmp_path):
    bad = write_lines(tmp_path / "bad.jsonl", ['{"prompt": "a"}', '{"messages": [{"content": "x"}]}'])
    toml = tmp_path / "sweep.toml"
    toml.write_text(f'[server]\nmodel = "m"\n[load]\nrequests = "{bad}"\n')
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(toml), "--out",
                           str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"load.requests: {bad}: line 2: message 1 has no \"role\"; "
                                                        "give one of system, user, assistant, tool, developer")
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_a_synthetic_prompts_response_keeps_its_metrics_but_not_its_text():
    capture = OutputCapture(keep_text=False)
    capture.add_line(b'data: {"id":"x","choices":[{"index":0,"text":" a","finish_reason":"length"}]}')
    capture.add_chunk(parse_sse_line('data: {"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1},'
                                     '"metrics":{"speculative_decoding":{"mean_acceptance_length":1.5,'
                                     '"num_spec_steps":2,"num_accepted_draft_tokens":1,"num_draft_tokens":4}}}'))
    record = to_record(0, 1, 1.0, StreamResult(0.1, 0.2, [], 3, 1, True, 1, True), "", None, capture=capture)
    assert record.output_hash == "" and record.request_index is None and record.category == ""
    assert (record.spec_acceptance_length, record.spec_steps, record.spec_draft_tokens) == (1.5, 2, 4)


def test_a_messages_request_with_endpoint_chat_is_a_chat_payload_of_natural_length():
    from lookahead_runner.workload.request_set import Message, SetRequest

    messages = (Message("system", "be brief"), Message("user", "write code"))
    request = SetRequest(0, None, messages, 40, "code")
    chat = chat_payload("m", request.messages, request.cap(), 0.0, 0.9, 3, {"enable_thinking": False}, exact=False)
    assert chat["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "write code"}]
    assert chat["max_completion_tokens"] == 40 and "max_tokens" not in chat and "prompt" not in chat
    assert "min_tokens" not in chat and "ignore_eos" not in chat
    assert chat["chat_template_kwargs"] == {"enable_thinking": False} and chat["seed"] == 3
    exact = chat_payload("m", request.messages, 16, 0.0, exact=True)
    assert exact["min_tokens"] == exact["max_completion_tokens"] == 16 and exact["ignore_eos"] is True


def test_messages_with_the_completions_endpoint_are_refused_in_one_line(tmp_path):
    chat = write_lines(tmp_path / "chat.jsonl", ['{"prompt": "a"}', '{"messages": [{"role": "user", "content": "x"}]}'])
    toml = tmp_path / "sweep.toml"
    toml.write_text(f'[server]\nmodel = "m"\n[load]\nrequests = "{chat}"\n')   # endpoint: "completions" by default
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(toml), "--out",
                           str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(f"load.requests: {chat}: line 2 has \"messages\", which need "
                                                        "load.endpoint = \"chat\"; set it, or give every request a "
                                                        "\"prompt\"")
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_the_capture_of_a_chat_stream_reads_the_deltas_text_and_finish():
    capture = OutputCapture(chat=True)
    capture.add_line(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":'
                     b'"assistant","content":""},"logprobs":null,"finish_reason":null}]}')
    capture.add_line(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":'
                     b'" a"},"logprobs":null,"finish_reason":null}]}')
    capture.add_line(b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":'
                     b'" b"},"logprobs":null,"finish_reason":"stop","stop_reason":null}]}')
    assert capture.texts == [" a", " b"] and capture.finish_reason == "stop"
    assert capture.output_hash == OutputCapture(texts=[" a b"]).output_hash
