"""One streamed completion, written straight from the engine loop.

The engine loop renders a step's chunks as soon as the model has computed the step (before the step
is due), sleeps until the step's end, then only writes the ready bytes to each socket. No task
switch, JSON encoding or histogram update sits between a step's due time and its chunks leaving,
which keeps the chunk times on the model's schedule with hundreds of streams on one core
(benchmarks/sim_fidelity.py). The request's handler waits on `done` and writes the final usage chunk
and [DONE] through aiohttp, whose chunked framing these writes follow.
"""
from __future__ import annotations

import asyncio
from lookahead_runner.sim.model import Sequence, TokenOutput
from lookahead_runner.sim.protocol import ChunkWriter, usage, words


class StreamSink:
    def __init__(self, transport: asyncio.Transport, chunked: bool, writer: ChunkWriter, seq: Sequence | None,
                 prompt_tokens: int, offset: int, *, stream_interval: int = 1, continuous_usage: bool = False,
                 cut_at: int | None = None, garbled: bool = False, trace: bool = False) -> None:
        self.transport, self.chunked, self.writer, self.seq = transport, chunked, writer, seq
        self.prompt_tokens, self.offset = prompt_tokens, offset
        self.stream_interval, self.continuous_usage = stream_interval, continuous_usage
        self.cut_at, self.garbled, self.trace = cut_at, garbled, trace
        # result: "finished", "cut" (short-stream fault) or "gone" (the client closed the connection)
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.n_done = self.pending = 0
        self.t_first: float | None = None
        self.t_last: float | None = None

    def render(self, out: TokenOutput) -> tuple[bytes, str | None] | None:
        """This step's bytes and the end they bring ("finished", "cut" or None); None while buffering."""
        if self.done.done():
            return None
        self.pending += out.n_tokens
        if self.n_done and self.pending < self.stream_interval and not out.finished:
            return None                    # --stream-interval: buffer all but the first token
        text = words(self.offset + self.n_done, self.pending)
        # a chat stream opens with the role-only chunk, written with the first token's (one iteration in vLLM)
        opening = (self.writer.opening(usage(self.prompt_tokens, 0) if self.continuous_usage else None)
                   if self.writer.chat and not self.n_done else b"")
        self.n_done, self.pending = self.n_done + self.pending, 0
        reason = self.seq.finish_reason if out.finished and self.seq is not None else None
        usage_now = usage(self.prompt_tokens, self.n_done) if self.continuous_usage else None
        data = opening + self.writer.content(text, reason, usage_now)
        if self.garbled and self.n_done > 1:
            data = self.writer.garbled() + data
            self.garbled = False
        end = "finished" if out.finished else None
        if end is None and self.cut_at is not None and self.n_done >= self.cut_at:
            end = "cut"
        return data, end

    def send(self, data: bytes, end: str | None, t_due: float, now: float) -> tuple[float, float | None] | None:
        """Write one rendered chunk (at or after its due time); (write time, previous write time) if written."""
        if self.done.done():
            return None
        if self.trace:
            data = data[:-3] + b',"sim_t":%.6f,"sim_w":%.6f}\n\n' % (t_due, now)
        transport = self.transport
        if transport is None or transport.is_closing():
            self.done.set_result("gone")
            return None
        transport.write(b"%x\r\n%b\r\n" % (len(data), data) if self.chunked else data)
        previous, self.t_last = self.t_last, now
        if self.t_first is None:
            self.t_first = now
        if end is not None:
            self.done.set_result(end)
        return now, previous
