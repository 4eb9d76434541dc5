"""Pure per-request timing: from (chunk, receive time) pairs to TTFT, per-token ITL, TPOT and token counts.

Definitions (all times are offsets in seconds from the moment the request was sent; a line's time is
when its bytes arrived at this host, workload/reader.py):

- TTFT: receive time of the first chunk with non-empty text (if no chunk has text, the first chunk
  that carries tokens).
- Tokens per chunk: the completion_tokens delta of the per-chunk usage (continuous_usage_stats);
  a chunk without per-chunk usage counts as one token if it has text, else zero.
- Per-token ITL: for every token-carrying chunk after the first one, the gap since the previous
  token-carrying chunk is spread evenly over its n tokens, i.e. n samples of gap / n. Tokens that
  arrive together with the first token get no sample (their gap is not observable), so the samples
  sum to (last token chunk - first token chunk) and speculative chunks neither hide as one long gap
  nor inflate the count with zeros.
- TPOT: (e2e - TTFT) / (output_tokens - 1), e2e ending at the arrival of ``[DONE]``; as vLLM's
  benchmarks define it. None for an answer of one token (no token after the first): vLLM's TPOT
  statistics leave it out, and its goodput counts it within any TPOT limit, as the decision's SLO
  rule does (a TPOT or ITL SLO is met by an answer of one token, its columns staying empty).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from lookahead_runner.contracts.records import (
    DISCONNECT_ERROR,
    MISSING_USAGE_ERROR,
    SHORT_OUTPUT_ERROR,
    WRONG_PROMPT_LENGTH_ERROR,
)
from lookahead_runner.workload.sse import Chunk


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation, as numpy's and pandas' default."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass
class StreamResult:
    """What one stream measured; times in seconds from send, None when not observed."""

    first_token_s: float | None
    end_s: float
    itl_samples_s: list[float]
    prompt_tokens: int | None
    output_tokens: int
    usage_seen: bool
    chunks: int
    done: bool

    @property
    def ttft_ms(self) -> float | None:
        return None if self.first_token_s is None else self.first_token_s * 1000.0

    @property
    def e2e_ms(self) -> float:
        return self.end_s * 1000.0

    def itl_ms(self, q: float) -> float | None:
        value = percentile(self.itl_samples_s, q)
        return None if value is None else value * 1000.0

    @property
    def tpot_ms(self) -> float | None:
        if self.first_token_s is None or self.output_tokens < 2:
            return None
        return (self.end_s - self.first_token_s) * 1000.0 / (self.output_tokens - 1)


@dataclass
class TokenTimeline:
    """Accumulates the chunks of one stream in arrival order (see the module docstring)."""

    first_text_s: float | None = None
    first_tokens_s: float | None = None
    last_token_chunk_s: float | None = None
    itl_samples_s: list[float] = field(default_factory=list)
    client_tokens: int = 0
    chunks: int = 0
    done: bool = False
    final_usage_tokens: int | None = None
    running_usage_tokens: int | None = None
    prompt_tokens: int | None = None

    def add(self, chunk: Chunk, received_s: float) -> None:
        if chunk.done:
            self.done = True
            return
        usage = chunk.usage
        self.add_parts(received_s, chunk.has_choices, bool(chunk.text),
                       None if usage is None else usage.completion_tokens, None if usage is None else usage.prompt_tokens)

    def add_parts(self, received_s: float, has_choices: bool, has_text: bool, completion_tokens: int | None,
                  prompt_tokens: int | None) -> None:
        """`add` for a chunk already taken apart (sse.scan_chunk): no objects built per chunk."""
        if prompt_tokens is not None:
            self.prompt_tokens = prompt_tokens
        if not has_choices:
            if completion_tokens is not None:
                self.final_usage_tokens = completion_tokens
            return
        self.chunks += 1
        if completion_tokens is None:
            tokens = 1 if has_text else 0
        else:
            tokens = completion_tokens - (self.running_usage_tokens or 0)
            self.running_usage_tokens = completion_tokens
            if tokens < 0:
                tokens = 0
        self.client_tokens += tokens
        if has_text and self.first_text_s is None:
            self.first_text_s = received_s
        if tokens <= 0:
            return
        if self.first_tokens_s is None:
            self.first_tokens_s = received_s
        elif self.last_token_chunk_s is not None:
            gap_s = (received_s - self.last_token_chunk_s) / tokens
            if tokens == 1:
                self.itl_samples_s.append(gap_s)
            else:
                self.itl_samples_s.extend([gap_s] * tokens)
        self.last_token_chunk_s = received_s

    def result(self, end_s: float) -> StreamResult:
        usage_tokens = self.final_usage_tokens
        if usage_tokens is None:
            usage_tokens = self.running_usage_tokens
        first_token_s = self.first_text_s if self.first_text_s is not None else self.first_tokens_s
        return StreamResult(
            first_token_s=first_token_s,
            end_s=end_s,
            itl_samples_s=self.itl_samples_s,
            prompt_tokens=self.prompt_tokens,
            output_tokens=usage_tokens if usage_tokens is not None else self.client_tokens,
            usage_seen=usage_tokens is not None,
            chunks=self.chunks,
            done=self.done,
        )


def judge(result: StreamResult, expected_output_tokens: int | None,
          expected_prompt_tokens: int | None = None) -> str | None:
    """The failure reason of a stream that ended without a transport error, or None when it is valid.

    The usage of every response is checked: a completion count other than asked is "short output",
    a prompt count other than `expected_prompt_tokens` is "wrong prompt length" (both are counted
    per stage by the analysis, never accepted). `expected_output_tokens` None: natural lengths, any count is right.
    """
    if not result.done:
        return DISCONNECT_ERROR
    if not result.usage_seen or (expected_prompt_tokens is not None and result.prompt_tokens is None):
        return MISSING_USAGE_ERROR
    if expected_output_tokens is not None and result.output_tokens != expected_output_tokens:
        return f"{SHORT_OUTPUT_ERROR} (completion_tokens != {expected_output_tokens})"
    if expected_prompt_tokens is not None and result.prompt_tokens != expected_prompt_tokens:
        return f"{WRONG_PROMPT_LENGTH_ERROR} (prompt_tokens != {expected_prompt_tokens})"
    if result.first_token_s is None:
        return "no token received"
    return None
