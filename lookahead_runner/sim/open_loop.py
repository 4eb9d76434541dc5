"""The simulator's own answer under open loop: its pure engine model fed requests at a rate, no clock, no server.

Requests arrive on the runner's own seeded schedule (workload/arrivals.py: the same times a rate stage sends),
whatever is outstanding: one that arrives while a step runs joins the waiting queue before the next step, as
the server's engine loop adds it (sim/app.py), and each token is out when its step ends. Above what a K
serves the waiting queue grows through the stage and never drains: the scheduler admits at most
--max-num-seqs (and what the KV pool holds), the rest wait.

Per request, in engine time from its arrival: TTFT, TPOT, its ITL p99 (per-token gaps as the runner measures
them, workload/timeline.py) and e2e; a request that has not finished when the simulation stops (its stage's
end plus a drain) meets no SLO. Over the steady window (the stage after its warm-up, as the runner's windows
are) each SLO holds where its own percentile of the arrivals meets it (decision/cells/slo_attainment.py's rule:
`ttft_p90_ms = 500`, 90 % within 500 ms), and `capacity_within_slo` is the highest rate at which every SLO holds
while the K keeps up: found by doubling the rate until it fails, then bisecting.

Whether a K keeps up at a rate is the model's own answer, not the runner's rule: the rate its window was offered
(`offered_per_s`: one draw of Poisson arrivals offers a window some 1 / sqrt(arrivals) more or fewer than
configured; the runner places a window there too) is below what the engine completes with a backlog it never
empties (`saturated_per_s`: requests topped up so some always wait, completions counted over many answers'
lengths), the most any arrival rate can be served at for good. An engine short of KV (tight-kv) holds a rate
somewhat above that for a while: below the top of its batch it preempts nothing and serves more, until a burst
fills the batch, preemptions waste its work and the queue grows for good (K=0, 256-token answers: 9.3 req/s
with a backlog, constant arrivals at 9.9 held through 300 s, Poisson at 9.3 broke within 300 s); a stage
shorter than that hold cannot see it. `OpenLoopRun.finding`
is the runner's rule (decision/cells/keeping_up.py) read on the model's arrivals, first tokens and ends, so the
two can be held against each other. The truth an end-to-end rate sweep on the simulator is held against:

    python -m lookahead_runner.sim.open_loop --k 0,2,4 --slo ttft_p99_ms=500 --prompt-tokens 128 \\
        --output-tokens 64 -- --max-num-seqs 32 --sim-scenario roomy-kv
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..config.slo import Slo, parse_slos
from ..decision.cells.keeping_up import QueueFinding, queue_finding
from ..decision.cells.rate_window import met_every_slo
from ..decision.cells.slo_attainment import meets
from ..workload.arrivals import ArrivalProcess, stage_offsets
from .cli import parse_serve
from .model import EngineModel
from .profiles import get_profile

DRAIN_S = 30.0          # after the last arrival, engine seconds left for the requests in flight to finish
WARMUP_FRAC = 0.25      # the window starts this share into the stage (the runner's default warm-up)
# The saturated throughput is counted over this many lengths of the first answer (the engine full): the
# requests admitted together end together, so completions come in waves; over 20 of them one wave more or
# less is 5 %, and the first quarter (the engine filling) is left out.
SATURATION_ANSWERS = 20


@dataclass(frozen=True)
class OpenLoopRun:
    """One rate stage on the engine model: per arrival its latencies (NaN where it did not finish), and the
    waiting queue sampled after every step."""

    rate: float
    duration_s: float
    arrived_s: np.ndarray
    first_s: np.ndarray             # each arrival's first token (NaN: none when the simulation stopped)
    done_s: np.ndarray              # NaN: not finished when the simulation stopped
    latency_ms: np.ndarray          # arrivals x (ttft, tpot, itl p99, e2e): evidence.LATENCY_COLUMNS' order
    queue_t_s: np.ndarray
    waiting: np.ndarray
    max_running: int
    saturated_per_s: float          # what the engine completes with a backlog (`saturated_per_s`)

    def window(self, warmup_frac: float = WARMUP_FRAC) -> np.ndarray:
        """The arrivals inside the steady window [warm-up, end)."""
        return (self.arrived_s >= warmup_frac * self.duration_s) & (self.arrived_s < self.duration_s)

    def attainment(self, slos: Sequence[Slo], warmup_frac: float = WARMUP_FRAC) -> float:
        """The share of the window's arrivals meeting every SLO at once (goodput's share)."""
        inside = self.window(warmup_frac)
        if not inside.any():
            return math.nan
        ok = np.isfinite(self.done_s[inside])
        return float(met_every_slo(self.latency_ms[inside], ok, slos).mean())

    def slos_hold(self, slos: Sequence[Slo], warmup_frac: float = WARMUP_FRAC) -> bool:
        """Every SLO's share of the window's arrivals meeting it reaches its own percentile."""
        inside = self.window(warmup_frac)
        if not inside.any():
            return False
        met = meets(self.latency_ms[inside], np.isfinite(self.done_s[inside]), slos)
        return all(float(met[:, i].mean()) >= slo.share for i, slo in enumerate(slos))

    @property
    def offered_per_s(self) -> float:
        """The arrivals of the steady window per second of it: the rate this draw offered (a Poisson draw offers
        a window some 1 / sqrt(arrivals) more or fewer than configured), as the runner places a window."""
        length = (1 - WARMUP_FRAC) * self.duration_s
        return float(self.window().sum()) / length if length > 0 else math.nan

    def keeps_up(self) -> bool:
        """The truth: the rate the window was offered is below what the engine completes with a backlog."""
        return self.offered_per_s < self.saturated_per_s

    def finding(self, warmup_frac: float = WARMUP_FRAC) -> QueueFinding:
        """The runner's rule on the steady window (keeping_up.queue_finding)."""
        return queue_finding(self.arrived_s, self.first_s, self.done_s, warmup_frac * self.duration_s,
                             self.duration_s, 0.0)


