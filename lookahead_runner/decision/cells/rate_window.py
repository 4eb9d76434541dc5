"""A rate stage's window (open loop) as typed evidence: every request scheduled in it, followed to its end.

Under open loop the population is the arrivals, not the completions: a window holds the requests the schedule
had arrive inside it (workload/arrivals.py), wherever they finished, and each one that did not succeed, was
cut or was never sent counts against it. Of them:

- offered rate: arrivals / window; achieved: requests that completed successfully inside it per second (not
  req_per_s' shares of request lives, which count a request queued through the window as partly served); an
  arrival the client held back (load.max_in_flight full) is counted as held, never hidden;
- SLO attainment: the share of arrivals that succeeded and met every SLO of decision.slo (config/slo.py), with
  its Wilson interval (stats.wilson) on the arrivals over their design effect (stats.design_effect: the requests
  behind one queue miss together, so n arrivals are fewer than n independent trials); goodput: those requests
  per second of the window;
- the queue: requests outstanding (arrived, not finished: at the server or held by the client) and the
  server's own waiting queue (vllm:num_requests_waiting) from the window's start to its end. A K whose
  outstanding requests grow through the window falls behind the offered rate: a finding with its figures
  (`behind`), not an invalid window;
- the dispatcher's lateness (send time - scheduled time - any wait for a slot), gated as the client's lag is.

Pure numpy: runfolder/rate_windows.py builds these from a life's frames. Capacity per K (the highest rate
whose attainment holds) and the decision at a target rate read these windows.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...config.slo import Slo
from .evidence import LATENCY_COLUMNS
from .stats import Bounds, design_effect, wilson

# summary.csv's columns for a rate stage's window (empty in a user stage's row), after the closed-loop ones
RATE_SUMMARY_COLUMNS = (
    "rate", "offered_per_s", "achieved_per_s", "arrivals", "held", "not_sent", "late_p50_ms", "late_p99_ms",
    "slo_attainment", "slo_attainment_low", "slo_attainment_high", "goodput_per_s", "outstanding_start",
    "outstanding_end", "waiting_start", "waiting_end", "keeps_up", "behind",
)
# Outstanding requests growing through the window beyond the count's own noise is falling behind. No share of
# the arrivals is tolerated on top: a floor of x % would pass a K overloaded by up to x % in a window of any
# length (its backlog growing without bound), where the noise floor shrinks against a longer window's growth.
BEHIND_NOISE_SDS = 3.0


@dataclass(frozen=True, eq=False)
class RateWindow:
    """One (K, repeat, rate stage) window: its arrivals (in the order they were scheduled) and what became of
    them."""

    k: int
    repeat: int
    stage: int
    rate: float                     # configured requests per second
    duration_s: float
    latency_ms: np.ndarray          # arrivals x LATENCY_COLUMNS; NaN where a request did not succeed
    ok: np.ndarray                  # per arrival: it succeeded
    good: np.ndarray                # per arrival: it succeeded and met every SLO (all False without SLOs)
    late_ms: np.ndarray             # per sent arrival: the dispatcher's lateness
    timeouts: int = 0               # arrivals that timed out
    held: int = 0                   # arrivals that waited for a load.max_in_flight slot
    not_sent: int = 0               # of them, never sent before the rate stages ended
    achieved_per_s: float = math.nan     # requests completed successfully inside the window per second
    output_tok_per_s: float = math.nan
    outstanding: tuple[float, float] = (math.nan, math.nan)   # arrived and not finished, at start and end
    growth: float = math.nan        # outstanding requests gained through the window (least-squares slope x span)
    waiting: tuple[float, float] = (math.nan, math.nan)       # the server's waiting queue, first and last sample
    has_slo: bool = False
    variant: str = ""
    valid: bool = True
    invalid_reason: str = ""
    server: Mapping[str, float] = field(default_factory=dict)   # the summary row's server and memory signals

    def signal(self, name: str) -> float:
        value = self.server.get(name, math.nan)
        return math.nan if value is None else float(value)

    @property
    def arrivals(self) -> int:
        return len(self.ok)

    @property
    def offered_per_s(self) -> float:
        return self.arrivals / self.duration_s if self.duration_s > 0 else math.nan

    @property
    def attainment(self) -> float:
        """The share of arrivals that succeeded and met every SLO; NaN without SLOs or arrivals."""
        return float(self.good.mean()) if self.has_slo and self.arrivals else math.nan

    def attainment_bounds(self, level: float) -> Bounds:
        if not self.has_slo:
            return Bounds(None, None)
        return wilson(int(self.good.sum()), self.arrivals, level, design_effect([self.good]))

    @property
    def goodput_per_s(self) -> float:
        """Requests per second of the window that succeeded and met every SLO (NaN without SLOs)."""
        return float(self.good.sum()) / self.duration_s if self.has_slo and self.duration_s > 0 else math.nan

    @property
    def keeps_up(self) -> bool:
        return not falls_behind(self.growth, self.arrivals, self.outstanding)

    @property
    def behind(self) -> str:
        """The finding, with its figures, where the K falls behind the offered rate ("" where it keeps up)."""
        if self.keeps_up:
            return ""
        start, end = self.waiting
        if math.isnan(start) or math.isnan(end):
            start, end, queue = *self.outstanding, "outstanding"
        else:
            queue = "waiting"
        return (f"falls behind at {self.rate:g} req/s: {self.achieved_per_s:.1f} served, "
                f"{queue} {start:.0f} -> {end:.0f}")

    def late_percentile_ms(self, q: float) -> float:
        late = self.late_ms[np.isfinite(self.late_ms)]
        return float(np.percentile(late, q)) if len(late) else math.nan

    def columns(self, level: float) -> dict:
        """Its summary.csv columns (RATE_SUMMARY_COLUMNS)."""
        bounds = self.attainment_bounds(level)
        return {
            "rate": self.rate, "offered_per_s": round(self.offered_per_s, 4),
            "achieved_per_s": self.achieved_per_s, "arrivals": self.arrivals, "held": self.held,
            "not_sent": self.not_sent, "late_p50_ms": self.late_percentile_ms(50),
            "late_p99_ms": self.late_percentile_ms(99), "slo_attainment": self.attainment,
            # rounded as the CSV keeps them: Wilson's upper end at 100 % comes out a hair below 1.0 unrounded
            "slo_attainment_low": math.nan if bounds.low is None else round(bounds.low, 6),
            "slo_attainment_high": math.nan if bounds.high is None else round(bounds.high, 6),
            "goodput_per_s": self.goodput_per_s,
            "outstanding_start": self.outstanding[0], "outstanding_end": self.outstanding[1],
            "waiting_start": self.waiting[0], "waiting_end": self.waiting[1],
            "keeps_up": self.keeps_up, "behind": self.behind,
        }


def falls_behind(growth: float, arrivals: int, outstanding: tuple[float, float]) -> bool:
    """Outstanding requests grew through the window by more than BEHIND_NOISE_SDS standard deviations of a steady
    queue of that size (Poisson: sqrt of its length)."""
    if math.isnan(growth) or not arrivals:
        return False
    level = max(v for v in (*outstanding, 1.0) if not math.isnan(v))
    return growth > BEHIND_NOISE_SDS * math.sqrt(level)


def met_every_slo(latency_ms: np.ndarray, ok: np.ndarray, slos: Sequence[Slo]) -> np.ndarray:
    """Per request: it succeeded and each SLO's metric is within its limit (a metric not measured fails it)."""
    good = np.asarray(ok, dtype=bool).copy()
    for slo in slos:
        values = latency_ms[:, LATENCY_COLUMNS.index(slo.column)] if len(latency_ms) else np.empty(0)
        with np.errstate(invalid="ignore"):
            good &= np.nan_to_num(values, nan=np.inf) <= slo.max_ms
    return good


