"""A K's windows at one arrival rate as the decision at that rate weighs them (decision/rate_decision.py): its
figures as measured and resampled, in `CellStats` so the user-stage gates (gates/checks.py) read them unchanged.

Every arrival of a window is a finished request (one that failed, timed out, was cut or never sent is a failure:
it counts against the K), its latencies those of the arrivals that succeeded, its goodput the arrivals meeting
every SLO per second of the windows. One resample: every window once (the spread from one server life to the next
is the life factor rate_spread.py draws: drawing the windows with replacement too would count it twice) and, inside
each, n / tau of its n arrivals drawn with replacement, each counted tau times (tau the window's correlation
time in arrival order, the longest of its SLOs' share's and its e2e latency's: arrival_correlation.py): the requests
behind one queue are slow together, so a window's percentiles and shares vary as those of n / tau independent
arrivals; the server's signals (memory, batch) are the windows' own. The design effects of every SLO's attainment
(rate_window.effective_arrivals, Student's t on their count folded in at decision.interval_level) come with the
figures as measured; each arrival's SLOs met are the window's (from its scheduled arrival: slo_attainment.py).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ...config import DecisionConfig
from .measure import QUANTILES, CellStats, column_quantiles
from .rate_window import RateWindow, effective_arrivals, windows_behind
from .stats import design_effect

# signal -> how a cell's windows combine it (as measure.py's)
SIGNALS = {"running_mean": np.nanmean, "waiting_mean": np.nanmean, "kv_usage_mean": np.nanmean,
           "kv_usage_peak": np.nanmax, "preemptions": np.nansum, "acceptance_rate": np.nanmean,
           "gpu_mem_peak_mib": np.nanmax, "gpu_mem_total_mib": np.nanmax, "kv_pool_tokens": np.nanmin}


@dataclass(frozen=True, eq=False)
class _Arrivals:
    """One window's arrivals as the figures need them (cut once, drawn many times)."""

    window: RateWindow
    good: np.ndarray         # per arrival: met every SLO (succeeded, without SLOs)
    meets: np.ndarray        # arrivals x SLOs
    tau: float               # arrivals per independent one in what the resamples read (the module's docstring)

    @classmethod
    def of(cls, window: RateWindow, p: DecisionConfig) -> "_Arrivals":
        meets = np.column_stack([window.met(i) for i in range(len(p.slos))]) if p.slos \
            else np.zeros((window.arrivals, 0), dtype=bool)
        tau = max(window.correlation_time(None if p.slos else -1), window.correlation_time(-1))
        return cls(window, window.good if p.slos else window.ok.copy(), meets, tau)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """The arrivals of one resample: ceil(n / tau) of the window's n drawn with replacement, each counted
        n / that many times (near-equal whole counts), so the resample keeps the window's own count of arrivals
        (every K had the same arrivals: their count is no noise to add)."""
        n = self.window.arrivals
        if not n:
            return np.empty(0, dtype=int)
        draws = min(n, math.ceil(n / self.tau))
        counts = np.diff(np.round(np.linspace(0, n, draws + 1)).astype(int))
        return np.repeat(rng.integers(n, size=draws), counts)


def _signals(windows: Sequence[RateWindow]) -> dict[str, float]:
    out = {}
    for name, reduce in SIGNALS.items():
        values = np.array([w.signal(name) for w in windows], dtype=float)
        out[name] = float(reduce(values)) if np.isfinite(values).any() else math.nan
    return out


def _design_effects(prepared: Sequence[_Arrivals], level: float) -> tuple[float, float, tuple[float, ...]]:
    """The design effects of the share meeting every SLO and of each SLO's attainment (rate_window.effective_arrivals
    at `level`) and of the failures (stats.design_effect), as measured: every resample carries them, so the gates
    read one rule measured and resampled."""
    slos = prepared[0].meets.shape[1] if prepared else 0
    windows = [a.window for a in prepared]
    return (effective_arrivals(windows).design_effect_at(level) if slos else 1.0,
            design_effect([~a.window.ok for a in prepared]),
            tuple(effective_arrivals(windows, i).design_effect_at(level) for i in range(slos)))


