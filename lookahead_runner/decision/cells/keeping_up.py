"""Whether a K keeps up with an arrival rate, from when each request arrived, started and finished (pure numpy):
`queue_finding`, the rule a rate window's `keeps_up` / `behind` / `too_short` read (cells/rate_window.py).

A server keeps up when what it holds does not grow without bound. Two counts tell it apart from a server that
is only filling up:

- queued: arrived and not started (no first token yet; the client's view of vllm:num_requests_waiting plus a
  prompt in prefill, and any arrival the client held for a load.max_in_flight slot). A server with room admits
  an arrival within its prefill, so this count stays near its level whatever the answers' length; it grows only
  where arrivals wait for a slot the server cannot give them. Judged through the whole window.
- outstanding: arrived and not finished. It rises at every stage's start until the answers begun then have
  ended (the server filling up, about one answer's length), so it is judged only after that, over the settled
  span [stage start + the answers' p95, window end]. That span must be at least one answer long, so that its
  first and last counts share no request; a window without such a span is "stage too short for answers of N s;
  lengthen to M s", never "behind" (real answers of 512-2048 tokens take 10-60 s).

A count grows when its growth through the span is beyond its own noise (`count_growth`), read two ways, either
enough: its change from first to last against its steps' spread, a t test against a count that wanders as a
random walk with no drift (the loosest a steady queue behaves within one window: a queue near saturation); and its
least-squares gain against the noise its variogram shows, that random walk's part and a jitter of its level that
does not add up (answers admitted together end together, which the steps' spread would count as drift's noise).
Each passes a driftless random walk 2.5 % of the time. So the noise is the window's own, whatever the arrivals'
burstiness (gamma gaps of shape b have CV^2 = 1/b) or the server's batching. Repeats are pooled
(`pooled_behind`: each reading's growths summed over their noises summed), so one repeat's chance excursion
does not mark a K that the others show keeping up.

For a calibration: `queue_finding(arrived_s, started_s, finished_s, t0, t1, stage_start_s)` on synthetic times
gives the finding (`.status`, `.behind`, `.too_short`) the runner would state.

The claim, measured on synthetic first-come-first-served servers (gamma gaps as workload/arrivals.py draws
them, answers uniform in 0.75-1.25 x their mean, the window after a 25 % warm-up, 300 trials a point;
tests/unit/decision/test_keeping_up.py asserts the bounds and keeps the figures). 16 slots of ~1 s answers,
20 s stages, load as a share of the server's throughput:

| load | false alarms, Poisson | shape 0.2 | (the rule before: 3 sqrt of the outstanding, as if Poisson) |
|---|---|---|---|
| 0.8 | 1.0 % | 1.7 % | 1.3 % / 22 % |
| 0.9 | 3.0 % | 4.3 % | 6.3 % / 29 % |

| load | read behind, Poisson | shape 0.2 |
|---|---|---|
| 1.1 | 60 % | 18 % |
| 1.25 | 98 % | 46 % |
| 1.5 | 100 % | 88 % |
| 2.0 | 100 % | 100 % |

64 slots of ~25 s answers, 120 s stages: false alarms at 0.8 and 0.9 at most 1.7 %; read behind at 1.25 in 80 %
(Poisson) and 28 % (shape 0.2), at 1.5 in 100 % and 73 %. So a window misses an overload within about 10 % of
the throughput, and bursty arrivals hide a moderate one in a short stage: a longer stage tells.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

KEEPS_UP, BEHIND, TOO_SHORT = "keeps up", "behind", "too short"
QUEUE_POINTS = 41          # equally spaced times across a span at which the counts are read (odd: see count_growth)
# Each reading's one-sided level: a driftless random walk passes the steps' t test this often (Student's t, exact
# for Gaussian steps), and the least-squares gain's bar GROWTH_T as often: 3.55 is the 97.5th percentile of
# Growth.t_line in 20,000 Gaussian walks read at QUEUE_POINTS (3.50 in walks of Poisson steps;
# tests/unit/decision/test_keeping_up.py derives it again; the fitted noise is itself noisy, hence a bar above a
# normal's 1.96). Either reading may say it grows, so a walk passes 5 % at most. A stable queue, which returns to
# its level, passes less often (the measured rates: the module's docstring).
GROWTH_ALPHA = 0.025
GROWTH_T = 3.55
# The answers' length the fill-up lasts: their 95th percentile, not their longest (one straggler, a timeout,
# would set it); the 5 % longer leave at most 5 % of the rate's arrivals still filling past it.
ANSWERS_QUANTILE = 0.95


@dataclass(frozen=True)
class Growth:
    """A count read at equally spaced times through a span, and two readings of whether it grew beyond its own
    noise (`count_growth`): its change from first to last against its steps' spread (`step_noise`: the change's
    variance were the count a driftless random walk of such steps), and its least-squares gain (`gained`, which
    one burst at an end hardly moves) against its variogram's noise (`noise`: a random walk's part and a jitter
    of its level that does not add up, as answers admitted together end together)."""

    first: float = math.nan
    last: float = math.nan
    steps: int = 0
    step_noise: float = math.nan
    gained: float = math.nan
    noise: float = math.nan

    @property
    def change(self) -> float:
        return self.last - self.first

    @property
    def t(self) -> float:
        """The change over its steps' noise: a t statistic with steps - 1 degrees of freedom (NaN unread)."""
        return _ratio(self.change, self.step_noise)

    @property
    def t_line(self) -> float:
        """The least-squares gain over its variogram's noise (NaN unread)."""
        return _ratio(self.gained, self.noise)

    @property
    def grows(self) -> bool:
        return self.steps >= 2 and (self.t > _t_bar(self.steps - 1) or self.t_line > GROWTH_T)


