"""Prompts of exactly P tokens for the served model: calibrated once through ``POST /tokenize``.

Two methods (a third, ``text``, for chat only: below), and the scenario records which one it used
(workload.json, ``prompt_method``):

- ``tokenize``: real text. A corpus (the built-in one under ``workload/corpus/``, or the user's
  JSONL file, one ``{"text": ...}`` per line) is cut by characters, bisecting on the server's own
  token count, to the shortest prefix that makes exactly P tokens together with a per-request head
  (a random number, so that no two prompts share a prefix-cache block). The cut is then
  re-tokenized with other random heads. Head styles, the first whose count holds is used:
  ``Passage 01234567:`` (tokenizers that split numbers by position: Llama, Mistral, Qwen), then
  ``Passage #0-1-2-3-4-5:`` (one digit per pre-token, so byte-level BPE like GPT-2's cannot merge
  them differently); if neither holds, token ids. The count includes what the server adds for a
  text prompt (a BOS token), as /v1/completions counts.
- ``token-ids``: a list of P token ids (a random head, then a fixed ramp), exact by construction,
  when the server has no /tokenize (or calibration failed, with the reason in ``note``).

For the chat endpoint the count is that of one user message holding the text, with the server's chat
template and its generation prompt applied (``/tokenize`` with ``messages``, as vLLM's chat endpoint counts;
the template's kwargs included). Token ids cannot be sent as a chat message: where calibration fails, the
method is ``text`` (the corpus cut by words, its length not exact) and the note says why.

Every response's ``usage.prompt_tokens`` is still checked against P (timeline.judge): a head that
tokenizes differently at run time is counted, never silently accepted.
The calibration logic is pure (the token counter is passed in); `tokenize_counter` does the HTTP.
"""

from __future__ import annotations

import dataclasses
import json
import random
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..contracts.auth import keyed_request
from .sse import error_message

METHOD_TOKENIZE = "tokenize"
METHOD_TOKEN_IDS = "token-ids"
METHOD_TEXT = "text"
BUILTIN_SOURCE = "built-in"
BUILTIN_CORPUS = "builtin.txt"
HEAD_STYLES = ("digits", "spaced-digits")
VERIFY_HEADS = 8
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


