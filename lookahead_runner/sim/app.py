"""HTTP face of the simulator: vLLM's routes on aiohttp, plus the loop that steps the engine.

One asyncio task steps the pure engine model while work exists and sleeps to an absolute
schedule (next_t += step duration), so chunk times follow the model, not Python's speed. A step's
tokens are due at the end of the step: the loop renders the streamed chunks as soon as the step is
computed and writes them itself when it is due (stream.py); a non-streamed request gets
(output, due time) through its asyncio.Queue. With LOOKAHEAD_SIM_TRACE_SCHEDULE=1 every streamed
chunk also carries "sim_t" (the due time) and "sim_w" (when it was written), both on
time.monotonic()'s clock, which all processes of a Linux host share: benchmarks/sim_fidelity.py
measures lateness with them.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from lookahead_runner.sim import logs
from lookahead_runner.sim.faults import Faults
from lookahead_runner.sim.metrics import CONTENT_TYPE, RequestDone, SimMetrics
from lookahead_runner.sim.model import EngineModel, TokenOutput
from lookahead_runner.sim.profiles import Profile
from lookahead_runner.sim.protocol import (NO_CHAT_TEMPLATE, VOCAB_SIZE, ChunkWriter, RequestError, chat_prompt_tokens,
                                           completion_response, detokenize, parse_chat, parse_completion,
                                           spec_metrics, token_ids, usage, words)
from lookahead_runner.sim.stream import StreamSink

Log = Callable[[str, str, str], None]          # (level, source "file.py:line", message)
STATS_INTERVAL_S = 5.0
MAX_LAG_BEFORE_RESYNC_S = 0.25                 # a stalled loop must not burst to catch up
TRACE_ENV = "LOOKAHEAD_SIM_TRACE_SCHEDULE"
PRECISE_SLEEP_S = 0.0015                       # the last stretch of a sleep is slept precisely


async def _sleep_until(loop: asyncio.AbstractEventLoop, t_due: float) -> None:
    """Sleep to t_due within ~0.1 ms, and always yield once.

    asyncio wakes up to 1 ms late (epoll counts in whole milliseconds), so the last 1.5 ms are slept
    with time.sleep, which blocks the loop that long but keeps chunk times on the schedule.
    """
    coarse = t_due - loop.time() - PRECISE_SLEEP_S
    await asyncio.sleep(max(coarse, 0.0))
    rest = t_due - loop.time()
    if rest > 0:
        time.sleep(rest)


@dataclass(eq=False)
class _Live:
    request_id: str
    prompt_tokens: int
    max_tokens: int
    t_arrival: float
    chat: bool = False
    content_key: int = 0
    t_scheduled: float | None = None
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)
    sink: StreamSink | None = None


class SimServer:
    def __init__(self, model: EngineModel, profile: Profile, model_name: str, faults: Faults, log: Log,
                 api_keys: list[str] | None = None, log_stats: bool = True, stream_interval: int = 1,
                 spec_metrics_level: str = "none") -> None:
        self.model = model
        self.profile = profile
        self.model_name = model_name
        self.faults = faults
        self.log = log
        self.api_keys = api_keys or []
        self.log_stats = log_stats
        self.stream_interval = stream_interval
        self.spec_metrics_level = spec_metrics_level   # --per-request-spec-decode-metrics: none, summary, detailed
        self.metrics = SimMetrics(model, model_name, profile, faults.dropped_metrics)
        self.live: dict[str, _Live] = {}
        self.created_s = int(time.time())
        self.fingerprint = f"vllm-{profile.version}-{hashlib.sha256(model_name.encode()).hexdigest()[:8]}"
        self.hung = False                  # the engine stops stepping; HTTP still answers
        self.unresponsive = False          # connections are accepted, nothing is answered
        self.resyncs = 0
        self.trace = os.environ.get(TRACE_ENV, "") not in ("", "0")
        self._wake = asyncio.Event()
        self._never = asyncio.Event()

    # --- engine loop ----------------------------------------------------------------------
    async def engine_loop(self) -> None:
        loop = asyncio.get_running_loop()
        next_t = loop.time()
        while True:
            if not self.model.has_work() or self.hung:
                self._wake.clear()
                await self._wake.wait()
                next_t = loop.time()
                continue
            result = self.model.step()
            for rid in self.model.admitted_last_step:
                live = self.live.get(rid)
                if live is not None:
                    live.t_scheduled = next_t
                    self.metrics.queue_s.observe(max(next_t - live.t_arrival, 0.0))
            if result.duration_s <= 0.0:        # nothing fits this instant; wait for a change
                await asyncio.sleep(0.005)
                next_t = loop.time()
                continue
            self.metrics.iteration_tokens.observe(result.n_tokens)
            ready, queued = self._render(result.outputs)
            next_t += result.duration_s
            delay = next_t - loop.time()
            if delay < -MAX_LAG_BEFORE_RESYNC_S:
                self.resyncs += 1
                self.log("WARNING", "core.py:410", f"simulated engine loop is {-delay:.3f} s behind its schedule; "
                         "resynchronising (the host is too slow for this load)")
                next_t = loop.time()
            await _sleep_until(loop, next_t)
            self._release(ready, queued, next_t, loop)

    def _render(self, outputs: list[TokenOutput]) -> tuple[list, list]:
        """Before the step is due: the bytes of every streamed chunk, the outputs for everyone else."""
        ready, queued = [], []
        for out in outputs:
            live = self.live.get(out.request_id)
            if live is None:
                continue
            if live.sink is None:
                queued.append((live, out))
            else:
                rendered = live.sink.render(out)
                if rendered is not None:
                    ready.append((live, *rendered))
        return ready, queued

    def _release(self, ready: list, queued: list, t_due: float, loop: asyncio.AbstractEventLoop) -> None:
        """At the step's end: write the chunks first, then the bookkeeping."""
        observed: list[tuple[_Live, float, float | None]] = []
        for live, data, end in ready:
            written = live.sink.send(data, end, t_due, loop.time())
            if written is not None:
                observed.append((live, *written))
        for live, out in queued:
            live.queue.put_nowait((out, t_due))
        for live, now, last in observed:
            self._observe_chunk(live, now, last)

    async def stats_loop(self) -> None:
        """vLLM's periodic throughput (and speculation) log lines, in the profile's format."""
        m, c = self.model, self.model.counters

        def snapshot() -> tuple:
            return (time.monotonic(), c.prompt_tokens, c.generation_tokens, c.spec_drafts, c.spec_draft_tokens,
                    c.spec_accepted_tokens, c.accepted_per_pos())

        last = snapshot()
        while True:
            await asyncio.sleep(STATS_INTERVAL_S)
            now = snapshot()
            d = [a - b for a, b in zip(now[:6], last[:6])]
            busy = d[1] or d[2] or m.num_running or m.num_waiting
            if busy and self.log_stats:
                window = logs.StatsWindow(d[0], d[1], d[2], d[3], d[4], d[5], [a - b for a, b in zip(now[6], last[6])],
                                          m.num_running, m.num_waiting, m.kv_usage, m.k, c.spec_drafts,
                                          c.spec_draft_tokens, c.spec_accepted_tokens)
                for source, message in logs.stats(self.profile, window):
                    self.log("INFO", source, message)
            last = now

    # --- routes ---------------------------------------------------------------------------
    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._faults_and_auth])
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_route)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/detokenize", self.detokenize)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        return app

    @web.middleware
    async def _faults_and_auth(self, request: web.Request, handler):
        if self.unresponsive:
            await self._never.wait()
        if self.api_keys and request.path.startswith("/v1"):
            if request.headers.get("Authorization", "") not in {f"Bearer {k}" for k in self.api_keys}:
                return web.json_response({"error": "Unauthorized"}, status=401)
        return await handler(request)

    def error(self, message: str, err_type: str = "BadRequestError", status: int = 400) -> web.Response:
        return web.json_response(self.profile.error_body(message, err_type, status), status=status)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.profile.version})

    async def models(self, request: web.Request) -> web.Response:
        card = {"id": self.model_name, "object": "model", "created": self.created_s, "owned_by": "vllm",
                "root": self.model_name, "parent": None, "max_model_len": self.model.cfg.max_model_len,
                "permission": [{"id": f"modelperm-{secrets.token_hex(16)}", "object": "model_permission",
                                "created": self.created_s, "allow_create_engine": False, "allow_sampling": True,
                                "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                                "allow_fine_tuning": False, "organization": "*", "group": None,
                                "is_blocking": False}]}
        return web.json_response({"object": "list", "data": [card]})

    async def metrics_route(self, request: web.Request) -> web.Response:
        delay_s = self.faults.get("slow-metrics")
        if delay_s:
            await asyncio.sleep(delay_s)
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    async def _json(self, request: web.Request) -> object:
        try:
            return await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RequestError("JSON decode error") from None

    async def tokenize(self, request: web.Request) -> web.Response:
        """A prompt's tokens, or (with `messages`) the chat template's count, as vLLM's TokenizeChatRequest."""
        try:
            body = await self._json(request)
            if isinstance(body, dict) and "messages" in body:
                self._check_chat_template()
                count = chat_prompt_tokens(body["messages"], bool(body.get("add_generation_prompt", True)),
                                           body.get("chat_template_kwargs"))
                tokens = [zlib.crc32(b"chat-%d" % i) % VOCAB_SIZE for i in range(count)]
            else:
                prompt = body.get("prompt") if isinstance(body, dict) else None
                if not isinstance(prompt, str):
                    raise RequestError("prompt must be a string")
                tokens = token_ids(prompt)
        except RequestError as e:
            return self.error(e.message, e.err_type, e.status)
        return web.json_response({"count": len(tokens), "max_model_len": self.model.cfg.max_model_len,
                                  "tokens": tokens, "token_strs": None})

    def _check_chat_template(self) -> None:
        if self.faults.get("no-chat-template"):
            raise RequestError(NO_CHAT_TEMPLATE)

    async def detokenize(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return self.error("tokens must be a list of integers")
        return web.json_response({"prompt": detokenize(tokens)})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, parse_completion)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._serve(request, parse_chat)

    async def _serve(self, request: web.Request, parse) -> web.StreamResponse:
        t_arrival = asyncio.get_running_loop().time()
        try:
            params = parse(await self._json(request), self.model.cfg.max_model_len)
            if params.chat:
                self._check_chat_template()
        except RequestError as e:
            return self.error(e.message, e.err_type, e.status)
        if params.model is not None and params.model != self.model_name:
            # vLLM 0.32's words (serve/engine/serving.py): the served names follow
            return self.error(f"The model `{params.model}` does not exist. Valid aliases: {self.model_name}.",
                              "NotFoundError", 404)
        if self.faults.draw("http-500"):
            return self.error("simulated internal server error (--sim-fault http-500)", "InternalServerError", 500)
        if self.faults.draw("http-429"):
            return self.error("simulated rate limit (--sim-fault http-429)", "TooManyRequestsError", 429)
        rid = f"{'chatcmpl' if params.chat else 'cmpl'}-{secrets.token_hex(8)}"
        # greedy decoding: the output (its text, its end) follows from the content alone, the same for every K;
        # sampled: from this request's draws
        greedy = params.temperature == 0
        live = _Live(rid, params.prompt_tokens, params.max_tokens, t_arrival, chat=params.chat,
                     content_key=params.content_key if greedy else zlib.crc32(rid.encode()))
        if params.stream:                  # the sink exists before the engine can produce a token
            response, writer = await self._open_stream(request, live, params)
        self.live[rid] = live
        seq = self.model.add_request(rid, params.prompt_tokens, params.max_tokens, min_tokens=params.min_tokens,
                                     ignore_eos=params.ignore_eos, temperature=params.temperature, chat=params.chat,
                                     content_key=params.content_key if greedy else None,
                                     category=self.model.scenario.category_of(list(params.content_words)))
        self._wake.set()
        try:
            if live.sink is not None:
                live.sink.seq = seq
                return await self._finish_stream(response, writer, live, params, seq)
            return await self._collect(live, seq)
        finally:
            self.live.pop(rid, None)
            self.model.abort(rid)          # no-op once finished; frees the blocks of a dropped client

    def _observe_chunk(self, live: _Live, now: float, t_last: float | None) -> None:
        if t_last is None:
            self.metrics.ttft_s.observe(now - live.t_arrival)
        else:
            self.metrics.itl_s.observe(now - t_last)

    def _observe_done(self, live: _Live, seq, now: float, t_first: float, n_done: int) -> None:
        t_scheduled = live.t_scheduled if live.t_scheduled is not None else live.t_arrival
        self.metrics.request_done(RequestDone(
            queue_s=t_scheduled - live.t_arrival, prefill_s=t_first - t_scheduled, decode_s=now - t_first,
            e2e_s=now - live.t_arrival, prompt_tokens=live.prompt_tokens, generation_tokens=n_done,
            max_tokens=live.max_tokens, preemptions=seq.preemptions))

    async def _collect(self, live: _Live, seq) -> web.Response:
        loop = asyncio.get_running_loop()
        n_done, t_first, t_last = 0, 0.0, None
        while True:
            out, _ = await live.queue.get()
            now = loop.time()
            self._observe_chunk(live, now, t_last)
            t_first, t_last = (now if t_last is None else t_first), now
            n_done += out.n_tokens
            if out.finished:
                break
        self._observe_done(live, seq, loop.time(), t_first, n_done)
        body = completion_response(live.request_id, int(time.time()), self.model_name,
                                   words(live.content_key, n_done), seq.finish_reason,
                                   live.prompt_tokens, n_done, chat=live.chat)
        return web.json_response(body)

    async def _open_stream(self, request: web.Request, live: _Live, params) -> tuple[web.StreamResponse, ChunkWriter]:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        await response.write(b"")          # flush the headers before the engine loop writes the body
        writer = ChunkWriter(live.request_id, int(time.time()), self.model_name, chat=params.chat)
        chunked = "chunked" in response.headers.get("Transfer-Encoding", "")
        # the text follows from the prompt: one content, one greedy output, in every life
        live.sink = StreamSink(request.transport, chunked, writer, None, live.prompt_tokens,
                               live.content_key, stream_interval=self.stream_interval,
                               continuous_usage=params.continuous_usage,
                               cut_at=params.max_tokens // 2 if self.faults.draw("short-stream") else None,
                               garbled=self.faults.draw("malformed-stream"), trace=self.trace)
        return response, writer

    async def _finish_stream(self, response: web.StreamResponse, writer: ChunkWriter, live: _Live, params,
                             seq) -> web.StreamResponse:
        sink = live.sink
        end = await sink.done
        try:
            if end == "finished":
                self._observe_done(live, seq, asyncio.get_running_loop().time(), sink.t_first or 0.0, sink.n_done)
                if params.include_usage:
                    extras = self.profile.usage_extras
                    level = self.spec_metrics_level
                    per_step = (seq.per_step_accepted, seq.per_step_drafted) if level == "detailed" else None
                    spec = (spec_metrics(self.model.k, seq.spec_steps, seq.drafted, seq.accepted, seq.accept_hist,
                                         per_step)
                            if self.model.k and extras and level != "none" else None)
                    await response.write(writer.final_usage(usage(live.prompt_tokens, sink.n_done),
                                                            self.fingerprint if extras else None, spec))
            if end != "gone":
                await response.write(writer.done())
        except ConnectionResetError:       # the client went away; the caller frees its blocks
            pass
        return response


def access_logger_class(write: Callable[[str], None]) -> type[AbstractAccessLogger]:
    """Uvicorn-style access lines: INFO:     127.0.0.1:34786 - "GET /health HTTP/1.1" 200 OK"""

    class _UvicornAccessLogger(AbstractAccessLogger):
        def log(self, request, response, time) -> None:  # noqa: A002 - aiohttp's signature
            peer = request.transport.get_extra_info("peername") if request.transport else None
            host, port = (peer[0], peer[1]) if peer else ("-", 0)
            write(f'INFO:     {host}:{port} - "{request.method} {request.path_qs} HTTP/'
                  f'{request.version.major}.{request.version.minor}" {response.status} {response.reason}')

        @property
        def enabled(self) -> bool:
            return True

    return _UvicornAccessLogger
