"""The tuning method (docs/method.md) as point rules on `CellStats`: gates, the stop rule, the pick.

These run on the figures as measured and again on every resample (the verdict's confidence is
the share of resamples in which the same K is picked), so they are plain and fast: no intervals,
no text. checks.py wraps the same rules with intervals and evidence for the report.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ...config import DecisionConfig
from ..cells.measure import CellStats
from ..cells.stats import Bounds, proportion_difference

PASS, FAIL, UNKNOWN, WAIVED = "pass", "fail", "unknown", "waived"

GATE_FAILURES = "failures and timeouts"
GATE_MEMORY = "memory headroom"
GATE_BATCH = "real batch"
GATE_LATENCY = "e2e latency"
SLO_GATE_PREFIX = "SLO "


def rel(new: float, old: float) -> float:
    if old is None or new is None or not old or math.isnan(old) or math.isnan(new):
        return math.nan
    return new / old - 1


def failure_difference(mine: int, s: CellStats, theirs: int, base: CellStats, level: float) -> Bounds:
    """Newcombe's interval of K's failure (or timeout) rate minus the baseline's, each count over its cell's
    failure design effect (1 at a users stage; at a rate, a queue's requests fail together: cells/stats.py)."""
    mine_d, theirs_d = s.failure_design_effect, base.failure_design_effect
    return proportion_difference(mine / mine_d, s.finished / mine_d, theirs / theirs_d, base.finished / theirs_d,
                                 level)


def failures_status(s: CellStats, base: CellStats, p: DecisionConfig) -> str:
    """Fails only when the rate over the baseline's is beyond the slack with its interval (as measured and in
    every resample alike: one failure in 200 requests is not a regression); beyond the slack but not proven
    is unknown."""
    if s.k == base.k or not s.finished or not base.finished:
        return PASS if s.finished else UNKNOWN
    worst = PASS
    for mine, theirs in ((s.failures, base.failures), (s.timeouts, base.timeouts)):
        if mine / s.finished - theirs / base.finished > p.failure_rate_slack:
            bounds = failure_difference(mine, s, theirs, base, p.interval_level)
            if bounds.low is not None and bounds.low > p.failure_rate_slack:
                return FAIL
            worst = UNKNOWN
    return worst


def slo_status(s: CellStats, index: int, share: float) -> str:
    if not s.finished:
        return UNKNOWN
    return PASS if s.slo_met[index] / s.finished >= share else FAIL


def memory_status(s: CellStats, p: DecisionConfig) -> str:
    """KV headroom is read on KV usage; preemptions prove the pool ran out, and a full device fails too.
    Without KV usage nothing proves headroom: device memory tells nothing of it (vLLM preallocates the
    pool), and no preemption only says the pool never ran out, not that the headroom held."""
    kv, preempted = s.kv_usage_peak, s.preemptions
    device = s.gpu_mem_peak_mib / s.gpu_mem_total_mib if s.gpu_mem_total_mib else math.nan
    if (kv > 1 - p.kv_headroom_frac) or (preempted > 0) or (device >= 1.0):
        return FAIL
    return UNKNOWN if math.isnan(kv) else PASS


def queue_share(s: CellStats) -> float:
    """The share of their time at the server that requests spend queued (Little's law: waiting over
    running + waiting)."""
    at_server = s.waiting_mean + s.running_mean
    return s.waiting_mean / at_server if at_server > 0 else math.nan


KV_ROOM_FRAC = 0.5  # a KV pool measured at most this full at its peak could hold twice the batch
LIMIT_QUEUE_STEPS = 3.0  # a request queued this many engine steps or more waits for a limit, not a step


def queue_steps(s: CellStats) -> float:
    """The engine steps a request spends queued, on average: its time queued (Little's law: waiting over
    req/s) over a step's time (TPOT p50 times the tokens a step gives a request, 1 + K x acceptance; 1 where
    acceptance is unknown, which counts more steps). NaN where either is unknown."""
    step_ms = s.quantile("tpot_ms", 0.5) * (1 + s.k * s.acceptance_rate if s.k and s.acceptance_rate >= 0 else 1)
    if not s.req_per_s > 0 or not step_ms > 0:
        return math.nan
    return 1000 * s.waiting_mean / s.req_per_s / step_ms


def queue_is_a_limit(s: CellStats, p: DecisionConfig) -> bool:
    """A whole request or more waiting for a real part of their time, for longer than a step or two.
    A request arriving mid-step waits for the next one, so a faster K queues a few per cent more by turnover
    alone (6-8 % on the simulator at K=4 and 16-64 users; 20 % at 2 users, where that is 0.3 of a request);
    a busy host queues them longer, at every K and most at the fastest (CI, 2026-12-05: 1.0 waiting, 13 %,
    at K=4 and 8 users on 2 oversubscribed cores: 1.4 steps each, the pool at 1 %). A limit the scheduler
    hits queues them for many steps: the KV pool running out (13-56 % of their time), or a token budget
    (--max-num-batched-tokens) that a larger K's drafts fill, beside an empty pool (the simulator's roomy-kv
    at 48 users and a 256-384-token budget: 6.5-21 steps, the pool at 2 %). So beside a pool measured at
    most half full (it could hold twice the batch) the queue counts only at LIMIT_QUEUE_STEPS or more."""
    if not queued(s, p):
        return False
    return not kv_has_room(s) or not queue_steps(s) < LIMIT_QUEUE_STEPS   # NaN steps: the queue counts


def kv_has_room(s: CellStats) -> bool:
    """The KV pool measured at most KV_ROOM_FRAC full at its peak (unmeasured: not known to have room)."""
    return not math.isnan(s.kv_usage_peak) and s.kv_usage_peak <= KV_ROOM_FRAC


def queued(s: CellStats, p: DecisionConfig) -> bool:
    """A whole request or more waiting, for queue_share_frac or more of their time at the server."""
    return s.waiting_mean >= 1.0 and queue_share(s) >= p.queue_share_frac


def server_holds_back(s: CellStats, p: DecisionConfig) -> bool:
    """Requests queue at the server (preempted, KV full, or `queue_is_a_limit`): a smaller batch is the
    server's limit, not users between requests (a faster K leaves each user more of its time outside the
    server)."""
    return pool_ran_out(s, p) or queue_is_a_limit(s, p)


def pool_ran_out(s: CellStats, p: DecisionConfig) -> bool:
    """Preempted, or the KV pool past its headroom at its peak."""
    return s.preemptions > 0 or s.kv_usage_peak > 1 - p.kv_headroom_frac


def batch_status(s: CellStats, base: CellStats, p: DecisionConfig) -> str:
    if math.isnan(s.running_mean) or math.isnan(base.running_mean):
        return UNKNOWN  # the baseline too: a batch nobody sampled is not a pass
    if s.k == base.k:
        return PASS
    dropped = s.running_mean < base.running_mean * (1 - p.batch_drop_frac)
    return FAIL if dropped and server_holds_back(s, p) else PASS


def latency_ratio(s: CellStats, base: CellStats, p: DecisionConfig) -> float:
    q = p.latency_percentile / 100
    return rel(s.quantile("e2e_ms", q), base.quantile("e2e_ms", q))


def latency_status(s: CellStats, base: CellStats, p: DecisionConfig) -> str:
    if s.k == base.k:
        return PASS
    ratio = latency_ratio(s, base, p)
    if math.isnan(ratio):
        return UNKNOWN
    return FAIL if ratio > p.latency_tolerance_frac else PASS


def gate_statuses(s: CellStats, base: CellStats, p: DecisionConfig) -> dict[str, str]:
    """Every gate of one K at one stage, judged on point figures."""
    statuses = {GATE_FAILURES: failures_status(s, base, p)}
    for index, slo in enumerate(p.slos):
        statuses[SLO_GATE_PREFIX + slo.key] = slo_status(s, index, slo.share)
    statuses[GATE_MEMORY] = memory_status(s, p)
    statuses[GATE_BATCH] = batch_status(s, base, p)
    if not p.slos:  # without SLOs "waits do not get longer" is read on e2e latency
        statuses[GATE_LATENCY] = latency_status(s, base, p)
    return statuses


MEMORY_READINGS = ("KV usage mean", "KV usage peak", "device memory", "preemptions")


def memory_rises(s: CellStats, prev: CellStats) -> dict[str, float]:
    """Each memory reading's rise from prev to s, on one scale: KV usage in points of the pool (mean and peak),
    device memory as a share of the total, preemptions appearing as 1.0 (none -> some); a reading missing on
    either side is left out. A KV pool that shrinks is no reading rising (method stepping rule 2: "memory
    rises"): at the same KV use in tokens a smaller pool already shows as a higher KV usage share, and at a
    constant KV usage share the pool still holds what the load asks (the draft's weights took the rest)."""
    rises = {"KV usage mean": s.kv_usage_mean - prev.kv_usage_mean,
             "KV usage peak": s.kv_usage_peak - prev.kv_usage_peak}
    if s.gpu_mem_total_mib:
        rises["device memory"] = (s.gpu_mem_peak_mib - prev.gpu_mem_peak_mib) / s.gpu_mem_total_mib
    if s.preemptions > 0 and not prev.preemptions > 0:
        rises["preemptions"] = 1.0
    elif not math.isnan(s.preemptions) and not math.isnan(prev.preemptions):
        rises["preemptions"] = 0.0
    return {name: rise for name, rise in rises.items() if not math.isnan(rise)}


def memory_rise(s: CellStats, prev: CellStats) -> float:
    """The clearest memory rise from prev to s (`memory_rises`); NaN when neither side has any of these
    readings (the stop rule cannot be evaluated there)."""
    return max(memory_rises(s, prev).values(), default=math.nan)


def gain_needed(rise: float, steps: int, p: DecisionConfig) -> float:
    """The objective gain a clear memory rise must buy. One K step: throughput_gain_frac (method stepping
    rule 2). Over the walk so far (two or more steps): throughput_gain_frac for each memory_rise_frac of the
    cumulative rise ("memory up clearly, and req/s not in step: stop"), so steps that each pay a little
    while together they double memory for a few per cent stop."""
    if steps <= 1 or not p.memory_rise_frac:
        return p.throughput_gain_frac
    return p.throughput_gain_frac * max(1.0, rise / p.memory_rise_frac)


def stop_step(stats: Mapping[int, CellStats], p: DecisionConfig) -> tuple[int, int] | None:
    """Method stepping rule 2, walking K upward: (the smaller K, the first K) whose memory rose clearly since
    the step before, or since any smaller K, while the objective did not rise in step with it."""
    ks = sorted(stats)
    for i, k in enumerate(ks[1:], 1):
        for j, prev in enumerate(ks[:i]):
            rise = memory_rise(stats[k], stats[prev])
            gain = rel(stats[k].objective(p.objective), stats[prev].objective(p.objective))
            if rise >= p.memory_rise_frac and not gain >= gain_needed(rise, i - j, p):
                return prev, k
    return None


def stop_at(stats: Mapping[int, CellStats], p: DecisionConfig) -> int | None:
    """The K where the stop rule fires (`stop_step`), None when it does not."""
    step = stop_step(stats, p)
    return step[1] if step else None


def stop_gaps(stats: Mapping[int, CellStats]) -> list[tuple[int, int]]:
    """The K steps the stop rule could not weigh: no memory reading on either side."""
    ks = sorted(stats)
    return [(prev, k) for prev, k in zip(ks, ks[1:]) if math.isnan(memory_rise(stats[k], stats[prev]))]


def pick(stats: Mapping[int, CellStats], gates: Mapping[int, Mapping[str, str]], stopped: int | None,
         p: DecisionConfig) -> int | None:
    """The best objective among K below the stop that no gate fails; the smallest K within the tie band."""
    eligible = {k: s.objective(p.objective) for k, s in stats.items()
                if (stopped is None or k < stopped) and FAIL not in gates[k].values()}
    eligible = {k: v for k, v in eligible.items() if not math.isnan(v)}
    if not eligible:
        return None
    best = max(eligible.values())
    return min(k for k, v in eligible.items() if v >= best / (1 + p.tie_tolerance_frac))


def choose(stats: Mapping[int, CellStats], p: DecisionConfig) -> int | None:
    """The whole point rule at one stage (one resample)."""
    if not stats:
        return None
    base = stats[min(stats)]
    gates = {k: gate_statuses(s, base, p) for k, s in stats.items()}
    return pick(stats, gates, stop_at(stats, p), p)
