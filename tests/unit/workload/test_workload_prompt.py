"""Prompt calibration to exactly P tokens against fake tokenizers, the corpus files and the fallback."""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path

import pytest

from lookahead_runner.workload.prompt import (
    BUILTIN_SOURCE,
    MAX_TOKENIZE_CALLS,
    METHOD_TOKEN_IDS,
    METHOD_TOKENIZE,
    CalibrationFailed,
    TokenizeUnavailable,
    builtin_corpus,
    calibrate,
    head_text,
    plan_prompt,
    prompt_token_ids,
    read_corpus_file,
)


class Tokenizer:
    """Counts calls; `per_word(word)` tokens for each whitespace-separated word, plus `bos`."""

    def __init__(self, per_word=lambda word: 1, bos: int = 0) -> None:
        self.per_word = per_word
        self.bos = bos
        self.calls = 0

    def __call__(self, text: str) -> int:
        self.calls += 1
        return self.bos + sum(self.per_word(word) for word in text.split())


def bpe_like(word: str) -> int:
    """A word costs one token per 4 letters, a digit run one per 3 digits (as Llama 3 splits numbers)."""
    digits = sum(math.ceil(len(run) / 3) for run in re.findall(r"\d+", word))
    letters = re.sub(r"\d+", "", word)
    return digits + (math.ceil(len(letters) / 4) if letters else 0)


def gpt2_like(word: str) -> int:
    """Like GPT-2's byte-level BPE: pre-tokens are runs of letters, digits or other characters; a digit
    run's count depends on which digits it holds (here: one per distinct digit)."""
    total = 0
    for run in re.findall(r"[A-Za-z]+|\d+|[^A-Za-z\d]+", word):
        total += len(set(run)) if run.isdigit() else math.ceil(len(run) / 4) if run.isalpha() else 1
    return total


def digits_vary(word: str) -> int:
    """Any digit anywhere changes the count: no head style can hold."""
    return 1 + len({c for c in word if c.isdigit()})


@pytest.mark.parametrize("target", [9, 17, 128, 1000, 4096])
@pytest.mark.parametrize(("per_word", "bos"), [(lambda word: 1, 0), (lambda word: 1, 1), (bpe_like, 1), (gpt2_like, 1)])
def test_calibrated_prompts_are_exact_for_any_head(target, per_word, bos):
    tokenizer = Tokenizer(per_word, bos)
    plan = calibrate(tokenizer, builtin_corpus(), target, random.Random(1))
    assert (plan.method, plan.prompt_tokens, plan.source) == (METHOD_TOKENIZE, target, BUILTIN_SOURCE)
    assert plan.tokenize_calls == tokenizer.calls <= 2 * MAX_TOKENIZE_CALLS
    rng = random.Random(2)
    prompts = [plan.make(rng) for _ in range(50)]
    assert all(tokenizer(prompt) == target for prompt in prompts)
    if per_word is gpt2_like and target < 17:  # the spaced head alone is 16 tokens: under a cache block
        assert not plan.unique_head
        return
    assert plan.unique_head
    assert plan.head_style == ("spaced-digits" if per_word is gpt2_like else "digits")
    assert len(set(prompts)) == 50  # unique heads: no shared prefix-cache block
    assert all(prompt.startswith("Passage ") for prompt in prompts)


def test_long_prompts_repeat_the_corpus_and_big_corpora_are_not_sent_whole():
    sent: list[int] = []

    def counting(text: str) -> int:
        sent.append(len(text))
        return len(text.split())

    corpus = " ".join(f"w{i}" for i in range(200_000))  # over a megabyte
    plan = calibrate(counting, corpus, 64, random.Random(0))
    assert max(sent) < 10_000
    assert counting(plan.make(random.Random(3))) == 64

    short = calibrate(Tokenizer(), "only five words are here", 300, random.Random(0))
    assert Tokenizer()(short.make(random.Random(4))) == 300


def test_prompts_too_short_for_a_head_are_identical_and_say_so():
    plan = calibrate(Tokenizer(bos=1), builtin_corpus(), 2, random.Random(0))
    assert not plan.unique_head and "no room for a unique head" in plan.note
    assert plan.make(random.Random(0)) == plan.make(random.Random(1))
    assert Tokenizer(bos=1)(plan.make(random.Random(0))) == 2


