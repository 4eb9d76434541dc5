"""Capacity in users and goodput, held against a closed loop whose truth is exact.

Claims checked:
- the capacity within the SLO in users per K measured on user stages (estimate.capacities' users_range, printed
  "64 users [58, 70]"), an interval at decision.interval_level: the truth the continuous number of users at which
  the closed loop's attainment of the SLO is its percentile (`closed_attainment`);
- the per-cell goodput interval of a users stage (decision.json's cells[].goodput_range, the report's evidence
  table), at the same level: the truth the closed loop's throughput times its share meeting the SLO;
- the per-cell SLO attainment interval of a users stage (cells[].slo_attainment, a Wilson interval): the truth the
  closed loop's share meeting the SLO.
Described, no interval printed (shown: the share of trials within 10 % / 25 % of the truth, and below it):
- the requests in flight a rate-only run states at its rate capacity by Little's law ("about 40 requests in flight
  at that capacity (Little's law; not the users a closed loop holds)"): shown against the closed loop's users
  capacity on the same server and SLO, the figure it says it is not (how far apart the two are);
- also against the open loop's own mean requests in the system at the true rate capacity (what it reads);
- the users capacity's point estimate: the truth above;
- a rate window's goodput (summary.csv's goodput_per_s, the report's rate tables), the ramp's first window: the
  truth its rate times the M/M/c's steady-state share meeting the SLO.
Each cell's factors name where its window would start by the 25 % rule alone: a warm-up shorter than a user's
cycle (users / req/s) left the stage's start, every user's first request at once, inside the window (the runner now
starts a users window after its first request cycle, and drops a stage too short for one more: shown as the share
of users windows too short); one throughput bin (a window shorter than two request cycles) is a req/s interval of
no width.

The closed loop (`closed_run`): U users each sending its next request the moment its last one ends (Locust users
with no wait), on c slots serving first come first served, exponential service of mean s. With U > c every slot is
always busy, so completions are a Poisson stream at c / s and a request waits for U - c of them: its wait is
Gamma(U - c, c / s), its e2e that plus an exponential service; with U <= c it never waits. Both in closed form,
continuous in U, so the capacity (the U where the attainment falls to the percentile) is exact.
"""
from __future__ import annotations

import collections
import heapq
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special, stats

from lookahead_runner.config import DecisionConfig
from lookahead_runner.decision import Window

from . import adapters
from .lives import limit_at
from .lives import erlang_c, mmc_attainment
from .rate_trials import TARGETS, TTFT_PREFILL_MS, capacity_trial, slo_config
from .regimes import Named, draw_attainment, log_uniform
from .tally import COVERAGE, SHOWN, Tallies

FAMILY = "interval"
TOKENS = 64
MAX_COMPLETIONS = 4_000   # per stage at the servers' full rate: a Python loop per completion keeps a trial ~0.1 s
WARMUP_SHARE = 0.25       # adapters.warmup_s: the runner's warm-up is 25 % of a stage this long
LITTLE_ARRIVALS = 5_000   # run.CAPACITY_ARRIVALS: a rate ramp's stage holds at most this many at the servable rate


def closed_attainment(users: float, servers: int, service_mean_s: float, limit_s: float, metric: str) -> float:
    """P(e2e <= limit) (wait + service) or P(wait <= limit) ("ttft") of a closed loop of `users` with no think
    time on `servers` exponential slots, in its steady state; `users` may be fractional (the Gamma's shape)."""
    mu, m = 1 / service_mean_s, users - servers
    if limit_s <= 0:
        return 0.0 if metric == "e2e" or m > 0 else 1.0
    if m <= 0:
        return 1.0 if metric == "ttft" else float(-math.expm1(-mu * limit_s))
    rate = servers * mu
    waited = float(stats.gamma.cdf(limit_s, m, scale=1 / rate))
    if metric == "ttft":
        return waited
    # P(W + S <= t) = F_W(t) - e^{-mu t} E[e^{mu W}; W <= t], the expectation a Gamma of rate (c - 1) mu
    if servers == 1:
        log_part = m * math.log(mu * limit_s) - special.gammaln(m + 1)
    else:
        log_part = m * math.log(servers / (servers - 1)) + float(stats.gamma.logcdf(limit_s, m,
                                                                                   scale=1 / (rate - mu)))
    return max(0.0, waited - math.exp(-mu * limit_s + log_part))


