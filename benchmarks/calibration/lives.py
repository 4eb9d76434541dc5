"""Synthetic server lives with a known truth, as the product's records would hold them.

Claim: none of its own; it builds the inputs every claim is scored on, each with its truth exact:
- `closed_loop_lives`: a users stage's windows per K and life: each life at its own speed (lognormal of mean 1,
  the regime's restart spread, as sim/restart.py draws it) times its K's true level, completions a Poisson
  stream over the window, e2e by Little's law, so the true gain is the ratio of the K's levels.
- `ledger_entry`: the one earlier run a trial's ledger holds, as the ledger records it (users, workload, spread,
  the part its windows' noise made, each K's level), measured alike, on other windows, at another stage or on
  another workload (regimes.LEDGER_KINDS).
- `queue_run`: a rate stage on a server of c slots, first come first served, arrivals from the product's own
  schedule (workload/arrivals.py) split over Locust processes (every n-th arrival) with the max_in_flight cap
  split as the dispatcher splits it; from an empty server (the runner's stage) or from the steady state of an
  M/M/c queue (`stationary_state`); written as requests.csv rows (`requests_frame`) for the runner's own window.
- `mmc_attainment` / `erlang_c`: the steady-state share of arrivals of an M/M/c queue whose e2e time (wait +
  service) or wait alone (TTFT) is within a limit, in closed form: the truth of an SLO attainment.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize

from lookahead_runner.decision import Window

from .regimes import ClosedLoopRegime

KS = (0, 4)
MAX_LIVES = 5   # load.max_repeats' default: auto repeats never ask for more


def life_speeds(rng: np.random.Generator, spread: float, count: int) -> np.ndarray:
    """sim/restart.py's draw: lognormal of mean 1 with this relative SD."""
    sigma = math.sqrt(math.log1p(spread * spread))
    return np.exp(rng.normal(-sigma * sigma / 2, sigma, count))


def closed_window(k: int, users: int, rate: float, repeat: int, duration_s: float, rng: np.random.Generator) -> Window:
    """One users-stage window served at `rate` req/s: Poisson completions, e2e = users / rate (Little's law) with
    a lognormal spread, TTFT 100 ms, 64 output tokens, a roomy KV pool."""
    n = int(rng.poisson(rate * duration_s))
    t_done = np.sort(rng.uniform(0, duration_s, n))
    e2e = 1000.0 * users / rate * rng.lognormal(-0.045, 0.3, n)
    ttft = np.minimum(100.0 * rng.lognormal(0, 0.2, n), e2e - 1)
    tpot = (e2e - ttft) / 63
    server = {"running_mean": float(users), "waiting_mean": 0.0, "kv_usage_mean": 0.5, "kv_usage_peak": 0.6,
              "preemptions": 0.0, "gpu_mem_peak_mib": 70000.0, "gpu_mem_total_mib": 81920.0,
              "acceptance_rate": 0.7 if k else math.nan}
    return Window(k=k, repeat=repeat, users=users, duration_s=duration_s, t_done_s=t_done,
                  output_tokens=np.full(n, 64.0), latency_ms=np.column_stack([ttft, tpot, tpot * 1.6, e2e]),
                  finished=n, failures=0, timeouts=0, server=server)


def closed_loop_lives(r: ClosedLoopRegime, rng: np.random.Generator) -> list[Window]:
    """MAX_LIVES restarted lives of each K (repeat r = its r-th life), the outlier life slowed."""
    windows = []
    for k in KS:
        level = r.base_rate * (1 + r.gain if k else 1.0)
        for repeat, speed in enumerate(life_speeds(rng, r.spread, MAX_LIVES)):
            slow = 1 - r.outlier if r.outlier and k == r.outlier_k and repeat == 0 else 1.0
            windows.append(closed_window(k, r.users, level * speed * slow, repeat, r.window_s, rng))
    return windows


def life_spread(r: ClosedLoopRegime, window_ratio: float = 1.0) -> float:
    """The relative SD of one life's measured throughput: the restart spread and the window's Poisson count
    together (Var(N/T) / mean^2 = spread^2 + 1 / expected completions, the mean over the K); `window_ratio`: with
    windows that many times this run's."""
    return math.sqrt(r.spread ** 2 + window_noise(r, window_ratio))


def window_noise(r: ClosedLoopRegime, window_ratio: float = 1.0) -> float:
    """The relative variance one life's window adds by its Poisson count (1 / expected completions, the mean over
    the K), with windows `window_ratio` times this run's."""
    counts = [r.base_rate * (1 + r.gain if k else 1.0) * r.window_s * window_ratio for k in KS]
    return sum(1 / c for c in counts) / len(counts)


