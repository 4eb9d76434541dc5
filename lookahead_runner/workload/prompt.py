"""Prompts of exactly P tokens for the served model: calibrated once through ``POST /tokenize``.

Two methods, and the scenario records which one it used (workload.json, ``prompt_method``):

- ``tokenize``: real text. A corpus (the built-in one under ``workload/corpus/``, or the user's
  JSONL file, one ``{"text": ...}`` per line) is cut by characters, bisecting on the server's own
  token count, to the longest prefix that makes exactly P tokens together with a per-request head
  (``Passage 01234567:``, a random number, so that no two prompts share a prefix-cache block). The
  cut is then re-tokenized with other random heads: a tokenizer whose count changes with the
  digits (GPT-2-like BPE) cannot be given unique text heads, and falls back to token ids. The
  count includes what the server adds for a text prompt (a BOS token), as /v1/completions counts.
- ``token-ids``: a list of P token ids (a random head, then a fixed ramp), exact by construction,
  when the server has no /tokenize (or calibration failed, with the reason in ``note``).

Every response's ``usage.prompt_tokens`` is still checked against P (timeline.judge): a head that
tokenizes differently at run time is counted, never silently accepted.
The calibration logic is pure (the token counter is passed in); `tokenize_counter` does the HTTP.
"""

from __future__ import annotations

import json
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

METHOD_TOKENIZE = "tokenize"
METHOD_TOKEN_IDS = "token-ids"
BUILTIN_SOURCE = "built-in"
BUILTIN_CORPUS = "builtin.txt"
HEAD_DIGITS = 8
VERIFY_HEADS = 4
MAX_TOKENIZE_CALLS = 80
TOKENIZE_TIMEOUT_S = 30.0
_PROMPT_BASE_ID = 100
_PROMPT_ID_SPAN = 1000
_UNIQUE_HEAD_TOKENS = 4
_START_SHIFTS = 3

TokenCounter = Callable[[str], int]


class TokenizeUnavailable(RuntimeError):
    """/tokenize cannot be used on this server (missing, refused, or answered nonsense)."""


class CalibrationFailed(RuntimeError):
    """No cut of the corpus tokenized to exactly the asked count."""


def head_text(number: int) -> str:
    return f"Passage {number:0{HEAD_DIGITS}d}:\n"


def prompt_token_ids(count: int, rng: random.Random) -> list[int]:
    """`count` token ids; a random head makes every prompt unique, so the server's prefix cache
    cannot skip prefills that production traffic (different prompts) would pay for."""
    head_length = min(count, _UNIQUE_HEAD_TOKENS)
    head = [rng.randrange(_PROMPT_BASE_ID, _PROMPT_BASE_ID + _PROMPT_ID_SPAN) for _ in range(head_length)]
    tail = [_PROMPT_BASE_ID + i % _PROMPT_ID_SPAN for i in range(len(head), count)]
    return head + tail


@dataclass(frozen=True)
class PromptPlan:
    """How this process builds each request's prompt; `describe()` is what workload.json records."""

    method: str
    prompt_tokens: int
    source: str = ""
    body: str = ""
    unique_head: bool = True
    tokenize_calls: int = 0
    note: str = ""

    def make(self, rng: random.Random) -> str | list[int]:
        if self.method == METHOD_TOKEN_IDS:
            return prompt_token_ids(self.prompt_tokens, rng)
        if not self.unique_head:
            return self.body
        return head_text(rng.randrange(10**HEAD_DIGITS)) + self.body

    def describe(self) -> dict[str, Any]:
        return {
            "prompt_method": self.method,
            "prompt_tokens": self.prompt_tokens,
            "prompt_source": self.source,
            "prompt_unique_head": self.unique_head,
            "prompt_chars": len(self.body) if self.method == METHOD_TOKENIZE else None,
            "tokenize_calls": self.tokenize_calls,
            "prompt_note": self.note,
        }


def token_ids_plan(prompt_tokens: int, note: str = "") -> PromptPlan:
    return PromptPlan(METHOD_TOKEN_IDS, prompt_tokens, source="synthetic", note=note)


# --- corpus ------------------------------------------------------------------------------------


def builtin_corpus() -> str:
    return resources.files("lookahead_runner.workload").joinpath("corpus", BUILTIN_CORPUS).read_text("utf-8")


def read_corpus_file(path: str | Path) -> str:
    """The texts of a JSONL corpus joined by blank lines; ValueError naming the line otherwise."""
    texts = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError:
                raise ValueError(f"{path}: line {number} is not JSON; write one {{\"text\": ...}} per line") from None
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise ValueError(f"{path}: line {number} has no string \"text\"; write one {{\"text\": ...}} per line")
            if item["text"].strip():
                texts.append(item["text"].strip())
    if not texts:
        raise ValueError(f"{path}: no text; write one {{\"text\": ...}} per line")
    return "\n\n".join(texts)


def corpus_text(prompt_file: str) -> tuple[str, str]:
    """(text, source) of the user's JSONL file, or of the built-in corpus when `prompt_file` is empty."""
    if prompt_file:
        return read_corpus_file(prompt_file), prompt_file
    return builtin_corpus(), BUILTIN_SOURCE


# --- calibration (pure) ------------------------------------------------------------------------


