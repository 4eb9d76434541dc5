"""Cell -> the figures the rules read (`CellStats`), once from the data as measured and many times
from resampled data (the bootstrap behind every interval and the verdict's confidence).

One resample of a cell: its repeats drawn with replacement (server starts differ); inside each
drawn window, the successful requests drawn with replacement (latency percentiles, SLO attainment);
failures drawn from their binomial. Throughput is not resampled from two or three repeats (that
bootstrap is far too sure of itself): its factor is drawn from Student's t with the relative spread
of one repeat (`ThroughputNoise`), or, with one repeat each, of one bin at least a request long inside
the windows (batch means). Where no K has two of either (one repeat, windows shorter than two requests), the
factor is the noise its count of completions implies (`count_factor`): a figure measured once is never exact,
nor one K against another. The spread is pooled over the K at the stage, except for a K whose own
spread is wider than the others' beyond an F test: that K keeps its own (moderated by theirs), and the
others pool without it (`throughput_noises`). With one server life per K (one repeat, or same-server
repeats) a normal term for the spread from one life to the next is added, which neither bins nor those
repeats can show (decision.restart_spread: a prior, or an assumed one the verdict names). That term is drawn
once per K's server life, alike at each of its stages; so is the part of a measured spread a single-life K
borrows that its window does not show inside (`_one_life_factor`): the knee compares the stages of one life. The
same factor divides the drawn latencies: at a fixed concurrency a server that serves fewer requests per
second keeps each longer.
Windows are resampled in an order of their content, not of their repeat labels: renaming or
reordering repeats gives the same draws.
"""
from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from .evidence import LATENCY_COLUMNS, Cell, Window
from ...config.slo import Slo
from .resample import CellDraws, RequestResampler, per_second
from .slo_attainment import meets as slo_meets
from .stats import bin_counts

QUANTILES = (0.5, 0.9, 0.99)


@dataclass(frozen=True)
class CellStats:
    k: int
    users: int
    repeats: int
    requests: int                   # successful requests
    finished: int
    failures: int
    timeouts: int
    duration_s: float
    req_per_s: float
    output_tok_per_s: float
    goodput: float                  # requests meeting every SLO, per second (req/s without SLOs)
    quantiles: np.ndarray           # LATENCY_COLUMNS x QUANTILES, ms
    slo_met: tuple[int, ...]        # finished requests meeting each SLO
    running_mean: float
    waiting_mean: float
    kv_usage_mean: float
    kv_usage_peak: float
    preemptions: float              # summed over the windows
    acceptance_rate: float
    gpu_mem_peak_mib: float
    gpu_mem_total_mib: float
    kv_pool_tokens: float
    throughput_units: int           # independent throughput values behind the figure: repeats x bins
    design_effect: float = 1.0      # rate stages: arrivals per independent one in the SLO attainment (stats.py)
    slo_design_effects: tuple[float, ...] = ()   # ... in each SLO's (slo_met's order); () = 1 each (users stages)
    failure_design_effect: float = 1.0   # ... and in the failures (a queue's requests time out together)

    def objective(self, name: str) -> float:
        return self.goodput if name == "goodput" else getattr(self, name)

    def quantile(self, column: str, q: float) -> float:
        return float(self.quantiles[LATENCY_COLUMNS.index(column), QUANTILES.index(q)])

    @property
    def failure_rate(self) -> float:
        return self.failures / self.finished if self.finished else math.nan

    @property
    def timeout_rate(self) -> float:
        return self.timeouts / self.finished if self.finished else math.nan


