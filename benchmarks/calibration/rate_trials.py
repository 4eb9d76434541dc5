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
  (decision/capacity/search.py) asks for: the true capacity is the rate whose attainment is the target;
- `spread_trial`: K=0 and K=4 at one rate on M/M/c servers, two server lives each, every life's service times
  x a life factor exp(spread x N(0, 1)) (spread 1-20 %, the restart spread), the same seeded arrivals for both K
  in a life: the verdict at the rate on the first life of each K and on both, against the true gain (K=4's e2e
  percentile's speed over K=0's at the median life, factor 1) in closed form.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize

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


@dataclass(frozen=True)
class SpreadRegime:
    servers: int
    service_mean_s: float       # K=0's, at the median life
    rho: float                  # K=0's utilisation at the median life
    speed: float                # K=4 serves each request this many times as fast
    spread: float               # the restart spread: SD of a life's log service-time factor
    stage_s: float
    named: Named = Named()

    @property
    def rate(self) -> float:
        return self.rho * self.servers / self.service_mean_s


SPREAD_LIVES = 2          # lives per K a spread trial measures (its verdicts read the first one, then both)
SPREAD_MAX_ARRIVALS = 1_500   # per window: the verdict's resamples take about 1 s per 1,000 arrivals of a K


def draw_spread(rng: np.random.Generator) -> SpreadRegime:
    """M/M/c: 1-32 servers, answers 0.2-10 s, K=0's utilisation 0.2-0.7 (a life up to 1.4 x slower stays under
    1), stages 30-300 s holding 100-SPREAD_MAX_ARRIVALS arrivals; K=4 as fast as K=0 in a fifth of the trials (a
    tie), else 0.7-1.6 x; the restart spread log-uniform 1-20 %."""
    for _ in range(100):
        servers = int(2 ** rng.integers(0, 6))
        service = log_uniform(rng, 0.2, 10.0)
        rho = rng.uniform(0.2, 0.7)
        stage_s = log_uniform(rng, 30.0, 300.0)
        if 100 <= rho * servers / service * stage_s <= SPREAD_MAX_ARRIVALS:
            break
    speed = 1.0 if rng.uniform() < 0.2 else log_uniform(rng, 0.7, 1.6)
    spread = log_uniform(rng, 0.01, 0.2)
    named = Named({"spread": "1-5%" if spread < 0.05 else "5-10%" if spread < 0.1 else "10-20%",
                   "rho": "<0.5" if rho < 0.5 else ">=0.5", "servers": "1" if servers == 1 else "2-32"})
    return SpreadRegime(servers, service, rho, speed, spread, stage_s, named)


@dataclass(frozen=True)
class SpreadTrial:
    regime: SpreadRegime
    p: DecisionConfig
    windows: dict[int, list[RateWindow]]   # per K, its lives in order
    factors: dict[int, list[float]]        # per K, each life's service-time factor (the truth behind its luck)
    gain: float                             # the true gain of K=4 at the rate (median lives)
    gain_named: Named

    @property
    def truth(self) -> int:
        return 4 if self.gain > TIE else 0


def spread_at_the_edge(r: SpreadRegime) -> SpreadRegime:
    """The regime with K=4 as much faster as puts its true gain at the rate on the tie band's edge (the worst truth:
    K=0 the truth there, K=4 at any gain past it), everything else as drawn."""
    q = adapters.decision_config().latency_percentile / 100
    latency = (lambda speed: mmc_limit(r.servers, r.rate, r.service_mean_s / speed, q, "e2e"))
    base = latency(1.0)
    speed = float(optimize.brentq(lambda v: base / latency(v) - 1 - TIE, 1.0, 1.5, xtol=1e-9))
    return replace(r, speed=speed, named=Named({**r.named.factors, "gain": "edge"}))


def spread_trial(r: SpreadRegime, rng: np.random.Generator) -> SpreadTrial:
    """Two lives of each K at the rate (no SLO: the latency at the rate decides, the pick rule's second step)."""
    # memory is not simulated: its gate is waived, so the verdict is the pick rule's alone
    p = adapters.decision_config().model_copy(update={"waive": ["memory"]})
    service = {0: r.service_mean_s, 4: r.service_mean_s / r.speed}
    seeds = [_seed(rng) for _ in range(SPREAD_LIVES)]
    factors = {k: [float(math.exp(r.spread * rng.standard_normal())) for _ in range(SPREAD_LIVES)] for k in service}
    windows = {k: [mmc_window(k, i, r.servers, r.rate, s * factors[k][i], r.stage_s, "stationary", seeds[i], (),
                              rng) for i in range(SPREAD_LIVES)] for k, s in service.items()}
    q = p.latency_percentile / 100
    speed = {k: 1 / mmc_limit(r.servers, r.rate, s, q, "e2e") for k, s in service.items()}
    gain = speed[4] / speed[0] - 1
    named = Named({"gain": "near" if abs(gain - TIE) <= 0.03 else "far", **r.named.factors})
    return SpreadTrial(r, p, windows, factors, gain, named)
