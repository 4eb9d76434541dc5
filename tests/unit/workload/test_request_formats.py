"""Request sets as the field writes them (issue 37): SpecBench's question.jsonl, SPEED-Bench's rows and prepared
files, vLLM bench's custom JSONL with its output_tokens, ShareGPT with its ids. Each is read as vLLM's own loaders
read it (the first turn is the user message), keys with a meaning are honoured, every other key is counted for the
run's notes, and a line in no known format is one line naming the file, the line and the formats read here."""
import json
from pathlib import Path

import pytest

from lookahead_runner.config import ConfigError, config_from_dict
from lookahead_runner.workload.request import set_payload
from lookahead_runner.workload.request_formats import (FORMAT_JSONL, FORMAT_SHAREGPT, FORMAT_SPEC_BENCH,
                                                       FORMAT_SPEED_BENCH, FORMAT_VLLM_CUSTOM)
from lookahead_runner.workload.request_set import RequestSetError, read_request_set


REQUEST_SETS = Path(__file__).resolve().parents[2] / "fixtures" / "request-sets"   # small files in each format


def sets(name):
    return read_request_set(REQUEST_SETS / name, min_per_category=1)


def write_lines(path, items):
    path.write_text("".join((item if isinstance(item, str) else json.dumps(item)) + "\n" for item in items))
    return path


def test_spec_bench_the_first_turn_is_the_user_message_and_its_ids_are_named():
    request_set = sets("spec_bench_question.jsonl")
    assert request_set.formats == {FORMAT_SPEC_BENCH: 6}
    first = request_set.requests[0]
    assert first.is_chat and [(m.role, m.content) for m in first.messages] == [
        ("user", "Compose a short travel note about a rainy harbour town.")]   # the second turn is not sent
    assert first.max_tokens is None and first.source == "turns"
    assert list(request_set.categories) == ["mt_bench", "translation", "summarization", "qa", "math_reasoning", "rag"]
    assert request_set.ignored == {"question_id": 6, "reference": 2}
    notes = request_set.notes()
    assert notes[0].endswith("spec_bench_question.jsonl: 6 requests, read as SpecBench question.jsonl")
    assert notes[1] == "ignored keys: question_id (6 requests), reference (2 requests)"


def test_speed_bench_prepared_messages_send_the_first_turn_alone():
    """vLLM's SpeedBench loader reads messages[0]: the later user turns have no answers between them to send."""
    request_set = sets("speed_bench_qualitative.jsonl")
    assert request_set.formats == {FORMAT_SPEED_BENCH: 3}
    math = request_set.requests[1]
    assert [(m.role, m.content) for m in math.messages] == [("user", "Solve 3x + 5 = 20.")]
    assert request_set.categories == {"coding": 1, "math": 1, "roleplay": 1}
    assert set(request_set.ignored) == {"question_id", "sub_category", "src_id", "multiturn", "source", "difficulty"}


def test_speed_bench_throughput_rows_keep_their_entropy_tier_as_the_category():
    request_set = sets("speed_bench_throughput_1k.jsonl")
    assert request_set.formats == {FORMAT_SPEED_BENCH: 6}
    assert request_set.categories == {"low_entropy": 2, "mixed": 2, "high_entropy": 2}
    assert request_set.requests[0].messages[0].content.startswith("low_entropy document 0: lorem ipsum")


def test_vllm_custom_output_tokens_is_the_requests_output_length():
    """It was dropped without a word: every request went out capped at the default 256."""
    request_set = sets("vllm_custom.jsonl")
    assert request_set.formats == {FORMAT_VLLM_CUSTOM: 3} and request_set.ignored == {}
    assert [r.max_tokens for r in request_set.requests] == [10, 24, 40] and request_set.own_lengths == 3
    payload = set_payload("m", request_set.requests[1], None, 0.0)  # natural: as vllm bench sends it
    assert payload["max_tokens"] == 24 and "ignore_eos" not in payload
    assert request_set.notes(exact_output_tokens=64)[-1] == (
        "load.output_tokens = 64 sends every request exactly that long: the set's own output lengths (3 requests) "
        "are not used; set load.output_tokens = \"natural\" to use them")


