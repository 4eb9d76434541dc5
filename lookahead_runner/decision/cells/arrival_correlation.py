"""How many independent arrivals a rate window's arrivals are worth: their correlation in arrival order, measured.

Claim: the share of a window's arrivals meeting an SLO (and the resampled latency percentiles at a rate) varies as
that of n / tau independent arrivals, tau the integrated autocorrelation time of the arrivals in the order the
schedule set them (tau = 1 + 2 sum_k rho_k: the variance of a mean of n correlated values is tau times that of n
independent ones). A busy queue makes its arrivals slow, and miss, together, for as long as it takes to drain,
which may be longer than any fixed batch inside the window and need not show as a miss at all (a window all met
still had its queue near the limit). So tau is estimated, per window, from two series of its own and the larger
taken (`window_time`):
- the met / missed flags themselves;
- the normal scores of the SLO's latency (failures the slowest, an answer with no value where it meets its SLO the
  fastest): the queue's state seen on every arrival, met or not;
each by Geyer's initial monotone sequence estimator (Geyer 1992, "Practical Markov chain Monte Carlo"; the window
chosen by the data: the autocovariances summed in pairs while the pairs stay positive, made non-increasing), on
the series' own autocovariances. A window over which nothing varies reads 1.
Its error is measured, not assumed: benchmarks/calibration's rate and capacity groups hold the intervals built on
it against M/M/c truths over utilisations 0.3-0.95 (benchmarks/README.md, "The calibration suite"). A queue whose
correlation runs longer than the window itself is the limit: no series inside the window shows it whole, so a
window's effective count carries Student's t on its effective count less one (`Effective.df`, folded into the
design effect an interval reads: `design_effect_at`), and the repeats' own spread is a floor where there are several
(`pooled`).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# fewer values than this carry no estimate of their own correlation (a pair sum needs lags 0-3)
MIN_SERIES = 4


def integrated_time(series: np.ndarray) -> float:
    """tau of one series in its order, by Geyer's initial monotone sequence: at least 1, at most its length; 1 for
    a series shorter than MIN_SERIES or one that does not vary."""
    x = np.asarray(series, dtype=float)
    n = len(x)
    if n < MIN_SERIES or not np.ptp(x) > 0:
        return 1.0
    x = x - x.mean()
    spectrum = np.fft.rfft(x, 2 * n)
    acov = np.fft.irfft(spectrum * np.conj(spectrum), 2 * n)[:n] / n
    pairs = (n - 1) // 2
    sums = acov[0:2 * pairs:2] + acov[1:2 * pairs + 1:2]
    stop = np.flatnonzero(sums <= 0)
    sums = np.minimum.accumulate(sums[:stop[0]] if len(stop) else sums)
    return float(min(max((2.0 * sums.sum() - acov[0]) / acov[0], 1.0), n))


def normal_scores(values: np.ndarray, ok: np.ndarray, met: np.ndarray) -> np.ndarray:
    """Per arrival, its latency's normal score among the window's (ties share their mean rank): an arrival that
    failed ranks slowest; one with no value ranks fastest where it met its SLO (a 1-token answer's TPOT), slowest
    where it did not."""
    values = np.asarray(values, dtype=float)
    ok, met = np.asarray(ok, dtype=bool), np.asarray(met, dtype=bool)
    known = ok & np.isfinite(values)
    keyed = np.where(known, values, np.where(ok & met, -np.inf, np.inf))
    ranks = stats.rankdata(keyed)
    return stats.norm.ppf((ranks - 0.5) / len(keyed)) if len(keyed) else keyed


def window_time(met: np.ndarray, values: Sequence[np.ndarray], ok: np.ndarray) -> float:
    """One window's tau for a share of its arrivals (`met`, in arrival order): the larger of the flags' own and each
    latency column's in `values` (the metrics the share is judged on) as normal scores."""
    met = np.asarray(met, dtype=bool)
    times = [integrated_time(met.astype(float))]
    times += [integrated_time(normal_scores(column, ok, met)) for column in values]
    return max(times)


@dataclass(frozen=True)
class Effective:
    """A share's arrivals as independent ones: `arrivals` counted, worth `independent`; `df` the degrees of freedom
    of that count (Student's t on them: the correlation is estimated, not known)."""

    arrivals: float
    independent: float
    df: float = math.inf

    @property
    def design_effect(self) -> float:
        """Arrivals per independent one (at least 1)."""
        return max(self.arrivals / self.independent, 1.0) if self.independent > 0 else 1.0

    def design_effect_at(self, level: float) -> float:
        """The design effect with Student's t on `df` folded in for an interval at `level`: Wilson's interval reads
        z and n only as z^2 / n, so Wilson's on n / (d (t / z)^2) arrivals with z is Wilson's on n / d with t."""
        if math.isinf(self.df):
            return self.design_effect
        tail = 1 - (1 - level) / 2
        return self.design_effect * (float(stats.t.ppf(tail, self.df)) / float(stats.norm.ppf(tail))) ** 2


def one(arrivals: int, tau: float) -> Effective:
    """One window: its arrivals over tau, with that count less one degree of freedom (as b batch means of
    independent batches have b - 1; at least 1)."""
    independent = arrivals / tau if arrivals else 0.0
    return Effective(float(arrivals), independent, max(independent - 1.0, 1.0))


def pooled(parts: Sequence[tuple[Effective, int]]) -> Effective:
    """Windows pooled (independent server lives or stages): their independent counts summed, each window's degrees
    of freedom summed; with several windows, never worth more than the spread of their shares (`parts`: each
    window's Effective and its arrivals meeting the share) shows, the floor for what no window shows inside (one
    life unlike another, a correlation longer than a window), and where that floor binds, on the windows' count less
    one degrees of freedom."""
    parts = [(e, met) for e, met in parts if e.arrivals > 0]
    if not parts:
        return Effective(0.0, 0.0)
    arrivals = sum(e.arrivals for e, _ in parts)
    independent = sum(e.independent for e, _ in parts)
    df = max(sum(e.df for e, _ in parts), 1.0)
    if len(parts) < 2:
        return Effective(arrivals, independent, df)
    share = sum(met for _, met in parts) / arrivals
    if not 0 < share < 1:
        return Effective(arrivals, independent, df)
    weights = np.array([e.arrivals for e, _ in parts]) / arrivals
    shares = np.array([met / e.arrivals for e, met in parts])
    # the pooled share's variance from the windows' spread (unbiased for independent windows of equal weight)
    between = float(np.sum(weights ** 2 * (shares - share) ** 2)) * len(parts) / (len(parts) - 1)
    floor = share * (1 - share) / between if between > 0 else math.inf
    if floor < independent:
        # the spread of len(parts) windows' shares carries len(parts) - 1 degrees of freedom, not the arrivals'
        return Effective(arrivals, floor, float(len(parts) - 1))
    return Effective(arrivals, independent, df)
