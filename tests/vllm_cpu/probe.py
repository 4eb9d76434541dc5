#!/usr/bin/env python3
"""Start a real vLLM (CPU) server, measure it, stop it. Standard library only.

    python3 tests/vllm_cpu/probe.py [--draft self|unrelated|perturbed] [--k 4] [--requests 4]
        [--concurrency 1] [--tokens 32] [-- EXTRA SERVE ARGS, e.g. --enforce-eager]

Starts `tests/vllm_cpu/vllm-cpu serve <tiny-target> ...` in a new session (own process
group), polls /health (bounded), streams fixed-length /v1/completions requests
(max_tokens = min_tokens, ignore_eos, temperature 0, include_usage), diffs /metrics
counters around them, then SIGTERMs the process group and checks nothing is left.
Prints one JSON object: start-to-ready seconds, tokens received vs
vllm:generation_tokens_total delta, spec-decode acceptance, shutdown seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
LAUNCHER = HERE / "vllm-cpu"
DEFAULT_MODELS = Path(os.environ.get("VLLM_CPU_MODELS", HERE / ".work" / "models"))

# Settings that fit the 2-core / 24 GiB machine (see README.md).
SERVER_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache (default would take far more)
}


def serve_argv(models: Path, port: int, draft: str | None, k: int, extra: list[str]) -> list[str]:
    argv = [
        str(LAUNCHER), "serve", str(models / "tiny-target"),
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", "512", "--max-num-seqs", "16",
        "--dtype", "float32",
    ]
    if draft:
        path = models / ("tiny-target" if draft == "self" else f"tiny-draft-{draft}")
        spec = {"method": "draft_model", "model": str(path), "num_speculative_tokens": k}
        argv += ["--speculative-config", json.dumps(spec)]
    return argv + extra


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError:
        return 0, ""


def metrics(base: str) -> dict[str, float]:
    """Sum of each sample name over its label sets (one model, one engine here)."""
    _, text = get(base + "/metrics")
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("vllm:"):
            continue
        name_labels, _, value = line.rpartition(" ")
        name = name_labels.split("{", 1)[0]
        if "position=" in name_labels:
            name += "{" + name_labels.split("position=", 1)[1].split('"')[1] + "}"
        try:
            out[name] = out.get(name, 0.0) + float(value)
        except ValueError:
            pass
    return out


def stream_completion(base: str, model: str, prompt: str, n: int) -> dict:
    body = {
        "model": model, "prompt": prompt, "max_tokens": n, "min_tokens": n,
        "ignore_eos": True, "temperature": 0, "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        base + "/v1/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    t0 = time.monotonic()
    chunks, text, usage, ttft = 0, "", None, None
    with urllib.request.urlopen(req, timeout=300) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            d = json.loads(line[6:])
            if d.get("usage"):
                usage = d["usage"]
            for c in d.get("choices", []):
                if ttft is None:
                    ttft = time.monotonic() - t0
                chunks += 1
                text += c.get("text", "")
    return {"chunks": chunks, "text": text, "usage": usage, "ttft_s": ttft,
            "e2e_s": time.monotonic() - t0}


def group_pids(pgid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "pid=,cmd=", "-g", str(pgid)],
                         capture_output=True, text=True).stdout
    return [line.strip() for line in out.splitlines()
            if line.strip() and "<defunct>" not in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, default=DEFAULT_MODELS)
    ap.add_argument("--draft", choices=["self", "unrelated", "perturbed"])
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--requests", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--concurrency", type=int, default=1, help="requests in flight at once")
    ap.add_argument("--ready-timeout", type=float, default=300)
    ap.add_argument("--log", type=Path, help="server log file (default: .work/probe-*.log)")
    ap.add_argument("extra", nargs="*", help="extra serve args (after --)")
    a = ap.parse_args()

    port = free_port()
    argv = serve_argv(a.models, port, a.draft, a.k, a.extra)
    env = dict(os.environ, **SERVER_ENV)
    log = a.log or HERE / ".work" / f"probe-{a.draft or 'nospec'}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{port}"
    res: dict = {"argv": argv, "env": SERVER_ENV, "log": str(log)}

    t0 = time.monotonic()
    with open(log, "w") as lf:
        proc = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        while True:
            if proc.poll() is not None:
                res["error"] = f"server exited with {proc.returncode} before ready"
                break
            if time.monotonic() - t0 > a.ready_timeout:
                res["error"] = "not ready in time"
                break
            if get(base + "/health", timeout=2)[0] == 200:
                res["ready_s"] = round(time.monotonic() - t0, 1)
                break
            time.sleep(0.5)
        if "error" not in res:
            model = json.loads(get(base + "/v1/models")[1])["data"][0]["id"]
            m0 = metrics(base)
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(max_workers=a.concurrency) as pool:
                reqs = list(pool.map(
                    lambda i: stream_completion(
                        base, model, f"Request {i}: the cat runs over the bridge", a.tokens),
                    range(a.requests)))
            time.sleep(1.0)  # metrics are published by the engine asynchronously
            m1 = metrics(base)
            d = {k: m1.get(k, 0.0) - m0.get(k, 0.0) for k in m1 if "spec_decode" in k or k in (
                "vllm:generation_tokens_total", "vllm:prompt_tokens_total")}
            got = sum(r["usage"]["completion_tokens"] for r in reqs)
            res.update({
                "completion_tokens_client": got,
                "generation_tokens_delta": d.get("vllm:generation_tokens_total"),
                "chunks": [r["chunks"] for r in reqs],
                "e2e_s": [round(r["e2e_s"], 3) for r in reqs],
                "ttft_s": [round(r["ttft_s"], 3) for r in reqs],
                "text0": reqs[0]["text"],
                "spec_deltas": {k: v for k, v in d.items() if "spec_decode" in k},
            })
            drafted = d.get("vllm:spec_decode_num_draft_tokens_total", 0)
            if drafted:
                res["acceptance"] = round(d["vllm:spec_decode_num_accepted_tokens_total"] / drafted, 4)
                res["mean_acceptance_length"] = round(
                    1 + d["vllm:spec_decode_num_accepted_tokens_total"]
                    / d["vllm:spec_decode_num_drafts_total"], 3)
    finally:
        t1 = time.monotonic()
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            proc.poll()  # reap the leader so it does not linger as a zombie
            if not group_pids(proc.pid):
                break
            time.sleep(0.2)
        left = group_pids(proc.pid)
        if left:
            res["left_after_sigterm"] = left
            os.killpg(proc.pid, signal.SIGKILL)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        res["shutdown_s"] = round(time.monotonic() - t1, 1)
        res["exit_code"] = proc.returncode
    print(json.dumps(res, indent=2))
    return 1 if "error" in res else 0


if __name__ == "__main__":
    sys.exit(main())
