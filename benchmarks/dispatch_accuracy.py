"""Does the rate-stage dispatcher send on schedule? Locust's open-loop dispatcher (the real locustfile, one
rate stage) beside a plain asyncio + aiohttp sender pacing the same seeded schedule the way `vllm bench serve`
does (sleep until each request is due, then start it as a task), against the same mock server, in one run.

    python benchmarks/dispatch_accuracy.py [--rate 200] [--duration-s 20] [--runs 2] [--burstiness 1]

Per client and run:
- lateness: each request's send time (taken just before the POST, as both clients record it) minus its
  scheduled time, p50 / p99 over every request (goal p99 <= 5 ms);
- the schedule kept: a Kolmogorov-Smirnov test of the gaps between the requests' arrivals at the server (the
  mock's kernel receive stamps, benchmarks/stamped_mock.py GET /arrivals) against the configured gamma
  distribution (exponential at burstiness 1) of mean 1 / rate: D and its p-value (and the same test of the
  scheduled times themselves, the check that the schedule is right);
- sent: the requests that reached the server, of those scheduled; ok: those that streamed to the end.
The mock streams --output-tokens tokens after 50 ms, one every --itl-ms, so requests overlap as an open loop's
must. Clients run pinned to all CPUs but the last and the mock to the last (on two CPUs or more; --no-pin: not).
Each run is one sample on a shared box; the summary gives the median over runs and the range. The last line
printed is one JSON object with every figure.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from stamped_mock import MODEL, PROMPT_TOKENS

REPO = Path(__file__).resolve().parents[1]
MOCK = Path(__file__).resolve().with_name("stamped_mock.py")
LOCUSTFILE = REPO / "locustfiles" / "completions.py"
GOAL_P99_MS = 5.0
SEED = 0


def _schedule(rate: float, duration_s: float, burstiness: float) -> np.ndarray:
    from lookahead_runner.workload.arrivals import ArrivalProcess, stage_offsets

    return stage_offsets(rate, duration_s, ArrivalProcess("poisson", burstiness, SEED), 0)


def _ks(times: np.ndarray, rate: float, burstiness: float) -> dict:
    """KS of the gaps between sorted times against gamma(burstiness, 1 / (rate * burstiness))."""
    gaps = np.diff(np.sort(times))
    if len(gaps) < 2:
        return {"D": None, "p": None, "n": int(len(gaps))}
    result = stats.kstest(gaps, "gamma", args=(burstiness, 0, 1 / (rate * burstiness)))
    return {"D": round(float(result.statistic), 4), "p": round(float(result.pvalue), 4), "n": int(len(gaps))}


# --- the reference sender: asyncio + aiohttp ------------------------------------------------------------

async def _reference(url: str, rate: float, duration_s: float, burstiness: float, output_tokens: int,
                     out: str) -> None:
    import aiohttp

    offsets = _schedule(rate, duration_s, burstiness)
    payload = {"model": MODEL, "prompt": " ".join(["word"] * PROMPT_TOKENS), "max_tokens": output_tokens,
               "min_tokens": output_tokens, "ignore_eos": True, "temperature": 0.0, "stream": True,
               "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
    rows: list[dict] = []

    async def request(session, due: float) -> None:
        t_send = time.time()
        ok = False
        try:
            async with session.post(url + "/v1/completions", json=payload) as response:
                async for line in response.content:
                    if line.strip() == b"data: [DONE]":
                        ok = True
                        break
        except aiohttp.ClientError:
            pass
        rows.append({"t_scheduled_s": due, "t_send_s": t_send, "t_done_s": time.time(), "ok": int(ok)})

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.time() + 0.5
        tasks = []
        for offset in offsets:  # as vllm bench serve's get_request: sleep to the due time, then start it
            due = start + float(offset)
            delay = due - time.time()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(request(session, due)))
        await asyncio.wait(tasks, timeout=30)
    pd.DataFrame(rows).to_csv(out, index=False)


# --- one client through one run ----------------------------------------------------------------------------

def _pin(cpus):
    return None if not cpus else (lambda: os.sched_setaffinity(0, set(cpus)))


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _run_client(client: str, url: str, args: argparse.Namespace, out: Path, cpus) -> pd.DataFrame:
    requests_csv = out / "requests.csv"
    if client == "locust":
        argv = [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--host", url,
                "--stages", f"{args.rate:g}/s:{args.duration_s:g}", "--arrival", "poisson",
                "--burstiness", f"{args.burstiness:g}", "--arrival-seed", str(SEED),
                "--prompt-tokens", str(PROMPT_TOKENS), "--output-tokens", str(args.output_tokens), "--model", MODEL,
                "--requests-csv", str(requests_csv), "--stages-csv", str(out / "stages.csv"), "--stop-timeout", "30",
                "--only-summary", "--loglevel", "WARNING"]
    else:
        argv = [sys.executable, str(Path(__file__).resolve()), "reference", "--url", url, "--rate", str(args.rate),
                "--duration-s", str(args.duration_s), "--burstiness", str(args.burstiness), "--output-tokens",
                str(args.output_tokens), "--out", str(requests_csv)]
    with open(out / "client.log", "wb") as log:
        code = subprocess.run(argv, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_pin(cpus),
                              env=os.environ | {"PYTHONPATH": str(REPO)}, timeout=args.duration_s + 180).returncode
    if code != 0 or not requests_csv.exists():
        raise RuntimeError(f"{client} exited {code}: {(out / 'client.log').read_text()[-2000:]}")
    return pd.read_csv(requests_csv)


def _figures(rows: pd.DataFrame, arrivals: list[float], scheduled: int, args: argparse.Namespace) -> dict:
    sent = rows[pd.to_numeric(rows["t_send_s"], errors="coerce").notna()]
    held = pd.to_numeric(sent.get("held_ms", pd.Series(0.0, index=sent.index)), errors="coerce").fillna(0.0)
    late = (sent["t_send_s"] - sent["t_scheduled_s"]) * 1000.0 - held
    return {"scheduled": scheduled, "rows": int(len(rows)), "sent": int(len(arrivals)), "ok": int(rows["ok"].sum()),
            "late_p50_ms": round(float(np.percentile(late, 50)), 3), "late_p99_ms": round(float(np.percentile(late, 99)), 3),
            "late_max_ms": round(float(late.max()), 3),
            "ks_server_arrivals": _ks(np.array(arrivals), args.rate, args.burstiness),
            "ks_sends": _ks(sent["t_send_s"].to_numpy(dtype=float), args.rate, args.burstiness)}


def _median(values: list) -> float | None:
    values = sorted(v for v in values if v is not None)
    return None if not values else round(float(np.median(values)), 4)


def _drive(args: argparse.Namespace) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    pinned = len(cpus) >= 2 and not args.no_pin
    client_cpus, server_cpus = (tuple(cpus[:-1]), (cpus[-1],)) if pinned else (None, None)
    schedule = _schedule(args.rate, args.duration_s, args.burstiness)
    runs = []
    with tempfile.TemporaryDirectory(prefix="dispatch-accuracy-") as folder:
        work = Path(folder)
        (work / "itl_ms").write_text(f"{args.itl_ms:g}")
        server = subprocess.Popen([sys.executable, str(MOCK), "--itl-file", str(work / "itl_ms")],
                                  stdout=subprocess.PIPE, preexec_fn=_pin(server_cpus), start_new_session=True)
        try:
            assert server.stdout is not None
            url = f"http://127.0.0.1:{int(server.stdout.readline().split()[1])}"
            time.sleep(0.5)
            for run in range(args.runs):
                pair = {}
                for client in ("locust", "reference"):
                    out = work / f"{client}-{run}"
                    out.mkdir()
                    _get(url + "/arrivals")  # reset
                    rows = _run_client(client, url, args, out, client_cpus)
                    arrivals = _get(url + "/arrivals")["t_arrival"]
                    pair[client] = _figures(rows, arrivals, len(schedule), args)
                runs.append({"run": run, **pair})
                print(f"run {run}: " + "  |  ".join(
                    f"{c} late p50/p99 {f['late_p50_ms']}/{f['late_p99_ms']} ms (max {f['late_max_ms']}), "
                    f"KS server gaps D={f['ks_server_arrivals']['D']} p={f['ks_server_arrivals']['p']}, "
                    f"sent {f['sent']}/{f['scheduled']}, ok {f['ok']}" for c, f in pair.items()), flush=True)
        finally:
            os.killpg(server.pid, 15)
            server.wait(timeout=10)
    summary = {}
    for client in ("locust", "reference"):
        figures = [r[client] for r in runs]
        summary[client] = {
            **{name: {"median": _median([f[name] for f in figures]),
                      "range": [min(f[name] for f in figures), max(f[name] for f in figures)]}
               for name in ("late_p50_ms", "late_p99_ms", "late_max_ms")},
            "ks_server_arrivals_p": _median([f["ks_server_arrivals"]["p"] for f in figures]),
            "ks_server_arrivals_D": _median([f["ks_server_arrivals"]["D"] for f in figures]),
            "sent_share": _median([f["sent"] / f["scheduled"] for f in figures]),
        }
    print(json.dumps({
        "benchmark": "dispatch_accuracy",
        "settings": {"rate": args.rate, "duration_s": args.duration_s, "burstiness": args.burstiness,
                     "output_tokens": args.output_tokens, "itl_ms": args.itl_ms, "runs": args.runs,
                     "schedule_ks": _ks(schedule, args.rate, args.burstiness), "scheduled": len(schedule)},
        "machine": {"cpus": os.cpu_count(), "client_cpus": client_cpus, "server_cpus": server_cpus,
                    "load_avg_1m_at_end": round(os.getloadavg()[0], 2)},
        "goal": {"late_p99_ms_max": GOAL_P99_MS,
                 "met": (summary["locust"]["late_p99_ms"]["median"] or 1e9) <= GOAL_P99_MS},
        "summary": summary, "runs": runs}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    reference = sub.add_parser("reference")  # the asyncio sender, run by the driver in its own process
    reference.add_argument("--url", required=True)
    reference.add_argument("--out", required=True)
    for target in (parser, reference):
        target.add_argument("--rate", type=float, default=200.0)
        target.add_argument("--duration-s", type=float, default=20.0)
        target.add_argument("--burstiness", type=float, default=1.0)
        target.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--itl-ms", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--no-pin", action="store_true")
    args = parser.parse_args()
    if args.command == "reference":
        asyncio.run(_reference(args.url, args.rate, args.duration_s, args.burstiness, args.output_tokens, args.out))
    else:
        _drive(args)


if __name__ == "__main__":
    main()