def engine_for(server_args: Sequence[str], k: int, model: str = "sim/e2e-model",
               draft: str = "sim/llama-68m") -> EngineModel:
    """The engine `vllm serve MODEL server_args` would run at K (a draft model's, as the runner's sweeps)."""
    spec = json.dumps({"method": "draft_model", "model": draft, "num_speculative_tokens": k})
    args = parse_serve([model, *server_args, *(["--speculative-config", spec] if k else [])], get_profile())
    return EngineModel(args.scenario, args.engine)


@functools.lru_cache(maxsize=64)
def _saturated_per_s(server_args: tuple[str, ...], k: int, prompt: int, output: int, temperature: float,
                     chat: bool) -> float:
    engine = engine_for(server_args, k)
    t, added, done = 0.0, 0, []
    horizon = math.inf
    while t < horizon:
        while engine.num_waiting < max(engine.num_running, 16):   # a backlog that never empties
            engine.add_request(str(added), prompt, output, min_tokens=output, ignore_eos=True,
                               temperature=temperature, chat=chat)
            added += 1
        result = engine.step()
        if result.duration_s <= 0:
            raise RuntimeError("the engine model stalled: nothing fits the KV pool")
        t += result.duration_s
        done += [t for out in result.outputs if out.finished]
        if done and math.isinf(horizon):
            horizon = SATURATION_ANSWERS * done[0]
    ends = np.array(done)
    return float(((ends >= horizon / 4) & (ends <= horizon)).sum()) / (0.75 * horizon)


def saturated_per_s(server_args: Sequence[str], k: int, prompt: int, output: int, temperature: float = 0.0,
                    chat: bool = False) -> float:
    """Requests per second the engine model completes at K with a backlog it never empties: the most any
    arrival rate can be served at (above it the waiting queue grows without bound)."""
    return _saturated_per_s(tuple(server_args), k, prompt, output, temperature, chat)


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
    return OpenLoopRun(rate, duration_s, arrivals, first, done, latency, np.array(queue_t), np.array(waiting),
                       max_running, saturated_per_s(server_args, k, prompt, output, temperature, chat))


def holds(server_args: Sequence[str], k: int, rate: float, slos: Sequence[Slo], prompt: int, output: int,
          temperature: float = 0.0, duration_s: float = 60.0, process: ArrivalProcess = ArrivalProcess()) -> bool:
    """At `rate`, every SLO of K holds its own percentile and its queue keeps up."""
    run = run_open_loop(server_args, k, rate, duration_s, prompt, output, temperature, process)
    return run.slos_hold(slos) and run.keeps_up()


def capacity_within_slo(server_args: Sequence[str], k: int, slos: Sequence[Slo], prompt: int = 128,
                        output: int = 64, temperature: float = 0.0, duration_s: float = 60.0,
                        process: ArrivalProcess = ArrivalProcess(), start_rate: float = 1.0,
                        precision: float = 0.02, max_rate: float = 10_000.0) -> float:
    """The highest arrival rate (req/s, configured) at which every SLO of K holds its own percentile and K keeps
    up: the rate doubled from `start_rate` until it fails, then bisected to within `precision` (relative). 0.0 when
    even `start_rate` / 1024 fails. What its window was offered (as the runner states a capacity): that rate's
    `run_open_loop(...).offered_per_s`."""
    good, bad = 0.0, start_rate
    while holds(server_args, k, bad, slos, prompt, output, temperature, duration_s, process):
        good, bad = bad, bad * 2
        if bad > max_rate:
            return good
    if good == 0.0:  # below the start: halve until one holds
        low = bad / 2
        while low > start_rate / 1024 and not holds(server_args, k, low, slos, prompt, output, temperature,
                                                     duration_s, process):
            bad, low = low, low / 2
        if low <= start_rate / 1024:
            return 0.0
        good = low
    while bad / good > 1 + precision:
        middle = math.sqrt(good * bad)
        if holds(server_args, k, middle, slos, prompt, output, temperature, duration_s, process):
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
                        help="an SLO as decision.slo writes it, e.g. ttft_p99_ms=500: 99 %% of the arrivals "
                             "within 500 ms (repeat for more; each holds at its own percentile)")
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
    capacity = {k: round(capacity_within_slo(server_args, k, slos, args.prompt_tokens, args.output_tokens,
                                             args.temperature, args.duration_s, process), 3)
                for k in ks}
    print(json.dumps({"slo": dict(items), "capacity_req_per_s": capacity}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