@dataclass(frozen=True)
class ThroughputNoise:
    """How much one throughput value varies, relative to its cell's mean, pooled over every K at a stage:
    from repeats (server start to server start, window included) where any K has two, else from bins
    inside the windows (batch means), else not measured. Few values make a wide Student's t."""

    rel_sd: float
    df: int
    source: str  # "repeats" | "bins" | "none"
    scope: str = "pooled over K"  # or "pooled over K=0, 4" / "K=8's own, moderated by the others'"
    # with one server life per K (source "bins", or same-server repeats) neither bins nor repeats see how far
    # the next life would land: a prior spread per life (decision.restart_spread) is added, and where it comes
    # from ("unknown": an assumed one)
    restart_sd: float = 0.0
    restart_source: str = ""
    one_life: bool = False  # a cell's windows share one server life (same-server repeats)
    origin: object | None = None  # restart_spread.SpreadOrigin: where the restart spread came from, when measured

    def text(self) -> str:
        if self.source == "none":
            restart = f", plus a restart spread of {self.restart_sd:.0%} per server life ({self.restart_source})" \
                if self.restart_sd else ""
            return ("throughput noise not measured (one repeat, windows shorter than two requests): each K's req/s "
                    f"is drawn from its count of completions (Poisson){restart}")
        text = f"throughput noise {self.rel_sd:.1%} per {self.source[:-1]} ({self.scope}, {self.df} degrees of freedom)"
        if self.restart_source == "unknown":
            return text + (f", plus a restart spread of {self.restart_sd:.0%} per server life (one life per K: "
                           "restart spread unknown, this much assumed)")
        if self.restart_source:
            return text + f", plus a restart spread of {self.restart_sd:.1%} per server life ({self.restart_source})"
        return text + (f": {self.origin.text()}" if self.origin is not None and not self.one_life else "")

    @property
    def restart_unknown(self) -> bool:
        return self.restart_source == "unknown"


def _spread(cell, source: str) -> tuple[float, int]:
    """Sum of squared relative deviations and degrees of freedom of one cell's throughput values."""
    groups = ([[w.window.served_per_s for w in cell.windows]] if source == "repeats"
              else [list(w.bins_req) for w in cell.windows])
    squares, df = 0.0, 0
    for values in groups:
        values = np.asarray(values, dtype=float)
        if len(values) >= 2 and values.mean() > 0:
            squares += float(((values / values.mean() - 1) ** 2).sum())
            df += len(values) - 1
    return squares, df


def _noisier(own: tuple[float, int], rest: tuple[float, int], level: float = 0.95) -> float:
    """How far a cell's spread is beyond the rest's, as its F ratio over the test's critical value (> 1:
    noisier beyond the test); 0 when either side has no degrees of freedom."""
    (sq, df), (rest_sq, rest_df) = own, rest
    if not df or not rest_df:
        return 0.0
    own_var, rest_var = sq / df, rest_sq / rest_df
    if rest_var <= 0:
        return math.inf if own_var > 0 else 0.0
    return own_var / rest_var / float(scipy_stats.f.ppf(level, df, rest_df))


