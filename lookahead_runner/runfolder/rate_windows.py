"""A rate stage's window from a life's frames (pure pandas): its `RateWindow` (decision/cells/rate_window.py)
and the summary row's rate columns and validity.

The window is the stage's steady part as a user stage's is ([start + warmup, end], analysis.py); its arrivals
are the requests scheduled inside it (requests.csv's t_scheduled_s), followed to their end wherever that is.
Its validity: the closed-loop rules (analysis._validity) with the arrivals as its requests, plus the
dispatcher's lateness, judged against decision.max_client_lag_p99_ms as the client's loop lag is. Falling
behind the offered rate is a finding (the row's `behind`; keeping_up.queue_finding on every arrival's arrival,
first token and end), never a reason to drop the window.

Missing arrivals: every arrival of the schedule writes a row (a request, or `not sent`), so an index of the
stage's schedule (requests.csv's `arrival`) with no row is one the runner lost: a process that died, a row
never written. It counts among the window's arrivals as a failure (the row's `missing`), not as a reason to
drop the window: an arrival lost under load is exactly one the open loop did not show served, and dropping the
window would hide that K's failures from the verdict (the failures gate reads them). With the arrival process
(`process`) the schedule is drawn again and every index due inside the window is checked, the last ones
included, where the rows' scheduled times sit on that schedule (one that does not is not the run's: another
seed or shape than the config's); without it only the gaps between the indexes present are seen.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ..config.slo import Slo
from ..contracts.records import CUT_ERROR, NOT_SENT_ERROR, TIMEOUT_ERROR
from ..decision.cells.evidence import LATENCY_COLUMNS, SERVER_SIGNALS
from ..decision.cells.keeping_up import QUEUE_POINTS, queue_finding
from ..decision.cells.rate_window import RateWindow, outstanding_at
from ..decision.cells.slo_attainment import from_arrival
from ..decision.cells.slo_attainment import meets as slo_meets
from ..workload.arrivals import MAX_DRAWN_ARRIVALS, ArrivalProcess, stage_offsets
from .analysis import WindowRules, _latency_columns, _validity, error_text, is_arrival, is_rate_stage


# How far a row's scheduled time may sit from the schedule drawn again and still be on it: requests.csv keeps
# times to the microsecond (contracts/records.format_cell), a unix time's float a quarter of one; 100 x that.
ON_SCHEDULE_S = 1e-4


def _floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    if column not in frame or frame.empty:
        return np.full(len(frame), np.nan)
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=float)


def scheduled_requests(requests: pd.DataFrame) -> pd.DataFrame:
    """The rows of rate-stage arrivals (with a scheduled time)."""
    return requests[is_arrival(requests)] if len(requests) else requests.iloc[0:0]


def _waiting(server: pd.DataFrame, t0: float, t1: float) -> tuple[float, float]:
    if server.empty or "waiting" not in server or "t_s" not in server:
        return math.nan, math.nan
    frame = server[["t_s", "waiting"]].apply(pd.to_numeric, errors="coerce").dropna()
    inside = frame[(frame["t_s"] >= t0) & (frame["t_s"] <= t1)]
    if inside.empty:
        return math.nan, math.nan
    return float(inside["waiting"].iloc[0]), float(inside["waiting"].iloc[-1])


def window_arrivals(scheduled: pd.DataFrame, stage: int, t0: float, t1: float) -> pd.DataFrame:
    """The arrivals of rate stage `stage` scheduled inside its window [t0, t1), in the order they were scheduled
    (requests.csv is in the order they ended; the attainment's batches are runs of consecutive arrivals)."""
    sched_s = _floats(scheduled, "t_scheduled_s")
    inside = (_floats(scheduled, "stage") == stage) & (sched_s >= t0) & (sched_s < t1)
    return scheduled.iloc[np.flatnonzero(inside)[np.argsort(sched_s[inside], kind="stable")]]


def _succeeded(frame: pd.DataFrame) -> np.ndarray:
    return (_floats(frame, "ok") == 1) & (error_text(frame) != CUT_ERROR).to_numpy()


def missing_arrivals(scheduled: pd.DataFrame, stage: int, stage_start_s: float, stage_end_s: float, rate: float,
                     t0: float, t1: float, process: ArrivalProcess | None) -> np.ndarray:
    """The scheduled times of the arrivals due in [t0, t1) of rate stage `stage` that have no row (see the
    module's docstring)."""
    rows = scheduled[_floats(scheduled, "stage") == stage] if len(scheduled) else scheduled
    index, times = _floats(rows, "arrival"), _floats(rows, "t_scheduled_s")
    # an index no schedule reaches (a corrupt row) is no arrival's: every index up to it would read as a gap
    known = np.isfinite(index) & np.isfinite(times) & (index >= 0) & (index < MAX_DRAWN_ARRIVALS)
    if "arrival" not in rows:
        return np.empty(0)
    present = set(index[known].astype(int).tolist())
    offsets = stage_offsets(rate, stage_end_s - stage_start_s, process, stage) if process is not None else None
    if offsets is not None and (on := _on_schedule(index[known], times[known], offsets, stage_start_s)) is not None:
        return np.array([on + t for i, t in enumerate(offsets) if t0 <= on + t < t1 and i not in present])
    if not known.any():
        return np.empty(0)
    order = np.argsort(index[known])
    first, last = int(index[known].min()), int(index[known].max())
    gone = np.array([i for i in range(first, last + 1) if i not in present], dtype=float)
    at = np.interp(gone, index[known][order], times[known][order]) if len(gone) else gone
    return at[(at >= t0) & (at < t1)]


def _on_schedule(index: np.ndarray, times: np.ndarray, offsets: np.ndarray, stage_start_s: float) -> float | None:
    """The start the rows' scheduled times sit on `offsets` from (stages.csv's start may trail the schedule's by a
    tick: anchored on the rows' own), or None where they do not: a row past the schedule's end, or one more than
    ON_SCHEDULE_S off it (a schedule not the one the run sent by: another seed or shape than the config's)."""
    if not len(index):
        return stage_start_s
    if index.max() >= len(offsets):
        return None
    offset = times - offsets[index.astype(int)]
    start = float(np.median(offset))
    return start if float(np.abs(offset - start).max()) <= ON_SCHEDULE_S else None


def rate_window(row: dict, scheduled: pd.DataFrame, server: pd.DataFrame, stage: int, rate: float, t0: float,
                t1: float, slos: tuple[Slo, ...], rules: WindowRules, stage_start_s: float | None = None,
                stage_end_s: float | None = None, process: ArrivalProcess | None = None) -> RateWindow:
    """The window of rate stage `stage` of one life: `row` is its summary row (analysis.stage_windows),
    `scheduled` every arrival of the life (`scheduled_requests`); the stage's start and end (default: the
    window's), and its arrival process where known (the schedule the missing arrivals are found against)."""
    start_s = t0 if stage_start_s is None else stage_start_s
    sched_s = _floats(scheduled, "t_scheduled_s")
    mine = window_arrivals(scheduled, stage, t0, t1)
    errors = error_text(mine)
    ok = _succeeded(mine)
    latency = np.column_stack([_floats(mine, c) for c in LATENCY_COLUMNS]) if len(mine) else np.empty((0, 4))
    latency[~ok] = np.nan
    sent = (errors != NOT_SENT_ERROR).to_numpy()
    held_ms = np.nan_to_num(_floats(mine, "held_ms"))
    waited = (_floats(mine, "t_send_s") - _floats(mine, "t_scheduled_s")) * 1000.0   # held, then late
    late = waited - held_ms
    # the user's SLO runs from the scheduled arrival; the latency columns stay the server's, from the send
    meets = slo_meets(from_arrival(latency, waited), ok, slos, _floats(mine, "output_tokens"))
    done_s = _floats(scheduled, "t_done_s")
    queue = queue_finding(sched_s, _floats(scheduled, "t_first_token_s"), done_s, t0, t1, start_s, QUEUE_POINTS)
    counts = outstanding_at(np.array([t0, t1]), sched_s, done_s)
    # missing arrivals: failures in their place in the schedule (none of them sent, met an SLO or was late)
    # found from the stage's start: one lost before the window may still have been due in the achieved rate's span
    lost_in_stage = missing_arrivals(scheduled, stage, start_s, t1 if stage_end_s is None else stage_end_s, rate,
                                     min(start_s, t0), t1, process)
    lost = lost_in_stage[lost_in_stage >= t0]
    order = np.argsort(np.concatenate([_floats(mine, "t_scheduled_s"), lost]), kind="stable")
    n_lost = len(lost)
    latency = np.vstack([latency, np.full((n_lost, latency.shape[1]), np.nan)])[order]
    ok = np.concatenate([ok, np.zeros(n_lost, dtype=bool)])[order]
    meets = np.vstack([meets, np.zeros((n_lost, meets.shape[1]), dtype=bool)])[order]
    served_from = queue.settled_from_s if queue.settled_from_s < t1 else t0
    window = RateWindow(
        k=int(row["k"]), repeat=int(row["repeat"]), stage=stage, rate=rate, duration_s=float(row["duration_s"]),
        latency_ms=latency, ok=ok, good=ok & meets.all(axis=1), meets=meets, late_ms=late[sent],
        held=int((held_ms > 0).sum()), not_sent=int((~sent).sum()), missing=n_lost,
        timeouts=int(errors[~_succeeded(mine)].str.startswith(TIMEOUT_ERROR).sum()),
        # completions, not req_per_s' shares of request lives: a request queued through the window is not served
        achieved_per_s=_served_per_s(scheduled, stage, served_from, t1, (len(mine) + n_lost) / (t1 - t0),
                                     lost_in_stage),
        achieved_span_s=t1 - served_from,
        output_tok_per_s=float(row.get("output_tok_per_s", math.nan)),
        outstanding=(float(counts[0]), float(counts[-1])), growth=queue.judged.change, queue=queue,
        waiting=_waiting(server, t0, t1), has_slo=bool(slos), slo_columns=tuple(slo.column for slo in slos),
        variant=str(row.get("variant", "") or ""),
        server={name: float(row[name]) if row.get(name) is not None else math.nan
                for name in SERVER_SIGNALS if name in row})
    valid, reason = _rate_validity(row, window, rules, _refused(errors[~_succeeded(mine)]))
    return replace(window, valid=valid, invalid_reason=reason)


def _served_per_s(scheduled: pd.DataFrame, stage: int, t0: float, t1: float, offered_per_s: float,
                  lost_s: np.ndarray = np.empty(0)) -> float:
    """The rate this stage's arrivals were served at through [t0, t1], against the offered one: those that
    succeeded and finished inside it (an earlier stage's backlog is not this rate's service), over the arrivals
    that would have finished there in step (this stage's, scheduled one median time in the system earlier, those
    lost with no row, `lost_s`, among them), times the offered rate. So an arrival schedule denser or sparser there
    than in the window does not read as serving more or less than offered; it reads above it only while this
    stage's own backlog drains (served faster than they arrived); without such arrivals, those served per second."""
    if not t1 > t0:
        return math.nan
    mine = _floats(scheduled, "stage") == stage
    done, sched = _floats(scheduled, "t_done_s"), _floats(scheduled, "t_scheduled_s")
    ok = mine & _succeeded(scheduled)
    served = float((ok & (done >= t0) & (done <= t1)).sum())
    in_system = done[ok] - sched[ok]
    lag = float(np.nanmedian(in_system)) if np.isfinite(in_system).any() else math.nan
    due = float((mine & (sched >= t0 - lag) & (sched < t1 - lag)).sum()
                + ((lost_s >= t0 - lag) & (lost_s < t1 - lag)).sum()) if not math.isnan(lag) else 0.0
    return offered_per_s * served / due if due else served / (t1 - t0)


def _refused(errors: pd.Series) -> str:
    """The most common error of the window's failed arrivals where none of them was a queue's doing (a timeout,
    a cut, never sent): a server refusing the requests, not falling behind ("" otherwise)."""
    queued = errors.str.startswith((TIMEOUT_ERROR, CUT_ERROR, NOT_SENT_ERROR))
    if not len(errors) or queued.any():
        return ""
    counts = errors.value_counts()
    return f"{counts.index[0]} ({int(counts.iloc[0])} of {len(errors)})"


def _rate_validity(row: dict, window: RateWindow, rules: WindowRules, refused: str) -> tuple[bool, str]:
    """The closed-loop rules with the arrivals as the window's requests (a K that falls behind completes few of
    them: a finding, not a thin window), none of them succeeding where the server refused them, and the
    dispatcher's lateness."""
    _valid, reason = _validity(row | {"requests": window.arrivals}, rules)
    reasons = [part for part in reason.split("; ") if part]
    if window.arrivals and not window.ok.any() and refused:
        reasons.insert(0, f"no arrival succeeded, most often {refused}")
    late = window.late_percentile_ms(99)
    if not math.isnan(late) and late > rules.max_client_lag_p99_ms:
        reasons.append(f"dispatcher late: requests left p99 {late:.0f} ms after their scheduled time "
                       f"(> {rules.max_client_lag_p99_ms:g} ms); {rules.lag_advice.saturated}")
    return (not reasons), "; ".join(reasons)


def rate_row(row: dict, window: RateWindow, level: float, arrived: pd.DataFrame) -> dict:
    """The summary row of a rate stage: its latency percentiles over its arrivals that succeeded, wherever they
    finished (not over the requests that happened to finish inside it: a K falling behind finishes its fastest
    there), its rate columns, and its validity as a rate window."""
    return (row | _latency_columns(arrived[_succeeded(arrived)]) | window.columns(level)
            | {"valid": window.valid, "invalid_reason": window.invalid_reason})


def rate_stage_window(row: dict, t0: float, stages: pd.DataFrame, requests: pd.DataFrame, server: pd.DataFrame,
                      slos: tuple[Slo, ...], rules: WindowRules, level: float,
                      process: ArrivalProcess | None = None) -> tuple[dict, RateWindow] | None:
    """(the row as a rate window's, its RateWindow) where `row` (analysis.stage_windows') is a rate stage's;
    None for a user stage's. `process`: load's arrival process (the schedule missing arrivals are found in)."""
    if "rate" not in stages:
        return None
    match = stages[pd.to_numeric(stages["stage"], errors="coerce") == int(row["stage"])]
    if match.empty or not is_rate_stage(next(match.itertuples(index=False))):
        return None
    stage = match.iloc[0]
    scheduled, t1 = scheduled_requests(requests), float(stage["t_end_s"])
    window = rate_window(row, scheduled, server, int(row["stage"]), float(stage["rate"]), t0, t1, slos, rules,
                         float(stage["t_start_s"]), t1, process)
    return rate_row(row, window, level, window_arrivals(scheduled, int(row["stage"]), t0, t1)), window
