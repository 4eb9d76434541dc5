"""FastHttpUser base that streams fixed-length ``/v1/completions`` (or, with ``--endpoint chat``,
``/v1/chat/completions``: the prompt as one user message, sse.scan_chat_chunk) and records each request.

One request = a prompt of exactly ``--prompt-tokens`` tokens for the served model (workload/prompt.py:
calibrated text, or token ids), exactly ``--output-tokens`` tokens out (max_tokens = min_tokens,
ignore_eos), with --temperature / --top-p / --seed, streamed with usage on every chunk. Lines are read
off the socket with the time their bytes arrived (workload/reader.py: the kernel's receive stamp, so
a busy event loop does not delay the reading), and vLLM's compact chunks are read by position
(sse.scan_chunk) rather than parsed as JSON; TTFT, per-token ITL and TPOT are defined in
`lookahead_runner.workload.timeline`. Locust's own statistics get the full
end-to-end time as response_time and the completion tokens as response_length.

A request ends in exactly one of three ways:
- valid: a requests.csv row with ok=1 and a Locust success;
- failed: a row with ok=0 and the reason (plus detail), and a Locust failure with the reason alone.
  Reasons: "HTTP <status>: <body excerpt>", "timeout" (--request-timeout-s, end to end),
  "connection error: <type>", "disconnect mid-stream", "malformed chunk", "stream error" (an error
  chunk), "short output (completion_tokens != N)", "wrong prompt length (prompt_tokens != P)",
  "missing usage", "no token received";
- cut (the user was stopped mid-request, by a ramp-down or the end of the test): a row with ok=0 and
  error="cut", and no Locust event at all, so a killed request never counts as completed. With
  ``--stop-timeout`` > 0 Locust lets in-flight requests finish instead, and they count normally.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import gevent
from gevent import GreenletExit, monkey
from geventhttpclient import connectionpool
from locust import FastHttpUser, constant

from lookahead_runner.contracts.records import CONNECTION_ERROR, CUT_ERROR, TIMEOUT_ERROR, RequestRecord
from lookahead_runner.workload.request import (OutputCapture, StreamFailure, chat_payload, completion_payload,
                                               set_payload, to_record, transport_failure)
from lookahead_runner.workload.arrivals import Arrival, scheduled
from lookahead_runner.workload.request_set import SetCursor
from lookahead_runner.workload.scenario import ScenarioState, prepare_requests, stage_now, state_of
from lookahead_runner.workload.reader import ArrivalReader
from lookahead_runner.workload.sse import (SPEC_KEY, MalformedChunk, error_message, excerpt, parse_sse_line,
                                           scan_chat_chunk, scan_chunk)
from lookahead_runner.workload.timeline import TokenTimeline, judge

# geventhttpclient checks a pooled connection with select(timeout=0) before every request. Under
# Locust's monkey-patching that is gevent's select, which yields to every other ready greenlet first:
# the request left a whole event-loop round after its send time was taken, and TTFT counted that
# queue (measured: 200 ms at p50 with 256 streams on a busy core). The check itself never needs to
# wait, so the pool gets the operating system's select.
connectionpool.select = SimpleNamespace(select=monkey.get_original("select", "select"))

COMPLETIONS_PATH = "/v1/completions"
CHAT_PATH = "/v1/chat/completions"
# A user's index in its process counts in steps of this, its worker's index added, so users of different worker
# processes walk the request set from different places (Locust's --processes: at most 64).
_USERS_STRIDE = 64
# After a request refused outright (server down, HTTP error status), pause before the next one:
# a closed loop would otherwise spin at thousands of failures per second and flood requests.csv.
_REFUSED_BACKOFF_S = 0.1
ERROR_MESSAGE_CHARS = 160   # an HTTP error's message in its failure reason (vLLM's name the model and its aliases)
Scanner = Callable[[bytes, bool], "tuple[bool, bool, int | None, int | None] | None"]
SPAWN_SPREAD_S = 1.0


class StreamingCompletionsBase(FastHttpUser):
    """Closed-loop user: sends the next streaming completion as soon as the last one ended."""

    abstract = True
    concurrency = 1
    wait_time = constant(0)
    # the request (and its API key) goes to the server's address only: a redirect is an answer, never followed
    max_redirects = 0
    # Called with (raw line without b"\n", arrival time in unix seconds) for every line read; for
    # instrumentation (benchmarks/client_accuracy.py), None in normal runs.
    observe_line: Callable[[bytes, float], None] | None = None

    def __init__(self, environment: Any) -> None:
        self.scenario: ScenarioState = state_of(environment)
        # Queueing at high concurrency delays the first chunk by seconds: Locust's 60 s default
        # socket timeout would cut exactly the requests this test is about.
        self.network_timeout = self.connection_timeout = self.scenario.settings.request_timeout_s
        super().__init__(environment)
        self._rng = random.Random()
        # raw SSE lines are read off the socket: a compressed body could not be split into lines
        self._headers = {"Accept-Encoding": "identity", **self.scenario.headers}
        # the n-th user made in a process: its requests of the set follow from that alone, not from timing
        worker = max(int(getattr(environment.runner, "worker_index", 0) or 0), 0)
        self.user_index = self.scenario.users_made * _USERS_STRIDE + worker
        self.scenario.users_made += 1
        self._cursor: SetCursor | None = None

    def on_start(self) -> None:
        # Locust spawns a stage's new users in one burst (spawn rate = USERS per second is one
        # dispatch); with fixed lengths they would then send, finish and resend in lockstep for the
        # whole stage, and the client would queue each wave's sends. Spreading first requests over
        # a second starts them "at USERS per second", as the stages promise, and keeps them apart.
        gevent.sleep(self._rng.uniform(0.0, SPAWN_SPREAD_S))

    def stream_completion(self, arrival: Arrival | None = None) -> RequestRecord:
        """Send one request, read its stream, report it to Locust and append it to requests.csv. `arrival`: a
        rate stage's scheduled request (workload/dispatcher.py), which brings its stage and its request."""
        state = self.scenario
        if not state.prepared:
            prepare_requests(self.environment, state)
        settings = state.settings
        stage, users = stage_now(self.environment) if arrival is None else (arrival.stage, 0)
        path, scan, payload, sent, expected_prompt = self._next_request(arrival)
        # every response's spec metrics; a set's text too (a chat chunk's text is its delta's content)
        capture = OutputCapture(keep_text=sent is not None, chat=path == CHAT_PATH)
        timeline = TokenTimeline()
        lag_mark = state.lag.mark()
        t_send_s = time.time()  # the clock the kernel stamps arrivals with (workload/reader.py)
        try:
            with self.client.post(
                path, json=payload, headers=self._headers, stream=True, catch_response=True
            ) as resp:
                failure, end_s = self._read_stream(resp, timeline, t_send_s, settings.request_timeout_s, scan,
                                                   capture)
                result = timeline.result(end_s)
                reason = judge(result, settings.exact_output_tokens, expected_prompt)
                if failure is None and reason is not None:
                    failure = StreamFailure(reason, f"{result.prompt_tokens} prompt, {result.output_tokens} "
                                                    f"output tokens, {result.chunks} chunks")
                resp.request_meta["response_time"] = result.e2e_ms
                resp.request_meta["response_length"] = result.output_tokens
                if failure is None:
                    resp.success()
                else:
                    resp.failure(failure.reason)
        except GreenletExit:
            # Stopped mid-request: no Locust event fired (the with-block saw no verdict), only a "cut" row.
            cut = timeline.result(time.time() - t_send_s)
            self._write(scheduled(to_record(stage, users, t_send_s, cut, CUT_ERROR, None, state.client,
                                            state.lag.cpu_pct(), sent, capture), arrival))
            raise
        record = scheduled(to_record(stage, users, t_send_s, result, str(failure or ""),
                                     state.lag.p99_since_ms(lag_mark), state.client, state.lag.cpu_pct(), sent,
                                     capture), arrival)
        self._write(record)
        # (an arrival keeps its schedule: a rate stage does not slow down for a refusing server)
        if arrival is None and failure is not None and failure.reason.startswith((CONNECTION_ERROR, "HTTP ")):
            gevent.sleep(_REFUSED_BACKOFF_S)
        return record

    def _next_request(self, arrival: Arrival | None = None
                      ) -> tuple[str, Scanner, dict[str, Any], tuple[Any, int] | None, int | None]:
        """(path, its chunk scanner, body, (the set's request, its round) or None, the prompt tokens every
        response must count). A request of the set with messages goes to the chat endpoint, one with a prompt to
        the endpoint load.endpoint names (config/loading refuses messages with load.endpoint = "completions").
        An arrival's request follows from its place in the schedule alone (the same in every life)."""
        state, settings = self.scenario, self.scenario.settings
        exact = settings.exact_output_tokens
        if state.request_set is None:
            assert state.prompt is not None and exact is not None
            prompt = state.prompt.make(self._rng if arrival is None else arrival.rng())
            if settings.chat:
                return (CHAT_PATH, scan_chat_chunk,
                        chat_payload(state.model, str(prompt), exact, settings.temperature, settings.top_p,
                                     settings.seed, settings.template_kwargs),
                        None, state.prompt.prompt_tokens)
            return (COMPLETIONS_PATH, scan_chunk,
                    completion_payload(state.model, prompt, exact, settings.temperature, settings.top_p, settings.seed),
                    None, state.prompt.prompt_tokens)
        if arrival is not None:
            request, rounds = arrival.pick(state.request_set)
        else:
            if self._cursor is None or self._cursor.request_set is not state.request_set:
                self._cursor = SetCursor(state.request_set, self.user_index)
            request, rounds = self._cursor.next()
        if request.is_chat or settings.chat:  # a prompt on the chat endpoint is one user message
            return (CHAT_PATH, scan_chat_chunk,
                    chat_payload(state.model, request.messages or str(request.prompt), exact or request.cap(),
                                 settings.temperature, settings.top_p, settings.seed, settings.template_kwargs, exact=exact is not None),
                    (request, rounds), None)
        return (COMPLETIONS_PATH, scan_chunk,
                set_payload(state.model, request, exact, settings.temperature, settings.top_p, settings.seed),
                (request, rounds), None)

    def _read_stream(self, resp: Any, timeline: TokenTimeline, t_send_s: float, timeout_s: float,
                     scan: Scanner = scan_chunk,
                     capture: OutputCapture | None = None) -> tuple[StreamFailure | None, float]:
        """(why the stream failed or None, its end in seconds from the send)."""
        error = getattr(resp, "error", None)
        status = resp.status_code
        if status != 200:
            failure = (StreamFailure(f"HTTP {status}: {_body_excerpt(resp)}") if status
                       else transport_failure(error, mid_stream=False))
            return failure, time.time() - t_send_s
        # The socket timeout bounds each read; this bounds the whole request (a trickling stream too).
        timer = gevent.Timeout.start_new(max(t_send_s + timeout_s - time.time(), 0.0))
        try:
            failure, end_s = self._read_events(resp.stream, timeline, t_send_s, scan, capture)
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            failure, end_s = StreamFailure(TIMEOUT_ERROR, f"over {timeout_s:g} s"), time.time() - t_send_s
        finally:
            timer.close()
        if failure is not None:
            _close_connection(resp)
        return failure, end_s

    def _read_events(self, raw: Any, timeline: TokenTimeline, t_send_s: float,
                     scan: Scanner = scan_chunk,
                     capture: OutputCapture | None = None) -> tuple[StreamFailure | None, float]:
        """Read the SSE events as they arrive. Per line: the arrival time of the socket read that completed
        it (reader.py), then vLLM's compact chunk read by position (sse.scan_chunk), a full JSON parse only
        for anything else. Ends at [DONE] (its arrival is the end), an error chunk, or the end of the body."""
        observe = self.observe_line
        reader = ArrivalReader(raw)
        try:
            return self._read_lines(reader, timeline, t_send_s, observe, scan, capture)
        finally:
            reader.close()  # the connection's own timeout back, however the stream ended

    @staticmethod
    def _read_lines(reader: ArrivalReader, timeline: TokenTimeline, t_send_s: float,
                    observe: Callable[[bytes, float], None] | None,
                    scan: Scanner = scan_chunk,
                    capture: OutputCapture | None = None) -> tuple[StreamFailure | None, float]:
        add = timeline.add_parts
        while True:
            try:
                lines = reader.read_lines()
            except Exception as exc:  # socket errors, parser errors, connection closed
                return transport_failure(exc, mid_stream=True), time.time() - t_send_s
            if lines is None:
                return None, time.time() - t_send_s  # end of body; judge() tells a clean end from a disconnect
            arrived_s = reader.arrived_s - t_send_s
            for line in lines:
                if observe is not None:
                    observe(line, reader.arrived_s)
                if not line:  # the blank line after every event
                    continue
                parts = scan(line, timeline.prompt_tokens is None)
                # the final usage chunk's metrics are read in full below; a request of the set keeps its text
                if parts is not None and (capture is None or (parts[0] and SPEC_KEY not in line)):
                    add(arrived_s, *parts)
                    if capture is not None:
                        capture.add_line(line)
                    continue
                try:
                    chunk = parse_sse_line(line)
                except MalformedChunk as exc:
                    return StreamFailure("malformed chunk", str(exc)), time.time() - t_send_s
                if chunk is None:
                    continue
                timeline.add(chunk, arrived_s)
                if capture is not None:
                    capture.add_chunk(chunk)
                if chunk.done:
                    return None, arrived_s
                if chunk.error is not None:
                    return StreamFailure("stream error", chunk.error), time.time() - t_send_s

    def _write(self, record: RequestRecord) -> None:
        if self.scenario.request_log is not None:
            self.scenario.request_log.append(record.as_row())


def _close_connection(resp: Any) -> None:
    """Drop the connection of a stream left unread, rather than leave it to the garbage collector."""
    raw = getattr(resp, "_response", None)
    try:
        if raw is not None:
            raw.release()
    except Exception:  # already closed
        pass


def _body_excerpt(resp: Any) -> str:
    """The server's own message where the body is an OpenAI-style error (vLLM's), else the body's start."""
    try:
        body = resp.content or b""
        return error_message(body, ERROR_MESSAGE_CHARS) or excerpt(body) or "(empty body)"
    except Exception:  # the body may be gone with the released connection
        return "(body unavailable)"