class _Counter:
    """Counts the calls to the server's tokenizer and bounds them."""

    def __init__(self, count_tokens: TokenCounter, limit: int) -> None:
        self._count_tokens = count_tokens
        self.limit = limit
        self.calls = 0

    def __call__(self, text: str) -> int:
        if self.calls >= self.limit:
            raise CalibrationFailed(f"no exact cut within {self.limit} /tokenize calls")
        self.calls += 1
        return self._count_tokens(text)


def calibrate(
    count_tokens: TokenCounter, corpus: str, target: int, rng: random.Random, source: str = BUILTIN_SOURCE
) -> PromptPlan:
    """A `tokenize` plan whose prompts are exactly `target` tokens by `count_tokens`.

    Raises CalibrationFailed (or what `count_tokens` raises) when no exact cut is found.
    """
    if target < 1:
        raise ValueError(f"prompt tokens must be >= 1, got {target}")
    if not corpus.strip():
        raise CalibrationFailed("the corpus is empty")
    count = _Counter(count_tokens, MAX_TOKENIZE_CALLS)
    head = head_text(0)
    unique = count(head) < target
    if not unique:
        head = ""
    body = _long_enough(count, head, corpus.strip(), target)
    for _ in range(_START_SHIFTS):
        cut = _exact_cut(count, head, body, target)
        if cut is not None:
            break
        body = body[_next_word(body, 0) :]  # another start can tokenize differently at the cut
    else:
        raise CalibrationFailed(f"no cut of the corpus is exactly {target} tokens")
    cut = _end_of_word(count, head, body, cut, target)
    text = body[:cut]
    note = "" if unique else f"{target} tokens leave no room for a unique head: prompts are identical"
    if unique:
        for _ in range(VERIFY_HEADS):
            seen = count(head_text(rng.randrange(10**HEAD_DIGITS)) + text)
            if seen != target:
                raise CalibrationFailed(f"a unique head changes the count ({seen} != {target} tokens)")
    return PromptPlan(METHOD_TOKENIZE, target, source, text, unique, count.calls, note)


def _long_enough(count: _Counter, head: str, corpus: str, target: int) -> str:
    """The corpus, repeated until head + body holds at least `target` tokens."""
    body = corpus
    for _ in range(4):
        total = count(head + body)
        if total >= target:
            return body
        copies = -(-target // max(total, 1)) + 1
        body = "\n\n".join([corpus] * copies)
    raise CalibrationFailed(f"the corpus does not reach {target} tokens")


def _exact_cut(count: _Counter, head: str, body: str, target: int) -> int | None:
    """The smallest character cut with count(head + body[:cut]) >= target, if it is exactly target.

    Bisection assumes the count grows with the text, which BPE keeps up to rare merges; a count
    that jumps over the target is looked for just around the crossing.
    """
    low, high = 0, len(body)  # count(low) < target <= count(high)
    while high - low > 1:
        middle = (low + high) // 2
        if count(head + body[:middle]) >= target:
            high = middle
        else:
            low = middle
    if count(head + body[:high]) == target:
        return high
    for cut in range(high + 1, min(high + 8, len(body)) + 1):
        if count(head + body[:cut]) == target:
            return cut
    return None


def _end_of_word(count: _Counter, head: str, body: str, cut: int, target: int) -> int:
    """Extend a cut that ended inside a word to the word's end, when that keeps the count."""
    end = _next_space(body, cut)
    if end == cut or end > len(body):
        return cut
    return end if count(head + body[:end]) == target else cut


def _next_space(text: str, start: int) -> int:
    index = start
    while index < len(text) and not text[index].isspace():
        index += 1
    return index


def _next_word(text: str, start: int) -> int:
    index = _next_space(text, start)
    while index < len(text) and text[index].isspace():
        index += 1
    return index


# --- the server's tokenizer (I/O) --------------------------------------------------------------


def tokenize_counter(host: str, model: str, headers: dict[str, str], timeout_s: float = TOKENIZE_TIMEOUT_S) -> TokenCounter:
    """A counter that asks the server's ``POST /tokenize``; raises TokenizeUnavailable on any refusal."""
    url = host.rstrip("/") + "/tokenize"

    def count_tokens(text: str) -> int:
        body = json.dumps({"model": model, "prompt": text}).encode()
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json", **headers})
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise TokenizeUnavailable(f"POST /tokenize answered HTTP {exc.code}") from None
        except (OSError, ValueError) as exc:
            raise TokenizeUnavailable(f"POST /tokenize failed: {type(exc).__name__}") from None
        if isinstance(answer, dict) and isinstance(answer.get("count"), int):
            return answer["count"]
        if isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
        raise TokenizeUnavailable("POST /tokenize answered without a token count")

    return count_tokens


def plan_prompt(
    count_tokens: TokenCounter, prompt_tokens: int, prompt_file: str, rng: random.Random
) -> PromptPlan:
    """Calibrate on the server, or fall back to token ids with the reason."""
    corpus, source = corpus_text(prompt_file)
    try:
        return calibrate(count_tokens, corpus, prompt_tokens, rng, source)
    except (TokenizeUnavailable, CalibrationFailed) as exc:
        return token_ids_plan(prompt_tokens, f"{exc}; sending token ids")