def throughput_noises(cells: Mapping[int, "PreparedCell"], restart: tuple[float, str] | None = None,
                      one_life_per_k: bool = False) -> tuple[ThroughputNoise, dict[int, ThroughputNoise]]:
    """The stage's pooled noise and each K's: the pooled spread of the K that agree (more degrees of freedom:
    the better estimate, and never narrower than the stage's typical spread), except for a K noisier than
    the others beyond a one-sided F test: a K with a wide repeat spread must not widen the intervals of
    stable ones, so it is left out of their pool, and keeps its own spread moderated by theirs (its squares
    and theirs over its degrees of freedom and theirs: with two repeats, one odd repeat widens its own
    interval without the Student t of one degree of freedom, which has no variance).
    `restart`: (relative SD per server life, its source), added where the spread comes from bins (every K one
    life) or from repeats on one server life (`one_life_per_k`): they show the noise inside one server life,
    never how far the next life lands."""
    for source in ("repeats", "bins"):
        parts = {k: _spread(cell, source) for k, cell in cells.items()}
        total = (sum(sq for sq, _ in parts.values()), sum(df for _, df in parts.values()))
        if not total[1]:
            continue
        apart: set[int] = set()
        while len(parts) - len(apart) > 1:  # the noisiest K beyond the others' spread goes apart, one at a time
            rest = {k: v for k, v in parts.items() if k not in apart}
            left = (sum(sq for sq, _ in rest.values()), sum(df for _, df in rest.values()))
            excess, worst = max((_noisier(v, (left[0] - v[0], left[1] - v[1])), k) for k, v in rest.items())
            if excess <= 1:
                break
            apart.add(worst)
        squares = sum(sq for k, (sq, _) in parts.items() if k not in apart)
        df = sum(d for k, (_, d) in parts.items() if k not in apart)
        together = [k for k in sorted(parts) if k not in apart]
        scope = "pooled over K" if not apart else f"pooled over K={', '.join(map(str, together))}"
        pooled = ThroughputNoise(math.sqrt(squares / df), df, source, scope) if df else \
            ThroughputNoise(math.nan, 0, "none")
        # a K apart: its own spread moderated by the agreeing K's (its own degrees of freedom and theirs), so
        # one odd repeat out of two neither borrows their stability nor makes a Cauchy of its interval
        by_k = {k: ThroughputNoise(math.sqrt((parts[k][0] + squares) / (parts[k][1] + df)), parts[k][1] + df, source,
                                   f"K={k}'s own, moderated by the others'") if k in apart else pooled for k in cells}
        if (source == "bins" or one_life_per_k) and restart is not None and df:
            prior = {"restart_sd": restart[0], "restart_source": restart[1], "one_life": True}
            with_prior = dataclasses.replace(pooled, **prior)  # a K on the pool stays `is` the pooled noise
            by_k = {k: with_prior if n is pooled else dataclasses.replace(n, **prior) for k, n in by_k.items()}
            pooled = with_prior
        return pooled, by_k
    # one life per K (no K has two repeats): the restart term the bins would carry, beside the counts' own noise
    none = ThroughputNoise(math.nan, 0, "none", **({} if restart is None else
                                                    {"restart_sd": restart[0], "restart_source": restart[1],
                                                     "one_life": True}))
    return none, dict.fromkeys(cells, none)


def throughput_noise(cells) -> ThroughputNoise:
    """The noise pooled over every cell given (the confirmation's expectation, a whole stage)."""
    return throughput_noises(dict(enumerate(cells)))[0]


@dataclass(frozen=True, eq=False)
class _PreparedWindow:
    window: Window
    meets: np.ndarray        # successful requests x SLOs (bool)
    good: np.ndarray         # successful requests meeting every SLO (bool)
    bins_req: np.ndarray     # completions per throughput bin (the noise of a single repeat)


