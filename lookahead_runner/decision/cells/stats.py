"""Statistics the decision rests on (docs/decision-statistics.md), pure numpy/scipy.

- A percentile of n samples has a distribution-free interval between two order statistics
  (binomial ranks); at small n the upper end does not exist (a p99 below ~300 samples is "the
  slowest request or two") and is returned as None.
- A proportion (failures, SLO attainment) gets a Wilson interval; a difference of two proportions
  Newcombe's hybrid interval built from the two Wilson intervals.
- Throughput has one value per window: the spread comes from repeats and, inside a window, from
  bins at least as long as a request (batch means), which `bin_counts` cuts.
- An open-loop window's arrivals are not independent: a queue that builds up makes the requests behind it
  miss the SLO together. Their proportions get Wilson's interval on an effective count, the arrivals over
  their design effect (`design_effect`: batch means over runs of consecutive arrivals), and their resamples
  draw such runs (`batch_index`), not single arrivals.
- Differences between settings get percentile intervals of their resampled values (`interval`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Bounds:
    """An interval; None on a side = unbounded there (too few samples to bound it)."""

    low: float | None
    high: float | None

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None

    def contains(self, value: float) -> bool:
        return (self.low is None or self.low <= value) and (self.high is None or value <= self.high)


def _finite(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def quantile_bounds(values: np.ndarray, q: float, level: float) -> Bounds:
    """Distribution-free interval for the q-quantile: order statistics X(j) at binomial ranks.

    P(X(j) <= true quantile) = P(B >= j) with B ~ Binomial(n, q): the lower end is the highest j with
    P(B <= j-1) <= tail, the upper end the lowest u with P(B <= u-1) >= 1 - tail; none exists at small n.
    """
    values = np.sort(np.asarray(values, dtype=float))
    values = values[np.isfinite(values)]
    n = len(values)
    if n == 0:
        return Bounds(None, None)
    tail = (1 - level) / 2
    k = int(stats.binom.ppf(tail, n, q))
    if stats.binom.cdf(k, n, q) > tail:
        k -= 1
    upper = int(stats.binom.ppf(1 - tail, n, q)) + 1
    return Bounds(float(values[k]) if k >= 0 else None, float(values[upper - 1]) if upper <= n else None)


def min_samples_for_upper_bound(q: float, level: float) -> int:
    """The smallest n at which the q-quantile has a finite upper bound (P(no sample above) < (1-level)/2)."""
    return int(math.ceil(math.log((1 - level) / 2) / math.log(q)))


def wilson(successes: float, n: float, level: float, design_effect: float = 1.0) -> Bounds:
    """Wilson's score interval (scipy's binomtest(...).proportion_ci(method="wilson")), in closed form: the
    failure gate runs it on every resample. `design_effect`: the successes and trials count as that many
    times fewer independent ones (`design_effect`)."""
    if n <= 0:
        return Bounds(None, None)
    successes, n = successes / design_effect, n / design_effect
    z = _z(level)
    rate, z2 = successes / n, z * z
    center = (rate + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(max(rate * (1 - rate) / n + z2 / (4 * n * n), 0.0))
    # none met: the low end is 0, all met: the high end 1, exactly (center - half rounds a hair off them)
    return Bounds(0.0 if successes <= 0 else max(center - half, 0.0),
                  1.0 if successes >= n else min(center + half, 1.0))


MIN_BATCH = 10   # arrivals in one batch at least


def batch_index(n: int) -> np.ndarray:
    """Per arrival, in arrival order, its batch: runs of about sqrt(n) consecutive arrivals (at least MIN_BATCH;
    the remainder joins the last run), the usual batch size of batch means."""
    size = max(MIN_BATCH, math.ceil(math.sqrt(n)))
    return np.minimum(np.arange(n) // size, max(n // size, 1) - 1)


def design_effect(series: Sequence[np.ndarray]) -> float:
    """How many times a share's variance exceeds that of as many independent trials, by batch means: each series
    (one window's per-arrival 0/1, in arrival order) cut into `batch_index` runs, the spread of the runs' shares
    around the pooled one against p(1 - p) per run. At least 1 (never narrower than independent trials); 1 with
    fewer than two runs or a share of 0 or 1 (nothing varies)."""
    sums, sizes = [], []
    for values in series:
        values = np.asarray(values, dtype=float)
        if len(values):
            index = batch_index(len(values))
            sums.append(np.bincount(index, weights=values))
            sizes.append(np.bincount(index).astype(float))
    if sum(len(s) for s in sizes) < 2:
        return 1.0
    total, size = np.concatenate(sums), np.concatenate(sizes)
    share = float(total.sum() / size.sum())
    if not 0 < share < 1:
        return 1.0
    spread = float(np.sum(size * (total / size - share) ** 2)) / (len(size) - 1)
    return max(1.0, spread / (share * (1 - share)))


_Z: dict[float, float] = {}


def _z(level: float) -> float:
    if level not in _Z:
        _Z[level] = float(stats.norm.ppf(1 - (1 - level) / 2))
    return _Z[level]


def proportion_difference(k1: int, n1: int, k2: int, n2: int, level: float) -> Bounds:
    """Newcombe's hybrid score interval for p1 - p2 (method 10): no normal approximation at 0 failures."""
    if n1 <= 0 or n2 <= 0:
        return Bounds(None, None)
    p1, p2 = k1 / n1, k2 / n2
    a, b = wilson(k1, n1, level), wilson(k2, n2, level)
    low = p1 - p2 - math.sqrt((p1 - a.low) ** 2 + (b.high - p2) ** 2)
    high = p1 - p2 + math.sqrt((a.high - p1) ** 2 + (p2 - b.low) ** 2)
    return Bounds(low, high)


def interval(draws: np.ndarray, level: float) -> Bounds:
    """Percentile interval of resampled values (NaN draws, where a statistic was undefined, dropped)."""
    draws = np.asarray(draws, dtype=float)
    draws = draws[np.isfinite(draws)]
    if len(draws) < 2:
        return Bounds(None, None)
    tail = (1 - level) / 2
    low, high = np.quantile(draws, [tail, 1 - tail])
    return Bounds(float(low), float(high))


def bin_counts(t_done_s: np.ndarray, weights: np.ndarray, duration_s: float, bin_s: float) -> np.ndarray:
    """Sums of `weights` per equal bin of a window [0, duration_s), bins as close to `bin_s` as divides
    the window and never shorter: one bin when the window holds less than two."""
    bins = max(1, int(duration_s // bin_s)) if bin_s > 0 else 1
    if len(t_done_s) == 0:
        return np.zeros(bins)
    index = np.clip((np.asarray(t_done_s) / duration_s * bins).astype(int), 0, bins - 1)
    return np.bincount(index, weights=np.asarray(weights, dtype=float), minlength=bins)


def repeats_needed(current_repeats: int, half_width: float, wanted_half_width: float, cap: int = 100) -> int:
    """Repeats for an interval to shrink from `half_width` to `wanted_half_width` (width ~ 1/sqrt(n))."""
    if wanted_half_width <= 0 or not math.isfinite(half_width) or half_width <= 0:
        return cap
    return min(cap, max(current_repeats + 1, int(math.ceil(current_repeats * (half_width / wanted_half_width) ** 2))))


def single_life_gains(restart_sd: float, confidence: float, tie: float) -> tuple[float, float]:
    """With one server life per K and a restart spread of `restart_sd` per life (and nothing else noisy):
    the gain over the baseline a K must show to be picked in `confidence` of the resamples (beyond the tie
    band, by a one-sided normal quantile of the two lives' log ratio), and the loss at which the baseline is
    kept as surely."""
    spread = float(stats.norm.ppf(confidence)) * math.sqrt(2) * restart_sd
    return (1 + tie) * math.exp(spread) - 1, (1 + tie) * math.exp(-spread) - 1
