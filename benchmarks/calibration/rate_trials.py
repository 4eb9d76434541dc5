"""Open-loop trials: rate stages served by a synthetic queue, read back by the runner's own window code.

Claim: none of its own; it builds the rate windows the interval and finding claims are scored on, with their
truths:
- `queue_trial`: one rate stage from an empty server (as a sweep runs it) at a known utilisation: whether the K
  keeps up is the truth, the window's keeps-up finding (cells/rate_window.py) the claim;
- `attainment_trial`: K=0 and K=4 at one rate on M/M/c servers (K=4's requests faster or slower by a drawn
  factor), the same seeded arrivals for both (as the product sends them), 1-3 repeats each: the true attainment of
  each K's SLO and the gain at the rate (the rate verdict's objective: the e2e percentile's inverse, K=4's over
  K=0's) in closed form (lives.mmc_attainment);
- `capacity_trial`: one K measured at a ladder of rates (a rate ramp) or at the rates the capacity search
  (decision/capacity/search.py) asks for: the true capacity is the rate whose attainment is the target.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision.adaptive import Budget, Spent
from lookahead_runner.decision.capacity import search
from lookahead_runner.decision.capacity.estimate import rate_points
from lookahead_runner.decision.cells.rate_window import RateWindow

from . import adapters
from .lives import mmc_attainment, mmc_limit, queue_run, requests_frame, service_times, stationary_state
from .regimes import TIE, AttainmentRegime, Named, QueueRegime, log_uniform

TTFT_PREFILL_MS = 20.0    # lives.requests_frame's TTFT: the wait for a slot plus this
OVERLOAD = 2.0            # the highest rate a capacity trial measures, x what the server can serve


TARGETS = (0.9, 0.95, 0.99)   # the SLOs' percentiles drawn (p90, p95, p99)


def slo_config(metric: str, limit_s: float, target: float) -> tuple[DecisionConfig, tuple]:
    """One SLO on `metric` within `limit_s`, held at `target` (its key's percentile)."""
    limit_ms = limit_s * 1000.0 + (TTFT_PREFILL_MS if metric == "ttft" else 0.0)
    key = f"{metric}_p{target * 100:g}_ms"
    return adapters.decision_config({key: limit_ms}), adapters.slos(key, limit_ms)


def _seed(rng: np.random.Generator) -> int:
    return int(rng.integers(2 ** 31))


def queue_trial(r: QueueRegime, rng: np.random.Generator) -> RateWindow:
    """The stage run from an empty server, read as the runner reads it."""
    seed = _seed(rng)
    arrived = adapters.arrivals(r.rate, r.stage_s, r.burstiness, seed)
    service = service_times(rng, len(arrived), r.service_mean_s, r.service_shape)
    client = adapters.client_split(r.cap, r.processes, len(arrived)) if r.cap or r.processes > 1 else None
    run = queue_run(arrived, service, r.slots, r.stage_s, client, dies_at_s=r.dies_at * r.stage_s)
    return adapters.rate_window(0, 0, r.rate, r.stage_s, requests_frame(run),
                                process=adapters.arrival_process(r.burstiness, seed))


def mmc_window(k: int, repeat: int, servers: int, rate: float, service_mean_s: float, stage_s: float, start: str,
               seed: int, slo, rng: np.random.Generator) -> RateWindow:
    """One rate stage of an M/M/c server: from its steady state, or from empty (`start` "cold")."""
    arrived = adapters.arrivals(rate, stage_s, 1.0, seed)
    service = rng.exponential(service_mean_s, len(arrived))
    stable = rate * service_mean_s < servers
    initial = stationary_state(servers, rate * service_mean_s, rng) if start == "stationary" and stable else 0
    run = queue_run(arrived, service, servers, stage_s, initial=initial, service_mean_s=service_mean_s, rng=rng)
    return adapters.rate_window(k, repeat, rate, stage_s, requests_frame(run), slo, adapters.arrival_process(1.0, seed))


@dataclass(frozen=True)
class AttainmentTrial:
    regime: AttainmentRegime
    p: DecisionConfig
    windows: dict[int, list[RateWindow]]
    attainment: dict[int, float]        # per K, the truth
    gain: float                         # the true gain of K=4 at the rate: its e2e percentile's speed over K=0's
    gain_named: Named


def attainment_trial(r: AttainmentRegime, rng: np.random.Generator) -> AttainmentTrial:
    limit_s = mmc_limit(r.servers, r.rate, r.service_mean_s, r.target, r.metric)
    p, slo = slo_config(r.metric, limit_s, float(rng.choice(TARGETS)))
    # K=4 serves each request `speed` x as fast: its utilisation stays under 0.97
    speed = max(r.rho / 0.97, log_uniform(rng, 0.8, 1.6))
    service = {0: r.service_mean_s, 4: r.service_mean_s / speed}
    truth = {k: mmc_attainment(r.servers, r.rate, s, limit_s, r.metric) for k, s in service.items()}
    seeds = [_seed(rng) for _ in range(r.repeats)]
    windows = {k: [mmc_window(k, i, r.servers, r.rate, s, r.stage_s, r.start, seeds[i], slo, rng)
                   for i in range(r.repeats)] for k, s in service.items()}
    q = p.latency_percentile / 100
    speed = {k: 1 / mmc_limit(r.servers, r.rate, s, q, "e2e") for k, s in service.items()}
    gain = speed[4] / speed[0] - 1
    named = Named({**r.named.factors, "gain": "near" if abs(gain - TIE) <= 0.03 else "far"})
    return AttainmentTrial(r, p, windows, truth, gain, named)


@dataclass(frozen=True)
class CapacityTrial:
    regime: AttainmentRegime
    p: DecisionConfig
    windows: list[RateWindow]
    capacity: float                     # the truth: the rate whose steady-state attainment is the target


def true_capacity(servers: int, service_mean_s: float, limit_s: float, metric: str, target: float) -> float:
    """The rate at which the M/M/c attainment of the limit falls to `target` (it falls as the rate rises)."""
    top = servers / service_mean_s
    low, high = 1e-9 * top, top * (1 - 1e-9)
    for _ in range(200):
        middle = (low + high) / 2
        if mmc_attainment(servers, middle, service_mean_s, limit_s, metric) >= target:
            low = middle
        else:
            high = middle
    return (low + high) / 2


def capacity_trial(r: AttainmentRegime, rng: np.random.Generator, probe: bool) -> CapacityTrial:
    """The regime's SLO (e2e where too few arrivals wait for a TTFT SLO to bind) set so that its rate is the
    capacity (its attainment there the SLO's percentile); the rates measured: a ramp of five from 0.3-0.8 x it,
    x 1.25-2 each, or (`probe`) the config's two rates and then the capacity search's probes. The ramp's last rate
    is at least 1.2 x the capacity (a ramp that stops below it states "> its last rate", true but untested); rates
    past OVERLOAD x what the servers serve are left out."""
    target = float(rng.choice(TARGETS))
    metric = r.metric if mmc_attainment(r.servers, r.rate, r.service_mean_s, 0.0, r.metric) < target else "e2e"
    limit_s = mmc_limit(r.servers, r.rate, r.service_mean_s, target, metric)
    p, slo = slo_config(metric, limit_s, target)
    capacity = true_capacity(r.servers, r.service_mean_s, limit_s, metric, target)
    first = capacity * rng.uniform(0.3, 0.8)
    step = max(float(rng.choice((1.25, 1.5, 2.0))), (1.2 * capacity / first) ** 0.25)   # the ramp passes it
    top = OVERLOAD * r.servers / r.service_mean_s   # past it a window is behind as surely as at it

    def measure(rate: float, repeat: int) -> RateWindow:
        return mmc_window(0, repeat, r.servers, rate, r.service_mean_s, r.stage_s, r.start, _seed(rng), slo, rng)

    if not probe:
        ramp = [first * step ** i for i in range(5)]
        return CapacityTrial(r, p, [measure(rate, 0) for rate in ramp if rate <= top], capacity)
    windows = [measure(first, 0), measure(first * step, 0)]
    budget, rates = Budget(adapters.CAPACITY_MAX_LIVES), [first, first * step]
    reach = (min(rates) / search.RATE_REACH, min(max(rates) * search.RATE_REACH, top))
    tried: list[float] = []
    for life in range(1, budget.max_lives):
        points = rate_points(windows)
        spent = Spent({0: life}, {0: life}, 0.0, 0.0)
        choice = adapters.next_probe(points, len(tried), spent, budget, target, reach, tried)
        if choice is None:
            break
        tried.append(choice)
        windows.append(measure(choice, life))
    return CapacityTrial(r, p, windows, capacity)
