"""The values of the web UI's live tabs, as pure functions: safe to import anywhere (no Locust, no gevent).

Every second the Locust process that serves the web UI (the master in distributed mode) scrapes the
server's /metrics into a `CounterWindow`; the requests.csv rows of the requests that finish (its own,
or the workers' forwarded ones) go to a `LatencyWindow`; both, with the stage and the setting, make
one `LiveValues`. tables.py turns them into the tabs' rows and CSV, charts.py into the charts' series.

Definitions (the report's, applied to the last `LIVE_WINDOW_S` seconds instead of a stage window):
- acceptance rate, mean acceptance length, generation tokens/s: telemetry/signals.py on the window's
  counter deltas;
- real batch = vllm:num_requests_running / vllm:num_requests_waiting at the last scrape;
- TTFT p50/p99 over the requests that finished in the window; ITL p50 = median of their per-request
  median ITLs, ITL p99 = 99th percentile of their per-request p99 ITLs;
- in a rate stage (`RateProgress`): the offered rate, the arrivals the dispatchers' schedule has due in the
  window (workload/arrivals.py: the times they send by, so known before any answer); the achieved rate, as a
  rate window's (runfolder/rate_windows.py) over the window: this stage's arrivals that succeeded, counted when
  their rows reach this process, since the stage's answers settled, against this stage's arrivals due one median
  time in the system earlier, times the rate offered meanwhile (`RateProgress.achieved`: an earlier stage's
  backlog finishing is not this rate's service; none while the stage fills up, about one answer's length after
  it begins); the requests outstanding, arrived by the schedule and not finished (client side, beside the
  server's own waiting queue). A K falls behind where the achieved rate stays below the offered one while the
  queues climb.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from lookahead_runner.contracts.records import CUT_ERROR, REQUEST_COLUMNS
from lookahead_runner.telemetry.signals import CounterSignals, counter_signals
from lookahead_runner.vllm.metrics import ACCEPTED_PER_POSITION, KV_POOL_INFO, SIGNALS
from lookahead_runner.workload.stages import Stage, load_label
from lookahead_runner.workload.timeline import percentile

LIVE_WINDOW_S = 10.0
POLL_INTERVAL_S = 1.0
HISTORY_MAX_ROWS = 6 * 3600  # six hours at one row a second


_SIGNAL_NAMES = frozenset(name for names in SIGNALS.values() for name in names) | {KV_POOL_INFO, ACCEPTED_PER_POSITION}


def signal_lines(text: str) -> str:
    """Only the sample lines of the series `telemetry.prometheus.parse` reads.

    vLLM's /metrics is tens of kB of histograms; parsing it whole takes about 10 ms, which would stall
    the event loop that times the streams once a second. The few lines kept parse the same.
    """
    kept = []
    for line in text.splitlines():
        if line and line[0] != "#":
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name in _SIGNAL_NAMES:
                kept.append(line)
    return "\n".join(kept) + "\n"


@dataclass(frozen=True)
class LatencySample:
    """What the live view needs from one finished request (cut requests are never sampled)."""

    ok: bool
    ttft_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None


_COLUMN = {name: index for index, name in enumerate(REQUEST_COLUMNS)}


def sample_of_row(row: Sequence[str]) -> LatencySample | None:
    """A requests.csv row (records.RequestRecord.as_row) -> its live sample; None for a cut request,
    which neither finished nor failed."""
    if len(row) != len(REQUEST_COLUMNS) or row[_COLUMN["error"]] == CUT_ERROR:
        return None

    def number(name: str) -> float | None:
        text = row[_COLUMN[name]]
        try:
            return float(text) if text != "" else None
        except ValueError:
            return None

    return LatencySample(row[_COLUMN["ok"]] == "1", number("ttft_ms"), number("itl_p50_ms"), number("itl_p99_ms"))


def arrival_of_row(row: Sequence[str]) -> tuple[float, bool] | None:
    """A requests.csv row of a rate stage's arrival -> (its scheduled time, it succeeded); None for any other
    row. Every end counts (a cut or never-sent arrival too): the arrival is no longer outstanding."""
    if len(row) != len(REQUEST_COLUMNS) or not row[_COLUMN["t_scheduled_s"]]:
        return None
    try:
        scheduled = float(row[_COLUMN["t_scheduled_s"]])
    except ValueError:
        return None
    return scheduled, row[_COLUMN["ok"]] == "1" and row[_COLUMN["error"]] != CUT_ERROR


class RateProgress:
    """A run of rate stages as the live view follows it: its schedule (every arrival's time, unix seconds, from
    `t_start_s`; its stages starting at `stage_starts_s`, by default one from `t_start_s`) and the arrivals that
    finished, as their rows reach this process."""

    def __init__(self, t_start_s: float, arrivals_s: Sequence[float], window_s: float = LIVE_WINDOW_S,
                 stage_starts_s: Sequence[float] = ()) -> None:
        self.t_start_s = t_start_s
        self.window_s = window_s
        self.arrivals_s = np.sort(np.asarray(arrivals_s, dtype=float))
        self.stage_starts_s = np.sort(np.asarray(stage_starts_s or (t_start_s,), dtype=float))
        self.finished = 0
        self._succeeded: deque[tuple[float, float]] = deque()   # (its row arrived, scheduled) of each success

    def observe(self, t_s: float, scheduled_s: float, ok: bool) -> None:
        if scheduled_s < self.t_start_s - 1e-3:   # an earlier run's straggler
            return
        self.finished += 1
        if ok:
            self._succeeded.append((t_s, scheduled_s))

    def _due(self, start_s: float, end_s: float) -> int:
        return int(np.searchsorted(self.arrivals_s, end_s, side="left")
                   - np.searchsorted(self.arrivals_s, start_s, side="left"))

    def achieved(self, now_s: float) -> float | None:
        """The rate this stage's arrivals are served at, as a rate window's achieved (runfolder/rate_windows.py)
        over the last `window_s` seconds: those that succeeded, their rows in since the stage's answers settled
        (one median time in the system past its start), against this stage's arrivals due one median time in the
        system earlier, times the rate the stage offered meanwhile. None while the stage fills up."""
        stage_s = float(self.stage_starts_s[max(int(np.searchsorted(self.stage_starts_s, now_s, "right")) - 1, 0)])
        recent = [(t, scheduled) for t, scheduled in self._succeeded
                  if scheduled >= stage_s - 1e-3 and now_s - self.window_s <= t <= now_s]
        if not recent:
            return 0.0 if now_s - stage_s >= self.window_s else None
        lag_s = float(np.median([t - scheduled for t, scheduled in recent]))
        start_s = max(now_s - self.window_s, stage_s + lag_s)
        if now_s - start_s <= 0:
            return None
        # the arrivals due in step, [start, now) - lag, and of them those served: counted by their schedule, not by
        # when their rows came in (rows are forwarded in batches, so a second's rows would read as served at once)
        due_from, due_to = max(start_s - lag_s, stage_s), now_s - lag_s
        served = sum(1 for _, scheduled in recent if due_from <= scheduled < due_to)
        due = self._due(due_from, due_to)
        offered = self._due(start_s, now_s) / (now_s - start_s)
        return offered * served / due if due else served / (now_s - start_s)

    def values(self, now_s: float) -> tuple[float | None, float | None, float]:
        """(offered req/s over the last `window_s` seconds of the run, `achieved`; None in its first instant), and
        the requests outstanding now."""
        due = int(np.searchsorted(self.arrivals_s, now_s, side="right"))
        outstanding = float(max(due - self.finished, 0))
        start_s = max(now_s - self.window_s, self.t_start_s)
        while self._succeeded and self._succeeded[0][0] < now_s - self.window_s:
            self._succeeded.popleft()
        span_s = now_s - start_s
        if span_s <= 0:
            return None, None, outstanding
        offered = (due - int(np.searchsorted(self.arrivals_s, start_s, side="right"))) / span_s
        return offered, self.achieved(now_s), outstanding


class LatencyWindow:
    """Finished requests of the last `window_s` seconds, stamped with the time they reached this process.

    Arrival time rather than the row's own times: rows from workers on other hosts carry their clock,
    which may be skewed, and workers forward rows about once a second, so arrival is at most that late.
    """

    def __init__(self, window_s: float = LIVE_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: deque[tuple[float, LatencySample]] = deque()

    def add(self, t_s: float, samples: Iterable[LatencySample]) -> None:
        self._samples.extend((t_s, sample) for sample in samples)

    def clear(self) -> None:
        self._samples.clear()

    def summary(self, now_s: float) -> dict[str, float | None]:
        while self._samples and self._samples[0][0] < now_s - self.window_s:
            self._samples.popleft()
        ok = [s for _, s in self._samples if s.ok]
        ttft = [s.ttft_ms for s in ok if s.ttft_ms is not None]
        itl50 = [s.itl_p50_ms for s in ok if s.itl_p50_ms is not None]
        itl99 = [s.itl_p99_ms for s in ok if s.itl_p99_ms is not None]
        return {
            "ttft_p50_ms": percentile(ttft, 50),
            "ttft_p99_ms": percentile(ttft, 99),
            "itl_p50_ms": percentile(itl50, 50),
            "itl_p99_ms": percentile(itl99, 99),
            "requests_ok": float(len(ok)),
            "requests_failed": float(len(self._samples) - len(ok)),
        }


class CounterWindow:
    """Scrapes of /metrics ({signal: value} from telemetry.prometheus.parse) over the last `window_s` s.

    Keeps the newest scrape older than the window as the base, so counter deltas span the whole window.
    """

    def __init__(self, window_s: float = LIVE_WINDOW_S) -> None:
        self.window_s = window_s
        self._scrapes: deque[tuple[float, dict[str, float]]] = deque()

    def add(self, t_s: float, signals: dict[str, float]) -> None:
        self._scrapes.append((t_s, dict(signals)))
        while len(self._scrapes) > 2 and self._scrapes[1][0] <= t_s - self.window_s:
            self._scrapes.popleft()

    def latest(self) -> dict[str, float]:
        return self._scrapes[-1][1] if self._scrapes else {}

    def latest_t_s(self) -> float | None:
        return self._scrapes[-1][0] if self._scrapes else None

    def signals(self) -> CounterSignals:
        """Acceptance, mean acceptance length and rates over the window: each counter's growth from the
        first scrape carrying it to the newest (telemetry/signals.py, as the report and progress)."""
        if len(self._scrapes) < 2:
            return CounterSignals()
        deltas = {}
        for name in self._scrapes[-1][1]:
            carrying = [values[name] for _, values in self._scrapes if name in values]
            if len(carrying) >= 2:
                deltas[name] = carrying[-1] - carrying[0]
        return counter_signals(deltas, self._scrapes[-1][0] - self._scrapes[0][0])


@dataclass(frozen=True, slots=True)
class StageNow:
    """Where the load shape is: the stage index (None before the first tick), its users and timing."""

    state: str  # Locust's runner state: ready, spawning, running, stopping, stopped
    index: int | None = None
    users: int = 0
    count: int = 0
    elapsed_s: float = 0.0
    duration_s: float = 0.0
    finished: bool = False
    variant: str = ""  # the workload variant these stages run (--variant-name); "" = the sweep's only one
    rate: float | None = None  # a rate stage's requests per second (its users are 0)

    @property
    def load(self) -> str:
        return load_label(self.users, self.rate)


def stage_now(state: str, stages: Sequence[Stage] | None, current: tuple[int, int] | None,
              run_time_s: float, finished: bool, variant: str = "") -> StageNow:
    """The stage running `run_time_s` into the shape run, from the shape's own (index, users)."""
    if current is None or not stages:
        return StageNow(state=state, count=len(stages or ()), finished=finished, variant=variant)
    index, users = current
    start_s = sum(stage.duration_s for stage in stages[:index])
    duration_s = stages[index].duration_s if index < len(stages) else 0.0
    elapsed_s = min(max(run_time_s - start_s, 0.0), duration_s)
    rate = stages[index].rate if index < len(stages) else None
    return StageNow(state, index, users, len(stages), elapsed_s, duration_s, finished, variant, rate)