def _stats(k: int, parts: Sequence[tuple[_Arrivals, np.ndarray]], signals: Mapping[str, float],
           deff: tuple[float, float, tuple[float, ...]] = (1.0, 1.0, ())) -> CellStats:
    """A K's figures from (window, the arrivals drawn from it) pairs."""
    duration = sum(a.window.duration_s for a, _ in parts)
    ok = np.concatenate([a.window.ok[i] for a, i in parts]) if parts else np.empty(0, dtype=bool)
    latency = np.concatenate([a.window.latency_ms[i] for a, i in parts]) if parts else np.empty((0, 4))
    met = np.concatenate([a.meets[i] for a, i in parts]).sum(axis=0) if parts else ()
    timeouts = sum(round(a.window.timeouts * len(i) / max(a.window.arrivals, 1)) for a, i in parts)
    per_s = (lambda value: value / duration) if duration > 0 else (lambda value: math.nan)
    return CellStats(
        k=k, users=0, repeats=len({id(a) for a, _ in parts}), requests=int(ok.sum()), finished=len(ok),
        failures=int(len(ok) - ok.sum()), timeouts=int(timeouts), duration_s=duration,
        req_per_s=per_s(sum(a.window.achieved_per_s * a.window.duration_s for a, _ in parts)),
        output_tok_per_s=per_s(sum(np.nan_to_num(a.window.output_tok_per_s) * a.window.duration_s for a, _ in parts)),
        goodput=per_s(sum(int(a.good[i].sum()) for a, i in parts)), quantiles=column_quantiles(latency[ok], QUANTILES),
        slo_met=tuple(int(v) for v in met), throughput_units=len(parts), design_effect=deff[0],
        failure_design_effect=deff[1], slo_design_effects=deff[2], **signals)


@dataclass(frozen=True, eq=False)
class RateCell:
    """Every valid window of one K at one rate, in repeat order."""

    k: int
    windows: tuple[RateWindow, ...]

    def _prepared(self, p: DecisionConfig) -> list[_Arrivals]:
        return [_Arrivals.of(w, p) for w in self.windows]

    def measure(self, p: DecisionConfig) -> CellStats:
        prepared = self._prepared(p)
        return _stats(self.k, [(a, np.arange(a.window.arrivals)) for a in prepared], _signals(self.windows),
                      _design_effects(prepared, p.interval_level))

    def draws(self, p: DecisionConfig, rng: np.random.Generator, count: int) -> list[CellStats]:
        """`count` resamples (see the module's docstring): every window once, its arrivals drawn."""
        prepared, signals = self._prepared(p), _signals(self.windows)
        deff = _design_effects(prepared, p.interval_level)
        return [_stats(self.k, [(a, a.draw(rng)) for a in prepared], signals, deff) for _ in range(count)]

    @property
    def behind(self) -> list[str]:
        """The finding where the K fell behind the rate, its repeats judged pooled (rate_window.windows_behind: one
        repeat's excursion does not mark it): each window's that fell behind on its own ("falls behind at 12
        req/s: ..."), or where only the pool does, one line for them all; [] where it keeps up."""
        if not windows_behind(self.windows):
            return []
        own = [w.behind for w in self.windows if not w.keeps_up]
        return own or [f"falls behind at {self.windows[0].rate:g} req/s over its {len(self.windows)} repeats "
                       "pooled (none beyond its noise alone)"]

    def behind_draws(self, rng: np.random.Generator, count: int) -> np.ndarray:
        """Per resample, whether the K falls behind: its windows drawn with replacement and judged pooled, so the
        finding's own uncertainty is carried into the resamples (the life factor, which `draws` carries the spread
        between lives by, does not reach this finding)."""
        n = len(self.windows)
        if n <= 1:
            return np.full(count, bool(self.behind))
        picks = rng.integers(n, size=(count, n))
        return np.array([windows_behind([self.windows[i] for i in row]) for row in picks], dtype=bool)

    def pooled(self, column: int) -> np.ndarray:
        """One latency column of its arrivals that succeeded."""
        return np.concatenate([w.latency_ms[w.ok, column] for w in self.windows])


def cells_at(windows: Sequence[RateWindow], rate: float, variant: str = "") -> dict[int, RateCell]:
    """Each K's valid windows at `rate` (of one workload variant)."""
    by_k: dict[int, list[RateWindow]] = {}
    for w in windows:
        if w.valid and same_rate(w.rate, rate) and w.variant == variant:
            by_k.setdefault(w.k, []).append(w)
    return {k: RateCell(k, tuple(sorted(ws, key=lambda w: w.repeat))) for k, ws in sorted(by_k.items())}


def same_rate(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9)
