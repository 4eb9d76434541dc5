"""A cell's resamples as arrays: the request bootstrap behind every latency interval, vectorized.

One resample draws the cell's windows with replacement (`picks`, measure.py), then inside each drawn window its
successful requests with replacement: a window drawn c times adds c x its size requests drawn uniformly from its
own (a multinomial). A latency percentile of a resample is the lowest value whose cumulative count reaches q x
the drawn requests with a value; SLO attainment counts the drawn requests meeting each SLO.

Neither needs the drawn requests one by one, so no array of requests x resamples is built:
- A percentile is found by halving the column's sorted values: the drawn requests of one window slot that fall in
  the lower half of an interval, given how many fell in the interval, are binomial (uniform draws split by the
  share of the window's requests there), so ~log2(requests) binomial draws per slot find the value, for every
  resample at once. The p50, p90 and p99 of a column are found one after another on the same draws (each search
  goes on right of the previous value, with the counts it left there), so they are those of one resample.
- The SLO counts: each request's pattern of SLOs met, and a multinomial of each slot's draws over the patterns.
Each latency column is drawn when first read (the rules read e2e, or the SLO counts; the report's trade-offs the
rest), from a generator of its own seeded from the resamples' stage generator: the same folder gives the same
figures whatever reads them first. The columns of one resample are drawn apart from each other (each exact on its
own; no rule reads two of them together).

`CellDraws` holds every figure of `count` resamples as arrays (`req_per_s`, `quantile(column, q)`, ...) and is also
a sequence of `CellStats`, one per resample, for code that reads them one at a time.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


class RequestResampler:
    """The requests of one cell (windows in order, `sizes` of them), ready to be resampled many times.

    `latency`: requests x columns (ms; NaN = not measured), `meets`: requests x SLOs (0/1)."""

    def __init__(self, latency: np.ndarray, columns: Sequence[str], sizes: Sequence[int], meets: np.ndarray,
                 quantiles: Sequence[float]) -> None:
        self.columns, self.qs = tuple(columns), tuple(quantiles)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.latency = np.asarray(latency, dtype=float)
        self.window_of = np.repeat(np.arange(len(self.sizes)), self.sizes)
        meets = np.asarray(meets).astype(bool).reshape(len(self.window_of), -1)
        self.slos = meets.shape[1]
        # the patterns of SLOs met that occur (not all 2 ** SLOs), in the order of their bits (SLO 0 the lowest)
        present, pattern = np.unique(meets[:, ::-1], axis=0, return_inverse=True) if self.slos and len(meets) \
            else (np.zeros((1, self.slos), dtype=bool), np.zeros(len(meets), dtype=np.int64))
        self.pattern_bits = present[:, ::-1].astype(float)             # patterns x SLOs
        # windows x patterns: how many of each window's requests meet exactly that set of SLOs
        self.patterns = np.zeros((len(self.sizes), len(present)), dtype=np.int64)
        np.add.at(self.patterns, (self.window_of, pattern.reshape(-1)), 1)
        self._columns: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _sorted(self, column: int) -> tuple[np.ndarray, np.ndarray]:
        """The column's finite values ascending, and windows x (values + 1): each window's requests below each."""
        if column in self._columns:
            return self._columns[column]
        values = self.latency[:, column]
        order = np.argsort(values, kind="stable")[:int(np.isfinite(values).sum())]
        below = np.zeros((len(self.sizes), len(order) + 1), dtype=np.int64)
        if len(order):
            mine = np.zeros((len(self.sizes), len(order)), dtype=np.int64)
            mine[self.window_of[order], np.arange(len(order))] = 1
            np.cumsum(mine, axis=1, out=below[:, 1:])
        self._columns[column] = values[order], below
        return self._columns[column]

    def column_draws(self, seed: int, picks: np.ndarray, column: int) -> "ColumnDraws":
        """One column's percentiles of the resamples, each found when first asked for (`ColumnDraws.at`)."""
        values, below = self._sorted(column)
        # the drawn requests with a value in this column, per slot: a binomial share of the window's draws
        sizes = self.sizes[picks]
        has = below[picks, len(values)]
        count = np.random.default_rng([seed, column]).binomial(sizes, np.where(sizes > 0, has / np.maximum(sizes, 1),
                                                                                 0.0))
        return ColumnDraws([seed, column], values, below, picks, count, self.qs[len(self.qs) // 2])

    def slo_met(self, rng: np.random.Generator, picks: np.ndarray) -> np.ndarray:
        """resamples x SLOs: drawn requests meeting each SLO (a multinomial of each slot's draws over the
        windows' patterns of SLOs met)."""
        rows = len(picks)
        met = np.zeros((rows, self.slos))
        if not self.slos or not rows:
            return met
        left = self.sizes[picks].copy()                   # draws not yet given a pattern, per slot
        weight = self.patterns[picks].astype(float)       # rows x slots x patterns
        remaining = weight.sum(axis=2)
        for pattern in range(weight.shape[2]):
            with np.errstate(all="ignore"):
                share = np.where(remaining > 0, weight[:, :, pattern] / np.where(remaining > 0, remaining, 1), 0.0)
            drawn = rng.binomial(left, np.minimum(share, 1.0))
            left, remaining = left - drawn, remaining - weight[:, :, pattern]
            met += drawn.sum(axis=1)[:, None] * self.pattern_bits[pattern][None, :]
        return met

    def draw(self, rng: np.random.Generator, picks: np.ndarray) -> "RequestDraws":
        """The resamples' SLO counts now; each latency column when first read (`RequestDraws.at`)."""
        seed = int(rng.integers(2 ** 63))
        return RequestDraws(self, picks, seed, {}, self.slo_met(rng, picks))


def _search(rng: np.random.Generator, below: np.ndarray, picks: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            count: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, ...]:
    """The `target`-th smallest drawn value's position in [lo, hi) for every resample, halving the interval:
    `count` (resamples x slots) drawn requests of each slot are in it. Returns the position, the slots' draws
    there, the target left at it (1 <= left <= their sum), and the slots' draws right of it."""
    right = np.zeros_like(count)
    lo, hi, target = lo.copy(), hi.copy(), target.copy()
    at_lo, at_hi = below[picks, lo[:, None]], below[picks, hi[:, None]]   # each slot's window's values below
    while True:
        active = hi - lo > 1
        if not active.any():
            return lo, count, target, right
        mid = (lo + hi) // 2
        at_mid = below[picks, mid[:, None]]
        inside = at_hi - at_lo
        share = np.where(inside > 0, (at_mid - at_lo) / np.maximum(inside, 1), 0.0)
        lower = np.where(active[:, None], rng.binomial(count, share), count)
        in_lower = lower.sum(axis=1)
        go_left = (in_lower >= target) | ~active
        left = go_left[:, None]
        right += np.where(left, count - lower, 0)
        target = np.where(go_left, target, target - in_lower)
        count = np.where(left, lower, count - lower)
        lo, hi = np.where(go_left, lo, mid), np.where(go_left, mid, hi)
        at_lo, at_hi = np.where(left, at_lo, at_mid), np.where(left, at_mid, at_hi)


class ColumnDraws:
    """One latency column's percentiles over the resamples, each found when first asked for, all on the same drawn
    requests: `lead` (the middle of QUANTILES, what the latency gate reads) first, then any other between the
    values already found (how many drawn requests of each slot lie on each side of them is known), each with a
    generator of its own: the p50, p90 and p99 of a resample are those of one resample, the same whichever is
    asked first."""

    def __init__(self, seed: list[int], values: np.ndarray, below: np.ndarray, picks: np.ndarray,
                 count: np.ndarray, lead: float) -> None:
        self.seed, self.values, self.below, self.picks, self.count, self.lead = seed, values, below, picks, count, lead
        self.total = count.sum(axis=1)
        self.found: dict[float, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # q -> rank, under, at (per slot)

    def at(self, q: float) -> np.ndarray:
        """The q-percentile of every resample (NaN where no drawn request has a value)."""
        if self.lead not in self.found:
            self.found[self.lead] = self._find(self.lead)
        if q not in self.found:
            self.found[q] = self._find(q)
        rank = self.found[q][0]
        if not len(self.values):
            return np.full(len(self.picks), np.nan)
        return np.where(self.total > 0, self.values[np.minimum(rank, len(self.values) - 1)], np.nan)

    def _find(self, q: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        rows, finite = len(self.picks), len(self.values)
        zero = np.zeros_like(self.count)
        lower = [p for p in self.found if p < q]
        upper = [p for p in self.found if p > q]
        lo_rank, lo_under, lo_at = self.found[max(lower)] if lower else (np.full(rows, -1), zero, zero)
        hi_rank, hi_under, _ = self.found[min(upper)] if upper else (np.full(rows, finite), self.count, zero)
        target = np.maximum(np.ceil(q * self.total), 1).astype(np.int64)
        passed = lo_under + lo_at                               # per slot: drawn at or below the value below
        inside = hi_under - passed                              # per slot: drawn strictly between the two
        at_lo = target <= passed.sum(axis=1)
        at_hi = ~at_lo & (target > hi_under.sum(axis=1))
        rng = np.random.default_rng(self.seed + [round(q * 1e6)])
        rank, leaf, _, right = _search(rng, self.below, self.picks, np.minimum(lo_rank + 1, finite),
                                       np.maximum(hi_rank, np.minimum(lo_rank + 1, finite)), inside,
                                       target - passed.sum(axis=1))
        under = passed + (inside - leaf - right)
        rank = np.where(at_lo, lo_rank, np.where(at_hi, hi_rank, rank))
        under = np.where(at_lo[:, None], lo_under, np.where(at_hi[:, None], hi_under, under))
        leaf = np.where(at_lo[:, None], lo_at, np.where(at_hi[:, None], self.found[min(upper)][2] if upper else zero,
                                                        leaf))
        return rank, under, leaf


@dataclass(eq=False)
class RequestDraws:
    """The request side of `count` resamples; each latency column drawn when first read."""

    resampler: RequestResampler
    picks: np.ndarray
    seed: int                            # each column's generator: [seed, column]
    done: dict[int, ColumnDraws]
    slo_met: np.ndarray                  # resamples x SLOs

    def at(self, j: int, q: float) -> np.ndarray:
        """Column j's q-percentile of every resample."""
        if j not in self.done:
            self.done[j] = self.resampler.column_draws(self.seed, self.picks, j)
        return self.done[j].at(q)

    def column(self, j: int) -> np.ndarray:
        """resamples x quantiles of column j."""
        return np.column_stack([self.at(j, q) for q in self.resampler.qs])

    def all_columns(self) -> np.ndarray:
        """resamples x columns x quantiles."""
        return np.stack([self.column(j) for j in range(len(self.resampler.columns))], axis=1)


@dataclass(eq=False)
class CellDraws(Sequence):
    """`count` resamples of one cell: each figure of `CellStats` as an array over the resamples (latency
    percentiles through `quantile` and `quantiles`), and, indexed, each resample as a `CellStats`."""

    k: int
    users: int
    picks: np.ndarray                    # resamples x drawn window slots
    requests: np.ndarray
    failures: np.ndarray
    timeouts: np.ndarray
    duration_s: np.ndarray
    req_per_s: np.ndarray
    output_tok_per_s: np.ndarray
    goodput: np.ndarray
    factor: np.ndarray                   # the throughput factor each resample's latencies are divided by
    request_draws: RequestDraws
    signals: dict[str, np.ndarray]       # each server signal, combined over the drawn windows
    throughput_units: int
    stats_of: Callable[["CellDraws", int], object] = field(repr=False, default=None)  # -> one resample's CellStats

    def __len__(self) -> int:
        return len(self.picks)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.stats_of(self, i) for i in range(*index.indices(len(self)))]
        return self.stats_of(self, int(index))

    def __iter__(self):
        return (self.stats_of(self, i) for i in range(len(self)))

    def __getattr__(self, name: str) -> np.ndarray:
        signals = self.__dict__.get("signals", {})
        if name in signals:
            return signals[name]
        raise AttributeError(name)

    @property
    def finished(self) -> np.ndarray:
        return self.requests + self.failures

    @functools.cached_property
    def repeats(self) -> np.ndarray:
        """Distinct windows drawn in each resample."""
        if not self.picks.shape[1]:
            return np.zeros(len(self), dtype=np.int64)
        ordered = np.sort(self.picks, axis=1)
        return 1 + (np.diff(ordered, axis=1) != 0).sum(axis=1)

    @property
    def slo_met(self) -> np.ndarray:
        return self.request_draws.slo_met

    def objective(self, name: str) -> np.ndarray:
        return self.goodput if name == "goodput" else getattr(self, name)

    def quantile(self, column: str, q: float) -> np.ndarray:
        return self.request_draws.at(self.request_draws.resampler.columns.index(column), q) / self.factor

    @functools.cached_property
    def quantiles(self) -> np.ndarray:
        """resamples x latency columns x quantiles."""
        return self.request_draws.all_columns() / self.factor[:, None, None]


def per_second(value: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """value / duration, NaN where no time was drawn."""
    with np.errstate(all="ignore"):
        return np.where(duration > 0, value / np.where(duration > 0, duration, 1.0), math.nan)