class PreparedCell:
    """A cell with its per-window arrays cut once, ready to be measured or resampled many times."""

    def __init__(self, cell: Cell, slos: tuple[Slo, ...], bin_min_s: float) -> None:
        self.cell, self.slos = cell, slos
        e2e = cell.pooled("e2e_ms")
        e2e_s = float(np.nanmedian(e2e)) / 1000 if len(e2e) and np.isfinite(e2e).any() else 0.0
        self.bin_s = max(bin_min_s, e2e_s)
        ordered = sorted(cell.windows, key=_content_key)  # repeat labels and their order never change a draw
        self.windows = [self._prepare(w) for w in ordered]
        self.pooled_latency = np.concatenate([w.latency_ms for w in ordered]) if ordered \
            else np.empty((0, len(LATENCY_COLUMNS)))
        self.meets = np.concatenate([p.meets for p in self.windows]).astype(float) if self.windows \
            else np.empty((0, len(slos)))
        self.durations = np.array([w.duration_s for w in ordered])
        self.sizes = np.array([w.completed for w in ordered], dtype=np.int64)
        self.signals = np.array([[w.signal(name) for name in _SIGNALS] for w in ordered], dtype=float) \
            .reshape(len(ordered), len(_SIGNALS))

    def _prepare(self, w: Window) -> _PreparedWindow:
        meets = slo_meets(w.latency_ms, np.ones(w.completed, dtype=bool), self.slos, w.output_tokens)
        good = meets.all(axis=1)
        return _PreparedWindow(w, meets, good, bin_counts(w.t_done_s, np.ones(w.completed), w.duration_s, self.bin_s))

    @property
    def throughput_units(self) -> int:
        return sum(len(p.bins_req) for p in self.windows)

    def measure(self) -> CellStats:
        """The cell's figures as measured."""
        everything = np.arange(len(self.windows))
        ws = [p.window for p in self.windows]
        lat = np.concatenate([w.latency_ms for w in ws]) if ws else np.empty((0, len(LATENCY_COLUMNS)))
        met = np.concatenate([p.meets for p in self.windows]) if ws else np.empty((0, len(self.slos)), dtype=bool)
        served = sum(w.served_per_s * w.duration_s for w in ws)
        good_share = sum(int(p.good.sum()) for p in self.windows) / max(sum(w.completed for w in ws), 1)
        return self._stats(
            everything, column_quantiles(lat, QUANTILES), len(lat), met.sum(axis=0),
            completed=served, tokens=sum(w.tokens_per_s * w.duration_s for w in ws),
            good=served * good_share, failures=sum(w.failures for w in ws),
            timeouts=sum(w.timeouts for w in ws), signals=_signal_summaries(self.signals[None, :, :])[0])

    def relative_se(self, noise: ThroughputNoise) -> float:
        """The relative standard error of this cell's throughput under the stage's pooled noise (inside the
        windows where it comes from bins; the restart spread is `restart_se`)."""
        units = len(self.windows) if noise.source == "repeats" else self.throughput_units
        return noise.rel_sd / math.sqrt(units) if units and noise.df else math.nan

    def restart_se(self, noise: ThroughputNoise) -> float:
        """The relative standard error the restart spread adds: one server life behind the cell."""
        return noise.restart_sd if noise.one_life else 0.0

    def draws(self, rng: np.random.Generator, count: int, noise: ThroughputNoise,
              life_rng: np.random.Generator | None = None) -> CellDraws:
        """`count` resamples of the cell (see the module's docstring for what is drawn). `life_rng` draws the
        restart term: one generator per K, seeded alike at every stage, so the stages of one server life share
        it draw for draw (the knee compares them, and one life's luck is in all of its stages)."""
        size = len(self.windows)
        picks = rng.integers(size, size=(count, size)) if size > 1 else np.zeros((count, size), dtype=int)
        rows, slots = np.arange(count)[:, None], np.arange(size)[None, :]
        failed = np.stack([rng.binomial(p.window.finished, p.window.failures / p.window.finished, (count, size))
                           if p.window.failures else np.zeros((count, size), dtype=int) for p in self.windows])
        timeout_share = np.array([p.window.timeouts / p.window.failures if p.window.failures else 0.0
                                  for p in self.windows])
        failures = failed[picks, rows, slots]
        timeouts = np.round(failures * timeout_share[picks]).sum(axis=1)
        failures = failures.sum(axis=1)
        # throughput: the measured rates times a factor drawn from Student's t with the pooled spread
        se = self.relative_se(noise)
        if math.isnan(se):  # no spread measured: the completions counted, with the restart term where one is given
            factor = count_factor(int(self.sizes.sum()), rng, count)
            if noise.restart_sd:
                factor = factor + self.restart_se(noise) * (life_rng or rng).standard_normal(count)
        elif life_rng is not None and self.borrows_restart_spread(noise):
            factor = self._one_life_factor(rng, life_rng, count, noise, se)
        else:
            factor = 1 + se * rng.standard_t(noise.df, count)
            if noise.restart_sd:  # a known (or assumed) spread: normal, not Student's t
                factor = factor + self.restart_se(noise) * (life_rng or rng).standard_normal(count)
        factor = np.maximum(factor, 0.01)
        duration = self.durations[picks].sum(axis=1)
        point = self.measure()
        completed, tokens, good = (factor * duration * rate for rate in
                                   (point.req_per_s, point.output_tok_per_s, point.goodput))
        signals = _signal_summaries(self.signals[picks])
        # the requests inside the drawn windows, and the same factor dividing their latencies: a slower server
        # start stretches every request as well (at a fixed concurrency latency ~ 1 / throughput)
        return CellDraws(
            k=self.cell.k, users=self.cell.users, picks=picks, requests=self.sizes[picks].sum(axis=1),
            failures=failures, timeouts=timeouts, duration_s=duration, req_per_s=per_second(completed, duration),
            output_tok_per_s=per_second(tokens, duration), goodput=per_second(good, duration), factor=factor,
            request_draws=self.resampler.draw(rng, picks), signals=dict(zip(_SIGNALS, signals.T)),
            throughput_units=self.throughput_units, stats_of=self._drawn)

    def borrows_restart_spread(self, noise: ThroughputNoise) -> bool:
        """One server life behind the cell, its throughput varied by a measured spread from life to life (a
        repeat's Student's t: restart_spread.py), not by an assumed restart term beside its windows' own noise."""
        return noise.source == "repeats" and not noise.restart_sd and len(self.windows) == 1

    def inside_se(self) -> tuple[float, int]:
        """The relative standard error of the cell's throughput from inside its windows (batch means), and its
        degrees of freedom; (0, 0) where its windows hold fewer than two bins."""
        squares, df = _spread(self, "bins")
        if not df or not self.throughput_units:
            return 0.0, 0
        return math.sqrt(squares / df / self.throughput_units), df

    def _one_life_factor(self, rng: np.random.Generator, life_rng: np.random.Generator, count: int,
                         noise: ThroughputNoise, se: float) -> np.ndarray:
        """A single life's throughput factor under a borrowed spread `se`, still `se` x Student's t with the
        spread's degrees of freedom: a normal of variance se^2 over the root of a chi-square / df. The normal is
        split in two: what the life's window shows inside (`inside_se`), drawn at this stage alone (`rng`), and the
        rest, the life's own luck, from `life_rng` (the same normal draws an assumed restart term takes), as is the
        chi-square (the spread's own uncertainty): every stage of the life shares them draw for draw, so the knee's
        stage ratios of that life carry its windows' noise only."""
        within = min(self.inside_se()[0], se)
        luck = life_rng.standard_normal(count)
        scale = np.sqrt(life_rng.chisquare(noise.df, count) / noise.df)
        return 1 + (math.sqrt(se ** 2 - within ** 2) * luck + within * rng.standard_normal(count)) / scale

    @functools.cached_property
    def resampler(self) -> RequestResampler:
        return RequestResampler(self.pooled_latency, LATENCY_COLUMNS, self.sizes, self.meets, QUANTILES)

    def _drawn(self, draws: CellDraws, b: int) -> CellStats:
        """Resample `b` of `draws` as a CellStats."""
        return CellStats(
            k=self.cell.k, users=self.cell.users, repeats=int(draws.repeats[b]), requests=int(draws.requests[b]),
            finished=int(draws.requests[b] + draws.failures[b]), failures=int(draws.failures[b]),
            timeouts=int(draws.timeouts[b]), duration_s=float(draws.duration_s[b]),
            req_per_s=float(draws.req_per_s[b]), output_tok_per_s=float(draws.output_tok_per_s[b]),
            goodput=float(draws.goodput[b]), quantiles=draws.quantiles[b],
            slo_met=tuple(int(v) for v in draws.slo_met[b]), throughput_units=self.throughput_units,
            **{name: float(draws.signals[name][b]) for name in _SIGNALS})

    def _stats(self, picked: np.ndarray, quantiles: np.ndarray, requests: int, slo_met: np.ndarray, *,
               completed: float, tokens: float, good: float, failures: int, timeouts: int,
               signals: np.ndarray) -> CellStats:
        duration = float(self.durations[picked].sum())
        per_s = (lambda value: value / duration) if duration else (lambda value: math.nan)
        return CellStats(
            k=self.cell.k, users=self.cell.users, repeats=len(set(picked.tolist())), requests=int(requests),
            finished=int(requests + failures), failures=int(failures), timeouts=int(timeouts), duration_s=duration,
            req_per_s=per_s(completed), output_tok_per_s=per_s(tokens), goodput=per_s(good), quantiles=quantiles,
            slo_met=tuple(int(v) for v in np.atleast_1d(slo_met))[:len(self.slos)] if self.slos else (),
            **dict(zip(_SIGNALS, (float(v) for v in signals))), throughput_units=self.throughput_units)