def test_vllm_custom_output_tokens_is_read_as_vllm_bench_reads_it(tmp_path):
    """vllm bench takes int(output_tokens): a file pandas wrote (10.0) or one with the count as text ("24") runs there,
    so it runs here; a count that is no whole number is still refused."""
    path = write_lines(tmp_path / "custom.jsonl", [{"prompt": "a", "output_tokens": 10.0},
                                                   {"prompt": "b", "output_tokens": "24"}])
    assert [r.max_tokens for r in read_request_set(path, min_per_category=1).requests] == [10, 24]
    for bad in (10.5, "1e3", 0.0, "\u00b2"):
        write_lines(path, [{"prompt": "a", "output_tokens": bad}])
        with pytest.raises(RequestSetError, match="\"output_tokens\" must be a whole number >= 1"):
            read_request_set(path, min_per_category=1)


def test_formats_mix_and_sharegpt_ids_are_named(tmp_path):
    mixed = write_lines(tmp_path / "mixed.jsonl", [{"prompt": "a", "id": 1}, {"prompt": "b", "output_tokens": 5},
                                                   {"turns": ["c"], "category": "qa", "question_id": 3}])
    request_set = read_request_set(mixed, min_per_category=1)
    assert request_set.formats == {FORMAT_JSONL: 1, FORMAT_VLLM_CUSTOM: 1, FORMAT_SPEC_BENCH: 1}
    assert request_set.notes()[0].endswith("3 requests, read as JSONL (prompt or messages) (1), "
                                           "vLLM bench custom JSONL (1), SpecBench question.jsonl (1)")
    share = tmp_path / "share.json"
    share.write_text(json.dumps([{"id": f"x{i}", "conversations": [{"from": "human", "value": f"q{i}"}]}
                                 for i in range(3)] + [{"id": "y", "conversations": [{"from": "gpt", "value": "a"}]}]))
    request_set = read_request_set(share)
    assert request_set.formats == {FORMAT_SHAREGPT: 3} and request_set.ignored == {"id": 3}
    assert request_set.notes()[1:] == ["ignored keys: id (3 requests)",
                                       "1 conversation(s) without a human turn skipped (nothing for the model to "
                                       "answer)"]


@pytest.mark.parametrize("line, expected", [
    ({"text": "b", "id": 7}, "line 2 is in no request format read here (its keys: text, id); a request set is one "
                             "of this tool's JSONL ({\"prompt\": ...} or {\"messages\": [...]}, optional max_tokens, "
                             "category), vLLM bench's custom JSONL ({\"prompt\": ..., \"output_tokens\": N}), "
                             "SpecBench's question.jsonl ({\"turns\": [...], \"category\": ...}), SPEED-Bench "
                             "({\"turns\": [...]} rows or its prepared {\"messages\": [...]} files) and ShareGPT JSON "
                             "(a list of {\"conversations\": [...]})"),
    ({"prompt": "a", "turns": ["b"]}, "line 2 has both 'prompt' and 'turns'; give one of them"),
    ({"prompt": "a", "output_tokens": "ten"}, "line 2: \"output_tokens\" must be a whole number >= 1, got 'ten'"),
    ({"prompt": "a", "max_tokens": 9, "output_tokens": 10},
     "line 2 gives max_tokens 9 and output_tokens 10; both are its output length: keep one"),
    ({"turns": [], "category": "qa"}, "line 2: \"turns\" must be a list whose first turn is a non-empty string"),
    ({"question_id": "q", "category": "rag", "sub_category": "x", "src_id": "s",
      "turns": ["FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH\n\n{question}"]},
     "line 2: the turn is SPEED-Bench's placeholder, not a prompt: its data comes from the sources it names; "
     "prepare the subset first"),
    # a prepared SPEED-Bench row: its own key named, and its first message must be the user's (the one sent)
    ({"sub_category": "x", "src_id": "s", "messages": [{"role": "user"}]},
     "line 2: \"messages\" must be a list whose first message is {\"role\": \"user\", \"content\": ...} with a "
     "non-empty content"),
    ({"sub_category": "x", "src_id": "s", "messages": [{"role": "system", "content": "Be brief."},
                                                      {"role": "user", "content": "Hi"}]},
     "line 2: \"messages\" must be a list whose first message is {\"role\": \"user\""),
])
def test_a_line_in_no_known_format_or_with_a_bad_key_is_one_line_naming_the_file_and_the_line(tmp_path, line,
                                                                                              expected):
    path = write_lines(tmp_path / "set.jsonl", [{"prompt": "fine"}, line])
    with pytest.raises(RequestSetError) as err:
        read_request_set(path, min_per_category=1)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{path}: ") and expected in message


