"""The restart spread at an arrival rate: how far one server life of a K lands from the next there, measured from
the K with two or more lives at the rate, pooled over K, else the prior the config states; and the life factor each
resample of the verdict at the rate draws per K from it (decision/rate_decision.py).

The claim: a verdict at a rate on one life per K carries the spread from one life to the next as the users
verdict does (cells/restart_spread.py), so a lucky or unlucky life does not read as a confident verdict. With the
spread unknown (real vLLM, nothing measured) the 15 % prior per life (config's RESTART_SPREAD_UNKNOWN, drawn normal)
leaves two K on one life each told apart only where the faster is about 35 % faster: the log gain must clear
z_{confidence} x sqrt(2) x 0.15 (0.27 at 90 %) plus the tie band (3 %); once a repeated life measures a small spread,
moderate gains decide.

The model: a life whose server runs a factor f slower has its latencies at the rate about f x longer (the queue's
wait included: a first-order model; near capacity the wait grows faster than f, which this does not claim) and
holds about 1 / f of the rate (its capacity bracket's ends scale by 1 / f). Its service speed, what the spread is
measured on, is the median TPOT of the window's arrivals that succeeded (the median e2e where none has a TPOT: every
answer one token): the decode step time, which follows the server's speed and not the time spent waiting in the
queue (that goes to TTFT), and the median, which the queue's tail does not move.
The spread: the between-life SD of log(service speed) within each K with two or more lives at the rate, pooled over
K (df = sum(lives - 1)); a life with two windows at the rate (a rate stage listed twice) is one life, their mean log
speed, and a window none of whose arrivals succeeded has no speed and is left out. A life's log speed is also off
by its window's own noise, which the verdict redraws anyway (each window's arrivals are resampled): that part
(`window_var`, the variance of a life's log speed over its arrivals' resamples, the same block draws the verdict
makes, the mean over the lives) is taken off the spread's square before it is drawn, so it is not counted twice.
Where no K has two lives at the rate (or a K's repeats share one server life: same-server repeats), the config's
restart_prior(): decision.restart_spread, the simulator's 1 %, or 15 % "unknown".
The draw, per resample and K with n lives at the rate: log f = z x sqrt(max(s^2 df / chi2_df - w, 0) / n), z
standard normal per K, chi2_df the spread's own uncertainty drawn once per resample for every K (the spread is one
unknown they share: so the gain between two K, s x sqrt(1/n + 1/m) x Student's t_df where w = 0, is a t draw; a
chi-square per K would make it a sum of two t's, wider at 90 % and narrower at 99 % on few df); a prior has no df
and is drawn normal. A K with several lives keeps each of them once in every resample (its arrivals redrawn):
drawing its lives with replacement as well would add the same between-life spread a second time (and, from two or
three lives, a biased one: a bootstrap of two draws one life twice in half of its resamples). SLO attainment is not
scaled: each window's arrivals meeting the SLO are the window's (a slower life's lower capacity enters through its
capacity bracket).
Pure: the K's windows at the rate in, the spread and its factors out.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from ...config import DecisionConfig
from .evidence import LATENCY_COLUMNS
from .measure import CellStats
from .rate_cell import RateCell, _Arrivals
from .rate_window import RateWindow
from .restart_spread import chi2_bounds
from .stats import single_life_gains

WINDOW_DRAWS = 200   # arrival resamples behind a window's variance of log speed (its relative SE about 10 %)
_TPOT, _E2E = LATENCY_COLUMNS.index("tpot_ms"), LATENCY_COLUMNS.index("e2e_ms")


def service_time(latency_ms: np.ndarray, ok: np.ndarray) -> float:
    """A window's service time per output token, ms: the median TPOT of its arrivals that succeeded, else (no TPOT:
    one-token answers) their median e2e; NaN where none succeeded."""
    for column in (_TPOT, _E2E):
        values = latency_ms[ok, column]
        values = values[np.isfinite(values) & (values > 0)]
        if len(values):
            return float(np.median(values))
    return math.nan


def window_var(arrivals: _Arrivals, rng: np.random.Generator, draws: int = WINDOW_DRAWS) -> float:
    """The variance of a window's log service time over the verdict's own resamples of its arrivals."""
    w = arrivals.window
    logs = np.log([service_time(w.latency_ms[i], w.ok[i]) for i in (arrivals.draw(rng) for _ in range(draws))])
    logs = logs[np.isfinite(logs)]
    return float(logs.var(ddof=1)) if len(logs) >= 2 else 0.0


@dataclass(frozen=True)
class RateSpread:
    """The restart spread at one rate: relative SD per server life (of log service speed), its degrees of freedom
    (0: a prior, drawn normal), where it comes from, and the part of it the windows' own noise makes (a variance)."""

    rate: float
    rel_sd: float
    df: int = 0
    source: str = "measured"      # "measured" | "decision.restart_spread" | "the simulator's default" | "unknown"
    window_var: float = 0.0
    lives: int = 0                # the lives behind a measured spread
    ks: tuple[int, ...] = ()      # their K
    level: float = 0.9

    @property
    def measured(self) -> bool:
        return self.source == "measured"

    @property
    def unknown(self) -> bool:
        return self.source == "unknown"

    def variances(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Per resample, the variance of one life's log speed its life factors are drawn with: a measured spread's
        own uncertainty (s^2 df / chi2_df) less the windows' part, a prior's square as it is. One draw per resample
        for every K: the spread is one unknown they share, so the gain between two K is Student's t."""
        if not self.df:
            return np.full(count, self.rel_sd ** 2)
        return np.maximum(self.rel_sd ** 2 * self.df / rng.chisquare(self.df, count) - self.window_var, 0.0)

    def factors(self, lives: int, rng: np.random.Generator, count: int,
                variances: np.ndarray | None = None) -> np.ndarray:
        """`count` life factors (slower > 1) for a K measured on `lives` lives at the rate (the module's draw);
        `variances`: the resamples' draws of the spread (`variances`), shared with the other K."""
        z = rng.standard_normal(count)
        return np.exp(z * np.sqrt((self.variances(rng, count) if variances is None else variances) / max(lives, 1)))

    def unknown_text(self, base_k: int, p: DecisionConfig) -> str:
        """Why one life per K at the rate decides only a large gain (gates/stage.restart_unknown_text's words)."""
        up, down = single_life_gains(self.rel_sd, p.confidence, p.tie_tolerance_frac)
        return (f"one life per K at {self.rate:g} req/s: restart spread unknown (taken as {self.rel_sd:.0%} per "
                f"server life: at {p.confidence:.0%} a single-life gain in speed over K={base_k} must be about "
                f"{up:+.0%} to set a K, or about {down:+.0%} to keep K={base_k}; a second life of a K measures it)")

    def text(self) -> str:
        """e.g. "restart spread at 20 req/s 3.1 % [2.0, 6.8] per server life, from 2 lives of K=0" or "... unknown,
        taken as 15 % per server life"."""
        at = f"restart spread at {self.rate:g} req/s"
        if self.unknown:
            return (f"one life per K at {self.rate:g} req/s: restart spread unknown, taken as {self.rel_sd:.0%} per "
                    "server life (a second life of a K measures it)")
        if not self.measured:
            return f"{at} {self.rel_sd:.1%} per server life ({self.source})"
        low, high = chi2_bounds(self.rel_sd, self.df, self.level)
        ks = ", ".join(f"K={k}" for k in self.ks)
        own = math.sqrt(self.window_var)
        window = (f"; their windows' own noise, {own * 100:.1f} %, taken off it: the resamples redraw their arrivals"
                  if own >= 0.0005 else "")
        return (f"{at} {self.rel_sd * 100:.1f} % [{low * 100:.1f}, {high * 100:.1f}] per server life, from "
                f"{self.lives} lives of {ks} ({self.df} degree{'s' if self.df != 1 else ''} of freedom{window})")


def lives_of(cell: RateCell, p: DecisionConfig) -> int:
    """The server lives behind a K's windows at the rate: one where its repeats share a life (same-server)."""
    return 1 if p.one_life_per_k else len({w.repeat for w in cell.windows})


def spread_at(rate: float, cells: Mapping[int, RateCell], p: DecisionConfig) -> RateSpread:
    """The restart spread at `rate` from the K's windows there (the module's docstring)."""
    rng = np.random.default_rng([p.seed, 59, int(round(rate * 1000))])
    squares, df, lives, ks, window_vars = 0.0, 0, 0, [], []
    for k, cell in sorted(cells.items()):
        measured = _lives_measured(cell) if lives_of(cell, p) >= 2 else []
        if len(measured) < 2:
            continue
        logs = np.array([np.mean([math.log(service_time(w.latency_ms, w.ok)) for w in life]) for life in measured])
        squares += float(((logs - logs.mean()) ** 2).sum())
        df, lives, ks = df + len(logs) - 1, lives + len(logs), [*ks, k]
        # a life's part: the variance of its windows' mean log speed
        window_vars += [sum(window_var(_Arrivals.of(w, p), rng) for w in life) / len(life) ** 2 for life in measured]
    if df:
        return RateSpread(rate, math.sqrt(squares / df), df, "measured", float(np.mean(window_vars)), lives,
                          tuple(ks), p.interval_level)
    prior, source = p.restart_prior()
    return RateSpread(rate, prior, 0, source, level=p.interval_level)


def life_factors(spread: RateSpread, cells: Mapping[int, RateCell], p: DecisionConfig, count: int
                 ) -> dict[int, np.ndarray]:
    """Per K, `count` life factors: the spread drawn once per resample for every K (`RateSpread.variances`), each
    K's own luck from a generator of its own (the run's seed, the rate and K)."""
    at = int(round(spread.rate * 1000))
    variances = spread.variances(np.random.default_rng([p.seed, 61, at]), count)
    return {k: spread.factors(lives_of(cell, p), np.random.default_rng([p.seed, 61, at, k]), count, variances)
            for k, cell in cells.items()}


def _lives_measured(cell: RateCell) -> list[list[RateWindow]]:
    """The K's server lives at the rate whose service speed is known, each its windows there (a rate stage listed
    twice gives a life two: one life of the spread, their mean log speed); a window none of whose arrivals
    succeeded is left out, and a life of no other."""
    by_life: dict[int, list[RateWindow]] = {}
    for w in cell.windows:
        if math.isfinite(service_time(w.latency_ms, w.ok)):
            by_life.setdefault(w.repeat, []).append(w)
    return list(by_life.values())


def slower(figures: CellStats, factor: float) -> CellStats:
    """A K's drawn figures on a life `factor` slower: every latency `factor` x longer (the module's model)."""
    return dataclasses.replace(figures, quantiles=figures.quantiles * factor)