def stage_text(stage: StageNow) -> str:
    return _stage_words(stage) + (f" · {stage.variant}" if stage.variant else "")


def _stage_words(stage: StageNow) -> str:
    if stage.finished:
        return f"all {stage.count} stages done ({stage.state})"
    if stage.index is None:
        return f"not started ({stage.state})" + (f"; {stage.count} stages planned" if stage.count else "")
    return (f"{stage.index + 1} of {stage.count}: {stage.load}, "
            f"{stage.elapsed_s:.0f} of {stage.duration_s:g} s")


@dataclass(frozen=True, slots=True)
class LiveValues:
    """One tick of the live view; None where the value is not known (yet). Slots: a long session keeps
    one per second (HISTORY_MAX_ROWS) for the history CSV."""

    t_s: float
    setting: str
    stage: StageNow
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    drafted_per_step: float | None = None
    running: float | None = None
    waiting: float | None = None
    kv_usage: float | None = None
    preemptions_total: float | None = None
    preemptions_in_window: float | None = None
    generation_tokens_per_s: float | None = None
    gpu_used_mib: float | None = None
    gpu_total_mib: float | None = None
    gpu_note: str = ""
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    requests_ok: float | None = None
    requests_failed: float | None = None
    metrics_age_s: float | None = None
    metrics_error: str = ""
    locust_users: int | None = None  # users Locust runs now (all workers), against the stage's target
    offered_per_s: float | None = None   # a rate stage: arrivals due per second, last LIVE_WINDOW_S seconds
    achieved_per_s: float | None = None  # ... arrivals that succeeded per second
    outstanding: float | None = None     # ... arrived and not finished now (client side)


