"""Pure pieces of one streaming completion request: its payload, failure reasons and requests.csv record.

Kept apart from user.py so they can be tested without importing Locust (which patches the process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lookahead_runner.contracts.records import CONNECTION_ERROR, DISCONNECT_ERROR, TIMEOUT_ERROR, RequestRecord
from lookahead_runner.workload.request_formats import Message, SetRequest
from lookahead_runner.workload.request_set import text_hash
from lookahead_runner.workload.sse import Chunk, excerpt, text_and_finish
from lookahead_runner.workload.timeline import StreamResult


@dataclass(frozen=True)
class StreamFailure:
    """`reason` is what Locust groups failures by (few distinct values); `detail` only goes to requests.csv."""

    reason: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.reason} ({self.detail})" if self.detail else self.reason


def completion_payload(
    model: str,
    prompt: str | list[int],
    output_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    seed: int | None = None,
) -> dict[str, Any]:
    """A streamed completion of exactly `output_tokens` tokens, with usage on every chunk."""
    payload: dict[str, Any] = {
        "model": model,
        "prompt": prompt,
        "max_tokens": output_tokens,
        "min_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": temperature,
        "top_p": top_p,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if seed is not None:
        payload["seed"] = seed
    return payload


def chat_payload(
    model: str,
    messages: str | tuple[Message, ...],
    output_tokens: int,
    temperature: float,
    top_p: float = 1.0,
    seed: int | None = None,
    template_kwargs: dict[str, Any] | None = None,
    exact: bool = True,
) -> dict[str, Any]:
    """The same request for /v1/chat/completions: `messages` as they are, or a synthetic prompt as one user message
    (the server applies its chat template and adds the generation prompt, as /tokenize with `messages` counted it),
    with usage on every chunk. Exactly `output_tokens` tokens where `exact`, else its natural length capped there."""
    if isinstance(messages, str):
        messages = (Message("user", messages),)
    body = completion_payload(model, "", output_tokens, temperature, top_p, seed)
    payload: dict[str, Any] = {"model": model, "messages": [{"role": m.role, "content": m.content} for m in messages],
                               "max_completion_tokens": output_tokens}
    payload |= {key: value for key, value in body.items()
                if key not in ("model", "prompt", "max_tokens") and (exact or key not in ("min_tokens", "ignore_eos"))}
    if template_kwargs:
        payload["chat_template_kwargs"] = template_kwargs
    return payload


def set_payload(model: str, request: SetRequest, output_tokens: int | None, temperature: float, top_p: float = 1.0,
                seed: int | None = None) -> dict[str, Any]:
    """A completion for one request of the user's set: exactly `output_tokens` tokens as `completion_payload`, or
    with `output_tokens` None its natural length, ending at its end of sequence, capped by its own max_tokens."""
    assert request.prompt is not None, "a request with messages goes to the chat endpoint (chat_payload)"
    if output_tokens is not None:
        return completion_payload(model, request.prompt, output_tokens, temperature, top_p, seed)
    payload = completion_payload(model, request.prompt, request.cap(), temperature, top_p, seed)
    del payload["min_tokens"], payload["ignore_eos"]
    return payload


@dataclass
class OutputCapture:
    """What a request of the user's set records beside its timing: the output text (hashed), the finish reason,
    and vLLM 0.32's per-request speculative-decoding metrics of its final usage chunk."""

    keep_text: bool = True          # False: only the metrics (a synthetic prompt's output is not compared)
    chat: bool = False              # chat chunks: the text is the delta's content
    texts: list[str] = field(default_factory=list)
    finish_reason: str = ""
    spec: dict | None = None

    def add_line(self, line: bytes) -> None:
        """A compact content line the fast path read (sse.scan_chunk): its text and finish reason."""
        if not self.keep_text:
            return
        text, finish = text_and_finish(line, '"content":' if self.chat else '"text":')
        if text:
            self.texts.append(text)
        if finish:
            self.finish_reason = finish

    def add_chunk(self, chunk: Chunk) -> None:
        if chunk.text and self.keep_text:
            self.texts.append(chunk.text)
        if chunk.finish_reason:
            self.finish_reason = chunk.finish_reason
        if chunk.spec is not None:
            self.spec = chunk.spec

    @property
    def output_hash(self) -> str:
        return text_hash("".join(self.texts))

    def spec_columns(self) -> dict[str, Any]:
        """The requests.csv spec_* cells (None where the response carried no metrics)."""
        spec = self.spec or {}
        return {"spec_acceptance_length": _number(spec.get("mean_acceptance_length"), float),
                "spec_acceptance_rate": _number(spec.get("draft_acceptance_rate"), float),
                "spec_steps": _number(spec.get("num_spec_steps"), int),
                "spec_draft_tokens": _number(spec.get("num_draft_tokens"), int),
                "spec_accepted_tokens": _number(spec.get("num_accepted_draft_tokens"), int)}


def _number(value: object, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def transport_failure(exc: BaseException | None, mid_stream: bool) -> StreamFailure:
    """Classify a socket-level error: timeout, disconnect mid-stream, or connection error."""
    original = getattr(exc, "original", None)  # geventhttpclient's RetriesExceeded wraps the real error
    for candidate in (exc, original):
        if isinstance(candidate, TimeoutError) or "timed out" in str(candidate):
            return StreamFailure(TIMEOUT_ERROR, type(candidate).__name__)
    name = type(original or exc).__name__
    if mid_stream:
        return StreamFailure(DISCONNECT_ERROR, name)
    return StreamFailure(f"{CONNECTION_ERROR}: {name}", excerpt(str(original or exc)))


def to_record(
    stage: int,
    users: int,
    t_send_s: float,
    result: StreamResult,
    error: str,
    lag_p99_ms: float | None,
    client: str = "",
    client_cpu_pct: float | None = None,
    sent: tuple[SetRequest, int] | None = None,
    capture: OutputCapture | None = None,
) -> RequestRecord:
    """`sent`: the request of the set and its round (None for a synthetic prompt); `capture`: what came back."""
    first = result.first_token_s
    extra: dict[str, Any] = {}
    if sent is not None:
        request, rounds = sent
        extra |= {"request_index": request.index, "category": request.category, "set_round": rounds}
    if capture is not None:
        extra |= {"output_hash": capture.output_hash if result.output_tokens and capture.keep_text else "",
                  "finish_reason": capture.finish_reason, **capture.spec_columns()}
    return RequestRecord(
        stage=stage,
        users=users,
        t_send_s=t_send_s,
        t_first_token_s=None if first is None else t_send_s + first,
        t_done_s=t_send_s + result.end_s,
        ttft_ms=result.ttft_ms,
        e2e_ms=result.e2e_ms,
        itl_p50_ms=result.itl_ms(50),
        itl_p99_ms=result.itl_ms(99),
        tpot_ms=result.tpot_ms,
        prompt_tokens=result.prompt_tokens,
        output_tokens=result.output_tokens,
        chunks=result.chunks,
        ok=not error,
        error=error,
        lag_p99_ms=lag_p99_ms,
        client=client,
        client_cpu_pct=client_cpu_pct,
        **extra,
    )
