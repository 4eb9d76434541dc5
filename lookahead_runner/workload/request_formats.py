"""The request formats the field writes, read into typed requests (pure: JSON in, `SetRequest`s out).

A JSONL line's format is told by its keys:
- this tool's JSONL: ``{"prompt": ...}`` (a raw completion prompt) or ``{"messages": [...]}`` (a chat);
- vLLM bench's custom JSONL (``vllm bench serve --dataset-name custom``): ``{"prompt": ..., "output_tokens": N}``;
  N is the request's output length, sent as its max_tokens as vllm bench sends it (without --ignore-eos);
- SpecBench's question.jsonl (hemingkx/Spec-Bench): ``{"question_id", "category", "turns": [...]}`` (and a
  "reference" on some lines); the first turn is the user message, as vLLM's SpecBench loader reads it;
- SPEED-Bench (nvidia/SPEED-Bench): the dataset's rows ``{"question_id", "category", "sub_category", "turns",
  "source", "src_id", "difficulty", "multiturn"}``, or the prepared files vLLM's SpeedBench loader reads (the same
  row with "messages", one user message per turn, in place of "turns"); the first turn is the user message. Its
  `qualitative` subset has 11 categories, its `throughput_1k` to `_32k` subsets fixed input lengths in three
  entropy tiers; every row keeps its own "category".

Keys with a meaning are honoured in every format: the content (prompt, messages or turns), "category", and the
output length ("max_tokens", or "output_tokens"). Any other key (an id, question_id, a reference answer) is counted
in `ignored` so the run can name it; a line in no known format is a `RequestSetError` naming the file, the line and
the formats read here. A ShareGPT-style JSON list (`sharegpt_requests`) is told from JSONL by the file's first
character.
"""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

UNCATEGORISED = ""
DEFAULT_MAX_TOKENS = 256          # the cap of a request without its own output length
_ROLES = ("system", "user", "assistant", "tool", "developer")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "system": "system"}
HONOURED = frozenset({"prompt", "messages", "turns", "category", "max_tokens", "output_tokens"})
SPEED_BENCH_KEYS = frozenset({"sub_category", "src_id"})   # in every SPEED-Bench row, in no other format
# a SPEED-Bench row whose turns are still to be fetched from their sources (its preparation script fills them in)
SPEED_BENCH_PLACEHOLDER = "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE"

FORMAT_JSONL = "JSONL (prompt or messages)"
FORMAT_VLLM_CUSTOM = "vLLM bench custom JSONL"
FORMAT_SPEC_BENCH = "SpecBench question.jsonl"
FORMAT_SPEED_BENCH = "SPEED-Bench"
FORMAT_SHAREGPT = "ShareGPT JSON"
KNOWN_FORMATS = ('this tool\'s JSONL ({"prompt": ...} or {"messages": [...]}, optional max_tokens, category), '
                 'vLLM bench\'s custom JSONL ({"prompt": ..., "output_tokens": N}), SpecBench\'s question.jsonl '
                 '({"turns": [...], "category": ...}), SPEED-Bench ({"turns": [...]} rows or its prepared '
                 '{"messages": [...]} files) and ShareGPT JSON (a list of {"conversations": [...]})')
JSONL_HELP = f"a request set is one of {KNOWN_FORMATS}"


class RequestSetError(ValueError):
    """Bad input, as one line: the file, the line number where there is one, what is wrong and the fix."""


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class SetRequest:
    """One request of the set: a prompt (completions) or messages (chat), never both."""

    index: int                              # its place in the set, 0-based: requests.csv's request_index
    prompt: str | None
    messages: tuple[Message, ...] | None
    max_tokens: int | None                  # its own output length (cap); None = the set's default
    category: str = UNCATEGORISED
    line: int = 0                           # where it stands in the file (1-based; for messages)
    source: str = ""                        # the key its content came from, for messages: "messages" or "turns"

    @property
    def is_chat(self) -> bool:
        return self.messages is not None

    @property
    def text(self) -> str:
        """The request's content as one text (its prompt, or its messages' contents in order)."""
        if self.prompt is not None:
            return self.prompt
        return "\n".join(m.content for m in self.messages or ())

    @property
    def content_words(self) -> int:
        """A tokenizer-free length: whitespace-separated words of the content (the report's distribution)."""
        return len(self.text.split())

    def cap(self, default: int = DEFAULT_MAX_TOKENS) -> int:
        return self.max_tokens if self.max_tokens is not None else default