def live_values(t_s: float, setting: str, stage: StageNow, counters: CounterWindow, latency: LatencyWindow,
                gpu: tuple[float, float] | None, gpu_note: str, metrics_error: str,
                locust_users: int | None = None, rate: RateProgress | None = None) -> LiveValues:
    """One tick; `rate`: the rate run going on, read only while the stage is a rate stage."""
    offered = achieved = outstanding = None
    if rate is not None and stage.rate is not None and not stage.finished:
        offered, achieved, outstanding = rate.values(t_s)
    latest = counters.latest()
    scraped_t_s = counters.latest_t_s()
    signals = counters.signals()
    return LiveValues(
        t_s=t_s, setting=setting, stage=stage,
        acceptance_rate=signals.acceptance_rate, mean_acceptance_length=signals.mean_acceptance_length,
        drafted_per_step=signals.drafted_per_step,
        generation_tokens_per_s=signals.generation_tokens_per_s, preemptions_in_window=signals.preemptions,
        running=latest.get("running"), waiting=latest.get("waiting"), kv_usage=latest.get("kv_usage"),
        preemptions_total=latest.get("preemptions_total"),
        gpu_used_mib=None if gpu is None else gpu[0], gpu_total_mib=None if gpu is None else gpu[1],
        gpu_note=gpu_note, metrics_age_s=None if scraped_t_s is None else max(t_s - scraped_t_s, 0.0),
        metrics_error=metrics_error, locust_users=locust_users,
        offered_per_s=offered, achieved_per_s=achieved, outstanding=outstanding,
        **latency.summary(t_s),
    )