def count_factor(completions: int, rng: np.random.Generator, count: int) -> np.ndarray:
    """`count` draws of a rate over its point `completions` / T from Jeffreys' posterior of a Poisson rate,
    Gamma(completions + 1/2) / T. Poisson: a closed loop's completions with every slot busy and exponential answers
    (regular answers vary less: it errs wide); measured in benchmarks/calibration's users group."""
    if completions <= 0:
        return np.ones(count)
    return rng.gamma(completions + 0.5, 1.0 / completions, count)


def _content_key(w: Window) -> tuple:
    """An order of windows by what they measured (not by their repeat label)."""
    latency = w.latency_ms[np.isfinite(w.latency_ms)]
    return (w.duration_s, w.finished, w.failures, w.timeouts, w.completed, round(w.served_per_s, 9),
            round(float(latency.sum()), 6), round(float(w.t_done_s.sum()), 6),
            tuple(round(w.signal(name), 9) if not math.isnan(w.signal(name)) else -1.0 for name in _SIGNALS))


# signal -> how the drawn windows combine: a mean of means, the highest peak, a sum of counts, the smallest pool
_SIGNALS = {"running_mean": "mean", "waiting_mean": "mean", "kv_usage_mean": "mean", "kv_usage_peak": "max",
            "preemptions": "sum", "acceptance_rate": "mean", "gpu_mem_peak_mib": "max", "gpu_mem_total_mib": "max",
            "kv_pool_tokens": "min"}