def head_text(rng: random.Random, style: str = HEAD_STYLES[0]) -> str:
    """A random per-request head: 10**8 (digits) or 10**6 (spaced-digits) different ones."""
    if style == "digits":
        return f"Passage {rng.randrange(10**8):08d}:\n"
    return "Passage #" + "-".join(str(rng.randrange(10)) for _ in range(6)) + ":\n"


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
    head_style: str = HEAD_STYLES[0]
    tokenize_calls: int = 0
    note: str = ""
    chat: bool = False  # counted as one chat message with the server's template (the chat endpoint)

    def make(self, rng: random.Random) -> str | list[int]:
        if self.method == METHOD_TOKEN_IDS:
            return prompt_token_ids(self.prompt_tokens, rng)
        if not self.unique_head:
            return self.body
        return head_text(rng, self.head_style) + self.body

    def describe(self) -> dict[str, Any]:
        return {
            "prompt_method": self.method,
            "prompt_tokens": self.prompt_tokens,
            "prompt_source": self.source,
            "prompt_unique_head": self.unique_head,
            "prompt_head_style": self.head_style if self.method == METHOD_TOKENIZE and self.unique_head else None,
            "prompt_chars": len(self.body) if self.method == METHOD_TOKENIZE else None,
            "tokenize_calls": self.tokenize_calls,
            "prompt_note": self.note,
            "prompt_chat_template": self.chat,
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

    Raises CalibrationFailed (or what `count_tokens` raises) when no head style gives an exact cut.
    """
    if target < 1:
        raise ValueError(f"prompt tokens must be >= 1, got {target}")
    if not corpus.strip():
        raise CalibrationFailed("the corpus is empty")
    count = _Counter(count_tokens, MAX_TOKENIZE_CALLS * len(HEAD_STYLES))
    failures = []
    for style in HEAD_STYLES:
        try:
            return _calibrate_style(count, corpus.strip(), target, rng, source, style)
        except CalibrationFailed as exc:
            failures.append(f"{style} head: {exc}")
    raise CalibrationFailed("; ".join(failures))


def _calibrate_style(
    count: _Counter, corpus: str, target: int, rng: random.Random, source: str, style: str
) -> PromptPlan:
    head = head_text(random.Random(0), style)
    unique = count(head) < target
    if not unique:
        head = ""
    body = _long_enough(count, head, corpus, target)
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
            seen = count(head_text(rng, style) + text)
            if seen != target:
                raise CalibrationFailed(f"a unique head changes the count ({seen} != {target} tokens)")
    return PromptPlan(METHOD_TOKENIZE, target, source, text, unique, style, count.calls, note)


def _long_enough(count: _Counter, head: str, corpus: str, target: int) -> str:
    """A start of the corpus (repeated when short) that holds at least `target` tokens with the head.

    Starts at about twice the characters English needs per token, so a large corpus file is never
    sent whole to /tokenize.
    """
    length = target * 8 + 256
    for _ in range(6):
        body = _repeated(corpus, length)
        if count(head + body) >= target:
            return body
        length *= 4
    raise CalibrationFailed(f"the corpus does not reach {target} tokens")


def _repeated(corpus: str, length: int) -> str:
    unit = corpus + "\n\n"
    return (unit * (length // len(unit) + 1))[:length].rstrip() if length > len(corpus) else corpus[:length]


def _exact_cut(count: _Counter, head: str, body: str, target: int) -> int | None:
    """The smallest character cut with count(head + body[:cut]) >= target, if it is exactly target.

    Bisection assumes the count grows with the text, which BPE keeps up to rare merges; a count
    that jumps over the target is looked for just around the crossing.
    """
    low, high = 0, len(body)  # count(low) < target <= count(high)
    high_count = None
    while high - low > 1:
        middle = (low + high) // 2
        middle_count = count(head + body[:middle])
        if middle_count >= target:
            high, high_count = middle, middle_count
        else:
            low = middle
    if high_count is None:
        high_count = count(head + body[:high])
    if high_count == target:
        return high
    for cut in range(high + 1, min(high + 8, len(body)) + 1):
        if count(head + body[:cut]) == target:
            return cut
    return None


def _end_of_word(count: _Counter, head: str, body: str, cut: int, target: int) -> int:
    """Extend a cut that ended inside a word to the word's end, when that keeps the count."""
    end = _next_space(body, cut)
    if end == cut:
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


def tokenize_body(model: str, text: str, chat: bool = False,
                  template_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """/tokenize's body: a raw prompt, or (chat) one user message with the generation prompt, as a chat request
    renders it (vLLM's TokenizeChatRequest; add_special_tokens stays False there, as in a chat request)."""
    if not chat:
        return {"model": model, "prompt": text}
    body: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": text}],
                            "add_generation_prompt": True}
    if template_kwargs:
        body["chat_template_kwargs"] = template_kwargs
    return body


def tokenize_counter(
    host: str, model: str, headers: dict[str, str], timeout_s: float = TOKENIZE_TIMEOUT_S,
    chat: bool = False, template_kwargs: dict[str, Any] | None = None,
) -> TokenCounter:
    """A counter that asks the server's ``POST /tokenize``; raises TokenizeUnavailable on any refusal."""
    url = host.rstrip("/") + "/tokenize"

    def count_tokens(text: str) -> int:
        body = json.dumps(tokenize_body(model, text, chat, template_kwargs)).encode()
        request = keyed_request(url, {"Content-Type": "application/json", **headers}, body)
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            said = error_message(exc.read())
            raise TokenizeUnavailable(f"POST /tokenize answered HTTP {exc.code}{f': {said}' if said else ''}") from None
        except (OSError, ValueError) as exc:
            raise TokenizeUnavailable(f"POST /tokenize failed: {type(exc).__name__}") from None
        if isinstance(answer, dict) and isinstance(answer.get("count"), int):
            return answer["count"]
        if isinstance(answer, dict) and isinstance(answer.get("tokens"), list):
            return len(answer["tokens"])
        raise TokenizeUnavailable("POST /tokenize answered without a token count")

    return count_tokens


def plan_prompt(
    count_tokens: TokenCounter, prompt_tokens: int, prompt_file: str, rng: random.Random, chat: bool = False
) -> PromptPlan:
    """Calibrate on the server, or fall back to token ids (chat: to uncalibrated text) with the reason."""
    corpus, source = corpus_text(prompt_file)
    try:
        if chat:
            return calibrate_chat(count_tokens, corpus, prompt_tokens, rng, source)
        return calibrate(count_tokens, corpus, prompt_tokens, rng, source)
    except (TokenizeUnavailable, CalibrationFailed) as exc:
        if chat:
            return text_plan(corpus, source, prompt_tokens, f"{exc}; sending text of about {prompt_tokens} words, "
                                                            "its length not exact")
        return token_ids_plan(prompt_tokens, f"{exc}; sending token ids")


def calibrate_chat(count_tokens: TokenCounter, corpus: str, target: int, rng: random.Random,
                   source: str = BUILTIN_SOURCE) -> PromptPlan:
    """`calibrate` through the chat template: first, that the template leaves room for any text at all."""
    frame = count_tokens("")
    if frame >= target:
        raise CalibrationFailed(f"the chat template alone makes {frame} prompt tokens; ask for more than {frame}")
    plan = calibrate(count_tokens, corpus, target, rng, source)
    return dataclasses.replace(plan, tokenize_calls=plan.tokenize_calls + 1, chat=True)


def text_plan(corpus: str, source: str, prompt_tokens: int, note: str) -> PromptPlan:
    """Uncalibrated text for a chat message: the corpus's first `prompt_tokens` words (repeated if short)."""
    words = corpus.split() or ["text"]
    body = " ".join(words[i % len(words)] for i in range(prompt_tokens))
    return PromptPlan(METHOD_TEXT, prompt_tokens, source, body, note=note, chat=True)
