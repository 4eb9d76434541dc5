"""The simulator's own answer under open loop: its pure engine model fed requests at a rate, no clock, no server.

Requests arrive on the runner's own seeded schedule (workload/arrivals.py: the same times a rate stage sends),
whatever is outstanding: one that arrives while a step runs joins the waiting queue before the next step, as
the server's engine loop adds it (sim/app.py), and each token is out when its step ends. Above what a K
serves the waiting queue grows through the stage and never drains: the scheduler admits at most
--max-num-seqs (and what the KV pool holds), the rest wait.

Per request, in engine time from its arrival: TTFT, TPOT, its ITL p99 (per-token gaps as the runner measures
them, workload/timeline.py) and e2e; a request that has not finished when the simulation stops (its stage's
end plus a drain) meets no SLO. Over the steady window (the stage after its warm-up, as the runner's windows
are) the SLO attainment is the share of arrivals meeting every SLO (decision/cells/rate_window.py's rule), and
`capacity_within_slo` is the highest rate whose attainment holds the target with the queue not growing:
found by doubling the rate until it fails, then bisecting. The truth an end-to-end rate sweep on the simulator
is held against:

    python -m lookahead_runner.sim.open_loop --k 0,2,4 --slo ttft_p99_ms=500 --prompt-tokens 128 \\
        --output-tokens 64 -- --max-num-seqs 32 --sim-scenario roomy-kv
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..config.slo import Slo, parse_slos
from ..decision.cells.rate_window import falls_behind, growth_through, met_every_slo, outstanding_at
from ..workload.arrivals import ArrivalProcess, stage_offsets
from .cli import parse_serve
from .model import EngineModel
from .profiles import get_profile

DRAIN_S = 30.0          # after the last arrival, engine seconds left for the requests in flight to finish
WARMUP_FRAC = 0.25      # the window starts this share into the stage (the runner's default warm-up)


@dataclass(frozen=True)
class OpenLoopRun:
    """One rate stage on the engine model: per arrival its latencies (NaN where it did not finish), and the
    waiting queue sampled after every step."""

    rate: float
    duration_s: float
    arrived_s: np.ndarray
    done_s: np.ndarray              # NaN: not finished when the simulation stopped
    latency_ms: np.ndarray          # arrivals x (ttft, tpot, itl p99, e2e): evidence.LATENCY_COLUMNS' order
    queue_t_s: np.ndarray
    waiting: np.ndarray
    max_running: int

    def window(self, warmup_frac: float = WARMUP_FRAC) -> np.ndarray:
        """The arrivals inside the steady window [warm-up, end)."""
        return (self.arrived_s >= warmup_frac * self.duration_s) & (self.arrived_s < self.duration_s)

    def attainment(self, slos: Sequence[Slo], warmup_frac: float = WARMUP_FRAC) -> float:
        inside = self.window(warmup_frac)
        if not inside.any():
            return math.nan
        ok = np.isfinite(self.done_s[inside])
        return float(met_every_slo(self.latency_ms[inside], ok, slos).mean())

    def keeps_up(self, warmup_frac: float = WARMUP_FRAC) -> bool:
        """The requests outstanding do not grow through the window (the runner's rule)."""
        times = np.linspace(warmup_frac * self.duration_s, self.duration_s, 21)
        counts = outstanding_at(times, self.arrived_s, self.done_s)
        return not falls_behind(growth_through(times, counts), int(self.window(warmup_frac).sum()),
                                (float(counts[0]), float(counts[-1])))


def engine_for(server_args: Sequence[str], k: int, model: str = "sim/e2e-model",
               draft: str = "sim/llama-68m") -> EngineModel:
    """The engine `vllm serve MODEL server_args` would run at K (a draft model's, as the runner's sweeps)."""
    spec = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": k})
    args = parse_serve([model, *server_args, *(["--speculative-config", spec] if k else [])], get_profile())
    return EngineModel(args.scenario, args.engine)


def run_open_loop(server_args: Sequence[str], k: int, rate: float, duration_s: float, prompt: int, output: int,
                  temperature: float = 0.0, process: ArrivalProcess = ArrivalProcess(), stage: int = 0,
                  chat: bool = False) -> OpenLoopRun:
    """One rate stage of `duration_s` at `rate` on the engine model at K (arrivals: stage `stage` of `process`)."""
    engine = engine_for(server_args, k)
    arrivals = stage_offsets(rate, duration_s, process, stage)
    n = len(arrivals)
    first, done = np.full(n, np.nan), np.full(n, np.nan)
    last_token, tokens = np.full(n, np.nan), np.zeros(n, dtype=int)
    itl: list[list[float]] = [[] for _ in range(n)]
    queue_t, waiting = [], []
    t, sent, max_running = 0.0, 0, 0
    stop_s = (float(arrivals[-1]) if n else 0.0) + DRAIN_S
    while (sent < n or engine.has_work()) and t < stop_s:
        while sent < n and arrivals[sent] <= t:
            engine.add_request(str(sent), prompt, output, min_tokens=output, ignore_eos=True,
                               temperature=temperature, chat=chat)
            sent += 1
        if not engine.has_work():
            t = float(arrivals[sent])
            continue
        result = engine.step()
        max_running = max(max_running, engine.num_running)
        if result.duration_s <= 0:
            if sent >= n:
                raise RuntimeError("the engine model stalled: nothing fits the KV pool")
            t = float(arrivals[sent])
            continue
        t += result.duration_s
        for out in result.outputs:
            i = int(out.request_id)
            if math.isnan(first[i]):
                first[i] = t
            else:  # the gap since the last token-carrying chunk, spread over this chunk's tokens
                itl[i].extend([(t - last_token[i]) / out.n_tokens] * out.n_tokens)
            last_token[i], tokens[i] = t, tokens[i] + out.n_tokens
            if out.finished:
                done[i] = t
        queue_t.append(t)
        waiting.append(engine.num_waiting)
    latency = np.full((n, 4), np.nan)
    finished = np.isfinite(done)
    latency[finished, 0] = (first[finished] - arrivals[finished]) * 1000.0
    latency[finished, 1] = np.where(tokens[finished] > 1, (done[finished] - first[finished])
                                    / np.maximum(tokens[finished] - 1, 1) * 1000.0, np.nan)
    latency[finished, 2] = [float(np.percentile(itl[i], 99)) * 1000.0 if itl[i] else np.nan
                            for i in np.flatnonzero(finished)]
    latency[finished, 3] = (done[finished] - arrivals[finished]) * 1000.0
    return OpenLoopRun(rate, duration_s, arrivals, done, latency, np.array(queue_t), np.array(waiting), max_running)


def holds(server_args: Sequence[str], k: int, rate: float, slos: Sequence[Slo], target: float, prompt: int,
          output: int, temperature: float = 0.0, duration_s: float = 60.0,
          process: ArrivalProcess = ArrivalProcess()) -> bool:
    """At `rate`, K's attainment of every SLO reaches `target` and its queue keeps up."""
    run = run_open_loop(server_args, k, rate, duration_s, prompt, output, temperature, process)
    attained = run.attainment(slos)
    return not math.isnan(attained) and attained >= target and run.keeps_up()


def capacity_within_slo(server_args: Sequence[str], k: int, slos: Sequence[Slo], target: float = 0.99,
                        prompt: int = 128, output: int = 64, temperature: float = 0.0, duration_s: float = 60.0,
                        process: ArrivalProcess = ArrivalProcess(), start_rate: float = 1.0,
                        precision: float = 0.02, max_rate: float = 10_000.0) -> float:
    """The highest arrival rate (req/s) at which K meets every SLO for `target` of the requests and keeps up:
    the rate doubled from `start_rate` until it fails, then bisected to within `precision` (relative). 0.0 when
    even `start_rate` / 1024 fails."""
    good, bad = 0.0, start_rate
    while holds(server_args, k, bad, slos, target, prompt, output, temperature, duration_s, process):
        good, bad = bad, bad * 2
        if bad > max_rate:
            return good
    if good == 0.0:  # below the start: halve until one holds
        low = bad / 2
        while low > start_rate / 1024 and not holds(server_args, k, low, slos, target, prompt, output,
                                                     temperature, duration_s, process):
            bad, low = low, low / 2
        if low <= start_rate / 1024:
            return 0.0
        good = low
    while bad / good > 1 + precision:
        middle = math.sqrt(good * bad)
        if holds(server_args, k, middle, slos, target, prompt, output, temperature, duration_s, process):
            good = middle
        else:
            bad = middle
    return good


def main(argv: Sequence[str] | None = None) -> int:
    """Print each K's capacity within the SLO (req/s) as JSON; the server's flags follow `--`."""
    argv = list(sys.argv[1:] if argv is None else argv)
    server_args = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m lookahead_runner.sim.open_loop",
                                     description="Each K's capacity within an SLO on the simulator's engine model "
                                                 "(open loop); the simulated server's flags after --.")
    parser.add_argument("--k", default="0,2,4", help="comma-separated K values (default 0,2,4)")
    parser.add_argument("--slo", action="append", required=True, metavar="METRIC_pNN_ms=LIMIT",
                        help="an SLO as decision.slo writes it, e.g. ttft_p99_ms=500 (repeat for more)")
    parser.add_argument("--attainment", type=float, default=0.99, help="the share of requests that must meet them")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--temperature", type=float, default=0.0)
    parser.add_argument("--duration-s", type=float, default=60.0, help="each probe's stage length (engine seconds)")
    parser.add_argument("--arrival", choices=("poisson", "constant"), default="poisson")
    parser.add_argument("--burstiness", type=float, default=1.0)
    parser.add_argument("--arrival-seed", type=int, default=0)
    args = parser.parse_args(own)
    try:
        items = []
        for text in args.slo:
            key, _, limit = text.partition("=")
            items.append((key.strip(), float(limit)))
        slos = parse_slos(tuple(sorted(items)))
        ks = [int(k) for k in args.k.split(",")]
        process = ArrivalProcess(args.arrival, args.burstiness, args.arrival_seed)
    except ValueError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    capacity = {k: round(capacity_within_slo(server_args, k, slos, args.attainment, args.prompt_tokens,
                                             args.output_tokens, args.temperature, args.duration_s, process), 3)
                for k in ks}
    print(json.dumps({"slo": dict(items), "attainment": args.attainment, "capacity_req_per_s": capacity}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