@dataclass
class Reading:
    """What a file's lines said besides their requests: lines per format, requests per key not honoured."""

    formats: Counter
    ignored: Counter
    skipped: int = 0       # ShareGPT conversations without a human turn: nothing for the model to answer

    @classmethod
    def empty(cls) -> "Reading":
        return cls(Counter(), Counter())


def jsonl_requests(name: str, text: str, reading: Reading) -> list[SetRequest]:
    requests: list[SetRequest] = []
    # a line ends at "\n" only, as vLLM's loaders read JSONL: splitlines() would also cut at U+2028, U+2029 or U+0085,
    # which a JSON string may hold unescaped
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise RequestSetError(f"{name}: line {number} is not JSON; {JSONL_HELP}") from None
        if not isinstance(item, dict):
            raise RequestSetError(f"{name}: line {number} is not a JSON object; {JSONL_HELP}")
        request, form = line_request(f"{name}: line {number}", number, len(requests), item)
        reading.formats[form] += 1
        reading.ignored.update(key for key in item if key not in HONOURED)
        requests.append(request)
    return requests


def line_request(where: str, number: int, index: int, item: dict[str, Any]) -> tuple[SetRequest, str]:
    """One JSONL line's request and the format it is in."""
    content = [key for key in ("prompt", "messages", "turns") if key in item]
    if not content:
        keys = ", ".join(list(item)[:6]) or "none"
        raise RequestSetError(f"{where} is in no request format read here (its keys: {keys}); {JSONL_HELP}")
    if len(content) > 1:
        raise RequestSetError(f"{where} has both {content[0]!r} and {content[1]!r}; give one of them")
    length, category = _length(where, item), _category(where, item.get("category"))
    speed = SPEED_BENCH_KEYS <= item.keys()
    if content == ["turns"]:
        form = FORMAT_SPEED_BENCH if speed else FORMAT_SPEC_BENCH
        messages = (Message("user", _first_turn(where, item["turns"], speed)),)
        return SetRequest(index, None, messages, length, category, number, "turns"), form
    if content == ["prompt"]:
        prompt = item["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise RequestSetError(f"{where}: \"prompt\" must be a non-empty string")
        form = FORMAT_VLLM_CUSTOM if "output_tokens" in item else FORMAT_JSONL
        return SetRequest(index, prompt, None, length, category, number), form
    if speed:  # SPEED-Bench's prepared file: one user message per turn, no answers between them
        first = item["messages"][0] if isinstance(item["messages"], list) and item["messages"] else None
        turn = first.get("content") if isinstance(first, dict) and first.get("role") == "user" else None
        messages = (Message("user", _first_turn(where, [turn], True, "messages")),)
        return SetRequest(index, None, messages, length, category, number, "messages"), FORMAT_SPEED_BENCH
    form = FORMAT_VLLM_CUSTOM if "output_tokens" in item else FORMAT_JSONL
    return SetRequest(index, None, _messages(where, item["messages"]), length, category, number, "messages"), form


def _first_turn(where: str, turns: object, speed: bool, key: str = "turns") -> str:
    """The user message of a benchmark row: its first turn (vLLM's SpecBench and SpeedBench loaders read no other);
    `key`: the row's key it came from, for the error ("messages": a prepared SPEED-Bench row's first message)."""
    first = turns[0] if isinstance(turns, list) and turns else None
    if not isinstance(first, str) or not first.strip():
        what = ("a list whose first message is {\"role\": \"user\", \"content\": ...} with a non-empty content"
                if key == "messages" else "a list whose first turn is a non-empty string")
        raise RequestSetError(f"{where}: \"{key}\" must be {what}")
    if speed and first.startswith(SPEED_BENCH_PLACEHOLDER):
        raise RequestSetError(f"{where}: the turn is SPEED-Bench's placeholder, not a prompt: its data comes from "
                              "the sources it names; prepare the subset first with its preparation script (see "
                              "the SPEED-Bench dataset card)")
    return first


