"""The user's own request set (load.requests): a file read into typed requests, and which one each user sends next.

The formats it reads (this tool's JSONL, vLLM bench's custom JSONL, SpecBench, SPEED-Bench, ShareGPT JSON) and what
each key means: request_formats.py. The set remembers which formats its lines were in and which keys it did not
use (`ignored`), so the run names them (`notes`) instead of dropping them without a word.

Every K and every repeat must send the same requests in the same order for each user, so a user's requests depend
only on its index: user u starts at its own offset of the set (spread by the golden ratio, so users at once send
different requests) and walks the set in order, starting again at its end (`SetCursor`). Pure: no Locust, no HTTP.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from lookahead_runner.workload.request_formats import (DEFAULT_MAX_TOKENS, JSONL_HELP, UNCATEGORISED,  # noqa: F401
                                                       Message, Reading, RequestSetError, SetRequest, jsonl_requests,
                                                       sharegpt_requests)

METHOD_REQUEST_SET = "request-set"   # workload.json's prompt_method: the prompts are the set's own
MIN_REQUESTS_PER_CATEGORY = 20    # fewer cannot give a category's acceptance an interval in a window
WHOLE_SET = "the mix"             # the report's and decision.json's name for every category together
_GOLDEN = 0.6180339887498949


@dataclass(frozen=True)
class RequestSet:
    path: str
    requests: tuple[SetRequest, ...]
    formats: dict[str, int] = field(default_factory=dict)   # requests per format their lines were in
    ignored: dict[str, int] = field(default_factory=dict)   # requests per key no format here gives a meaning
    skipped: int = 0                                        # ShareGPT conversations without a human turn

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

    @property
    def own_lengths(self) -> int:
        """Requests that carry their own output length (max_tokens or output_tokens)."""
        return sum(r.max_tokens is not None for r in self.requests)

    def notes(self, exact_output_tokens: object = None, option: str = "load.output_tokens") -> list[str]:
        """What the run says once about how the file was read: its formats, the keys it did not use, and the own
        lengths a fixed output length overrides (`exact_output_tokens`, set by `option`; None with "natural")."""
        formats = ", ".join(f"{form} ({count})" if len(self.formats) > 1 else form
                            for form, count in self.formats.items())
        out = [f"{self.path}: {len(self)} requests, read as {formats}"]
        if self.ignored:
            out.append("ignored keys: " + ", ".join(f"{key} ({count} request{'s' if count != 1 else ''})"
                                                     for key, count in self.ignored.items()))
        if self.skipped:
            out.append(f"{self.skipped} conversation(s) without a human turn skipped (nothing for the model to answer)")
        if exact_output_tokens is not None and self.own_lengths:
            out.append(f"{option} = {exact_output_tokens} sends every request exactly that long: the set's own "
                       f"output lengths ({self.own_lengths} requests) are not used; set {option} = \"natural\" to "
                       "use them")
        return out


def read_request_set(path: str | Path, min_per_category: int = MIN_REQUESTS_PER_CATEGORY) -> RequestSet:
    """The file's requests, or RequestSetError naming the file, the line and what is wrong. OSError and
    UnicodeDecodeError pass through (the caller names the file)."""
    text = Path(path).read_text(encoding="utf-8-sig")   # a byte-order mark (Windows tools write one) is no content
    name = str(path)
    stripped = text.lstrip()
    if not stripped:
        raise RequestSetError(f"{name}: the file is empty; {JSONL_HELP}")
    reading = Reading.empty()
    if stripped.startswith("["):
        requests = sharegpt_requests(name, text, reading)
    else:
        requests = jsonl_requests(name, text, reading)
    if not requests:
        raise RequestSetError(f"{name}: no request in the file; {JSONL_HELP}")
    _check_categories(name, requests, min_per_category)
    return RequestSet(name, tuple(requests), dict(reading.formats), dict(reading.ignored), reading.skipped)


def _check_categories(name: str, requests: list[SetRequest], least: int) -> None:
    counts = Counter(r.category for r in requests)
    if len(counts) < 2 and UNCATEGORISED in counts:
        return  # no categories: the set is measured as one mix
    if WHOLE_SET in counts:   # its figures would be overwritten by the whole set's
        first = next(r.line for r in requests if r.category == WHOLE_SET)
        raise RequestSetError(f"{name}: line {first}: category {WHOLE_SET!r} is the report's name for every category "
                              "together; rename it")
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
