"""The random draw of a regime: the conditions one calibration trial runs under, each named.

Claim: none of its own; it makes every trial's conditions a draw from the ranges issue 46 names, and gives each
one a label per factor (`factors`) so a claim that misses can be broken down by the factor behind it (tally.py):
answer length against stage length, burstiness, max_in_flight caps and Locust processes, a ledger unlike the
run, an outlier life, 1-token answers, a worker that dies mid-stage, gains near and far from the tie band,
spreads 1-20 %.

Three worlds, each with a truth known exactly (lives.py builds their lives):
- `ClosedLoopRegime`: a users stage, two K (0 and 4), K=4 at a true gain over K=0; every server life lands at
  its own speed (the simulator's restart draw, sim/restart.py) with a known restart spread.
- `QueueRegime`: a rate stage on a server of `slots` slots serving requests that take `service_mean_s` each
  (an open loop: arrivals at a rate whatever is outstanding), at a known utilisation `rho` (keeps up iff
  rho < 1); with Locust processes and a max_in_flight cap split between them as the product splits it.
- `AttainmentRegime`: the same server with exponential service and Poisson arrivals (M/M/c), where the share of
  arrivals meeting an SLO is known in closed form (lives.mmc_attainment): the SLO attainment, goodput, the
  gain at a rate and the capacity within the SLO have exact truths.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import adapters

TIE = 0.03   # decision.tie_tolerance_frac's default: a gain within it is a tie, the smaller K its truth
MAX_ARRIVALS = 20_000   # per simulated stage: keeps a trial in tens of milliseconds (a Python loop per arrival)


def log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(math.exp(rng.uniform(math.log(low), math.log(high))))


@dataclass(frozen=True)
class Named:
    """A regime's labels: one per factor, coarse enough that many trials share each."""

    factors: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return " ".join(f"{key}={value}" for key, value in self.factors.items())


@dataclass(frozen=True)
class ClosedLoopRegime:
    gain: float                 # K=4's true objective over K=0's, relative
    spread: float               # restart spread: relative SD of a life's speed (lognormal of mean 1)
    window_s: float
    base_rate: float            # K=0's true req/s
    users: int = 32
    outlier: float = 0.0        # one life (the first of `outlier_k`) this much slower; 0 = none
    outlier_k: int = 0
    ledger: str = "alike"       # where the ledger's earlier run was measured: LEDGER_KINDS
    ledger_window: float = 1.0  # its windows' length over this run's ("another window"; 1 otherwise)
    ledger_df: int = 4          # its degrees of freedom
    named: Named = Named()

    @property
    def truth(self) -> int:
        return 4 if self.gain > TIE else 0


def _zone(gain: float) -> str:
    return "near" if abs(gain - TIE) <= 0.03 + 1e-12 else "far"


# Where the one earlier run in a trial's ledger was measured, as the ledger records it (runfolder/spread_ledger.py:
# the target users, the workload's key, the part of its spread its windows' noise makes): like this run; with windows
# 0.25-4 x as long (the same restart spread, another window noise); at another stage (users); on another workload.
LEDGER_KINDS = ("alike", "another window", "another stage", "another workload")


def draw_closed_loop(rng: np.random.Generator) -> ClosedLoopRegime:
    """Gains near the tie band (within 0.5-3 points of its edge, either side) or far from it (-20 to -5 %,
    +10 to +40 %); spreads 1-20 % (log-uniform); windows 10-120 s; a third of the trials with an outlier life
    10-25 % slow; a ledger measured alike (a third), with windows 0.25-4 x as long (a third), at another stage or
    on another workload (a sixth each)."""
    if rng.uniform() < 0.5:
        gain = TIE + float(rng.choice((-1, 1))) * rng.uniform(0.005, 0.03)
    else:
        gain = rng.uniform(-0.20, -0.05) if rng.uniform() < 0.4 else rng.uniform(0.10, 0.40)
    spread = log_uniform(rng, 0.01, 0.20)
    window_s = log_uniform(rng, 10.0, 120.0)
    base_rate = log_uniform(rng, 5.0, 40.0)
    outlier = rng.uniform(0.10, 0.25) if rng.uniform() < 1 / 3 else 0.0
    outlier_k = int(rng.choice((0, 4)))
    kind = LEDGER_KINDS[int(np.searchsorted((1 / 3, 2 / 3, 5 / 6), rng.uniform(), side="right"))]
    ratio = log_uniform(rng, 0.25, 4.0) if kind == "another window" else 1.0
    df = int(rng.integers(2, 9))
    named = Named({"gain": _zone(gain), "spread": "1-5%" if spread < 0.05 else "5-10%" if spread < 0.10 else "10-20%",
                   "window": "10-30s" if window_s < 30 else "30-120s",
                   "outlier": "slow life" if outlier else "none", "ledger": kind})
    return ClosedLoopRegime(gain, spread, window_s, base_rate, outlier=outlier, outlier_k=outlier_k,
                            ledger=kind, ledger_window=ratio, ledger_df=df, named=named)


@dataclass(frozen=True)
class QueueRegime:
    slots: int                  # the server's (max_num_seqs)
    service_mean_s: float       # a request's time at the server: its answer's length
    service_shape: str          # exponential | lognormal | 1-token answers
    stage_s: float
    burstiness: float           # the gamma shape of the gaps (1 = Poisson)
    rho: float                  # offered / servable at the binding queue: keeps up iff < 1
    rate: float
    cap: int = 0                # load.max_in_flight (0 = none)
    processes: int = 1          # Locust processes (each sends every n-th arrival)
    dies_at: float = math.nan   # a share of the stage at which one process dies (NaN: none)
    named: Named = Named()

    @property
    def behind(self) -> bool:
        return self.rho > 1