_REDUCE = {"mean": np.nanmean, "max": np.nanmax, "sum": np.nansum, "min": np.nanmin}


def _signal_summaries(rows: np.ndarray) -> np.ndarray:
    """draws x windows x signals -> draws x signals, each signal combined by its rule, NaN readings skipped."""
    out = np.full((rows.shape[0], len(_SIGNALS)), np.nan)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN signal (not measured): stays NaN
        for i, how in enumerate(_SIGNALS.values()):
            column = rows[:, :, i]
            if np.isfinite(column).any():
                out[:, i] = _REDUCE[how](column, axis=1)
    return out


def column_quantiles(matrix: np.ndarray, qs: tuple[float, ...]) -> np.ndarray:
    """Quantiles of each column ignoring NaN, numpy's linear rule: columns x qs (NaN for an empty column).
    One sort instead of np.nanquantile's per-column path: this runs for every resample."""
    columns = matrix.shape[1]
    out = np.full((columns, len(qs)), np.nan)
    if not len(matrix):
        return out
    ordered = np.sort(matrix, axis=0)  # NaN sorts last
    n = np.isfinite(matrix).sum(axis=0)
    have = np.nonzero(n)[0]
    if not len(have):
        return out
    last = n[have] - 1
    for j, q in enumerate(qs):
        pos = q * last
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, last)
        frac = pos - lo
        out[have, j] = ordered[lo, have] * (1 - frac) + ordered[hi, have] * frac
    return out