def outstanding_at(times_s: np.ndarray, arrived_s: np.ndarray, finished_s: np.ndarray) -> np.ndarray:
    """Requests arrived at or before each time and not finished by it."""
    arrived = np.sort(np.asarray(arrived_s, dtype=float))
    finished = np.sort(np.nan_to_num(np.asarray(finished_s, dtype=float), nan=np.inf))
    return (np.searchsorted(arrived, times_s, side="right") - np.searchsorted(finished, times_s, side="right")
            ).astype(float)


def growth_through(times_s: np.ndarray, counts: np.ndarray) -> float:
    """How much a count gained from the first time to the last, by its least-squares line (a steadier reading
    than its two ends)."""
    if len(times_s) < 2 or float(np.ptp(times_s)) <= 0:
        return math.nan
    slope = np.polyfit(times_s - times_s[0], counts, 1)[0]
    return float(slope * np.ptp(times_s))


def behind_findings(windows: Sequence[RateWindow]) -> list[str]:
    """One line per window where a K fell behind the offered rate: "K=8 falls behind at 12 req/s: 9.8 served,
    waiting 3 -> 41" (the repeat named where a K has several)."""
    repeats = {w.k for w in windows if w.repeat > 0}
    return [f"K={w.k}{f' (repeat {w.repeat})' if w.k in repeats else ''}"
            f"{f' [{w.variant}]' if w.variant else ''} {w.behind}." for w in windows if not w.keeps_up]
