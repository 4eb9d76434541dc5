"""The verdict at a rate where the capacity within the SLO decides: how often it is wrong where a wrong verdict is
likeliest, and how often a decided one is right.

Trials (`capacity_verdict_trial`): K=0 and K=4 on M/M/c servers, an e2e SLO held at its percentile (p90, p95 or
p99), each K measured on a rate ramp (the user's target rate, then 2-4 rates up to 1.3 x the larger capacity) on 1
or 2 server lives, every life's service times x exp(spread x N(0, 1)) (the restart spread 1-20 %, on a server
whose spread is not known in advance), the same seeded arrivals for both K in a life at a rate. K=4 runs its own
number of slots (half, as many, or twice K=0's) at the service time that puts its true capacity within the SLO (the
rate at which its M/M/c attainment is the SLO's percentile, lives.mmc_attainment) at a drawn gain over K=0's: near
either edge of the tie band (0.5-3 points past or short of +3 % or of -2.9 %, K=0's capacity 3 % over K=4's) or far
from it (-30 to -10 %, +10 to +40 %). Fewer, faster slots are quicker at a low rate and hold less; more, slower
ones the reverse: the latency at the rate can disagree with the capacity. Both K keep up and hold the SLO at the
target rate (0.2-0.6 x the smaller capacity), so the verdict is gates/rate_pick.py's rule.

The truth: that rule on the true figures, each K's capacity a point (no bracket): K=4 where its capacity is beyond
K=0's by more than the tie band, K=0 where K=0's is beyond K=4's by more; else K=4 where its true e2e p90 at the
target rate (the median life) is faster than K=0's by more than the tie band, else K=0.

- claim (`score_edge`): a verdict at decision.confidence c is wrong at most 1 - c of the time at the worst truth, a
  second trial of each regime with K=4's true capacity gain on the edge of the tie band whose side the latency
  contradicts (twice the slots: +3 %, where the latency names K=0; half: -2.9 %, where it names K=4): the capacity
  ties there and the latency's K is the truth, while past the edge by any margin the capacity's K is; so a verdict
  naming either is an error, each stated at 1 - c over every trial, decided or not (verdicts.score_edge's rule);
- described, no claim (`score_trial`): how often a decided verdict is right by the confidence it states
  (verdicts.BANDS), the share decided, and how often a K=4 decided says the step that decides the truth
  (decided_by: a K=0 decided says "tie", whatever put K=4 out).
The same claims again "after the capacity search" (`capacity_search`), the remedy the product prints where a ramp
leaves both K in one bracket: from the trial's ramp, the product's capacity search (decision/capacity/search.py,
sweep.capacity_precision SEARCH_PRECISION, its default budget of 8 lives per K, the ramp's among them) probes each
K, every probe a rate stage in a server life of its own (its own life factor from the same spread, simulated as the
ramp's windows are), then the same verdict on every window; shown beside them, the probes a trial ran (mean).
The capacity gain is printed without an interval (estimate.capacities' gain: the ratio of two estimates), so there
is no capacity-gain coverage to score.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from scipy import optimize

from . import adapters
from .lives import mmc_attainment, mmc_limit
from .rate_trials import OVERLOAD, TARGETS, mmc_window, slo_config
from .regimes import TIE, Named, log_uniform
from .tally import DESCRIPTIVE, ERROR, MEAN, SHOWN, Tallies
from .verdicts import band_of, edge_claim

FAMILY = "verdict"
WHAT = "at a rate, capacity decides"
TRUTH = ("gates/rate_pick's rule on the true capacities (points) and the true e2e p90 at the rate (median life)")
LOW_EDGE = 1 / (1 + TIE) - 1     # K=4's capacity gain at which K=0's capacity is the tie band over K=4's
RATE_ARRIVALS = (300, 1_000)     # a window at the target rate holds this many arrivals (drawn log-uniform; the
#                                  ramp's highest rate 2-9 x as many): fewer leave the attainment gate unknown
# decision.resamples here (the default 1,000 costs about 2 s a K per verdict on this host, 2026-12-06): the share is
# still counted as the product counts it, more resamples drawn while its Monte Carlo interval straddles the bar
RESAMPLES = 200
AFTER = "after the capacity search"     # the second pass's claims end with it
SEARCH_PRECISION = TIE / 2    # the sweep.capacity_precision the verdict's next_runs names: half the tie band


def capacity(servers: int, service_mean_s: float, limit_s: float, target: float) -> float:
    """The rate at which the M/M/c attainment of an e2e limit is `target` (0 where even an idle server misses it)."""
    top = servers / service_mean_s
    f = (lambda rate: mmc_attainment(servers, rate, service_mean_s, limit_s, "e2e") - target)
    if f(top * 1e-9) <= 0:
        return 0.0
    return float(optimize.brentq(f, top * 1e-9, top * (1 - 1e-9), xtol=1e-10 * top))


def service_for(servers: int, limit_s: float, target: float, wanted: float) -> float:
    """The mean service time at which `servers` slots hold the e2e limit at `target` up to the rate `wanted`."""
    most = limit_s / -math.log1p(-target)      # past it even an idle server's service alone misses the limit
    return float(optimize.brentq(lambda s: capacity(servers, s, limit_s, target) - wanted, most * 1e-6,
                                 most * (1 - 1e-9), xtol=most * 1e-10))


@dataclass(frozen=True)
class CapacityVerdictRegime:
    servers: dict[int, int]
    service_mean_s: dict[int, float]    # at the median life
    limit_s: float                       # the e2e SLO's limit
    target: float                        # its percentile, as a share
    capacity: dict[int, float]           # per K, the truth
    rate: float                          # the user's target rate
    ramp: tuple[float, ...]              # the rates measured, the target rate first
    stage_s: float
    spread: float
    lives: int
    named: Named = Named()

    @property
    def capacity_gain(self) -> float:
        return self.capacity[4] / self.capacity[0] - 1


def _speed(r: CapacityVerdictRegime, k: int) -> float:
    """K's true speed at the target rate: 1 / its e2e p90 there (decision.latency_percentile's default)."""
    q = adapters.decision_config().latency_percentile / 100
    return 1 / mmc_limit(r.servers[k], r.rate, r.service_mean_s[k], q, "e2e")


def truth(r: CapacityVerdictRegime) -> tuple[int, str]:
    """The rule on the true figures (module docstring): the K and the step that decides it."""
    if r.capacity[4] > r.capacity[0] * (1 + TIE):
        return 4, "capacity"
    if r.capacity[0] > r.capacity[4] * (1 + TIE):
        return 0, "capacity"
    return (4, "latency") if _speed(r, 4) > _speed(r, 0) * (1 + TIE) else (0, "latency")


def _zone(gain: float) -> str:
    return "near" if min(abs(gain - TIE), abs(gain - LOW_EDGE)) <= 0.03 + 1e-12 else "far"


def _with_gain(r: CapacityVerdictRegime, servers4: int, gain: float, named: dict[str, str]) -> CapacityVerdictRegime:
    """`r` with K=4 on `servers4` slots at the service time that puts its true capacity at `gain` over K=0's; the
    target rate 0.2-0.6 x the smaller capacity as drawn (`r.rate` over K=0's capacity kept), the ramp rebuilt."""
    cap4 = r.capacity[0] * (1 + gain)
    service4 = service_for(servers4, r.limit_s, r.target, cap4)
    share = r.rate / min(r.capacity.values())
    rate = share * min(r.capacity[0], cap4)
    top = 1.3 * max(r.capacity[0], cap4)
    steps = len(r.ramp) - 1
    ramp = tuple(rate * (top / rate) ** (i / steps) for i in range(steps + 1))
    servable = OVERLOAD * min(r.servers[0] / r.service_mean_s[0], servers4 / service4)
    stage_s = r.stage_s * r.rate / rate    # the target rate's arrivals as drawn
    return replace(r, servers={0: r.servers[0], 4: servers4}, service_mean_s={0: r.service_mean_s[0], 4: service4},
                   capacity={0: r.capacity[0], 4: cap4}, rate=rate,
                   ramp=tuple(x for x in ramp if x <= servable) or ramp[:1], stage_s=stage_s,
                   named=Named({**r.named.factors, **named}))


def draw(rng: np.random.Generator) -> CapacityVerdictRegime:
    """The regime (module docstring): K=0 on 1-8 slots, answers 0.2-5 s, its capacity at 0.5-0.95 of what its slots
    serve; K=4 on half, as many or twice the slots at its drawn capacity gain, near an edge in half the trials.
    Drawn again (bounded) where a K does not hold the SLO at the target rate with a margin (`holds_with_margin`),
    or no service time puts K=4's capacity at the gain (numerically: a capacity falls from most of what many slots
    serve to 0 within a hair of the service time whose own percentile is the limit)."""
    for _ in range(100):
        try:
            return _draw(rng)
        except ValueError:
            continue
    raise RuntimeError("no capacity-verdict regime drawn in 100 tries")


def _draw(rng: np.random.Generator) -> CapacityVerdictRegime:
    servers0 = int(2 ** rng.integers(0, 4))
    service0 = log_uniform(rng, 0.2, 5.0)
    target = float(rng.choice(TARGETS))
    cap0 = rng.uniform(0.5, 0.95) * servers0 / service0
    limit_s = mmc_limit(servers0, cap0, service0, target, "e2e")
    if rng.uniform() < 0.5:
        gain = float(rng.choice((TIE, LOW_EDGE))) + float(rng.choice((-1, 1))) * rng.uniform(0.005, 0.03)
    else:
        gain = rng.uniform(-0.30, -0.10) if rng.uniform() < 0.5 else rng.uniform(0.10, 0.40)
    slots = float(rng.choice((0.5, 1.0, 2.0)))
    share = rng.uniform(0.2, 0.6)
    steps = int(rng.integers(2, 5))
    spread = log_uniform(rng, 0.01, 0.2)
    lives = int(rng.integers(1, 3))
    arrivals = log_uniform(rng, *RATE_ARRIVALS)
    base = CapacityVerdictRegime({0: servers0, 4: servers0}, {0: service0, 4: service0}, limit_s, target,
                                 {0: cap0, 4: cap0}, share * cap0, (0.0,) * (steps + 1), 1.0, spread, lives)
    r = _with_gain(base, max(1, round(servers0 * slots)), gain, {})
    r = replace(r, stage_s=arrivals / r.rate)
    if not holds_with_margin(r):
        raise ValueError("a K's SLO attainment at the target rate too close to its percentile")
    return _named(r, slots)


def holds_with_margin(r: CapacityVerdictRegime) -> bool:
    """Both K's true attainment at the target rate misses the SLO at most half as often as its percentile allows:
    their attainment gates pass on the arrivals a window holds, and the pick rule decides (at a rate where the
    attainment is barely above the percentile, as on many slots whose service time alone sets the limit, the gate is
    unknown and the verdict not decided: no verdict to score)."""
    return all(mmc_attainment(r.servers[k], r.rate, r.service_mean_s[k], r.limit_s, "e2e") >= 1 - (1 - r.target) / 2
               for k in (0, 4))


def _named(r: CapacityVerdictRegime, slots: float) -> CapacityVerdictRegime:
    """Its labels; "latency": whether the latency at the rate names the capacity's K (the truth's, or at an edge
    the K past it)."""
    k, decides = truth(r)
    if "edge" in r.named.factors:
        k = 4 if r.capacity_gain > 0 else 0
    latency = 4 if _speed(r, 4) > _speed(r, 0) * (1 + TIE) else 0
    factors = {"gain": _zone(r.capacity_gain), "sign": "+" if r.capacity_gain > 0 else "-",
               "slots": {0.5: "half", 1.0: "same", 2.0: "twice"}[slots], "decides": decides,
               "latency": "agrees" if latency == k else "disagrees",
               "spread": "1-5%" if r.spread < 0.05 else "5-10%" if r.spread < 0.1 else "10-20%",
               "lives": str(r.lives), "rates": str(len(r.ramp))}
    return replace(r, named=Named({**r.named.factors, **factors}))


def at_the_edge(r: CapacityVerdictRegime, rng: np.random.Generator) -> CapacityVerdictRegime:
    """The regime with K=4's capacity gain on the edge its latency contradicts (module docstring): twice K=0's
    slots at +3 % or half of them at -2.9 % (drawn), everything else as drawn."""
    first = float(rng.choice((0.5, 2.0))) if r.servers[0] >= 2 else 2.0
    found = []
    for slots in (first, 2.5 - first):     # the other edge where the first puts no K=4 there with the SLO's margin
        gain = TIE if slots == 2.0 else LOW_EDGE
        try:
            edge = _with_gain(r, max(1, round(r.servers[0] * slots)), gain, {"edge": "+3%" if gain > 0 else "-2.9%"})
        except ValueError:
            continue
        found.append(_named(edge, slots))
        if holds_with_margin(found[-1]):
            return found[-1]
    if not found:
        raise RuntimeError("no service time puts K=4's capacity on either edge")
    return found[0]


@dataclass(frozen=True)
class CapacityVerdictTrial:
    regime: CapacityVerdictRegime
    decision: object     # schema.Decision
    truth: int
    decides: str         # the step that decides the truth: capacity | latency
    past_edge: int       # the truth where the capacity gain is past the edge by any margin (the capacity's K)
    searched: object = None   # schema.Decision on the ramp and the capacity search's probes (None: not run)
    probes: int = 0           # the probes the search ran, every K


def capacity_verdict_trial(r: CapacityVerdictRegime, rng: np.random.Generator, search: bool = True
                           ) -> CapacityVerdictTrial:
    """Each K's lives on the ramp, decided at the target rate by the product's rate verdict (memory not simulated:
    its gate waived); then (`search`) the capacity search from those windows and the verdict on them all, its
    draws from a stream seeded by the ramp's (the ramp's draws, and every later trial's, as without it)."""
    p, slo, windows, seeds = ramp_windows(r, rng)
    decision = adapters.decide_rate(windows, r.rate, p)
    k, decides = truth(r)
    past = 4 if r.capacity_gain > 0 else 0
    if not search:
        return CapacityVerdictTrial(r, decision, k, decides, past)
    probed = capacity_search(r, windows, slo, np.random.default_rng(seeds))
    return CapacityVerdictTrial(r, decision, k, decides, past, adapters.decide_rate(probed, r.rate, p),
                                len(probed) - len(windows))


def ramp_windows(r: CapacityVerdictRegime, rng: np.random.Generator) -> tuple[object, object, list, list[int]]:
    """The trial's config and SLO, each K's windows on the ramp (every life's own factor), and each rate's arrival
    seed."""
    p, slo = slo_config("e2e", r.limit_s, r.target)
    p = p.model_copy(update={"waive": ["memory"], "resamples": RESAMPLES})
    factors = {k: [float(math.exp(r.spread * rng.standard_normal())) for _ in range(r.lives)] for k in (0, 4)}
    windows, seeds = [], []
    for life in range(r.lives):
        for rate in r.ramp:
            seeds.append(int(rng.integers(2 ** 31)))
            for k in (0, 4):
                windows.append(mmc_window(k, life, r.servers[k], rate, r.service_mean_s[k] * factors[k][life],
                                          r.stage_s, "stationary", seeds[-1], slo, rng))
    return p, slo, windows, seeds


def capacity_search(r: CapacityVerdictRegime, windows: list, slo, rng: np.random.Generator,
                    judge=None) -> list:
    """`windows` and the capacity search's probes after them (module docstring): each the rate the product's chooser
    names for the K it names, in a life of its own (a fresh life factor), until it stops (every K's bracket within
    SEARCH_PRECISION, its budget spent, or no rate left to narrow one; or, with `judge`, once `judge(windows)` says
    the verdict is decided: judged after each probe). Its reach the product's from the ramp's rates, no higher than
    OVERLOAD x what the faster K serves."""
    servable = OVERLOAD * max(r.servers[k] / r.service_mean_s[k] for k in (0, 4))
    windows = list(windows)
    probes, tried = {0: 0, 4: 0}, {0: [], 4: []}
    lives = {k: r.lives for k in probes}
    while (judge is None or not judge(windows)) and (choice := adapters.capacity_search_probe(
            windows, {k: lives[k] + n for k, n in probes.items()}, probes, r.target, SEARCH_PRECISION, r.ramp,
            servable, tried)):
        k, rate = choice
        factor = float(math.exp(r.spread * rng.standard_normal()))
        windows.append(mmc_window(k, r.lives + probes[k], r.servers[k], rate, r.service_mean_s[k] * factor,
                                  r.stage_s, "stationary", int(rng.integers(2 ** 31)), slo, rng))
        probes[k] += 1
        tried[k].append(rate)
    return windows


def _passes(trial: CapacityVerdictTrial) -> list[tuple[object, str]]:
    """Each verdict of the trial and the suffix its claims' names take: the ramp's (""), the search's (AFTER)."""
    return [(trial.decision, "")] + ([(trial.searched, f", {AFTER}")] if trial.searched is not None else [])


def score_trial(trial: CapacityVerdictTrial, tallies: Tallies) -> None:
    """The reliability table, the share decided and, where K=4 is decided, whether its decided_by is the step that
    decides the truth (described, no claim), for each pass; the search's probes per trial (shown, its mean)."""
    factors = trial.regime.named.factors
    for decision, after in _passes(trial):
        if after:
            tallies.add(f"probes per trial (mean): {WHAT}{after}", FAMILY, MEAN, 0.0, "shown, not scored", False,
                        factors, trial.probes)
        decided, k, confidence = adapters.verdict(decision)
        tallies.add(f"decided share: {WHAT}{after}", FAMILY, SHOWN, 0.0, "shown, not scored", decided, factors)
        if not decided or confidence is None:
            continue
        for name in (f"verdict {WHAT}, stated {band_of(confidence)}{after}", f"verdict {WHAT}, every decided{after}"):
            tallies.add(name, FAMILY, DESCRIPTIVE, 0.9, TRUTH, k == trial.truth, factors, confidence)
        if k == 4:   # decided_by of the smallest K is "tie" or "gates" whatever put the larger out
            tallies.add(f"decided_by is the truth's step, K=4 decided: {WHAT}{after}", FAMILY, SHOWN, 0.0,
                        "shown, not scored", adapters.decided_by(decision) == trial.decides, factors)


def score_edge(trial: CapacityVerdictTrial, tallies: Tallies) -> None:
    """A trial at the edge (module docstring): naming the latency's K (wrong past the edge) or the capacity's K
    (wrong at it), each an error stated at 1 - decision.confidence over every trial, for each pass."""
    factors = trial.regime.named.factors
    for decision, after in _passes(trial):
        decided, k, _ = adapters.verdict(decision)
        stated = 1 - adapters.confidence_bar(decision)
        for named in (4, 0):
            # wrong at the edge (the latency's K the truth there) or past it (the capacity's K); where the latency
            # names the capacity's K too, that K is right on both sides
            wrong = named != trial.truth or named != trial.past_edge
            tallies.add(edge_claim(WHAT, named) + after, FAMILY, ERROR, stated, "capacity gain on the edge: the "
                        "latency's K the truth there, the capacity's past it", decided and k == named and wrong,
                        factors)


def run_trial(rng: np.random.Generator, tallies: Tallies) -> None:
    """One drawn regime, then the same regime at the edge from a child stream (the drawn trials' draws stay)."""
    regime = draw(rng)
    score_trial(capacity_verdict_trial(regime, rng), tallies)
    edge_rng = rng.spawn(1)[0]
    score_edge(capacity_verdict_trial(at_the_edge(regime, edge_rng), edge_rng), tallies)