def test_heads_whose_count_depends_on_the_digits_are_refused():
    tokenizer = Tokenizer(digits_vary)
    with pytest.raises(CalibrationFailed, match="digits head: a unique head changes the count.*spaced-digits head"):
        calibrate(tokenizer, builtin_corpus(), 128, random.Random(5))
    assert tokenizer.calls <= 2 * MAX_TOKENIZE_CALLS


def test_a_tokenizer_that_jumps_over_the_target_everywhere_fails_in_bounded_calls():
    tokenizer = Tokenizer(lambda word: 2)  # every count is even
    with pytest.raises(CalibrationFailed):
        calibrate(tokenizer, builtin_corpus(), 129, random.Random(0))
    assert tokenizer.calls <= 2 * MAX_TOKENIZE_CALLS


def test_plan_falls_back_to_token_ids_with_the_reason():
    def missing(text: str) -> int:
        raise TokenizeUnavailable("POST /tokenize answered HTTP 404")

    plan = plan_prompt(missing, 64, "", random.Random(0))
    assert plan.method == METHOD_TOKEN_IDS and plan.prompt_tokens == 64
    assert "HTTP 404" in plan.note and "token ids" in plan.note
    assert len(plan.make(random.Random(0))) == 64
    described = plan.describe()
    assert described["prompt_method"] == "token-ids" and described["prompt_tokens"] == 64

    varying = plan_prompt(Tokenizer(digits_vary), 64, "", random.Random(0))
    assert varying.method == METHOD_TOKEN_IDS and "unique head" in varying.note


def test_plan_uses_the_users_corpus(tmp_path):
    corpus = tmp_path / "prompts.jsonl"
    corpus.write_text(json.dumps({"text": "alpha beta gamma " * 50}) + "\n\n" + json.dumps({"text": "delta"}) + "\n")
    plan = plan_prompt(Tokenizer(), 40, str(corpus), random.Random(0))
    assert plan.method == METHOD_TOKENIZE and plan.source == str(corpus)
    assert "alpha beta" in plan.body
    assert plan.describe()["prompt_source"] == str(corpus)


@pytest.mark.parametrize(
    ("content", "fragment"),
    [("not json\n", "line 1 is not JSON"), ('{"text": 3}\n', "line 1 has no string"),
     ('{"text": "a"}\n[1]\n', "line 2 has no string"), ("\n\n", "no text")],
)
def test_bad_corpus_files_name_the_line(tmp_path, content, fragment):
    corpus = tmp_path / "bad.jsonl"
    corpus.write_text(content)
    with pytest.raises(ValueError, match=fragment):
        read_corpus_file(corpus)


def test_builtin_corpus_is_package_data_of_real_prose():
    text = builtin_corpus()
    assert len(text.split()) > 2000
    assert "\n\n" in text


def test_heads_and_token_ids():
    assert re.fullmatch(r"Passage \d{8}:\n", head_text(random.Random(1)))
    assert re.fullmatch(r"Passage #\d(-\d){5}:\n", head_text(random.Random(1), "spaced-digits"))
    rng = random.Random(7)
    for count in (1, 3, 4, 5, 128, 4096):
        ids = prompt_token_ids(count, rng)
        assert len(ids) == count and all(100 <= i < 1100 for i in ids)


def test_a_refused_tokenize_says_what_the_server_said():
    """POST /tokenize refused (vLLM 0.32 without a chat template, tests/fixtures): the fallback's note carries the
    server's own message, not only the status."""
    import http.server
    import threading

    from lookahead_runner.workload.prompt import TokenizeUnavailable, tokenize_counter

    body = (Path(__file__).resolve().parents[2] / "fixtures" / "tokenize-no-chat-template-400.json").read_bytes()

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        count = tokenize_counter(f"http://127.0.0.1:{server.server_port}", "m", {}, timeout_s=5, chat=True)
        with pytest.raises(TokenizeUnavailable) as refused:
            count("hello")
    finally:
        server.shutdown()
    assert str(refused.value) == ("POST /tokenize answered HTTP 400: As of transformers v4.44, default chat template "
                                  "is no longer allowed, so you must provide a chat template if the tokenizer does "
                                  "not define one.")
