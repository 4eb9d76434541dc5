"""Pure parsing of the server-sent events of a streaming vLLM ``/v1/completions`` response (and of
``/v1/chat/completions``, whose choices carry a ``delta`` instead of ``text``: `scan_chat_chunk`).

A vLLM stream is a sequence of ``data: {json}`` lines separated by blank lines and ended by
``data: [DONE]``. With ``stream_options.include_usage`` a last chunk has ``"choices": []`` and the
request's ``usage``; with ``continuous_usage_stats`` every chunk also carries the running
``usage`` (so the completion_tokens delta between chunks is the number of tokens a chunk holds:
under speculative decoding one chunk carries several tokens). An error after the headers were
sent arrives as a chunk with an ``error`` object (or ``"object": "error"``), then ``[DONE]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

DATA_PREFIX = b"data:"
DONE_PAYLOAD = b"[DONE]"
_EXCERPT_CHARS = 80
_DECODER = json.JSONDecoder()


class MalformedChunk(ValueError):
    """A ``data:`` line whose payload is not a JSON object of the expected shape."""


# Not frozen: a frozen dataclass's __init__ costs about a microsecond more, for every chunk read.
@dataclass(slots=True)
class Usage:
    prompt_tokens: int | None
    completion_tokens: int


@dataclass(slots=True)
class Chunk:
    """One ``data:`` event. ``done`` marks the ``[DONE]`` sentinel (all other fields empty)."""

    text: str = ""
    has_choices: bool = False
    finish_reason: str | None = None
    usage: Usage | None = None
    error: str | None = None
    done: bool = False
    spec: dict | None = None        # vLLM 0.32's metrics.speculative_decoding (--per-request-spec-decode-metrics)


DONE = Chunk(done=True)


# The compact chunk vLLM writes (pydantic's model_dump_json: no spaces), read by position:
# data: {"id":...,"choices":[{"index":0,"text":"...",...}],"usage":{"prompt_tokens":P,...,"completion_tokens":C}}
FAST_PREFIX = b"data: {"
_CHOICES = b'"choices":['
_TEXT = b'"text":'
_COMPLETION = b'"completion_tokens":'
_PROMPT = b'"prompt_tokens":'
_NO_USAGE = b'"usage":null'
_DIGITS = re.compile(rb"\d+")


def scan_chunk(line: bytes, want_prompt: bool = True) -> tuple[bool, bool, int | None, int | None] | None:
    """(has choices, has text, completion_tokens, prompt_tokens) of a content line in vLLM's compact
    form, read by position without building the JSON; None for anything else (an error chunk, other
    spacing, a line cut short...), which `parse_sse_line` then reads in full. prompt_tokens is read
    from the usage-only chunk, and from content chunks only while `want_prompt`.

    A key found by position cannot come from inside a string: JSON escapes every quote there."""
    at = _choices_at(line)
    if at is None:
        return None
    if line.startswith(b"]", at):
        has_choices = has_text = False
    elif line.startswith(b"{", at):
        has_choices = True
        text = line.find(_TEXT, at)
        if text < 0:
            return None
        text += len(_TEXT)
        has_text = line.startswith(b'"', text) and not line.startswith(b'""', text)
    else:
        return None
    return _with_usage(line, at, has_choices, has_text, want_prompt)


# A chat chunk (/v1/chat/completions) carries a delta instead of text, written with exclude_unset:
#   the opening chunk   "choices":[{"index":0,"delta":{"role":"assistant","content":""},...}]  (no token)
#   a content chunk     "choices":[{"index":0,"delta":{"content":" the"},...}]
#   an empty delta      "choices":[{"index":0,"delta":{},...,"finish_reason":"stop",...}]  (with a parser)
# A reasoning or tool-call delta goes to the JSON path.
_DELTA = b'"delta":{'
_ROLE = b'"role":"'
_CONTENT = b'"content":'
_EMPTY_CONTENT_END = b',"content":""}'


def scan_chat_chunk(line: bytes, want_prompt: bool = True) -> tuple[bool, bool, int | None, int | None] | None:
    """`scan_chunk` for a chat chunk: has text = a delta with non-empty content. The role-only opening chunk has
    choices but no text (its usage says 0 completion tokens), so it neither counts a token nor stops TTFT."""
    at = _choices_at(line)
    if at is None:
        return None
    if line.startswith(b"]", at):
        has_choices = has_text = False
    elif line.startswith(b"{", at):
        has_choices = True
        key = line.find(_DELTA, at)
        if key < 0:
            return None
        key += len(_DELTA)
        if line.startswith(_CONTENT, key):
            value = key + len(_CONTENT)
            if line.startswith(b'""}', value) or line.startswith(b"null}", value):
                has_text = False
            elif line.startswith(b'"', value) and not line.startswith(b'""', value):
                has_text = True
            else:  # an empty content with more of the delta after it (a reasoning delta): the JSON path
                return None
        elif line.startswith(_ROLE, key):
            role_end = line.find(b'"', key + len(_ROLE))
            if role_end < 0 or not (line.startswith(_EMPTY_CONTENT_END, role_end + 1)
                                    or line.startswith(b"}", role_end + 1)):
                return None
            has_text = False
        elif line.startswith(b"}", key):
            has_text = False
        else:
            return None
    else:
        return None
    return _with_usage(line, at, has_choices, has_text, want_prompt)


def _choices_at(line: bytes) -> int | None:
    """Where the choices list's contents start in a compact chunk line, or None for a line the fast path leaves
    to the JSON parse (another prefix, cut short, no choices)."""
    if not line.startswith(FAST_PREFIX) or not line.endswith(b"}"):
        return None
    at = line.find(_CHOICES)
    return None if at < 0 else at + len(_CHOICES)


def _with_usage(line: bytes, at: int, has_choices: bool, has_text: bool,
                want_prompt: bool) -> tuple[bool, bool, int | None, int | None] | None:
    """The usage part of a scanned chunk, searched from `at` (past the choices' start)."""
    completion = line.find(_COMPLETION, at)
    if completion < 0:
        if _NO_USAGE not in line and b'"usage"' in line:
            return None
        return has_choices, has_text, None, None
    tokens = _number_at(line, completion + len(_COMPLETION))
    if tokens is None:
        return None
    prompt = None
    if want_prompt or not has_choices:
        prompt_at = line.find(_PROMPT, at)
        if prompt_at >= 0:
            prompt = _number_at(line, prompt_at + len(_PROMPT))
            if prompt is None:
                return None
    return has_choices, has_text, tokens, prompt


def _number_at(line: bytes, start: int) -> int | None:
    """The integer starting at `start`; None when no digit stands there."""
    match = _DIGITS.match(line, start)
    return int(match.group()) if match else None


def excerpt(data: bytes | str, limit: int = _EXCERPT_CHARS) -> str:
    """A short one-line printable excerpt, for error messages."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def parse_sse_line(line: bytes | str) -> Chunk | None:
    """Parse one line of the stream; None for lines that carry no data (blank, comment, event:, id:).

    Raises MalformedChunk when a ``data:`` payload is not valid JSON or has the wrong shape.
    """
    raw = line.encode("utf-8") if isinstance(line, str) else line
    if not raw.startswith(DATA_PREFIX):
        raw = raw.strip()
        if not raw.startswith(DATA_PREFIX):
            return None
    payload = raw[len(DATA_PREFIX) :].strip()
    if payload == DONE_PAYLOAD:
        return DONE
    try:
        # str into the decoder directly: json.loads(bytes) first sniffs the encoding, a third of its time
        obj = _DECODER.decode(payload.decode("utf-8"))
    except ValueError as exc:  # UnicodeDecodeError included
        raise MalformedChunk(f"not JSON: {excerpt(payload)}") from exc
    if not isinstance(obj, dict):
        raise MalformedChunk(f"not a JSON object: {excerpt(payload)}")
    return chunk_from_json(obj, payload)


def chunk_from_json(obj: dict, payload: bytes = b"") -> Chunk:
    error = _error_message(obj)
    if error is not None:
        return Chunk(error=error)
    choices = obj.get("choices")
    if choices is None:
        choices = []
    if not isinstance(choices, list):
        raise MalformedChunk(f"'choices' is not a list: {excerpt(payload)}")
    texts: list[str] = []
    finish_reason = None
    for choice in choices:
        if not isinstance(choice, dict):
            raise MalformedChunk(f"a choice is not an object: {excerpt(payload)}")
        delta = choice.get("delta")
        text = choice.get("text") if delta is None else _delta_text(delta, payload)
        text = text or ""
        if not isinstance(text, str):
            raise MalformedChunk(f"'text' is not a string: {excerpt(payload)}")
        texts.append(text)
        finish_reason = choice.get("finish_reason") or finish_reason
    metrics = obj.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, dict) else None
    return Chunk(
        text="".join(texts),
        has_choices=bool(choices),
        finish_reason=finish_reason,
        usage=_usage(obj.get("usage"), payload),
        spec=spec if isinstance(spec, dict) else None,
    )


def _delta_text(delta: object, payload: bytes) -> str:
    """The generated text of a chat delta: its content, or its reasoning where the server's reasoning parser
    splits the thinking out (a token all the same). The role, or an empty content, is no text."""
    if not isinstance(delta, dict):
        raise MalformedChunk(f"'delta' is not an object: {excerpt(payload)}")
    parts = [delta.get("content"), delta.get("reasoning")]
    if not all(part is None or isinstance(part, str) for part in parts):
        raise MalformedChunk(f"a delta's 'content' is not a string: {excerpt(payload)}")
    return "".join(part for part in parts if part)
SPEC_KEY = b'"speculative_decoding"'
_FINISH = '"finish_reason":'


def text_and_finish(line: bytes, key: str = '"text":') -> tuple[str, str | None]:
    """The text (the string after `key`) and the finish_reason of a compact content line that scan_chunk
    read; ("", None) where either is not there. Only for a request whose output is hashed (request sets)."""
    decoded = line.decode("utf-8", errors="replace")
    text, finish = "", None
    at = decoded.find(key)
    if at >= 0:
        try:
            value, _ = _DECODER.raw_decode(decoded, at + len(key))
            text = value if isinstance(value, str) else ""
        except ValueError:
            pass
    at = decoded.find(_FINISH)
    if at >= 0 and decoded.startswith('"', at + len(_FINISH)):
        try:
            value, _ = _DECODER.raw_decode(decoded, at + len(_FINISH))
            finish = value if isinstance(value, str) else None
        except ValueError:
            pass
    return text, finish


def model_ids(body: bytes) -> list[str]:
    """The model names a GET /v1/models answer lists, in its order (vLLM's served model first); [] for an answer
    that is no such list (not JSON, no "data" list, ids that are no name: never "None" from {"id": null})."""
    try:
        obj = json.loads(body)
    except ValueError:
        return []
    models = obj.get("data") if isinstance(obj, dict) else None
    ids = [m.get("id") for m in models if isinstance(m, dict)] if isinstance(models, list) else []
    return [i for i in ids if isinstance(i, str) and i.strip()]


def error_message(body: bytes, limit: int = 300) -> str:
    """The message of an OpenAI-style error body (an HTTP error's), or "" where it has none."""
    try:
        obj = json.loads(body)
    except ValueError:
        return ""
    return (_error_message(obj, limit) or "") if isinstance(obj, dict) else ""


def _error_message(obj: dict, limit: int = _EXCERPT_CHARS) -> str | None:
    error = obj.get("error")
    if isinstance(error, dict):
        return excerpt(str(error.get("message") or error), limit)
    if isinstance(error, str):
        return excerpt(error, limit)
    if obj.get("object") == "error":
        return excerpt(str(obj.get("message") or obj), limit)
    return None


def _usage(usage: object, payload: bytes) -> Usage | None:
    if usage is None:
        return None
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        raise MalformedChunk(f"'usage' lacks an integer completion_tokens: {excerpt(payload)}")
    prompt_tokens = usage.get("prompt_tokens")
    return Usage(
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        completion_tokens=usage["completion_tokens"],
    )
