"""How exact is the project's Locust user? Against the same mock server, beside a plain asyncio +
aiohttp client (the way `vllm bench serve` streams) measured in the same run.

    python benchmarks/client_accuracy.py [--cases 256:10:1,1024:40:auto] [--runs 3] [--duration-s 10]

A case is USERS:MS_PER_TOKEN:PROCESSES (Locust processes, a count or "auto": what load.processes =
"auto" plans, placement.py, at most one per client CPU). The defaults are the goal's two cases:
256 users in one process at 10 ms per token, and 1024 users at 40 ms per token (the same ~25k
tokens/s). Every case runs --runs times (this box is shared and noisy: one run is one sample); the
summary gives the median over runs and the range.

One mock server process (stamped_mock.py) streams /v1/completions on a fixed schedule; every content
chunk carries its true send time and the request's arrival time, the kernel's receive stamp, so the
mock's own lateness (reading the request late, sending a chunk behind schedule) is not counted against
the client; it is reported beside (`mock late`: p99 of send lateness and of request-read lateness, ms).

- TTFT error = client TTFT - (t_sent of the first token - t_arrival): what the client adds in
  sending the request and in timing the first token;
- ITL error = client gap between two tokens - the gap between their t_sent;
- read lag = client arrival time of a token - its t_sent.
Errors are p50 / p99 of their absolute values over the requests completed in [WARMUP_S, duration].
Tokens/s = completed output tokens in that window per second; CPU = the client's processes' CPU over
the window, in % of one core (summed over processes).

The Locust client is the real scenario (locustfiles/completions.py's user base, shape and record
files) with one hook, `observe_line`, that keeps (arrival time, t_sent, t_arrival) per content line:
stamps are read by slicing fixed offsets, not by a second JSON parse. The reference takes its
timestamp right after each line is read, before json.loads (vllm bench serve takes it after).
Clients run pinned to all CPUs but the last and the server to the last when there are two CPUs or
more (--no-pin: not). The last line printed is one JSON object with every figure.

This file is also the benchmark's locustfile (`locust -f benchmarks/client_accuracy.py`): the Locust
part below is defined only when Locust imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from stamped_mock import FIRST_TOKEN_MS, MODEL, OUTPUT_TOKENS, PROMPT_TOKENS, pct, read_stamps

REPO = Path(__file__).resolve().parents[1]
MOCK = Path(__file__).resolve().with_name("stamped_mock.py")
WARMUP_S = 2.0
GOALS = {"token_rate_ratio_min": 1.0, "p50_error_ms_max": 1.0, "p99_error_ms_max": 5.0}
DEFAULT_CASES = "256:10:1,1024:40:auto"  # users : ms per token : Locust processes


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


def _pin(cpus: tuple[int, ...] | None):
    return None if not cpus else (lambda: os.sched_setaffinity(0, set(cpus)))


def _cpu_figures(cpu_by_process: dict[str, list], t0: float, t1: float) -> tuple[float | None, float | None]:
    """(total, busiest process) CPU over [t0, t1], in % of one core."""
    shares = []
    for samples in cpu_by_process.values():
        inside = [(t, c) for t, c in samples if t0 - 0.5 <= t <= t1 + 0.5] or samples
        if len(inside) > 1:
            shares.append(100.0 * (inside[-1][1] - inside[0][1]) / max(inside[-1][0] - inside[0][0], 1e-9))
    return (round(sum(shares), 1), round(max(shares), 1)) if shares else (None, None)


def _figures(raw: dict, duration_s: float) -> dict:
    t0 = raw["t_start"] + WARMUP_S
    t1 = raw["t_start"] + duration_s
    done = [r for r in raw["requests"] if t0 <= r[0] <= t1 and r[1]]
    cpu_total, cpu_busiest = _cpu_figures(raw["cpu"], t0, t1)
    ttft = [abs(r[3]) for r in done if r[3] is not None]
    itl = [abs(e) for r in done for e in r[4]]
    lags = [lag for r in done for lag in r[5]]
    sends = [r[3] - r[5][0] for r in done if r[3] is not None and r[5]]
    loop = [r[6] for r in done if r[6] is not None]
    return {
        "requests": len(done), "failed_or_short": sum(1 for r in raw["requests"] if t0 <= r[0] <= t1 and not r[1]),
        "tokens_per_s": round(sum(r[2] for r in done) / (t1 - t0), 1),
        "ttft_error_ms": {"p50": pct(ttft, 50), "p99": pct(ttft, 99)},
        "itl_error_ms": {"p50": pct(itl, 50), "p99": pct(itl, 99)},
        "read_lag_ms": {"p50": pct(lags, 50), "p99": pct(lags, 99)},
        # TTFT error = first token's read lag + send delay (client's send time -> the request's arrival)
        "send_delay_ms": {"p50": pct(sends, 50), "p99": pct(sends, 99)},
        "loop_lag_p99_ms": pct(loop, 99),
        "cpu_pct": cpu_total, "busiest_process_cpu_pct": cpu_busiest, "processes": len(raw["cpu"]),
    }


def _run_client(client: str, url: str, users: int, duration_s: float, out: Path, cpus: tuple[int, ...] | None,
                processes: int = 1) -> dict:
    """One client through one run; its raw measurements (every Locust process's, merged)."""
    raw_path = out / "raw.json"
    if client == "locust":
        from lookahead_runner.run.life.load import _processes_args

        argv = [sys.executable, "-m", "locust", "-f", str(Path(__file__).resolve()), "--headless", "--host", url,
                "--stages", f"{users}:{duration_s:g}", "--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens",
                str(OUTPUT_TOKENS), "--model", MODEL, "--requests-csv", str(out / "requests.csv"),
                "--stages-csv", str(out / "stages.csv"), "--only-summary", "--loglevel", "WARNING",
                *_processes_args(processes)]
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "reference", "--url", url, "--users", str(users),
                "--duration-s", str(duration_s), "--out", str(raw_path)]
    env = os.environ | {"ACCURACY_RAW": str(raw_path), "PYTHONPATH": str(REPO)}
    with open(out / "client.log", "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=_pin(cpus),
                              timeout=duration_s + 120).returncode
    parts = sorted(out.glob("raw.json*"))
    if code != 0 or not parts:
        raise RuntimeError(f"{client} exited {code}: {(out / 'client.log').read_text()[-2000:]}")
    raw = {"requests": [], "cpu": {}}
    for part in parts:
        data = json.loads(part.read_text())
        raw["requests"] += data["requests"]
        if data["requests"] or client == "reference":  # a Locust master runs no user: its CPU is not the readers'
            raw["cpu"][part.name] = data["cpu"]
        raw.setdefault("t_start", data.get("t_start"))
    if client == "locust":  # the stage as the shape ran it
        with open(out / "stages.csv", newline="") as handle:
            raw["t_start"] = float(next(csv.DictReader(handle))["t_start_s"])
    return raw


