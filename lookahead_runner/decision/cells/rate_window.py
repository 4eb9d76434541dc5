"""A rate stage's window (open loop) as typed evidence: every request scheduled in it, followed to its end.

Under open loop the population is the arrivals, not the completions: a window holds the requests the schedule
had arrive inside it (workload/arrivals.py), wherever they finished, and each one that did not succeed, was
cut or was never sent counts against it. Of them:

- offered rate: arrivals / window; achieved: the rate this stage's arrivals were served at through the window's
  settled span (after the answers begun at the stage's start have ended: keeping_up.py), those that completed
  successfully there against those due to in step (scheduled one median time in the system earlier), times the
  offered rate (runfolder/rate_windows.py). So an earlier stage's backlog finishing here is not served at this
  rate, a server still filling up does not read as serving less, and a schedule denser early in the stage does
  not read as serving more (not req_per_s' shares of request lives, which count a request queued through the
  window as partly served); an arrival the client held back (load.max_in_flight full) is counted as held, never
  hidden, and an arrival of the schedule with no row in requests.csv as missing, a failure;
- SLO attainment: per SLO of decision.slo, the arrivals that succeeded and met it from their scheduled arrival
  (`meets`; each SLO holds at its own percentile: slo_attainment.py); the summary's share and its Wilson interval
  (stats.wilson) are of the arrivals meeting every SLO at once, on the arrivals worth as many independent ones as
  their correlation in arrival order allows (`effective`: arrival_correlation.py, from the met flags and the SLOs'
  latencies, so a window all met whose queue ran near the limit is not read as independent trials); goodput: those
  requests per second of the window;
- the queue: requests outstanding (arrived, not finished: at the server or held by the client) and the
  server's own waiting queue (vllm:num_requests_waiting) from the window's start to its end. Whether the K keeps
  up is keeping_up.queue_finding's (`queue`): its queued requests (arrived, not started) grow through the window,
  or its outstanding ones through the span after the answers settled: it falls behind the offered rate, a finding
  with its figures (`behind`), not an invalid window; a window without a settled span says so (`too_short`:
  "stage too short for answers of N s; lengthen to M s"), never behind. Several repeats are judged pooled
  (`windows_behind`), so one repeat's excursion does not mark the K; that rule's false-alarm and miss rates are
  keeping_up.py's claim;
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
from . import arrival_correlation
from .arrival_correlation import Effective
from .evidence import LATENCY_COLUMNS
from .keeping_up import QueueFinding, counts_at, pooled_behind
from .slo_attainment import meets
from .stats import Bounds, wilson

# summary.csv's columns for a rate stage's window (empty in a user stage's row), after the closed-loop ones
RATE_SUMMARY_COLUMNS = (
    "rate", "offered_per_s", "achieved_per_s", "arrivals", "held", "not_sent", "missing", "late_p50_ms",
    "late_p99_ms", "slo_attainment", "slo_attainment_low", "slo_attainment_high", "goodput_per_s",
    "outstanding_start", "outstanding_end", "waiting_start", "waiting_end", "keeps_up", "behind", "too_short",
)
# A window given only its growth (no counts through it: `queue` None) falls behind where that growth is beyond
# this many standard deviations of a steady Poisson queue of its size. No share of the arrivals is tolerated on
# top: a floor of x % would pass a K overloaded by up to x % in a window of any length.
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
    achieved_per_s: float = math.nan     # the rate this stage's arrivals were served at (the module's docstring)
    achieved_span_s: float = math.nan    # that span's length (NaN: the window's)
    output_tok_per_s: float = math.nan
    outstanding: tuple[float, float] = (math.nan, math.nan)   # arrived and not finished, at start and end
    growth: float = math.nan        # requests gained by the count `queue` judged (without it: outstanding, given)
    waiting: tuple[float, float] = (math.nan, math.nan)       # the server's waiting queue, first and last sample
    has_slo: bool = False
    variant: str = ""
    valid: bool = True
    invalid_reason: str = ""
    server: Mapping[str, float] = field(default_factory=dict)   # the summary row's server and memory signals
    # arrivals x SLOs of decision.slo: each one met (slo_attainment.meets, from its scheduled arrival); None: `good`
    # stands for each SLO (a window built from `good` alone)
    meets: np.ndarray | None = None
    missing: int = 0                # arrivals of the schedule with no row (counted among the arrivals, failed)
    queue: QueueFinding | None = None   # whether it keeps up (keeping_up.queue_finding); None: judged by `growth`
    # the LATENCY_COLUMNS each SLO of decision.slo is judged on (meets' order); (): TTFT and e2e stand for each
    slo_columns: tuple[str, ...] = ()
    _times: dict = field(default_factory=dict, init=False, repr=False)   # correlation_time's, per SLO index

    def met(self, index: int) -> np.ndarray:
        """Per arrival: it met SLO `index` of decision.slo."""
        return self.good if self.meets is None else self.meets[:, index]

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
        return wilson(int(self.good.sum()), self.arrivals, level, self.effective().design_effect_at(level))

    def correlation_time(self, index: int | None = None) -> float:
        """tau of the share meeting SLO `index` of decision.slo (None: every SLO at once; `good`), in arrival order
        (arrival_correlation.window_time over its flags and its SLOs' latencies); -1 for the e2e latency alone, the
        figure the verdict at a rate reads."""
        if index not in self._times:
            columns = self.slo_columns or ("ttft_ms", "e2e_ms")
            if index == -1:
                flags, names = self.ok, ("e2e_ms",)
            elif index is None:
                flags, names = self.good, columns
            else:
                flags, names = self.met(index), (columns[index],) if self.slo_columns else columns
            values = [self.latency_ms[:, LATENCY_COLUMNS.index(name)] for name in names]
            self._times[index] = arrival_correlation.window_time(flags, values, self.ok)
        return self._times[index]

    def effective(self, index: int | None = None) -> Effective:
        """Its arrivals as independent ones for the share meeting SLO `index` (None: every SLO)."""
        return arrival_correlation.one(self.arrivals, self.correlation_time(index))

    @property
    def goodput_per_s(self) -> float:
        """Requests per second of the window that succeeded and met every SLO (NaN without SLOs)."""
        return float(self.good.sum()) / self.duration_s if self.has_slo and self.duration_s > 0 else math.nan

    @property
    def keeps_up(self) -> bool:
        """Not behind the offered rate (a window too short to tell is not behind: `too_short` says so)."""
        if self.queue is not None:
            return not self.queue.behind
        return not falls_behind(self.growth, self.arrivals, self.outstanding)

    @property
    def too_short(self) -> str:
        """"stage too short for answers of N s; lengthen to M s" where no span of the window had settled ("")."""
        return "" if self.queue is None else self.queue.too_short

    @property
    def behind(self) -> str:
        """The finding, with its figures, where the K falls behind the offered rate ("" where it keeps up): the
        server's waiting queue where sampled, else the client's count that grew."""
        if self.keeps_up:
            return ""
        start, end = self.waiting
        if math.isnan(start) or math.isnan(end):
            if self.queue is None:
                start, end, queue = *self.outstanding, "outstanding"
            else:
                judged = self.queue.judged
                start, end, queue = judged.first, judged.last, self.queue.judged_name
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
            "not_sent": self.not_sent, "missing": self.missing, "late_p50_ms": self.late_percentile_ms(50),
            "late_p99_ms": self.late_percentile_ms(99), "slo_attainment": self.attainment,
            # rounded as the CSV keeps them: Wilson's upper end at 100 % comes out a hair below 1.0 unrounded
            "slo_attainment_low": math.nan if bounds.low is None else round(bounds.low, 6),
            "slo_attainment_high": math.nan if bounds.high is None else round(bounds.high, 6),
            "goodput_per_s": self.goodput_per_s,
            "outstanding_start": self.outstanding[0], "outstanding_end": self.outstanding[1],
            "waiting_start": self.waiting[0], "waiting_end": self.waiting[1],
            "keeps_up": self.keeps_up, "behind": self.behind, "too_short": self.too_short,
        }


def falls_behind(growth: float, arrivals: int, outstanding: tuple[float, float]) -> bool:
    """A count of requests grew by more than BEHIND_NOISE_SDS standard deviations of a steady Poisson queue of
    that size (sqrt of its length): the rule for a growth given without its counts through the window."""
    if math.isnan(growth) or not arrivals:
        return False
    level = max(v for v in (*outstanding, 1.0) if not math.isnan(v))
    return growth > BEHIND_NOISE_SDS * math.sqrt(level)


def met_every_slo(latency_ms: np.ndarray, ok: np.ndarray, slos: Sequence[Slo],
                  output_tokens: np.ndarray | None = None) -> np.ndarray:
    """Per request: it succeeded and met every SLO (slo_attainment.meets: a metric not measured fails it, but an
    answer of one token meets a TPOT or ITL SLO); at a rate pass the latencies from the scheduled arrival
    (slo_attainment.from_arrival)."""
    return np.asarray(ok, dtype=bool) & meets(latency_ms, ok, slos, output_tokens).all(axis=1)


def outstanding_at(times_s: np.ndarray, arrived_s: np.ndarray, finished_s: np.ndarray) -> np.ndarray:
    """Requests arrived at or before each time and not finished by it."""
    return counts_at(times_s, arrived_s, finished_s)


def windows_behind(windows: Sequence[RateWindow]) -> bool:
    """A K's windows at one rate (its repeats) fall behind it, judged pooled (keeping_up.pooled_behind); windows
    given only their growth, each by its own."""
    judged = [w.queue for w in windows if w.queue is not None]
    return (bool(judged) and pooled_behind(judged)) or any(not w.keeps_up for w in windows if w.queue is None)


def effective_arrivals(windows: Sequence[RateWindow], index: int | None = None) -> Effective:
    """The arrivals of windows pooled (a K's repeats at one rate) as independent ones for the share meeting SLO
    `index` of decision.slo (None: every SLO; -1: succeeded), arrival_correlation.pooled: never worth more than
    the spread between the windows shows."""
    def met(w: RateWindow) -> int:
        return int((w.ok if index == -1 else w.good if index is None else w.met(index)).sum())

    return arrival_correlation.pooled([(w.effective(index), met(w)) for w in windows])


def windows_too_short(windows: Sequence[RateWindow]) -> str:
    """Why a K's windows at one rate cannot tell whether it keeps up: not behind pooled, and every one a stage too
    short for its answers (the first one's "stage too short for answers of N s; lengthen to M s"); "" where one
    of them was judged, or they fall behind."""
    if not windows or not all(w.too_short for w in windows) or windows_behind(windows):
        return ""
    return windows[0].too_short


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
