"""HTTP face of the simulator: vLLM's routes on aiohttp, plus the loop that steps the engine.

One asyncio task steps the pure engine model while work exists and sleeps to an absolute
schedule (next_t += step duration), so chunk times follow the model, not Python's speed.
Each request owns an asyncio.Queue that the loop fills with (tokens, finished) per step.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time
import zlib
from dataclasses import dataclass, field
from typing import Callable

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger

from lookahead_runner.sim.faults import Faults
from lookahead_runner.sim.metrics import CONTENT_TYPE, SimMetrics
from lookahead_runner.sim.model import EngineModel, TokenOutput
from lookahead_runner.sim.profiles import Profile
from lookahead_runner.sim.protocol import (ChunkWriter, RequestError, completion_response, detokenize,
                                           parse_completion, spec_metrics, token_ids, usage, words)

Log = Callable[[str, str, str], None]          # (level, source "file.py:line", message)
STATS_INTERVAL_S = 5.0
MAX_LAG_BEFORE_RESYNC_S = 0.25                 # a stalled loop must not burst to catch up


@dataclass(eq=False)
class _Live:
    request_id: str
    prompt_tokens: int
    t_arrival: float
    queue: asyncio.Queue = field(default_factory=asyncio.Queue)


class SimServer:
    def __init__(self, model: EngineModel, profile: Profile, model_name: str, faults: Faults, log: Log,
                 api_keys: list[str] | None = None, log_stats: bool = True, stream_interval: int = 1) -> None:
        self.model = model
        self.profile = profile
        self.model_name = model_name
        self.faults = faults
        self.log = log
        self.api_keys = api_keys or []
        self.log_stats = log_stats
        self.stream_interval = stream_interval
        self.metrics = SimMetrics(model, model_name, profile)
        self.live: dict[str, _Live] = {}
        self.created_s = int(time.time())
        self.fingerprint = f"vllm-{profile.version}-{hashlib.sha256(model_name.encode()).hexdigest()[:8]}"
        self.hung = False
        self._wake = asyncio.Event()

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
            step_start = loop.time()
            result = self.model.step()
            for rid in self.model.admitted_last_step:
                live = self.live.get(rid)
                if live is not None:
                    self.metrics.queue_s.observe(step_start - live.t_arrival)
            if result.duration_s <= 0.0:        # nothing fits this instant; wait for a change
                await asyncio.sleep(0.005)
                next_t = loop.time()
                continue
            next_t += result.duration_s
            delay = next_t - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -MAX_LAG_BEFORE_RESYNC_S:
                next_t = loop.time()
            self._deliver(result.outputs)

    def _deliver(self, outputs: list[TokenOutput]) -> None:
        for out in outputs:
            live = self.live.get(out.request_id)
            if live is not None:
                live.queue.put_nowait(out)

    async def stats_loop(self) -> None:
        """vLLM's periodic 'Engine 000: ...' and 'SpecDecoding metrics: ...' lines."""
        c = self.model.counters
        last = (time.monotonic(), c.prompt_tokens, c.generation_tokens, c.spec_drafts, c.spec_draft_tokens,
                c.spec_accepted_tokens, c.accepted_per_pos())
        while True:
            await asyncio.sleep(STATS_INTERVAL_S)
            now = (time.monotonic(), c.prompt_tokens, c.generation_tokens, c.spec_drafts, c.spec_draft_tokens,
                   c.spec_accepted_tokens, c.accepted_per_pos())
            dt = max(now[0] - last[0], 1e-9)
            prompt_tps, gen_tps = (now[1] - last[1]) / dt, (now[2] - last[2]) / dt
            busy = prompt_tps or gen_tps or self.model.num_running or self.model.num_waiting
            if busy and self.log_stats:
                self.log("INFO", "loggers.py:259", (
                    f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
                    f"{gen_tps:.1f} tokens/s, Running: {self.model.num_running} reqs, Waiting: "
                    f"{self.model.num_waiting} reqs, GPU KV cache usage: {100 * self.model.kv_usage:.1f}%, "
                    "Prefix cache hit rate: 0.0%"))
                drafts, drafted, accepted = now[3] - last[3], now[4] - last[4], now[5] - last[5]
                if self.model.k and drafts:
                    per_pos = ", ".join(f"{(a - b) / drafts:.3f}" for a, b in zip(now[6], last[6]))
                    self.log("INFO", "metrics.py:100", (
                        f"SpecDecoding metrics: Mean acceptance length: {1 + accepted / drafts:.2f}, "
                        f"Accepted throughput: {accepted / dt:.2f} tokens/s, Drafted throughput: "
                        f"{drafted / dt:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
                        f"Per-position acceptance rate: {per_pos}, Avg Draft acceptance rate: "
                        f"{100 * accepted / drafted:.1f}%"))
            last = now

    # --- routes ---------------------------------------------------------------------------
    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/health", self.health)
        app.router.add_get("/version", self.version)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics_route)
        app.router.add_post("/tokenize", self.tokenize)
        app.router.add_post("/detokenize", self.detokenize)
        app.router.add_post("/v1/completions", self.completions)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler):
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
        try:
            body = await self._json(request)
            prompt = body.get("prompt") if isinstance(body, dict) else None
            if not isinstance(prompt, str):
                raise RequestError("prompt must be a string")
        except RequestError as e:
            return self.error(e.message, e.err_type, e.status)
        tokens = token_ids(prompt)
        return web.json_response({"count": len(tokens), "max_model_len": self.model.cfg.max_model_len,
                                  "tokens": tokens, "token_strs": None})

    async def detokenize(self, request: web.Request) -> web.Response:
        body = await self._json(request)
        tokens = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            return self.error("tokens must be a list of integers")
        return web.json_response({"prompt": detokenize(tokens)})

    async def completions(self, request: web.Request) -> web.StreamResponse:
        t_arrival = asyncio.get_running_loop().time()
        try:
            params = parse_completion(await self._json(request), self.model.cfg.max_model_len)
        except RequestError as e:
            return self.error(e.message, e.err_type, e.status)
        if params.model is not None and params.model != self.model_name:
            return self.error(f"The model `{params.model}` does not exist.", "NotFoundError", 404)
        if self.faults.draw("http-500"):
            return self.error("simulated internal server error (--sim-fault http-500)",
                              "InternalServerError", 500)
        rid = f"cmpl-{secrets.token_hex(8)}"
        live = _Live(rid, params.prompt_tokens, t_arrival)
        self.live[rid] = live
        seq = self.model.add_request(rid, params.prompt_tokens, params.max_tokens, min_tokens=params.min_tokens,
                                     ignore_eos=params.ignore_eos, temperature=params.temperature)
        self._wake.set()
        try:
            if params.stream:
                return await self._stream(request, live, params, seq)
            return await self._collect(live, params, seq)
        finally:
            self.live.pop(rid, None)
            self.model.abort(rid)          # no-op once finished; frees the blocks of a dropped client

    def _observe_chunk(self, live: _Live, now: float, t_last: float | None) -> None:
        if t_last is None:
            self.metrics.ttft_s.observe(now - live.t_arrival)
        else:
            self.metrics.itl_s.observe(now - t_last)

    async def _collect(self, live: _Live, params, seq) -> web.Response:
        loop = asyncio.get_running_loop()
        n_done, t_last = 0, None
        while True:
            out: TokenOutput = await live.queue.get()
            now = loop.time()
            self._observe_chunk(live, now, t_last)
            t_last = now
            n_done += out.n_tokens
            if out.finished:
                break
        self.metrics.e2e_s.observe(loop.time() - live.t_arrival)
        body = completion_response(live.request_id, int(time.time()), self.model_name,
                                   words(zlib.crc32(live.request_id.encode()), n_done), seq.finish_reason,
                                   live.prompt_tokens, n_done)
        return web.json_response(body)

    async def _stream(self, request: web.Request, live: _Live, params, seq) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        writer = ChunkWriter(live.request_id, int(time.time()), self.model_name)
        try:
            await self._write_stream(response, writer, live, params, seq)
        except ConnectionResetError:       # the client went away; the caller frees its blocks
            pass
        return response

    async def _write_stream(self, response: web.StreamResponse, writer: ChunkWriter, live: _Live, params,
                            seq) -> None:
        loop = asyncio.get_running_loop()
        offset = zlib.crc32(live.request_id.encode())
        cut_at = params.max_tokens // 2 if self.faults.draw("short-stream") else None
        garbled = self.faults.draw("malformed-stream")
        n_done, pending, t_last = 0, 0, None
        while True:
            out: TokenOutput = await live.queue.get()
            pending += out.n_tokens
            if n_done and pending < self.stream_interval and not out.finished:
                continue                   # --stream-interval: buffer all but the first token
            now = loop.time()
            self._observe_chunk(live, now, t_last)
            t_last = now
            text = words(offset + n_done, pending)
            n_done, pending = n_done + pending, 0
            reason = seq.finish_reason if out.finished else None
            usage_now = usage(live.prompt_tokens, n_done) if params.continuous_usage else None
            if garbled and n_done > 1:
                await response.write(b'data: {"id": "' + live.request_id.encode() + b'", "choices": [\n\n')
                garbled = False
            await response.write(writer.content(text, reason, usage_now))
            if cut_at is not None and n_done >= cut_at and not out.finished:
                await response.write(writer.done())
                return
            if out.finished:
                break
        self.metrics.e2e_s.observe(loop.time() - live.t_arrival)
        if params.include_usage:
            spec = (spec_metrics(self.model.k, seq.spec_steps, seq.accepted, seq.accept_hist)
                    if self.model.k else None)
            await response.write(writer.final_usage(usage(live.prompt_tokens, n_done), self.fingerprint, spec))
        await response.write(writer.done())


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
