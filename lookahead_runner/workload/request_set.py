"""The user's own request set (load.requests): a file read into typed requests, and which one each user sends next.

Two formats, told apart by the file's first character:
- JSONL, one request a line: ``{"prompt": "..."}`` or ``{"messages": [{"role": ..., "content": ...}, ...]}``, with
  optional ``"max_tokens"`` (a whole number >= 1) and ``"category"`` (a short name: code, chat, summarise...);
- ShareGPT-style JSON: a list of ``{"conversations": [{"from": "human"|"gpt"|"system", "value": ...}, ...]}``
  (optional "category" and "max_tokens" beside "conversations"); each conversation up to its last human turn is
  one chat request (``messages``), the turns after it are dropped.

Every K and every repeat must send the same requests in the same order for each user, so a user's requests depend
only on its index: user u starts at its own offset of the set (spread by the golden ratio, so users at once send
different requests) and walks the set in order, starting again at its end (`SetCursor`). Pure: no Locust, no HTTP.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METHOD_REQUEST_SET = "request-set"   # workload.json's prompt_method: the prompts are the set's own
MIN_REQUESTS_PER_CATEGORY = 20    # fewer cannot give a category's acceptance an interval in a window
DEFAULT_MAX_TOKENS = 256          # the cap of a request without its own max_tokens
UNCATEGORISED = ""
_ROLES = ("system", "user", "assistant", "tool", "developer")
_SHAREGPT_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
                   "chatgpt": "assistant", "bard": "assistant", "bing": "assistant", "system": "system"}
_GOLDEN = 0.6180339887498949
JSONL_HELP = 'write one {"prompt": ...} or {"messages": [...]} per line'


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
    max_tokens: int | None                  # its own cap; None = the set's default
    category: str = UNCATEGORISED
    line: int = 0                           # where it stands in the file (1-based; for messages)

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


@dataclass(frozen=True)
class RequestSet:
    path: str
    requests: tuple[SetRequest, ...]

    def __len__(self) -> int:
        return len(self.requests)

    @property
    def categories(self) -> dict[str, int]:
        """Requests per category, in order of first appearance."""
        return dict(Counter(r.category for r in self.requests))

    @property
    def has_chat(self) -> bool:
        return any(r.is_chat for r in self.requests)

    @property
    def fingerprint(self) -> str:
        """A short hash of the set's content: two lives sent the same set when it is equal."""
        digest = hashlib.sha256()
        for r in self.requests:
            digest.update(json.dumps([r.prompt, None if r.messages is None else [[m.role, m.content] for m in r.messages],
                                      r.max_tokens, r.category]).encode())
        return digest.hexdigest()[:16]

    def largest_cap(self, default: int = DEFAULT_MAX_TOKENS) -> int:
        return max(r.cap(default) for r in self.requests)


def read_request_set(path: str | Path, min_per_category: int = MIN_REQUESTS_PER_CATEGORY) -> RequestSet:
    """The file's requests, or RequestSetError naming the file, the line and what is wrong. OSError and
    UnicodeDecodeError pass through (the caller names the file)."""
    text = Path(path).read_text(encoding="utf-8")
    name = str(path)
    stripped = text.lstrip()
    if not stripped:
        raise RequestSetError(f"{name}: the file is empty; {JSONL_HELP}")
    if stripped.startswith("["):
        requests = _sharegpt(name, text)
    else:
        requests = _jsonl(name, text)
    if not requests:
        raise RequestSetError(f"{name}: no request in the file; {JSONL_HELP}")
    _check_categories(name, requests, min_per_category)
    return RequestSet(name, tuple(requests))


def _jsonl(name: str, text: str) -> list[SetRequest]:
    requests: list[SetRequest] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise RequestSetError(f"{name}: line {number} is not JSON; {JSONL_HELP}") from None
        if not isinstance(item, dict):
            raise RequestSetError(f"{name}: line {number} is not a JSON object; {JSONL_HELP}")
        requests.append(_request(name, number, len(requests), item))
    return requests


def _request(name: str, number: int, index: int, item: dict[str, Any]) -> SetRequest:
    where = f"{name}: line {number}"
    has_prompt, has_messages = "prompt" in item, "messages" in item
    if has_prompt == has_messages:
        what = "has both \"prompt\" and \"messages\"" if has_prompt else "has neither \"prompt\" nor \"messages\""
        raise RequestSetError(f"{where} {what}; give one of them")
    prompt = messages = None
    if has_prompt:
        prompt = item["prompt"]
        if not isinstance(prompt, str) or not prompt.strip():
            raise RequestSetError(f"{where}: \"prompt\" must be a non-empty string")
    else:
        messages = _messages(where, item["messages"])
    return SetRequest(index, prompt, messages, _max_tokens(where, item.get("max_tokens")),
                      _category(where, item.get("category")), number)


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


def _max_tokens(where: str, value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestSetError(f"{where}: \"max_tokens\" must be a whole number >= 1, got {value!r}")
    return value


def _category(where: str, value: object) -> str:
    if value is None:
        return UNCATEGORISED
    if not isinstance(value, str) or not value.strip() or len(value) > 40:
        raise RequestSetError(f"{where}: \"category\" must be a short non-empty name (code, chat, summarise...)")
    return value.strip()


def _sharegpt(name: str, text: str) -> list[SetRequest]:
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
            continue  # nothing for the model to answer
        requests.append(SetRequest(len(requests), None, tuple(turns[:last_user + 1]),
                                   _max_tokens(where, item.get("max_tokens")), _category(where, item.get("category")),
                                   position))
    return requests


def _check_categories(name: str, requests: list[SetRequest], least: int) -> None:
    counts = Counter(r.category for r in requests)
    if len(counts) < 2 and UNCATEGORISED in counts:
        return  # no categories: the set is measured as one mix
    for category, count in counts.items():
        if count < least:
            first = next(r.line for r in requests if r.category == category)
            label = repr(category) if category else "without a category"
            raise RequestSetError(f"{name}: line {first}: category {label} has {count} request(s), fewer than the "
                                  f"{least} a window needs for its acceptance; add requests or merge it into another")


def user_offset(user_index: int, set_size: int) -> int:
    """Where user `user_index` starts in a set of `set_size`: spread by the golden ratio, the same in every life."""
    return int((user_index * _GOLDEN % 1.0) * set_size) % set_size


class SetCursor:
    """One user's walk through the set: its offset first, then each next request, around again at the end."""

    def __init__(self, request_set: RequestSet, user_index: int) -> None:
        self.request_set = request_set
        self.user_index = user_index
        self.offset = user_offset(user_index, len(request_set))
        self.sent = 0

    def next(self) -> tuple[SetRequest, int]:
        """(the next request, how many times this user had run through the whole set before it)."""
        size = len(self.request_set)
        request = self.request_set.requests[(self.offset + self.sent) % size]
        rounds = self.sent // size
        self.sent += 1
        return request, rounds


def text_hash(text: str) -> str:
    """The output text's hash in requests.csv: two outputs compare equal across K when it is equal."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()
