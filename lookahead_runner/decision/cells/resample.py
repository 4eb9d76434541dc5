"""A cell's resamples as arrays: the request bootstrap behind every latency interval, vectorized.

One resample draws the cell's windows with replacement (`picks`, measure.py), then inside each drawn window its
successful requests with replacement: a window drawn c times adds c x its size requests drawn uniformly from its
own (a multinomial). The latency percentile of a resample is the lowest value whose cumulative count reaches
q x the requests drawn; SLO attainment counts the drawn requests meeting each SLO.

Vectorized: the cell's requests are laid out once in the order of their e2e latency (the percentile every
resample reads), so a chunk of resamples is one matrix of request counts (`np.bincount` of the drawn positions),
its cumulative sum per row, and one binary search per percentile; no Python loop runs over requests or resamples.
The other latency columns (the report's trade-offs read them at one stage) are computed when first asked for, from
the same counts drawn again from the generator's saved state: the same requests, the same figures.

`CellDraws` holds every figure of `count` resamples as arrays (`req_per_s`, `quantile(column, q)`, ...) and is also
a sequence of `CellStats`, one per resample, for code that reads them one at a time.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

ORDER_COLUMN = "e2e_ms"           # the column resamples are laid out by: the e2e percentile every resample reads
CHUNK_ELEMENTS = 1 << 21          # request counts per chunk of resamples (int64: 16 MiB), so a chunk stays in cache


class RequestResampler:
    """The requests of one cell (windows in order, `sizes` of them), ready to be resampled many times.

    `latency`: requests x columns (ms; NaN = not measured), `meets`: requests x SLOs (0/1)."""

    def __init__(self, latency: np.ndarray, columns: Sequence[str], sizes: Sequence[int], meets: np.ndarray,
                 quantiles: Sequence[float]) -> None:
        self.columns, self.qs = tuple(columns), tuple(quantiles)
        self.sizes = np.asarray(sizes, dtype=np.int64)
        self.total = int(self.sizes.sum())
        at = self.columns.index(ORDER_COLUMN)
        layout = np.argsort(latency[:, at], kind="stable")              # NaN last
        self.latency = latency[layout]
        self.meets = np.asarray(meets, dtype=np.float64)[layout]
        place = np.empty(self.total, dtype=np.int64)
        place[layout] = np.arange(self.total)
        edges = np.concatenate([[0], np.cumsum(self.sizes)])
        self.members = [place[edges[i]:edges[i + 1]] for i in range(len(self.sizes))]  # each window's positions
        self._orders: dict[int, np.ndarray] = {}

    def order(self, column: int) -> np.ndarray:
        """Positions of the finite values of a column, in its ascending order (the layout's own for e2e)."""
        if column not in self._orders:
            values = self.latency[:, column]
            finite = int(np.isfinite(values).sum())
            self._orders[column] = np.arange(finite) if self.columns[column] == ORDER_COLUMN \
                else np.argsort(values, kind="stable")[:finite]
        return self._orders[column]

    def counts(self, rng: np.random.Generator, picks: np.ndarray) -> np.ndarray:
        """resamples x requests: how often each request (in the layout's order) is in each resample."""
        rows = len(picks)
        drawn = []
        base = np.arange(rows, dtype=np.int64) * self.total
        for slot in range(picks.shape[1]):
            for w in np.unique(picks[:, slot]):
                n = int(self.sizes[w])
                if not n:
                    continue
                mine = np.nonzero(picks[:, slot] == w)[0]
                chosen = rng.integers(0, n, size=(len(mine), n))
                drawn.append((self.members[w][chosen] + base[mine, None]).ravel())
        flat = np.concatenate(drawn) if drawn else np.empty(0, dtype=np.int64)
        return np.bincount(flat, minlength=rows * self.total).reshape(rows, self.total)

    def quantiles_of(self, counts: np.ndarray, column: int) -> np.ndarray:
        """resamples x quantiles of one column: the lowest value whose cumulative count reaches q x the drawn
        requests with a value (NaN where none has one)."""
        rows, order = len(counts), self.order(column)
        out = np.full((rows, len(self.qs)), np.nan)
        if not len(order) or not rows:
            return out
        ordered = counts[:, :len(order)].copy() if self.columns[column] == ORDER_COLUMN else counts[:, order]
        span = int(counts.sum(axis=1).max()) + 1                          # each row's cumulative counts apart
        offset = np.arange(rows, dtype=np.int64) * span
        ordered[:, 0] += offset
        cumulative = np.cumsum(ordered, axis=1, out=ordered).ravel()     # one sorted array: rows one after another
        total = ordered[:, -1] - offset
        values = self.latency[order, column]
        for m, q in enumerate(self.qs):
            target = np.maximum(np.ceil(q * total), 1).astype(np.int64)
            at = np.searchsorted(cumulative, offset + target) - np.arange(rows) * len(order)
            out[:, m] = np.where(total > 0, values[np.minimum(at, len(order) - 1)], np.nan)
        return out

    def draw(self, rng: np.random.Generator, picks: np.ndarray) -> "RequestDraws":
        """The resamples' e2e percentiles and SLO counts now; the other columns when asked for (`RequestDraws`)."""
        state = (type(rng.bit_generator), rng.bit_generator.state)
        first = self.columns.index(ORDER_COLUMN)
        quantiles, met = self._pass(rng, picks, [first])
        return RequestDraws(self, picks, state, {first: quantiles[first]}, met)

    def _pass(self, rng: np.random.Generator, picks: np.ndarray, columns: list[int]
              ) -> tuple[dict[int, np.ndarray], np.ndarray]:
        rows = len(picks)
        chunk = max(1, CHUNK_ELEMENTS // max(self.total, 1))
        quantiles = {j: np.full((rows, len(self.qs)), np.nan) for j in columns}
        met = np.zeros((rows, self.meets.shape[1]))
        for start in range(0, rows, chunk):
            part = slice(start, min(start + chunk, rows))
            counts = self.counts(rng, picks[part])
            for j in columns:
                quantiles[j][part] = self.quantiles_of(counts, j)
            if self.meets.shape[1]:
                met[part] = counts.astype(np.float64) @ self.meets
        return quantiles, met


@dataclass(eq=False)
class RequestDraws:
    """The request side of `count` resamples; a column not computed yet is drawn again from the saved state."""

    resampler: RequestResampler
    picks: np.ndarray
    state: tuple                         # (bit generator class, its state before these resamples)
    done: dict[int, np.ndarray]          # column -> resamples x quantiles
    slo_met: np.ndarray                  # resamples x SLOs

    def column(self, j: int) -> np.ndarray:
        if j not in self.done:
            kind, saved = self.state
            rng = np.random.Generator(kind())
            rng.bit_generator.state = saved
            missing = [c for c in range(len(self.resampler.columns)) if c not in self.done]
            self.done.update(self.resampler._pass(rng, self.picks, missing)[0])
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