def closed_limit(users: float, servers: int, service_mean_s: float, target: float, metric: str) -> float:
    """The SLO limit (s) at which the closed loop's attainment at `users` is `target`."""
    return limit_at(lambda t: closed_attainment(users, servers, service_mean_s, t, metric), target, service_mean_s)


def closed_capacity(servers: int, service_mean_s: float, limit_s: float, metric: str, target: float) -> float:
    """The users at which the attainment falls to `target` (it falls as users rise past the slots); the slots where
    it is met up to them and not past (never below: U <= c never waits), 0 where not even one user meets it."""
    f = (lambda u: closed_attainment(u, servers, service_mean_s, limit_s, metric) - target)
    if f(servers) < 0:
        return 0.0
    high = 2.0 * servers
    while f(high) >= 0:
        high *= 2
    return float(optimize.brentq(f, servers, high, xtol=1e-9 * high))


def closed_run(users: int, servers: int, service_mean_s: float, stage_s: float, rng: np.random.Generator
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One users stage from its start (every user's first request at 0): per completion its arrival, start and end,
    in the order they end, up to `stage_s`."""
    waiting = collections.deque([0.0] * max(0, users - servers))
    busy = [(float(rng.exponential(service_mean_s)), 0.0, 0.0) for _ in range(min(users, servers))]
    heapq.heapify(busy)   # (end, arrival, start)
    ends, arrivals, starts = [], [], []
    draws, used = rng.exponential(service_mean_s, 4096), 0
    while busy:
        end, arrival, start = heapq.heappop(busy)
        if end > stage_s:
            break
        ends.append(end), arrivals.append(arrival), starts.append(start)
        waiting.append(end)   # the user's next request
        head = waiting.popleft()
        if used == len(draws):
            draws, used = rng.exponential(service_mean_s, 4096), 0
        heapq.heappush(busy, (end + float(draws[used]), head, end))
        used += 1
    return np.array(arrivals), np.array(starts), np.array(ends)


def closed_window(k: int, repeat: int, users: int, servers: int, service_mean_s: float, stage_s: float,
                  rng: np.random.Generator) -> Window | None:
    """The stage's window as the runner reads it: the requests ending after the warm-up (the runner's rule, from
    the stage's requests; a first request still running at the end counts as cut), their TTFT the wait for a slot
    plus a 20 ms prefill, `TOKENS` output tokens each. None where the runner finds the stage too short (invalid)."""
    arrived, started, ended = closed_run(users, servers, service_mean_s, stage_s, rng)
    unended = max(0, users - int((arrived == 0).sum()))   # first requests (sent at 0) cut by the stage's end
    t0, too_short = adapters.users_window_start(stage_s, users, np.concatenate([arrived, np.zeros(unended)]),
                                                np.concatenate([ended, np.full(unended, np.nan)]))
    if too_short:
        return None
    keep = ended >= t0
    e2e = (ended[keep] - arrived[keep]) * 1000.0
    ttft = (started[keep] - arrived[keep]) * 1000.0 + TTFT_PREFILL_MS
    e2e = np.maximum(e2e, ttft)
    tpot = (e2e - ttft) / (TOKENS - 1)
    n = int(keep.sum())
    server = {"running_mean": float(min(users, servers)), "waiting_mean": float(max(0, users - servers)),
              "kv_usage_mean": 0.5, "kv_usage_peak": 0.6, "preemptions": 0.0, "gpu_mem_peak_mib": 70000.0,
              "gpu_mem_total_mib": 81920.0, "acceptance_rate": math.nan}
    return Window(k=k, repeat=repeat, users=users, duration_s=stage_s - t0, t_done_s=ended[keep] - t0,
                  output_tokens=np.full(n, float(TOKENS)), latency_ms=np.column_stack([ttft, tpot, tpot * 1.6, e2e]),
                  finished=n, failures=0, timeouts=0, server=server)


@dataclass(frozen=True)
class UsersRegime:
    servers: int
    service_mean_s: float
    metric: str                 # e2e | ttft (the wait for a slot)
    target: float               # the SLO's percentile
    capacity: float             # the truth: users at which the attainment is the target
    stages: tuple[int, ...]     # the users stages measured
    stage_s: float
    repeats: int
    named: Named = Named()

    @property
    def limit_s(self) -> float:
        return closed_limit(self.capacity, self.servers, self.service_mean_s, self.target, self.metric)


def draw_users(rng: np.random.Generator) -> UsersRegime:
    """1-32 slots, answers 0.2-20 s, the true capacity 1.2-6 x the slots (log-uniform), an e2e SLO (a third TTFT)
    at p90, p95 or p99; four users stages x1.5 or x2 apart from 0.3-0.9 x the capacity (so it lies among them);
    1-2 lives per stage; stages 20-600 s, drawn again (bounded) until each window holds at least 30 completions and
    a stage at most MAX_COMPLETIONS."""
    for _ in range(100):
        servers = int(2 ** rng.integers(0, 6))
        service = log_uniform(rng, 0.2, 20.0)
        stage_s = log_uniform(rng, 20.0, 600.0)
        full = servers / service * stage_s
        capacity = servers * log_uniform(rng, 1.2, 6.0)
        first = capacity * rng.uniform(0.3, 0.9)
        slowest = min(max(1, round(first)), servers) / service * stage_s * (1 - WARMUP_SHARE)
        if full <= MAX_COMPLETIONS and slowest >= 30:
            break
    step = float(rng.choice((1.5, 2.0)))
    stages = tuple(sorted({max(1, round(first * step ** i)) for i in range(4)}))
    metric = "ttft" if rng.uniform() < 1 / 3 else "e2e"
    target = float(rng.choice(TARGETS))
    repeats = int(rng.integers(1, 3))
    named = Named({"metric": metric, "servers": "1" if servers == 1 else "2-8" if servers <= 8 else "16-32",
                   "true": f"p{target * 100:g}", "lives": str(repeats), "step": f"x{step:g}"})
    return UsersRegime(servers, service, metric, target, capacity, stages, stage_s, repeats, named)


@dataclass(frozen=True)
class UsersTrial:
    regime: UsersRegime
    p: DecisionConfig
    windows: list[Window]       # the valid ones
    stages_run: int = 0         # windows read, the too-short (invalid) ones included


def users_trial(r: UsersRegime, rng: np.random.Generator) -> UsersTrial:
    p, _ = slo_config(r.metric, r.limit_s, r.target)
    windows = [closed_window(0, life, users, r.servers, r.service_mean_s, r.stage_s, rng)
               for users in r.stages for life in range(r.repeats)]
    return UsersTrial(r, p, [w for w in windows if w is not None], len(windows))


def _error_rows(tallies: Tallies, name: str, estimate: float | None, truth: float, factors: dict[str, str]) -> None:
    """A point estimate with no interval: how often it lies within 10 % and 25 % of the truth, and below it."""
    if estimate is None or not truth:
        return
    error = estimate / truth - 1
    for within in (0.10, 0.25):
        tallies.add(f"{name}: within {within:.0%} of the truth", FAMILY, SHOWN, 0.0, "shown, not scored",
                    abs(error) <= within, factors)
    tallies.add(f"{name}: below the truth", FAMILY, SHOWN, 0.0, "shown, not scored", error < 0, factors)


def holds(low: float | None, high: float | None, truth: float) -> bool:
    return (low is None or low <= truth) and (high is None or truth <= high)


def score_users(trial: UsersTrial, tallies: Tallies) -> None:
    r, p, factors = trial.regime, trial.p, trial.regime.named.factors
    level = float(p.interval_level)
    for at in range(trial.stages_run):
        tallies.add("users stage: too short for its first request cycle (invalid)", FAMILY, SHOWN, 0.0,
                    "shown, not scored", at >= len(trial.windows), factors)
    if not trial.windows:
        return
    ev = adapters.users_evidence(trial.windows, r.stages[-1])
    row = adapters.users_capacity(ev, p).get(0)
    if row is not None:
        value, low, high, _ = row
        tallies.add("capacity (users): user stages", FAMILY, COVERAGE, level,
                    "users at which the closed loop's attainment is the target", holds(low, high, r.capacity),
                    factors)
        tallies.add("capacity (users): user stages, unbounded both ends", FAMILY, SHOWN, 0.0, "shown, not scored",
                    low is None and high is None, factors)
        _error_rows(tallies, "capacity (users): point estimate", value, r.capacity, factors)
    limit_s, mu = r.limit_s, 1 / r.service_mean_s
    for users, goodput, attained, units in adapters.cell_goodput(ev, p):
        share = closed_attainment(users, r.servers, r.service_mean_s, limit_s, r.metric)
        cycle_s = users / (min(users, r.servers) * mu)   # a user's time from one request to the next (Little)
        # the regime: whether the default 25 % warm-up alone held a request per user (the window now starts after
        # the first cycle either way, users_window_start)
        cell = {**factors, "users": "<= slots" if users <= r.servers else "> slots",
                "warm-up": "< 1 request per user" if adapters.warmup_s(r.stage_s) < cycle_s else ">= 1 per user",
                "throughput units": "1" if units <= 1 else "2+"}
        tallies.add("goodput (users): a cell's interval", FAMILY, COVERAGE, level,
                    "closed loop: min(users, slots) / s x its share meeting the SLO",
                    holds(*goodput, min(users, r.servers) * mu * share), cell)
        tallies.add("SLO attainment (users): a cell's interval", FAMILY, COVERAGE, level,
                    "closed loop's share meeting the SLO", holds(*attained, share), cell)


def score_little(rng: np.random.Generator, tallies: Tallies) -> None:
    """A rate ramp on M/M/c (the capacity group's), the requests in flight it states at its rate capacity by Little's
    law against the closed loop's users capacity on the same server and SLO (and the open loop's own L); beside it,
    the ramp's first window's goodput against its rate times its true attainment."""
    regime = draw_attainment(rng, max_servable_arrivals=LITTLE_ARRIVALS)
    trial = capacity_trial(regime, rng, probe=False)
    slo = trial.p.slos[0]
    limit_s = (slo.max_ms - (TTFT_PREFILL_MS if slo.metric == "ttft" else 0.0)) / 1000.0
    row = adapters.users_capacity_rate(trial.windows, trial.p).get(0)
    if row is not None and row[3] == "Little's law":
        truth = closed_capacity(regime.servers, regime.service_mean_s, limit_s, slo.metric, slo.share)
        _error_rows(tallies, "in flight at the rate capacity (Little's law) vs the closed loop's users capacity",
                    row[0], truth, regime.named.factors)
        # what the figure reads: the M/M/c's mean requests in the system at its true rate capacity (L = lambda W)
        mu, offered = 1 / regime.service_mean_s, trial.capacity * regime.service_mean_s
        in_system = trial.capacity * (regime.service_mean_s + erlang_c(regime.servers, offered)
                                      / (regime.servers * mu - trial.capacity))
        _error_rows(tallies, "in flight at the rate capacity (Little's law) vs the open loop's L", row[0], in_system,
                    regime.named.factors)
    window = min(trial.windows, key=lambda w: w.rate)   # the ramp's first rate: below the capacity, a steady state
    measured = adapters.window_goodput(window)
    if window.valid and math.isfinite(measured):
        truth = window.rate * mmc_attainment(regime.servers, window.rate, regime.service_mean_s, limit_s, slo.metric)
        _error_rows(tallies, "goodput (rate): one window", measured, truth, regime.named.factors)


def run_trial(rng: np.random.Generator, tallies: Tallies) -> None:
    score_users(users_trial(draw_users(rng), rng), tallies)
    score_little(rng.spawn(1)[0], tallies)
