"""How exact is the project's Locust user? Against the same mock server, compared with a plain asyncio +
aiohttp client (the way `vllm bench serve` streams), at several concurrencies and token rates.

    python benchmarks/client_accuracy.py [--users 16,64,256] [--itl-ms 10,0] [--duration-s 10]

One mock server process (this file, `serve`) streams /v1/completions on a fixed schedule: first
token FIRST_TOKEN_MS after the request arrived, then one token every ITL ms (0: as fast as it can),
one token per chunk, usage on every chunk. Every content chunk starts with its true send time and
the request's arrival time (``data: {"t_sent":...,"t_arrival":...,``), so each client's readings can
be compared with what really happened, whatever the server's own lag:

- TTFT error = client TTFT - (t_sent of the first token - t_arrival): the client's delay in sending
  plus its delay in reading the first token;
- ITL error = client gap between two tokens - the gap between their t_sent;
- read lag = client receive time - t_sent (how late the client read what the server sent).
Errors are reported as p50 / p99 of their absolute values, over the requests that completed in the
window [WARMUP_S, duration]. Tokens/s = completed output tokens in that window per second, for one
client process; CPU = the client process's CPU time over the window, in % of one core.

The Locust client is the real scenario (locustfiles/completions.py's user base, shape and record
files) with one hook, `observe_line`, that keeps (receive time, t_sent, t_arrival) per content line:
stamps are read by slicing fixed offsets, not by a second JSON parse. The reference takes its
timestamp right after each line is read, before json.loads (vllm bench serve takes it after).
Clients run pinned to CPU 0 and the server to CPU 1 when there are two CPUs or more (--no-pin: not).
The last line printed is one JSON object with every figure.

This file is also the benchmark's locustfile (`locust -f benchmarks/client_accuracy.py`): the Locust
part below is defined only when Locust imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODEL = "mock-model"
FIRST_TOKEN_MS = 50.0
OUTPUT_TOKENS = 128
PROMPT_TOKENS = 32
WARMUP_S = 2.0
STAMP_PREFIX = b'data: {"t_sent":'
STAMP_CHARS = 17  # unix seconds with 6 decimals, 10 integer digits
ARRIVAL_OFFSET = len(STAMP_PREFIX) + STAMP_CHARS + len(b',"t_arrival":')
GOALS = {"users": 256, "itl_ms": 10.0, "token_rate_ratio_min": 1.0, "p50_error_ms_max": 1.0, "p99_error_ms_max": 5.0}


def read_stamps(line: bytes) -> tuple[float, float] | None:
    """(t_sent, t_arrival) of a content chunk, by position; None for other lines."""
    if not line.startswith(STAMP_PREFIX):
        return None
    start = len(STAMP_PREFIX)
    return float(line[start : start + STAMP_CHARS]), float(line[ARRIVAL_OFFSET : ARRIVAL_OFFSET + STAMP_CHARS])


# --- the mock server ---------------------------------------------------------------------------


def _chunk(request_id: int, index: int, t_arrival: float, finish: bool) -> bytes:
    reason = '"length"' if finish else "null"
    body = (f'{{"t_sent":{time.time():.6f},"t_arrival":{t_arrival:.6f},"id":"cmpl-{request_id}",'
            f'"object":"text_completion","created":{int(t_arrival)},"model":"{MODEL}","choices":[{{"index":0,'
            f'"text":" tok","logprobs":null,"finish_reason":{reason},"stop_reason":null}}],"usage":{{'
            f'"prompt_tokens":{PROMPT_TOKENS},"total_tokens":{PROMPT_TOKENS + index + 1},'
            f'"completion_tokens":{index + 1}}}}}')
    return _frame(b"data: " + body.encode() + b"\n\n")


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


async def _stream(writer: asyncio.StreamWriter, body: dict, t_arrival: float, itl_s: float, request_id: int) -> None:
    """Send the chunks from timer callbacks (no task switch per chunk), each at start + first + i * itl."""
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    loop = asyncio.get_running_loop()
    start = loop.time() + FIRST_TOKEN_MS / 1000.0
    tokens = int(body.get("max_tokens", OUTPUT_TOKENS))
    finished = loop.create_future()

    def send(index: int) -> None:
        if writer.is_closing():
            finished.set_result(None)
            return
        writer.write(_chunk(request_id, index, t_arrival, index == tokens - 1))
        if index + 1 < tokens:
            loop.call_at(start + (index + 1) * itl_s, send, index + 1)
        else:
            finished.set_result(None)

    loop.call_at(start, send, 0)
    await finished
    usage = (f'{{"id":"cmpl-{request_id}","object":"text_completion","choices":[],"usage":{{"prompt_tokens":'
             f'{PROMPT_TOKENS},"total_tokens":{PROMPT_TOKENS + tokens},"completion_tokens":{tokens}}}}}')
    writer.write(_frame(b"data: " + usage.encode() + b"\n\n") + _frame(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


def _json_response(document: dict) -> bytes:
    data = json.dumps(document).encode()
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data)


async def _serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, itl_s: float,
                            counter: list[int]) -> None:
    try:
        while True:
            request_line = await reader.readline()
            if not request_line:
                return
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = json.loads(await reader.readexactly(length)) if length else {}
            t_arrival = time.time()
            path = request_line.split(b" ")[1]
            if path == b"/v1/completions":
                counter[0] += 1
                await _stream(writer, body, t_arrival, itl_s, counter[0])
            elif path == b"/v1/models":
                writer.write(_json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]}))
            elif path == b"/tokenize":
                writer.write(_json_response({"count": len(str(body.get("prompt", "")).split())}))
            else:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        writer.close()


async def _serve(port: int, itl_file: str) -> None:
    counter = [0]
    itl = {"s": 0.0}

    async def handle(reader, writer):
        await _serve_connection(reader, writer, itl["s"], counter)

    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=1024)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    while True:  # the driver changes the token interval between runs through a file
        try:
            itl["s"] = float(Path(itl_file).read_text()) / 1000.0
        except (OSError, ValueError):
            pass
        await asyncio.sleep(0.2)


# --- the reference client: asyncio + aiohttp ----------------------------------------------------


async def _reference(url: str, users: int, duration_s: float, out: str) -> None:
    import aiohttp

    offset = time.time() - time.perf_counter()
    requests: list[list] = []
    cpu: list[tuple[float, float]] = []
    prompt = " ".join(["word"] * PROMPT_TOKENS)
    payload = {"model": MODEL, "prompt": prompt, "max_tokens": OUTPUT_TOKENS, "min_tokens": OUTPUT_TOKENS,
               "ignore_eos": True, "temperature": 0.0, "stream": True,
               "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    end = time.perf_counter() + duration_s

    async def user(index: int, session) -> None:
        await asyncio.sleep(index / users)  # spawned at `users` per second, as the Locust shape does
        while time.perf_counter() < end:
            chunks: list[tuple[float, float, float]] = []
            tokens, t0 = 0, time.perf_counter()
            ttft = None
            async with session.post(url + "/v1/completions", json=payload) as response:
                async for line in response.content:
                    received = time.perf_counter()
                    line = line.strip()
                    if not line.startswith(b"data:"):
                        continue
                    text = line[5:].strip()
                    if text == b"[DONE]":
                        break
                    data = json.loads(text)
                    if data.get("choices"):
                        stamps = read_stamps(line)
                        if ttft is None:
                            ttft = received - t0
                        if stamps is not None:
                            chunks.append((received, *stamps))
                    elif usage := data.get("usage"):
                        tokens = usage.get("completion_tokens", 0)
            requests.append(json.dumps(_summarise(offset + time.perf_counter(), tokens == OUTPUT_TOKENS, tokens,
                                                  None if ttft is None else ttft * 1000.0, chunks, offset, None)))

    async def sample_cpu() -> None:
        while True:
            cpu.append((time.time(), time.process_time()))
            await asyncio.sleep(0.5)

    sampler = asyncio.create_task(sample_cpu())
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        tasks = [asyncio.create_task(user(i, session)) for i in range(users)]
        await asyncio.sleep(duration_s)
        for task in tasks:  # cut what is still running, as the Locust shape's end does
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    cpu.append((time.time(), time.process_time()))
    sampler.cancel()
    Path(out).write_text(json.dumps({"requests": [json.loads(r) for r in requests], "cpu": cpu,
                                     "t_start": offset + end - duration_s}))


def _summarise(t_done: float, ok: bool, tokens: int, ttft_ms: float | None, chunks: list, offset: float,
               loop_lag_ms: float | None) -> list:
    """[t_done, ok, tokens, ttft error ms, [itl errors ms], [read lags ms], loop lag p99 ms] of one request."""
    ttft_error = None
    if ttft_ms is not None and chunks:
        ttft_error = ttft_ms - (chunks[0][1] - chunks[0][2]) * 1000.0
    itl_errors = [((b[0] - a[0]) - (b[1] - a[1])) * 1000.0 for a, b in zip(chunks, chunks[1:])]
    lags = [(received + offset - sent) * 1000.0 for received, sent, _ in chunks]
    return [t_done, ok, tokens, ttft_error, itl_errors, lags, loop_lag_ms]


# --- the driver ---------------------------------------------------------------------------------


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return round(ordered[low] + (ordered[high] - ordered[low]) * (position - low), 3)


def _pin(cpu: int | None):
    if cpu is None:
        return None
    return lambda: os.sched_setaffinity(0, {cpu})


def _figures(raw: dict, duration_s: float) -> dict:
    t0 = raw["t_start"] + WARMUP_S
    t1 = raw["t_start"] + duration_s
    done = [r for r in raw["requests"] if t0 <= r[0] <= t1 and r[1]]
    cpu = [(t, c) for t, c in raw["cpu"] if t0 - 0.5 <= t <= t1 + 0.5] or raw["cpu"]
    cpu_pct = 100.0 * (cpu[-1][1] - cpu[0][1]) / max(cpu[-1][0] - cpu[0][0], 1e-9) if len(cpu) > 1 else None
    ttft = [abs(r[3]) for r in done if r[3] is not None]
    itl = [abs(e) for r in done for e in r[4]]
    lags = [lag for r in done for lag in r[5]]
    loop = [r[6] for r in done if r[6] is not None]
    return {
        "requests": len(done), "failed_or_short": sum(1 for r in raw["requests"] if t0 <= r[0] <= t1 and not r[1]),
        "tokens_per_s": round(sum(r[2] for r in done) / (t1 - t0), 1),
        "ttft_error_ms": {"p50": _pct(ttft, 50), "p99": _pct(ttft, 99)},
        "itl_error_ms": {"p50": _pct(itl, 50), "p99": _pct(itl, 99)},
        "read_lag_ms": {"p50": _pct(lags, 50), "p99": _pct(lags, 99)},
        "loop_lag_p99_ms": _pct(loop, 99),
        "cpu_pct": None if cpu_pct is None else round(cpu_pct, 1),
    }


def _run_client(client: str, url: str, users: int, duration_s: float, out: Path, cpu: int | None) -> dict:
    """One client process through one run; its raw measurements."""
    raw_path = out / "raw.json"
    if client == "locust":
        argv = [sys.executable, "-m", "locust", "-f", str(Path(__file__).resolve()), "--headless", "--host", url,
                "--stages", f"{users}:{duration_s:g}", "--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens",
                str(OUTPUT_TOKENS), "--model", MODEL, "--requests-csv", str(out / "requests.csv"),
                "--stages-csv", str(out / "stages.csv"), "--only-summary", "--loglevel", "WARNING"]
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "reference", "--url", url, "--users", str(users),
                "--duration-s", str(duration_s), "--out", str(raw_path)]
    env = os.environ | {"ACCURACY_RAW": str(raw_path), "PYTHONPATH": str(REPO)}
    with open(out / "client.log", "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_pin(cpu),
                              timeout=duration_s + 120).returncode
    if code != 0 or not raw_path.exists():
        raise RuntimeError(f"{client} exited {code}: {(out / 'client.log').read_text()[-2000:]}")
    raw = json.loads(raw_path.read_text())
    if client == "locust":  # the stage as the shape ran it
        with open(out / "stages.csv", newline="") as handle:
            raw["t_start"] = float(next(csv.DictReader(handle))["t_start_s"])
    return raw


def _drive(args: argparse.Namespace) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    client_cpu, server_cpu = (cpus[0], cpus[1]) if len(cpus) >= 2 and not args.no_pin else (None, None)
    with tempfile.TemporaryDirectory(prefix="client-accuracy-") as folder:
        work = Path(folder)
        itl_file = work / "itl_ms"
        itl_file.write_text("10")
        server = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "serve", "--itl-file", str(itl_file)],
                                  stdout=subprocess.PIPE, preexec_fn=_pin(server_cpu), start_new_session=True)
        try:
            assert server.stdout is not None
            url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
            runs = []
            for itl_ms in args.itl_ms:
                itl_file.write_text(f"{itl_ms:g}")
                time.sleep(0.5)
                for users in args.users:
                    pair = {}
                    for client in ("locust", "reference"):
                        out = work / f"{client}-{users}-{itl_ms:g}"
                        out.mkdir()
                        raw = _run_client(client, url, users, args.duration_s, out, client_cpu)
                        pair[client] = _figures(raw, args.duration_s)
                    ratio = (pair["locust"]["tokens_per_s"] / pair["reference"]["tokens_per_s"]
                             if pair["reference"]["tokens_per_s"] else None)
                    ratio = ratio and round(ratio, 3)
                    runs.append({"users": users, "itl_ms": itl_ms, "token_rate_ratio": ratio, **pair})
                    print(f"users={users:4d} itl={itl_ms:g}ms  locust {_line(pair['locust'])}  |  "
                          f"reference {_line(pair['reference'])}  ratio {ratio}", flush=True)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=10)
    print(json.dumps({"benchmark": "client_accuracy", "machine": _machine(client_cpu, server_cpu),
                      "settings": {"first_token_ms": FIRST_TOKEN_MS, "output_tokens": OUTPUT_TOKENS,
                                   "prompt_tokens": PROMPT_TOKENS, "duration_s": args.duration_s, "warmup_s": WARMUP_S},
                      "goals": _goals(runs), "runs": runs}))


def _line(figures: dict) -> str:
    ttft, itl = figures["ttft_error_ms"], figures["itl_error_ms"]
    return (f"{figures['tokens_per_s']:8.0f} tok/s ttft err {ttft['p50']}/{ttft['p99']} itl err {itl['p50']}/"
            f"{itl['p99']} lag p99 {figures['read_lag_ms']['p99']} cpu {figures['cpu_pct']}%")


def _goals(runs: list[dict]) -> dict:
    target = next((r for r in runs if r["users"] == GOALS["users"] and r["itl_ms"] == GOALS["itl_ms"]), None)
    if target is None:
        return {"evaluated": False}
    locust = target["locust"]
    checks = {
        "token_rate_ratio": (target["token_rate_ratio"] or 0) >= GOALS["token_rate_ratio_min"],
        "ttft_error_p50": (locust["ttft_error_ms"]["p50"] or 1e9) <= GOALS["p50_error_ms_max"],
        "ttft_error_p99": (locust["ttft_error_ms"]["p99"] or 1e9) <= GOALS["p99_error_ms_max"],
        "itl_error_p50": (locust["itl_error_ms"]["p50"] or 1e9) <= GOALS["p50_error_ms_max"],
        "itl_error_p99": (locust["itl_error_ms"]["p99"] or 1e9) <= GOALS["p99_error_ms_max"],
    }
    return {"evaluated": True, **GOALS, "met": checks, "all_met": all(checks.values())}


def _machine(client_cpu: int | None, server_cpu: int | None) -> dict:
    return {"cpus": os.cpu_count(), "client_cpu": client_cpu, "server_cpu": server_cpu,
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve")
    serve.add_argument("--port", type=int, default=0)
    serve.add_argument("--itl-file", required=True)
    reference = sub.add_parser("reference")
    reference.add_argument("--url", required=True)
    reference.add_argument("--users", type=int, required=True)
    reference.add_argument("--duration-s", type=float, required=True)
    reference.add_argument("--out", required=True)
    parser.add_argument("--users", type=lambda s: [int(v) for v in s.split(",")], default=[16, 64, 256])
    parser.add_argument("--itl-ms", type=lambda s: [float(v) for v in s.split(",")], default=[10.0, 0.0])
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--no-pin", action="store_true", help="leave clients and server to the OS scheduler")
    args = parser.parse_args()
    if args.command == "serve":
        asyncio.run(_serve(args.port, args.itl_file))
    elif args.command == "reference":
        asyncio.run(_reference(args.url, args.users, args.duration_s, args.out))
    else:
        _drive(args)


if __name__ == "__main__":
    main()
else:  # loaded by `locust -f benchmarks/client_accuracy.py`: the scenario with one observation hook
    import gevent
    from locust import events, task

    from lookahead_runner.workload import scenario
    from lookahead_runner.workload.options import add_scenario_options
    from lookahead_runner.workload.shape import StagedShape
    from lookahead_runner.workload.user import StreamingCompletionsBase

    _RAW: dict = {"requests": [], "cpu": []}
    _OFFSET = time.time() - time.perf_counter()

    class AccuracyUser(StreamingCompletionsBase):
        """The project's user; `observe_line` keeps each content line's receive time and stamps."""

        def on_start(self) -> None:
            self._chunks: list[tuple[float, float, float]] = []
            super().on_start()

        def observe_line(self, line: bytes, received: float) -> None:
            stamps = read_stamps(line)
            if stamps is not None:
                self._chunks.append((received, *stamps))

        @task
        def completion(self) -> None:
            self._chunks = []
            record = self.stream_completion()
            # kept as text: a growing pile of lists would lengthen the process's garbage collections
            _RAW["requests"].append(json.dumps(_summarise(record.t_done_s, record.ok, record.output_tokens,
                                                          record.ttft_ms, self._chunks, _OFFSET, record.lag_p99_ms)))

    class Stages(StagedShape):
        pass

    def _sample_cpu() -> None:
        while True:
            _RAW["cpu"].append((time.time(), time.process_time()))
            gevent.sleep(0.5)

    @events.init_command_line_parser.add_listener
    def _options(parser, **_kwargs):
        add_scenario_options(parser)

    @events.init.add_listener
    def _init(environment, **_kwargs):
        scenario.on_init(environment)
        gevent.spawn(_sample_cpu)

    @events.test_start.add_listener
    def _start(environment, **_kwargs):
        scenario.on_test_start(environment)

    @events.test_stop.add_listener
    def _stop(environment, **_kwargs):
        scenario.on_test_stop(environment)

    @events.quitting.add_listener
    def _quit(environment, **_kwargs):
        scenario.on_quitting(environment)
        _RAW["cpu"].append((time.time(), time.process_time()))
        requests = "[" + ",".join(_RAW["requests"]) + "]"
        cpu = json.dumps(_RAW["cpu"])
        Path(os.environ["ACCURACY_RAW"]).write_text(f'{{"requests": {requests}, "cpu": {cpu}}}')
