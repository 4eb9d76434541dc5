"""Pure pieces of one streaming completion request: its payload, failure reasons and requests.csv record.

Kept apart from user.py so they can be tested without importing Locust (which patches the process).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lookahead_runner.contracts.records import CONNECTION_ERROR, DISCONNECT_ERROR, TIMEOUT_ERROR, RequestRecord
from lookahead_runner.workload.sse import excerpt
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
) -> RequestRecord:
    first = result.first_token_s
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
    )