def test_a_benchmark_file_needs_the_chat_endpoint_said_in_its_own_words(tmp_path):
    path = write_lines(tmp_path / "question.jsonl", [{"question_id": i, "category": "qa", "turns": [f"q {i}"]}
                                                     for i in range(20)])
    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {"model": "m"}, "load": {"requests": str(path)}}, "t.toml")
    assert str(err.value) == (f"t.toml: load.requests: {path}: line 1 has \"turns\" (a benchmark's: its first turn is "
                              "a user message), which need load.endpoint = \"chat\"; set it, or give every request "
                              "a \"prompt\"")
    loaded = config_from_dict({"server": {"model": "m"}, "load": {"requests": str(path), "endpoint": "chat"}}, "t.toml")
    assert loaded.load.requests == str(path)


def test_a_line_is_what_ends_in_a_newline_as_vllm_reads_it(tmp_path):
    """A JSON string may hold U+2028, U+2029 or U+0085 unescaped (json.dumps(..., ensure_ascii=False) writes them so):
    vLLM's loaders (pandas, lines=True) read such a line, str.splitlines() cut it in two and refused the file. A file
    saved with a UTF-8 byte-order mark (Windows tools) is read too."""
    texts = ["first\u2028second", "para\u2029graph", "next\x85line"]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps({"prompt": t}, ensure_ascii=False) + "\r\n" for t in texts), encoding="utf-8")
    assert [r.prompt for r in read_request_set(path).requests] == texts
    path.write_text(json.dumps({"prompt": "a"}) + "\n" + "{oops\n", encoding="utf-8")
    with pytest.raises(RequestSetError, match=": line 2 is not JSON"):   # lines still counted as an editor does
        read_request_set(path)
    path.write_text("".join(json.dumps({"prompt": t}) + "\n" for t in texts), encoding="utf-8-sig")
    assert [r.prompt for r in read_request_set(path).requests] == texts
    share = tmp_path / "share.json"
    share.write_text(json.dumps([{"conversations": [{"from": "human", "value": "q"}]}]), encoding="utf-8-sig")
    assert read_request_set(share).formats == {FORMAT_SHAREGPT: 1}


def test_a_request_set_that_is_not_utf8_says_the_fix(tmp_path):
    path = tmp_path / "set.jsonl"
    path.write_bytes('{"prompt": "caf\u00e9"}\n'.encode("latin-1"))
    with pytest.raises(ConfigError) as err:
        config_from_dict({"server": {"model": "m"}, "load": {"requests": str(path)}}, "t.toml")
    assert str(err.value) == f"t.toml: load.requests: {str(path)!r} is not UTF-8 text; save it as UTF-8"
    import argparse

    from lookahead_runner.workload.options import _request_set_file

    with pytest.raises(argparse.ArgumentTypeError) as err:   # standalone Locust's --request-set says the same
        _request_set_file(str(path))
    assert str(err.value) == f"{str(path)!r} is not UTF-8 text; save it as UTF-8"
