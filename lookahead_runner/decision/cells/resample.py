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
        pattern = (meets * (1 << np.arange(self.slos))).sum(axis=1) if self.slos else np.zeros(len(meets), int)
        # windows x SLO patterns: how many of each window's requests meet exactly that set of SLOs
        self.patterns = np.zeros((len(self.sizes), 1 << self.slos), dtype=np.int64)
        np.add.at(self.patterns, (self.window_of, pattern), 1)
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

    def quantiles_of(self, rng: np.random.Generator, picks: np.ndarray, column: int) -> np.ndarray:
        """resamples x quantiles of one column (NaN where no drawn request has a value)."""
        values, below = self._sorted(column)
        rows, finite = len(picks), len(values)
        out = np.full((rows, len(self.qs)), np.nan)
        if not finite or not rows:
            return out
        # the drawn requests with a value in this column, per slot: a binomial share of the window's draws
        has = below[picks, finite]
        count = rng.binomial(self.sizes[picks], np.where(self.sizes[picks] > 0, has / np.maximum(self.sizes[picks], 1),
                                                            0.0))
        total = count.sum(axis=1)
        start = np.zeros(rows, dtype=np.int64)             # searches go on right of the previous value
        upto = np.zeros(rows, dtype=np.int64)              # drawn requests at or below it
        for m, q in enumerate(self.qs):
            target = np.maximum(np.ceil(q * total), 1).astype(np.int64) - upto
            again = target > 0
            rank, leaf, left, right = _search(rng, below, picks, start, np.full(rows, finite), count, target)
            found = np.minimum(np.where(again, rank, start - 1), finite - 1)
            out[:, m] = np.where(total > 0, values[found], np.nan)
            upto = np.where(again, upto + (target - left) + leaf.sum(axis=1), upto)
            count = np.where(again[:, None], right, count)
            start = np.where(again, np.minimum(rank + 1, finite), start)
        return out

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
            bits = [(pattern >> i) & 1 for i in range(self.slos)]
            met += drawn.sum(axis=1)[:, None] * np.array(bits, dtype=float)[None, :]
        return met

    def draw(self, rng: np.random.Generator, picks: np.ndarray) -> "RequestDraws":
        """The resamples' SLO counts now; each latency column when first read (`RequestDraws.column`)."""
        seed = int(rng.integers(2 ** 63))
        return RequestDraws(self, picks, seed, {}, self.slo_met(rng, picks))


def _search(rng: np.random.Generator, below: np.ndarray, picks: np.ndarray, lo: np.ndarray, hi: np.ndarray,
            count: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, ...]:
    """The `target`-th smallest drawn value's position in [lo, hi) for every resample, halving the interval:
    `count` (resamples x slots) drawn requests of each slot are in it. Returns the position, the slots' draws
    there, the target left at it (1 <= left <= their sum), and the slots' draws right of it."""
    right = np.zeros_like(count)
    lo, hi, target = lo.copy(), hi.copy(), target.copy()
    while True:
        active = hi - lo > 1
        if not active.any():
            return lo, count, target, right
        mid = (lo + hi) // 2
        at_lo, at_mid, at_hi = (below[picks, edge[:, None]] for edge in (lo, mid, hi))
        inside = at_hi - at_lo
        share = np.where(inside > 0, (at_mid - at_lo) / np.maximum(inside, 1), 0.0)
        lower = np.where(active[:, None], rng.binomial(count, share), count)
        go_left = (lower.sum(axis=1) >= target) | ~active
        right += np.where(go_left[:, None], count - lower, 0)
        target = np.where(go_left, target, target - lower.sum(axis=1))
        count = np.where(go_left[:, None], lower, count - lower)
        lo, hi = np.where(go_left, lo, mid), np.where(go_left, mid, hi)


@dataclass(eq=False)
class RequestDraws:
    """The request side of `count` resamples; each latency column drawn when first read."""

    resampler: RequestResampler
    picks: np.ndarray
    seed: int                            # each column's generator: [seed, column]
    done: dict[int, np.ndarray]          # column -> resamples x quantiles
    slo_met: np.ndarray                  # resamples x SLOs

    def column(self, j: int) -> np.ndarray:
        if j not in self.done:
            self.done[j] = self.resampler.quantiles_of(np.random.default_rng([self.seed, j]), self.picks, j)
        return self.done[j]

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
        r = self.request_draws.resampler
        return self.request_draws.column(r.columns.index(column))[:, r.qs.index(q)] / self.factor

    @functools.cached_property
    def quantiles(self) -> np.ndarray:
        """resamples x latency columns x quantiles."""
        return self.request_draws.all_columns() / self.factor[:, None, None]


def per_second(value: np.ndarray, duration: np.ndarray) -> np.ndarray:
    """value / duration, NaN where no time was drawn."""
    with np.errstate(all="ignore"):
        return np.where(duration > 0, value / np.where(duration > 0, duration, 1.0), math.nan)