def binding_service_rate(slots: int, cap: int, processes: int, service_mean_s: float) -> float:
    """The highest arrival rate the system can serve: the server's slots, or where the client's max_in_flight parts
    hold fewer, the process whose slots are fewest for its share of the arrivals (each process then a queue of its
    own of the arrivals dealt to it: adapters.client_split)."""
    if not cap or cap >= slots:
        return slots / service_mean_s
    count = cap * processes * 64
    return min(part / (len(mine) / count) for part, mine in adapters.client_split(cap, processes, count)
               if len(mine)) / service_mean_s


def draw_queue(rng: np.random.Generator, behind: bool) -> QueueRegime:
    """Answers 0.2-60 s against stages 10-300 s (both log-uniform), burstiness 0.1-1 (half the trials Poisson),
    slots 4-64, half the trials a max_in_flight cap below them split over 1-4 Locust processes, a tenth a process
    dying mid-stage; utilisation 0.3-0.9 (keeps up) or 1.1-2 (falls behind). Drawn again (bounded) until the
    stage holds at most MAX_ARRIVALS arrivals."""
    for _ in range(100):
        slots = int(2 ** rng.integers(2, 7))
        service = log_uniform(rng, 0.2, 60.0)
        stage_s = log_uniform(rng, 10.0, 300.0)
        burst = 1.0 if rng.uniform() < 0.5 else log_uniform(rng, 0.1, 1.0)
        processes = int(rng.integers(1, 5))
        cap = int(rng.integers(1, slots)) if rng.uniform() < 0.5 and slots > 1 else 0
        rho = rng.uniform(1.1, 2.0) if behind else rng.uniform(0.3, 0.9)
        rate = rho * binding_service_rate(slots, cap, processes, service)
        if rate * stage_s <= MAX_ARRIVALS and rate * stage_s >= 20:
            break
    shape = str(rng.choice(("exponential", "lognormal", "1-token answers")))
    dies = rng.uniform(0.3, 0.9) if rng.uniform() < 0.1 and processes > 1 else math.nan
    ratio = service / stage_s
    named = Named({"answer/stage": "<1%" if ratio < 0.01 else "1-10%" if ratio < 0.1 else ">10%",
                   "burstiness": "1" if burst == 1.0 else "0.3-1" if burst >= 0.3 else "0.1-0.3",
                   "cap": "capped" if cap else "none", "processes": str(processes),
                   "lengths": shape, "worker": "dies" if not math.isnan(dies) else "lives"})
    return QueueRegime(slots, service, shape, stage_s, burst, rho, rate, cap, processes, dies, named)


@dataclass(frozen=True)
class AttainmentRegime:
    servers: int
    service_mean_s: float
    rho: float
    stage_s: float
    metric: str                 # e2e | ttft (ttft: the wait for a slot)
    start: str                  # stationary | cold (an empty server at the stage's start, the runner's warm-up)
    target: float               # the true attainment the SLO's limit is set to
    repeats: int
    named: Named = Named()

    @property
    def rate(self) -> float:
        return self.rho * self.servers / self.service_mean_s


def draw_attainment(rng: np.random.Generator, max_servable_arrivals: float = math.inf) -> AttainmentRegime:
    """M/M/c: 1-32 servers, answers 0.2-60 s, utilisation 0.3-0.95, stages 10-300 s, 1-3 repeats, an e2e or a TTFT
    SLO set so 50-99.9 % of arrivals meet it, a quarter of the trials from an empty server (a cold start). Drawn
    again (bounded) until the stage holds 30 to MAX_ARRIVALS arrivals, and at most `max_servable_arrivals` at the
    rate the servers can serve."""
    for _ in range(100):
        servers = int(2 ** rng.integers(0, 6))
        service = log_uniform(rng, 0.2, 60.0)
        rho = rng.uniform(0.3, 0.95)
        stage_s = log_uniform(rng, 10.0, 300.0)
        n = rho * servers / service * stage_s
        if 30 <= n <= MAX_ARRIVALS and n / rho <= max_servable_arrivals:
            break
    metric = "ttft" if rng.uniform() < 0.3 else "e2e"
    start = "cold" if rng.uniform() < 0.25 else "stationary"
    target = 1 - log_uniform(rng, 0.001, 0.5)
    repeats = int(rng.integers(1, 4))
    if metric == "ttft":   # a wait of 0 meets any limit: the attainment is at least the share that never waits
        target = max(target, 1 - 0.5 * _wait_share(servers, rho * servers))
    ratio = service / stage_s
    named = Named({"metric": metric, "start": start,
                   "servers": "1" if servers == 1 else "2-8" if servers <= 8 else "16-32",
                   "rho": "<0.7" if rho < 0.7 else ">=0.7",
                   "answer/stage": "<1%" if ratio < 0.01 else "1-10%" if ratio < 0.1 else ">10%",
                   "true": "<95%" if target < 0.95 else ">=95%", "repeats": str(repeats)})
    return AttainmentRegime(servers, service, rho, stage_s, metric, start, target, repeats, named)


def _wait_share(servers: int, offered: float) -> float:
    from .lives import erlang_c

    return erlang_c(servers, offered)