def _auto_processes(users: int, itl_ms: float, cpus: tuple[int, ...] | None) -> tuple[int, str]:
    """What load.processes = "auto" plans for this case (placement.py), at most one per client CPU."""
    from lookahead_runner.run.life.placement import CHUNK_CPU_US, processes_for

    wanted = processes_for(users, 1000.0 / itl_ms if itl_ms else 1000.0, CHUNK_CPU_US)
    room = len(cpus) if cpus else (os.cpu_count() or 1)
    return min(wanted, room), f"auto: {wanted} wanted at {CHUNK_CPU_US:g} us per chunk, {room} client CPU(s)"


def _mock_stats(url: str) -> dict:
    with urllib.request.urlopen(url + "/stats", timeout=10) as response:
        return json.loads(response.read())


def _parse_cases(text: str) -> list[tuple[int, float, str]]:
    cases = []
    for item in text.split(","):
        users, itl_ms, processes = item.split(":")
        cases.append((int(users), float(itl_ms), processes))
    return cases


def _median(values: list) -> float | None:
    values = sorted(v for v in values if v is not None)
    return None if not values else round(values[len(values) // 2] if len(values) % 2 else
                                         (values[len(values) // 2 - 1] + values[len(values) // 2]) / 2, 3)


def _summary(runs: list[dict]) -> list[dict]:
    """Per case and client: the median over runs of each figure, and its range."""
    out = []
    for key in dict.fromkeys((r["users"], r["itl_ms"]) for r in runs):
        mine = [r for r in runs if (r["users"], r["itl_ms"]) == key]
        case = {"users": key[0], "itl_ms": key[1], "runs": len(mine), "processes": mine[0]["processes"],
                "token_rate_ratio": _median([r["token_rate_ratio"] for r in mine])}
        for client in ("locust", "reference"):
            figures = [r[client] for r in mine]
            case[client] = {
                f"{metric}_{q}": {"median": _median([f[metric][q] for f in figures]),
                                  "range": [min(f[metric][q] for f in figures), max(f[metric][q] for f in figures)]}
                for metric in ("ttft_error_ms", "itl_error_ms") for q in ("p50", "p99")
                if all(f[metric][q] is not None for f in figures)
            } | {"tokens_per_s": _median([f["tokens_per_s"] for f in figures]),
                 "cpu_pct": _median([f["cpu_pct"] for f in figures])}
        case["mock_lateness_ms"] = {name: _median([r["mock"][name]["p99"] for r in mine]) for name in mine[0]["mock"]}
        out.append(case)
    return out


def _drive(args: argparse.Namespace) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    pinned = len(cpus) >= 2 and not args.no_pin
    client_cpus, server_cpus = (tuple(cpus[:-1]), (cpus[-1],)) if pinned else (None, None)
    runs = []
    with tempfile.TemporaryDirectory(prefix="client-accuracy-") as folder:
        work = Path(folder)
        itl_file = work / "itl_ms"
        itl_file.write_text("10")
        server = subprocess.Popen([sys.executable, str(MOCK), "--itl-file", str(itl_file)],
                                  stdout=subprocess.PIPE, preexec_fn=_pin(server_cpus), start_new_session=True)
        try:
            assert server.stdout is not None
            url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
            for run in range(args.runs):
                for users, itl_ms, processes_text in args.cases:
                    itl_file.write_text(f"{itl_ms:g}")
                    time.sleep(0.5)
                    processes, how = ((_auto_processes(users, itl_ms, client_cpus)) if processes_text == "auto"
                                      else (int(processes_text), "fixed"))
                    pair, mock = {}, {}
                    for client in ("locust", "reference"):
                        out = work / f"{client}-{users}-{itl_ms:g}-{run}"
                        out.mkdir()
                        _mock_stats(url)  # reset the mock's lateness
                        raw = _run_client(client, url, users, args.duration_s, out, client_cpus,
                                          processes if client == "locust" else 1)
                        pair[client] = _figures(raw, args.duration_s)
                        mock[client] = _mock_stats(url)
                    ratio = (pair["locust"]["tokens_per_s"] / pair["reference"]["tokens_per_s"]
                             if pair["reference"]["tokens_per_s"] else None)
                    ratio = ratio and round(ratio, 3)
                    lateness = {"send_ms": mock["locust"]["send_ms"], "read_ms": mock["locust"]["read_ms"]}
                    runs.append({"run": run, "users": users, "itl_ms": itl_ms, "processes": processes,
                                 "processes_how": how, "token_rate_ratio": ratio, "mock": lateness, **pair})
                    print(f"run {run} users={users:4d} itl={itl_ms:g}ms processes={processes}  "
                          f"locust {_line(pair['locust'])}  |  reference {_line(pair['reference'])}  ratio {ratio}  "
                          f"mock late p99 send {lateness['send_ms']['p99']} read {lateness['read_ms']['p99']} ms",
                          flush=True)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=10)
    summary = _summary(runs)
    print(json.dumps({"benchmark": "client_accuracy", "machine": _machine(client_cpus, server_cpus),
                      "settings": {"first_token_ms": FIRST_TOKEN_MS, "output_tokens": OUTPUT_TOKENS,
                                   "prompt_tokens": PROMPT_TOKENS, "duration_s": args.duration_s, "warmup_s": WARMUP_S,
                                   "runs": args.runs},
                      "goals": _goals(summary), "summary": summary, "runs": runs}))


def _line(figures: dict) -> str:
    ttft, itl = figures["ttft_error_ms"], figures["itl_error_ms"]
    return (f"{figures['tokens_per_s']:8.0f} tok/s ttft err {ttft['p50']}/{ttft['p99']} itl err {itl['p50']}/"
            f"{itl['p99']} read lag p99 {figures['read_lag_ms']['p99']} send delay p50/p99 "
            f"{figures['send_delay_ms']['p50']}/{figures['send_delay_ms']['p99']} cpu {figures['cpu_pct']}%")


def _goals(summary: list[dict]) -> dict:
    """The 1 ms p50 / 5 ms p99 goal on the median of the runs, for every case measured."""
    verdicts = {}
    for case in summary:
        locust = case["locust"]
        checks = {
            "token_rate_ratio": (case["token_rate_ratio"] or 0) >= GOALS["token_rate_ratio_min"],
            **{f"{metric}_{q}": ((locust.get(f"{metric}_{q}") or {}).get("median") or 1e9) <= limit
               for metric in ("ttft_error_ms", "itl_error_ms")
               for q, limit in (("p50", GOALS["p50_error_ms_max"]), ("p99", GOALS["p99_error_ms_max"]))},
        }
        verdicts[f"{case['users']}u/{case['itl_ms']:g}ms"] = {"met": checks, "all_met": all(checks.values())}
    return {"p50_error_ms_max": GOALS["p50_error_ms_max"], "p99_error_ms_max": GOALS["p99_error_ms_max"],
            "token_rate_ratio_min": GOALS["token_rate_ratio_min"], "cases": verdicts}


def _machine(client_cpus, server_cpus) -> dict:
    return {"cpus": os.cpu_count(), "client_cpus": client_cpus, "server_cpus": server_cpus,
            "load_avg_1m_at_end": round(os.getloadavg()[0], 2), "python": sys.version.split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    reference = sub.add_parser("reference")
    reference.add_argument("--url", required=True)
    reference.add_argument("--users", type=int, required=True)
    reference.add_argument("--duration-s", type=float, required=True)
    reference.add_argument("--out", required=True)
    parser.add_argument("--cases", type=_parse_cases, default=_parse_cases(DEFAULT_CASES),
                        help=f"USERS:ITL_MS:PROCESSES,... (PROCESSES a count or auto; default {DEFAULT_CASES})")
    parser.add_argument("--runs", type=int, default=3, help="repeat every case this many times (figures: medians)")
    parser.add_argument("--duration-s", type=float, default=10.0)
    parser.add_argument("--no-pin", action="store_true", help="leave clients and server to the OS scheduler")
    args = parser.parse_args()
    if args.command == "reference":
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
            # arrival times are unix seconds already (workload/reader.py): no clock offset
            _RAW["requests"].append(json.dumps(_summarise(record.t_done_s, record.ok, record.output_tokens,
                                                          record.ttft_ms, self._chunks, 0.0, record.lag_p99_ms)))

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
        # one file per process (with --processes, every worker and the master write their own)
        Path(f"{os.environ['ACCURACY_RAW']}.{os.getpid()}").write_text(f'{{"requests": {requests}, "cpu": {cpu}}}')