THIS_WORKLOAD, OTHER_WORKLOAD = "this run's workload", "another workload"


@dataclass(frozen=True)
class LedgerEntry:
    """The one earlier run a trial's ledger holds, as runfolder/spread_ledger.LedgerRun records it."""

    users: int
    workload: str
    squares: float
    df: int
    lives: int
    window_squares: float
    window_df: int
    levels: dict[str, float]


def ledger_entry(r: ClosedLoopRegime, rng: np.random.Generator, bin_min_s: float) -> LedgerEntry:
    """What the ledger's one earlier run on this server measured (regimes.LEDGER_KINDS): squared relative deviations
    with `ledger_df` degrees of freedom of lives whose true spread is this server's restart spread with the window
    noise of its windows (chi-square), the part of them its windows' noise makes and the bins behind it (as
    decision/cells/restart_spread.window_part keeps it), and each K's level (a life of it: the true level times a
    life's draw). Another stage: measured at twice this run's users; another workload: under another key."""
    ratio = r.ledger_window
    squares = float(life_spread(r, ratio) ** 2 * rng.chisquare(r.ledger_df))
    bins = max(1, int(r.window_s * ratio // max(bin_min_s, r.users / r.base_rate)))
    lives = r.ledger_df + len(KS)
    draws = life_speeds(rng, life_spread(r, ratio), len(KS))
    levels = {str(k): float(r.base_rate * (1 + r.gain if k else 1.0) * d) for k, d in zip(KS, draws)}
    return LedgerEntry(users=r.users * (2 if r.ledger == "another stage" else 1),
                       workload=OTHER_WORKLOAD if r.ledger == "another workload" else THIS_WORKLOAD,
                       squares=squares, df=r.ledger_df, lives=lives,
                       window_squares=r.ledger_df * window_noise(r, ratio), window_df=lives * (bins - 1),
                       levels=levels)


# --- the queue ---------------------------------------------------------------------------------------------------


def erlang_c(servers: int, offered: float) -> float:
    """The share of arrivals that wait (M/M/c, offered load a = lambda / mu < servers)."""
    rho = offered / servers
    term, total = 1.0, 1.0
    for n in range(1, servers):
        term *= offered / n
        total += term
    last = term * offered / servers / (1 - rho)
    return last / (total + last)


def mmc_attainment(servers: int, rate: float, service_mean_s: float, limit_s: float, metric: str) -> float:
    """P(e2e <= limit) (wait + service) or P(wait <= limit) (metric "ttft") in an M/M/c queue's steady state."""
    mu = 1 / service_mean_s
    c = erlang_c(servers, rate / mu)
    theta = servers * mu - rate
    if metric == "ttft":
        return 1 - c * math.exp(-theta * limit_s)
    if math.isclose(theta, mu):
        both = (1 + mu * limit_s) * math.exp(-mu * limit_s)
    else:
        both = (theta * math.exp(-mu * limit_s) - mu * math.exp(-theta * limit_s)) / (theta - mu)
    return 1 - ((1 - c) * math.exp(-mu * limit_s) + c * both)


def limit_at(attainment_at, target: float, start_s: float) -> float:
    """The SLO limit (s) at which `attainment_at(limit)` (rising in the limit) is `target`: bracketed by doubling
    from `start_s` (at most 200 doublings: a target of 1 or more is never reached), then solved."""
    f = (lambda t: attainment_at(t) - target)
    high = start_s
    for _ in range(200):
        if f(high) >= 0:
            return float(optimize.brentq(f, 0.0, high, xtol=1e-12 * high))
        high *= 2
    raise ValueError(f"attainment {target} not reached below a limit of {high:g} s")


def mmc_limit(servers: int, rate: float, service_mean_s: float, attainment: float, metric: str) -> float:
    """The SLO limit (s) at which the steady-state attainment is `attainment`."""
    return limit_at(lambda t: mmc_attainment(servers, rate, service_mean_s, t, metric), attainment, service_mean_s)


def stationary_state(servers: int, offered: float, rng: np.random.Generator) -> int:
    """Requests in an M/M/c system at a random moment of its steady state."""
    c = erlang_c(servers, offered)
    rho = offered / servers
    if rng.uniform() < c:
        return servers + int(rng.geometric(1 - rho)) - 1
    weights = np.array([offered ** n / math.factorial(n) for n in range(servers)])
    return int(rng.choice(servers, p=weights / weights.sum()))


@dataclass(frozen=True)
class QueueRun:
    """Per arrival: its scheduled time, when it left the client (later where a client slot held it), when it
    started at the server and finished (NaN: its record was lost), and its process."""

    arrived_s: np.ndarray
    sent_s: np.ndarray
    started_s: np.ndarray
    done_s: np.ndarray
    recorded: np.ndarray       # its row reached requests.csv
    stage_s: float


def service_times(rng: np.random.Generator, n: int, mean_s: float, shape: str) -> np.ndarray:
    """Exponential; lognormal (sigma 1); or a third of the answers a single token (2 % of the mean) and the rest
    lognormal, the mean kept."""
    if shape == "exponential":
        return rng.exponential(mean_s, n)
    if shape == "lognormal":
        return mean_s * rng.lognormal(-0.5, 1.0, n)
    short = rng.uniform(size=n) < 1 / 3
    long_mean = (mean_s - 0.02 * mean_s / 3) / (2 / 3)
    return np.where(short, 0.02 * mean_s, long_mean * rng.lognormal(-0.5, 1.0, n))


def _fcfs(arrived: np.ndarray, service: np.ndarray, slots: int, busy: list[float], queued: list[float]
          ) -> tuple[np.ndarray, np.ndarray]:
    """First come first served on `slots`: `busy` the remaining work of the requests in service at 0, `queued`
    the work of those waiting ahead. Returns each arrival's start and end."""
    free = sorted(busy + [0.0] * (slots - len(busy)))
    heapq.heapify(free)
    for work in queued:
        heapq.heappush(free, heapq.heappop(free) + work)
    start, end = np.empty(len(arrived)), np.empty(len(arrived))
    for i, (a, s) in enumerate(zip(arrived.tolist(), service.tolist())):
        t = max(a, heapq.heappop(free))
        start[i], end[i] = t, t + s
        heapq.heappush(free, t + s)
    return start, end


def queue_run(arrived: np.ndarray, service: np.ndarray, slots: int, stage_s: float,
              client: list[tuple[int, np.ndarray]] | None = None, initial: int = 0, service_mean_s: float = 1.0,
              dies_at_s: float = math.nan, rng: np.random.Generator | None = None) -> QueueRun:
    """The stage served. `client`: per Locust process, its max_in_flight part and the arrivals dealt to it; where
    the parts hold fewer than the server's slots each process is a queue of its own on its part (else one queue on
    the server's slots). `initial`: requests already in the system at 0 (exponential work: the M/M/c steady
    state). `dies_at_s`: the last process sending arrivals dies then: its arrivals after it and those in flight
    lose their rows (a process's requests.csv rows are written as its requests end)."""
    n = len(arrived)
    owner = np.zeros(n, dtype=int)
    for index, (_, mine) in enumerate(client or []):
        owner[mine] = index
    parts = [part for part, _ in client or []]
    if any(parts) and sum(parts) < slots:   # no cap: every part 0
        start, end = np.empty(n), np.empty(n)
        for part, mine in client:
            if len(mine):
                start[mine], end[mine] = _fcfs(arrived[mine], service[mine], part, [], [])
        sent = start
    else:
        rng = rng or np.random.default_rng(0)
        work = rng.exponential(service_mean_s, initial).tolist()
        start, end = _fcfs(arrived, service, slots, work[:slots], work[slots:])
        sent = arrived
    recorded = np.ones(n, dtype=bool)
    done = end.copy()
    if math.isfinite(dies_at_s) and n:
        lost = (owner == owner.max()) & (end > dies_at_s)
        recorded &= ~lost
        done[lost] = np.nan
    return QueueRun(arrived, sent, start, done, recorded, stage_s)


def requests_frame(run: QueueRun) -> pd.DataFrame:
    """requests.csv's rows of the run's arrivals that reached it: their index in the schedule, scheduled, sent,
    held, first-token and done times (seconds from the stage's start), ok, and latencies (TTFT: the wait for a
    server slot plus a 20 ms prefill). The latencies run from the send, as the client records them: the window adds
    the time from the scheduled arrival to the send (a max_in_flight hold) itself (slo_attainment.from_arrival)."""
    keep = run.recorded
    arrived, sent, started, done = (a[keep] for a in (run.arrived_s, run.sent_s, run.started_s, run.done_s))
    e2e = (done - sent) * 1000.0
    ttft = (started - sent) * 1000.0 + 20.0
    tokens = 64
    return pd.DataFrame({
        "arrival": np.flatnonzero(keep), "t_scheduled_s": arrived, "t_send_s": sent,
        "held_ms": (sent - arrived) * 1000.0, "t_first_token_s": started + 0.02, "t_done_s": done,
        "ok": np.where(np.isfinite(done), 1, 0), "stage": 0, "error": "",
        "ttft_ms": ttft, "tpot_ms": (e2e - ttft) / (tokens - 1), "itl_p99_ms": (e2e - ttft) / (tokens - 1) * 1.6,
        "e2e_ms": e2e, "output_tokens": tokens})
