"""The knee and the gates as binary findings: how often each fires where its truth says it should not (a false
alarm) and stays silent where its truth says it should fire (a miss), through the product's own ramp and decision.

Claims checked (each trial one K=4 ramp, or one users stage of K=0 and K=4 with one gate's truth drawn):
- the knee (gates/knee.find_knee through decision/ramp.py): a ramp over 4-64 users whose true throughput
  saturates smoothly or sharply (X(u) = peak x (u/u_s) / (1 + (u/u_s)^n)^(1/n), known exactly), each life at its
  own speed (the restart spread) and each stage a Poisson window. A knee is named on a step whose gain per doubling
  has its interval's high end below decision.knee_gain_per_doubling: one-sided at (1 - interval_level) / 2 per
  step, so a knee named before the true one (on a step whose true gain is at least the threshold) is stated at
  most 1 - (1 - a)^m over the m such steps the ramp judged (between its valid stages). A miss: a true knee clearly
  in the ramp (its true gain per doubling at most half the threshold) that the product calls "no knee up to" (named
  late: shown apart);
- the failures and latency gates (gates/checks.py as decision.json shows them): FAIL only where the rise over
  the baseline is beyond its slack or tolerance interval included: a false alarm (a true rise within it) is stated
  at (1 - interval_level) / 2 one-sided; a miss is a rise clearly beyond it (by twice the z-width of its standard
  error) that the gate passes;
- the memory gate: the KV pool's usage through the window (an Ornstein-Uhlenbeck series on 50 ms steps, preempting
  at 100 %) read at the sampler's scrapes (0.5 s, jittered as telemetry/sampler.py does); the truth its peak past
  1 - kv_headroom_frac on the fine series (a scrape reads that series, so no false alarm can come from the readings:
  that row checks only that nothing else, the baseline's windows or the device memory, fails the gate);
- the real-batch gate: K=4's true running batch below the baseline's by more than batch_drop_frac at a server
  holding requests back, the gauge read at the scrapes (a binomial's noise, correlated over a request's time at the
  server), each life's batch moved by its speed through Little's law (the restart spread).
The memory and real-batch gates and the knee's misses state no error rate: they are held to 10 % (issue 46's bar
for a finding with none) and a miss names its regime.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np
from scipy import signal, stats

from . import adapters, adapters_findings
from .lives import closed_window, life_speeds
from .regimes import Named, log_uniform
from .tally import ERROR, SHOWN, Tallies

FAMILY = "finding"
UNSTATED = 0.10   # the error rate a finding that states none is held to (issue 46's bar)
RAMP_USERS = (4, 8, 16, 32, 64)
SCRAPE_S = 0.5    # telemetry/sampler.Sampler's interval_s default
FINE_S = 0.05     # the memory series' step: ten per scrape
E2E_LOG_SD = 0.3  # lives.closed_window's lognormal spread of e2e


def _spread_label(spread: float) -> str:
    return "1-5%" if spread < 0.05 else "5-10%" if spread < 0.10 else "10-20%"


def _common(rng: np.random.Generator) -> tuple[float, float, int, dict[str, str]]:
    spread = log_uniform(rng, 0.01, 0.20)
    window_s = log_uniform(rng, 10.0, 120.0)
    repeats = int(rng.integers(1, 4))
    return spread, window_s, repeats, {"spread": _spread_label(spread),
                                       "window": "10-30s" if window_s < 30 else "30-120s", "repeats": str(repeats)}


# ---- the knee -------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KneeRegime:
    saturation_users: float     # u_s: where the curve bends
    sharpness: float            # n: 1 soft, 8 nearly a corner
    peak_rate: float            # req/s the server saturates at
    spread: float
    window_s: float
    repeats: int
    named: Named

    def rate(self, users: float) -> float:
        x = users / self.saturation_users
        return self.peak_rate * x / (1 + x ** self.sharpness) ** (1 / self.sharpness)

    def gains(self) -> list[float]:
        """The true gain per doubling of each step of the ramp (each step doubles the users)."""
        return [self.rate(b) / self.rate(a) - 1 for a, b in zip(RAMP_USERS, RAMP_USERS[1:])]

    def step_gain(self, users_from: int, users_to: int) -> float:
        """The true gain per doubling from one stage to another (gates/knee._per_doubling's, on the true req/s)."""
        return (self.rate(users_to) / self.rate(users_from) - 1) / math.log2(users_to / users_from)


def draw_knee(rng: np.random.Generator) -> KneeRegime:
    """The bend at 2-200 users (log-uniform: a third of the ramps bend past 64, no knee in them), sharpness 1-8, a
    peak of 5-40 req/s; spreads 1-20 %, windows 10-120 s, 1-3 repeats."""
    spread, window_s, repeats, labels = _common(rng)
    sharp = float(rng.choice((1.0, 2.0, 4.0, 8.0)))
    bend = log_uniform(rng, 2.0, 200.0)
    return KneeRegime(bend, sharp, log_uniform(rng, 5.0, 40.0), spread, window_s, repeats,
                      Named({"curve": "soft (n 1-2)" if sharp <= 2 else "sharp (n 4-8)",
                             "bend": "<16 users" if bend < 16 else "16-64" if bend <= 64 else ">64", **labels}))


def score_knee(rng: np.random.Generator, tallies: Tallies) -> None:
    r = draw_knee(rng)
    windows = []
    for repeat, speed in enumerate(life_speeds(rng, r.spread, r.repeats)):   # one life runs every stage
        windows += [closed_window(4, u, r.rate(u) * speed, repeat, r.window_s, rng) for u in RAMP_USERS]
    # the runner's invalid windows left out
    windows = [w for w in windows if w.completed >= adapters_findings.min_requests()]
    if not windows:
        return
    p = adapters.decision_config()
    knee = adapters_findings.ramp_knee(windows, 4, p)
    threshold, one_step = p.knee_gain_per_doubling, (1 - p.interval_level) / 2
    gains = r.gains()
    true_step = next((i for i, g in enumerate(gains) if g < threshold), None)
    named_step = None if knee.users is None else RAMP_USERS.index(knee.users)
    # the steps the ramp judged (between its valid stages) that it could fire on before the true knee
    exposed = sum(r.step_gain(s.users_from, s.users_to) >= threshold for s in knee.steps)
    if exposed:
        tallies.add("knee: named before the true knee", FAMILY, ERROR, one_step,
                    "a step whose true gain per doubling >= the threshold", knee.users is not None and
                    r.step_gain(knee.users, knee.next_users) >= threshold, r.named.factors,
                    1 - (1 - one_step) ** exposed)
    if true_step is None or gains[true_step] > threshold / 2:
        return
    clear = "a true knee in the ramp, gain per doubling <= half the threshold"
    tallies.add("knee: true knee unsure (repeat asked)", FAMILY, SHOWN, 0.0, "shown, not scored",
                named_step is None and knee.reason.startswith("no knee proven"), r.named.factors)
    tallies.add("knee: miss (says no knee)", FAMILY, ERROR, UNSTATED, clear,
                named_step is None and knee.reason.startswith("no knee up to"), r.named.factors)
    tallies.add("knee: named late (past the true knee)", FAMILY, ERROR, UNSTATED, clear,
                named_step is not None and named_step > true_step, r.named.factors)


# ---- the gates at one users stage -------------------------------------------------------------------------------

GATES = ("failures", "latency", "memory", "real batch")


def _stage(rng: np.random.Generator, users: int, rate: float, spread: float, window_s: float, repeats: int,
           latency_factor: float = 1.0):
    """K=0's and K=4's windows at one stage (K=4 at the same true throughput), each life at its own speed; K=4's
    latencies times `latency_factor`."""
    out = {}
    for k in (0, 4):
        windows = []
        for repeat, speed in enumerate(life_speeds(rng, spread, repeats)):
            w = closed_window(k, users, rate * speed, repeat, window_s, rng)
            if k and latency_factor != 1.0:
                w = dataclasses.replace(w, latency_ms=w.latency_ms * latency_factor)
            windows.append(w)
        out[k] = windows
    return out


def scrape_times(rng: np.random.Generator, window_s: float) -> np.ndarray:
    """The sampler's scrape times through a window (gaps of SCRAPE_S x uniform(0.5, 1.5), a random phase)."""
    gaps = SCRAPE_S * rng.uniform(0.5, 1.5, int(2 * window_s / SCRAPE_S) + 4)
    times = np.cumsum(gaps) - rng.uniform(0, SCRAPE_S)
    return times[(times >= 0) & (times < window_s)]


def ou_series(rng: np.random.Generator, steps: int, tau_steps: float) -> np.ndarray:
    """A unit-variance Ornstein-Uhlenbeck series of correlation time `tau_steps` (an AR(1) from its steady state)."""
    phi = math.exp(-1 / tau_steps)
    noise = rng.normal(0, math.sqrt(1 - phi * phi), steps)
    noise[0] = rng.normal()
    return signal.lfilter([1.0], [1.0, -phi], noise)


def _z(p) -> float:
    return float(stats.norm.isf((1 - p.interval_level) / 2))


def score_gate(rng: np.random.Generator, tallies: Tallies) -> None:
    gate = GATES[int(rng.integers(len(GATES)))]
    fires = bool(rng.uniform() < 0.5)
    spread, window_s, repeats, labels = _common(rng)
    users, rate = int(2 ** rng.integers(2, 7)), log_uniform(rng, 5.0, 40.0)
    p = adapters.decision_config()
    factors = {"truth": "fires" if fires else "does not", **labels}
    if gate == "failures":
        _failures(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors)
    elif gate == "latency":
        _latency(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors)
    elif gate == "memory":
        _memory(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors)
    else:
        _batch(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors)


def _judge(tallies: Tallies, name: str, status: str, fires: bool, detectable: bool, stated_alarm: float,
           factors: dict[str, str], truth_alarm: str, truth_miss: str) -> None:
    """A false alarm where the truth does not fire (a FAIL), a miss where it clearly does (a PASS; "unknown" is
    neither: the gate says it cannot tell, and how often it says so there is shown beside the misses)."""
    if not fires:
        tallies.add(f"{name} gate: false alarm", FAMILY, ERROR, stated_alarm, truth_alarm, status == "fail", factors)
    elif detectable:
        tallies.add(f"{name} gate: miss", FAMILY, ERROR, UNSTATED, truth_miss, status == "pass", factors)
        tallies.add(f"{name} gate: clearly beyond, left unknown", FAMILY, SHOWN, 0.0, "shown, not scored",
                    status == "unknown", factors)


def _failures(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors) -> None:
    """K=0 fails a share 0-3 % of its requests, K=4 that plus a rise within the slack (-base..slack) or beyond it
    (slack + 0.2-10 points)."""
    base = rng.uniform(0.0, 0.03)
    slack = p.failure_rate_slack
    rise = rng.uniform(slack + 0.002, slack + 0.10) if fires else rng.uniform(-base, slack)
    stage = _stage(rng, users, rate, spread, window_s, repeats)
    counts = {}
    for k, share in ((0, base), (4, base + rise)):
        ws = []
        for w in stage[k]:
            failed = int(rng.binomial(max(w.completed, 1), share / (1 - share))) if share > 0 else 0
            ws.append(dataclasses.replace(w, failures=failed, finished=w.completed + failed))
        stage[k] = ws
        counts[k] = sum(w.finished for w in ws)
    # clearly beyond: the rise's excess over the slack at least twice the z-width of its standard error
    se = math.sqrt(base * (1 - base) / max(counts[0], 1) + (base + rise) * (1 - base - rise) / max(counts[4], 1))
    detectable = rise - slack >= 2 * _z(p) * se
    status = adapters_findings.gate_status(stage[0] + stage[4], users, 4, "failures", p)
    _judge(tallies, "failures", status, fires, detectable, (1 - p.interval_level) / 2,
           {"rise": "<2 points" if abs(rise - slack) < 0.02 else ">=2 points", **factors},
           "K=4's true failure rate within the slack of K=0's", "a rise beyond the slack by 2 z standard errors")


def _latency(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors) -> None:
    """K=4's e2e times (1 + r), r within the tolerance (-20 % to it) or beyond it (to +60 %); a life's latencies
    scale with its speed, so the restart spread enters the ratio."""
    tol = p.latency_tolerance_frac
    rise = rng.uniform(tol + 0.005, 0.60) if fires else rng.uniform(-0.20, tol)
    stage = _stage(rng, users, rate, spread, window_s, repeats, latency_factor=1 + rise)
    n0, n4 = (sum(w.completed for w in stage[k]) for k in (0, 4))
    q = p.latency_percentile / 100
    # a percentile's SE on the log scale: sd x sqrt(q (1 - q)) / phi(z_q) / sqrt(n); the lives' spread besides
    per = E2E_LOG_SD * math.sqrt(q * (1 - q)) / stats.norm.pdf(stats.norm.ppf(q))
    se = math.sqrt(per ** 2 * (1 / max(n0, 1) + 1 / max(n4, 1)) + spread ** 2 * 2 / repeats)
    detectable = math.log1p(rise) - math.log1p(tol) >= 2 * _z(p) * se
    status = adapters_findings.gate_status(stage[0] + stage[4], users, 4, "latency", p)
    _judge(tallies, "latency", status, fires, detectable, (1 - p.interval_level) / 2,
           {"margin": "<5 points" if abs(rise - tol) < 0.05 else ">=5 points", **factors},
           "K=4's true e2e percentile within the tolerance of K=0's",
           "a rise beyond the tolerance by 2 z standard errors (log scale)")
    few_rng = rng.spawn(1)[0]   # a child stream: the trials' own draws stay as they were
    if few_rng.uniform() < 1 / 3:
        _latency_few_baseline(few_rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors)


def _latency_few_baseline(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors) -> None:
    """Long answers: K=0's windows keep a random few of their requests (at least decision.min_requests each, fewer
    in all than bound its percentile above), K=4's at least that bound. There a pass needs K=4's whole interval
    inside the tolerance (gates/checks.py), so a pass where the truth is beyond it at all is stated at
    (1 - interval_level) / 2; the rises where it fires lie within 5 points of the tolerance, where that error
    lives."""
    tol = p.latency_tolerance_frac
    rise = rng.uniform(tol + 0.005, tol + 0.05) if fires else rng.uniform(-0.20, tol)
    stage = _stage(rng, users, rate, spread, window_s, repeats, latency_factor=1 + rise)
    needed, least = adapters_findings.requests_to_bound(p), p.min_requests
    most = (needed - 1) // len(stage[0])
    if most < least or sum(w.completed for w in stage[4]) < needed or \
            any(w.completed < most for w in stage[0]):
        return   # the regime cannot be drawn from these windows
    stage[0] = [_thinned(w, int(rng.integers(least, most + 1)), rng) for w in stage[0]]
    status = adapters_findings.gate_status(stage[0] + stage[4], users, 4, "latency", p)
    labels = {"baseline requests": "under 20" if sum(w.completed for w in stage[0]) < 20 else "20 or more", **factors}
    if fires:
        tallies.add("latency gate, a baseline too few to bound above: pass beyond the tolerance", FAMILY, ERROR,
                    (1 - p.interval_level) / 2, "K=4's true e2e percentile beyond the tolerance of K=0's, by 0.5-5 "
                    "points", status == "pass", labels)
    else:
        tallies.add("latency gate, a baseline too few to bound above: passed", FAMILY, SHOWN, 0.0,
                    "shown, not scored", status == "pass", labels)


def _thinned(window, keep: int, rng: np.random.Generator):
    """The window with `keep` of its requests, drawn at random (the same distribution, fewer of it)."""
    rows = np.sort(rng.choice(window.completed, size=keep, replace=False))
    return dataclasses.replace(window, t_done_s=window.t_done_s[rows], output_tokens=window.output_tokens[rows],
                               latency_ms=window.latency_ms[rows], finished=keep + window.failures)


def _memory(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors) -> None:
    """K=4's KV usage through each window: a mean of 40-90 %, an SD of 2-10 points, correlation 0.2-10 s; the truth
    fires where any window's fine series passes 1 - kv_headroom_frac (drawn until the truth is the one asked)."""
    limit = 1 - p.kv_headroom_frac
    steps = int(window_s / FINE_S)
    for _ in range(200):
        mean, sd, tau = rng.uniform(0.4, 0.9), rng.uniform(0.02, 0.10), log_uniform(rng, 0.2, 10.0)
        series = [np.minimum(mean + sd * ou_series(rng, steps, tau / FINE_S), 1.0) for _ in range(repeats)]
        if any(s.max() > limit for s in series) == fires:
            break
    else:
        return
    stage = _stage(rng, users, rate, spread, window_s, repeats)
    ws = []
    for w, s in zip(stage[4], series):
        read = s[np.minimum((scrape_times(rng, window_s) / FINE_S).astype(int), steps - 1)]
        preempted = float(np.count_nonzero(np.diff((s >= 1.0).astype(int)) == 1) + (s[0] >= 1.0))
        server = {**w.server, "kv_usage_mean": float(read.mean()) if len(read) else math.nan,
                  "kv_usage_peak": float(read.max()) if len(read) else math.nan, "preemptions": preempted}
        ws.append(dataclasses.replace(w, server=server))
    status = adapters_findings.gate_status(stage[0] + ws, users, 4, "memory", p)
    above_s = max(float((s > limit).sum()) for s in series) * FINE_S
    _judge(tallies, "memory", status, fires, True, UNSTATED,
           {"correlation": "<1s" if tau < 1 else ">=1s", "above the limit": "<0.5s" if above_s < 0.5 else ">=0.5s",
            **factors},
           "the pool's usage under 1 - kv_headroom_frac at every 50 ms step",
           "the pool's usage past 1 - kv_headroom_frac at some 50 ms step")


def _batch(rng, tallies, p, fires, users, rate, spread, window_s, repeats, factors) -> None:
    """K=0's requests spend a share a = 0.6-0.95 of their time at the server (its true batch a x users), K=4's batch
    (1 - d) of that, d within batch_drop_frac (-10 % to it) or beyond (to 50 %); the server holds back (a quarter of
    the time at it queued, the KV pool 80 % full at its peak). A life at speed v holds each request 1 / v as long
    (the share a / v over a / v + 1 - a: Little's law in a closed loop, so the restart spread moves the batch by
    (1 - a) of itself); the gauge through a window an OU series of the binomial's relative SD, sqrt((1 - a) / (a x
    users)), correlated over a request's time at the server (users / rate), read at the scrapes."""
    drop_limit = p.batch_drop_frac
    drop = rng.uniform(drop_limit + 0.005, 0.50) if fires else rng.uniform(-0.10, drop_limit)
    share = rng.uniform(0.6, 0.95)
    stage = _stage(rng, users, rate, spread, window_s, repeats)
    steps = int(window_s / FINE_S)
    for k, level in ((0, users * share), (4, users * share * (1 - drop))):
        a = min(level / users, 0.99)   # a batch 10 % above K=0's 95 % of the users: all but 1 % of the time held
        ws = []
        for w, speed in zip(stage[k], life_speeds(rng, spread, repeats)):
            held = a / speed / (a / speed + 1 - a)
            sd = math.sqrt((1 - held) / (held * users))
            gauge = users * held * (1 + sd * ou_series(rng, steps, max(users / rate, FINE_S) / FINE_S))
            read = gauge[np.minimum((scrape_times(rng, window_s) / FINE_S).astype(int), steps - 1)]
            running = float(read.mean()) if len(read) else math.nan
            ws.append(dataclasses.replace(w, server={**w.server, "running_mean": running,
                                                     "waiting_mean": max(1.0, running / 3), "kv_usage_peak": 0.8}))
        stage[k] = ws
    status = adapters_findings.gate_status(stage[0] + stage[4], users, 4, "real batch", p)
    _judge(tallies, "real batch", status, fires, True, UNSTATED,
           {"margin": "<5 points" if abs(drop - drop_limit) < 0.05 else ">=5 points", **factors},
           "K=4's true batch within batch_drop_frac of K=0's", "K=4's true batch below K=0's by more than it")