def _messages(where: str, value: object) -> tuple[Message, ...]:
    if not isinstance(value, list) or not value:
        raise RequestSetError(f"{where}: \"messages\" must be a non-empty list of {{\"role\": ..., \"content\": ...}}")
    out = []
    for position, message in enumerate(value, start=1):
        if not isinstance(message, dict):
            raise RequestSetError(f"{where}: message {position} is not an object; write {{\"role\": ..., \"content\": ...}}")
        role = message.get("role")
        if not isinstance(role, str) or not role:
            raise RequestSetError(f"{where}: message {position} has no \"role\"; give one of {', '.join(_ROLES)}")
        if role not in _ROLES:
            raise RequestSetError(f"{where}: message {position} has role {role!r}; give one of {', '.join(_ROLES)}")
        content = message.get("content")
        if not isinstance(content, str):
            raise RequestSetError(f"{where}: message {position} has no string \"content\"")
        out.append(Message(role, content))
    if out[-1].role == "assistant":
        raise RequestSetError(f"{where}: the last message is the assistant's; end with the turn the model answers")
    return tuple(out)


def _length(where: str, item: dict[str, Any]) -> int | None:
    """The request's own output length: "max_tokens" (this tool's) or "output_tokens" (vLLM bench's), one value."""
    lengths = {key: _whole(where, key, item[key]) for key in ("max_tokens", "output_tokens")
               if item.get(key) is not None}
    if len(set(lengths.values())) > 1:
        raise RequestSetError(f"{where} gives max_tokens {lengths['max_tokens']} and output_tokens "
                              f"{lengths['output_tokens']}; both are its output length: keep one")
    return next(iter(lengths.values()), None)


def _whole(where: str, key: str, value: object) -> int:
    if key == "output_tokens":  # vLLM's key, read as vllm bench reads it (int(...)): 10.0 and "10" are 10
        value = _as_int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestSetError(f"{where}: \"{key}\" must be a whole number >= 1, got {value!r}")
    return value


def _as_int(value: object) -> object:
    """A whole number written as a float or a string (a pandas-written file: 10.0), else the value unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdecimal():   # int() takes these (not "²", which isdigit() does)
        return int(value)
    return value


def _category(where: str, value: object) -> str:
    if value is None:
        return UNCATEGORISED
    if not isinstance(value, str) or not value.strip() or len(value) > 40:
        raise RequestSetError(f"{where}: \"category\" must be a short non-empty name (code, chat, summarise...)")
    return value.strip()


def sharegpt_requests(name: str, text: str, reading: Reading) -> list[SetRequest]:
    """A ShareGPT-style list: each conversation up to its last human turn is one chat request."""
    try:
        items = json.loads(text)
    except ValueError as exc:
        line = getattr(exc, "lineno", 0)
        raise RequestSetError(f"{name}: line {line} is not JSON; a ShareGPT file is one JSON list of "
                              "{\"conversations\": [...]}") from None
    requests: list[SetRequest] = []
    for position, item in enumerate(items, start=1):
        where = f"{name}: conversation {position}"
        if not isinstance(item, dict) or not isinstance(item.get("conversations"), list):
            raise RequestSetError(f"{where} has no \"conversations\" list; write {{\"conversations\": "
                                  "[{\"from\": \"human\", \"value\": ...}, ...]}")
        turns = []
        for turn_at, turn in enumerate(item["conversations"], start=1):
            role = _SHAREGPT_ROLES.get(str(turn.get("from", "")).lower()) if isinstance(turn, dict) else None
            if role is None:
                raise RequestSetError(f"{where}: turn {turn_at} has no known \"from\" (human, gpt or system)")
            if not isinstance(turn.get("value"), str):
                raise RequestSetError(f"{where}: turn {turn_at} has no string \"value\"")
            turns.append(Message(role, turn["value"]))
        last_user = max((i for i, m in enumerate(turns) if m.role == "user"), default=-1)
        if last_user < 0:
            reading.skipped += 1
            continue
        reading.formats[FORMAT_SHAREGPT] += 1
        reading.ignored.update(key for key in item if key not in HONOURED | {"conversations"})
        requests.append(SetRequest(len(requests), None, tuple(turns[:last_user + 1]), _length(where, item),
                                   _category(where, item.get("category")), position, "conversations"))
    return requests