def _ratio(value: float, variance: float) -> float:
    if math.isnan(value) or math.isnan(variance):
        return math.nan
    if not variance > 0:
        return math.inf if value > 0 else 0.0
    return value / math.sqrt(variance)


def _t_bar(dof: float) -> float:
    return float(stats.t.ppf(1 - GROWTH_ALPHA, dof))


def _line_weights(points: int) -> tuple[np.ndarray, float, float]:
    """The least-squares gain over `points` equally spaced readings as weights on them, and its variance per
    unit of a level's independent jitter and per unit of a random walk's step variance."""
    x = np.arange(points, dtype=float) - (points - 1) / 2
    weights = (points - 1) * x / (x ** 2).sum()
    after = np.cumsum(weights[::-1])[::-1][1:]      # each step moves every reading after it
    return weights, float((weights ** 2).sum()), float((after ** 2).sum())


def count_growth(counts: np.ndarray) -> Growth:
    """The growth of a count read at equally spaced times (an odd number of them). Its steps: those between
    every other reading (the jitter of a level within one step adds less to them). Its variogram: the variance
    of its changes over 1 to n/4 readings (their mean taken out, so a drift adds nothing) fitted as a + b x lag,
    a random walk's part (b per reading) and a level's jitter that does not add up (a = twice its variance);
    the least-squares gain's variance follows from both. A fitted part below zero is refitted without it."""
    counts = np.asarray(counts, dtype=float)
    n = len(counts) - 1
    if n < 4:
        return Growth()
    steps = np.diff(counts[::2])
    lags = np.arange(1, max(2, n // 4) + 1)
    variances = np.array([np.var(counts[lag:] - counts[:-lag], ddof=1) for lag in lags])
    jitter, per_step = np.linalg.lstsq(np.column_stack([np.ones(len(lags)), lags]), variances, rcond=None)[0]
    if per_step < 0:
        jitter, per_step = float(variances.mean()), 0.0
    elif jitter < 0:
        jitter, per_step = 0.0, float((lags * variances).sum() / (lags ** 2).sum())
    weights, per_jitter, per_walk = _line_weights(len(counts))
    return Growth(float(counts[0]), float(counts[::2][-1]), len(steps), len(steps) * float(steps.var(ddof=1)),
                  float(weights @ counts), jitter / 2 * per_jitter + per_step * per_walk)


def pooled_growth(growths: Sequence[Growth]) -> bool:
    """Several spans' growth judged together, each reading pooled: the changes summed over their steps' noises
    summed (a t statistic with Welch-Satterthwaite's degrees of freedom: spans of unequal noise have fewer than
    their sum, which read a driftless walk as growing 2.8 % of the time, not 2.5 %), the gains over their
    variograms' noises. One span's excursion weighs as much as it is, not as a veto."""
    read = [g for g in growths if g.steps >= 2]
    if not read:
        return False
    change = _ratio(sum(g.change for g in read), sum(g.step_noise for g in read))
    gained = _ratio(sum(g.gained for g in read), sum(g.noise for g in read))
    return change > _t_bar(_pooled_dof(read)) or gained > GROWTH_T


def _pooled_dof(read: Sequence[Growth]) -> float:
    """Welch-Satterthwaite's degrees of freedom of the summed step noises (their sum where none is noisy)."""
    noises = [(g.step_noise, g.steps - 1) for g in read if g.step_noise > 0]
    if not noises:
        return float(sum(g.steps - 1 for g in read))
    return sum(v for v, _ in noises) ** 2 / sum(v * v / dof for v, dof in noises)


def counts_at(times_s: np.ndarray, entered_s: np.ndarray, left_s: np.ndarray) -> np.ndarray:
    """Requests entered at or before each time and not left by it (NaN left: never)."""
    entered = np.sort(np.asarray(entered_s, dtype=float))
    left = np.sort(np.nan_to_num(np.asarray(left_s, dtype=float), nan=np.inf))
    return (np.searchsorted(entered, times_s, side="right") - np.searchsorted(left, times_s, side="right")
            ).astype(float)


@dataclass(frozen=True)
class QueueFinding:
    """What a window's counts say: its status (KEEPS_UP, BEHIND, TOO_SHORT), the queued count's growth through the
    window, the outstanding count's through the settled span (unread where too short), the answers' length and
    the stage length that would settle them."""

    status: str
    queued: Growth
    outstanding: Growth
    answers_s: float
    settled_from_s: float       # the settled span's start (absolute, as the times given)
    needed_stage_s: float       # a stage this long settles the answers (NaN where none is needed)

    @property
    def behind(self) -> bool:
        return self.status == BEHIND

    @property
    def judged(self) -> Growth:
        """The count whose growth decided it: the queued one where it grew, else the outstanding one."""
        return self.queued if self.queued.grows or self.status == TOO_SHORT else self.outstanding

    @property
    def judged_name(self) -> str:
        return "queued" if self.judged is self.queued else "outstanding"

    @property
    def too_short(self) -> str:
        if self.status != TOO_SHORT:
            return ""
        return f"stage too short for answers of {self.answers_s:.0f} s; lengthen to {self.needed_stage_s:.0f} s"


def answers_length(arrived_s: np.ndarray, started_s: np.ndarray, finished_s: np.ndarray) -> float:
    """The answers' ANSWERS_QUANTILE length (first token to end; arrival to end for one never started); one not
    finished counts as lasting at least until the last moment the data saw."""
    arrived, started, finished = (np.asarray(v, dtype=float) for v in (arrived_s, started_s, finished_s))
    if not len(arrived):
        return 0.0
    begun = np.where(np.isfinite(started), started, arrived)
    seen = np.concatenate([arrived, started[np.isfinite(started)], finished[np.isfinite(finished)]])
    ended = np.where(np.isfinite(finished), finished, float(seen.max()))
    return float(np.quantile(np.maximum(ended - begun, 0.0), ANSWERS_QUANTILE))


def queue_finding(arrived_s: np.ndarray, started_s: np.ndarray, finished_s: np.ndarray, t0: float, t1: float,
                  stage_start_s: float, points: int = QUEUE_POINTS) -> QueueFinding:
    """Whether the server kept up with the arrivals through the window [t0, t1] of a stage that began at
    `stage_start_s`. Per request (every arrival that may be held then, this stage's and earlier ones'): when it
    arrived, started (its first token; NaN: never, it left when it finished) and finished (NaN: never seen to).
    Times in any one unit and origin (seconds)."""
    arrived = np.asarray(arrived_s, dtype=float)
    finished = np.asarray(finished_s, dtype=float)
    started = np.where(np.isfinite(np.asarray(started_s, dtype=float)), started_s, finished)
    queued = count_growth(counts_at(np.linspace(t0, t1, points), arrived, started))
    stage = (arrived >= stage_start_s) & (arrived < t1)
    answers = answers_length(arrived[stage], np.asarray(started_s, dtype=float)[stage], finished[stage])
    settled_from = max(t0, stage_start_s + answers)
    needed = math.ceil(round(max(2 * answers, (t0 - stage_start_s) + answers), 6))   # no float dust
    if queued.grows:
        return QueueFinding(BEHIND, queued, Growth(), answers, settled_from, math.nan)
    if t1 - settled_from < max(answers, 0.0) or t1 <= settled_from:
        return QueueFinding(TOO_SHORT, queued, Growth(), answers, settled_from, float(needed))
    outstanding = count_growth(counts_at(np.linspace(settled_from, t1, points), arrived, finished))
    return QueueFinding(BEHIND if outstanding.grows else KEEPS_UP, queued, outstanding, answers, settled_from,
                        math.nan)


def pooled_behind(findings: Sequence[QueueFinding]) -> bool:
    """Several repeats' windows at one rate judged together: behind where their queued counts grow pooled, or
    the outstanding counts of those settled do."""
    if pooled_growth([f.queued for f in findings]):
        return True
    return pooled_growth([f.outstanding for f in findings if f.status != TOO_SHORT])
