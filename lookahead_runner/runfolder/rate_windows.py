"""A rate stage's window from a life's frames (pure pandas): its `RateWindow` (decision/cells/rate_window.py)
and the summary row's rate columns and validity.

The window is the stage's steady part as a user stage's is ([start + warmup, end], analysis.py); its arrivals
are the requests scheduled inside it (requests.csv's t_scheduled_s), followed to their end wherever that is.
Its validity: the closed-loop rules (analysis._validity) with the arrivals as its requests, plus the
dispatcher's lateness, judged against decision.max_client_lag_p99_ms as the client's loop lag is. Falling
behind the offered rate is a finding (the row's `behind`), never a reason to drop the window.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd

from ..config.slo import Slo
from ..contracts.records import CUT_ERROR, NOT_SENT_ERROR, TIMEOUT_ERROR
from ..decision.cells.evidence import LATENCY_COLUMNS, SERVER_SIGNALS
from ..decision.cells.rate_window import RateWindow, growth_through, met_every_slo, outstanding_at
from .analysis import WindowRules, _latency_columns, _validity, error_text, is_arrival, is_rate_stage

QUEUE_POINTS = 21   # times across the window at which the outstanding requests are counted


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


def rate_window(row: dict, scheduled: pd.DataFrame, server: pd.DataFrame, stage: int, rate: float, t0: float,
                t1: float, slos: tuple[Slo, ...], rules: WindowRules) -> RateWindow:
    """The window of rate stage `stage` of one life: `row` is its summary row (analysis.stage_windows),
    `scheduled` every arrival of the life (`scheduled_requests`)."""
    sched_s = _floats(scheduled, "t_scheduled_s")
    mine = window_arrivals(scheduled, stage, t0, t1)
    errors = error_text(mine)
    ok = (_floats(mine, "ok") == 1) & (errors != CUT_ERROR).to_numpy()
    latency = np.column_stack([_floats(mine, c) for c in LATENCY_COLUMNS]) if len(mine) else np.empty((0, 4))
    latency[~ok] = np.nan
    sent = (errors != NOT_SENT_ERROR).to_numpy()
    held_ms = np.nan_to_num(_floats(mine, "held_ms"))
    late = (_floats(mine, "t_send_s") - _floats(mine, "t_scheduled_s")) * 1000.0 - held_ms
    times = np.linspace(t0, t1, QUEUE_POINTS)
    counts = outstanding_at(times, sched_s, _floats(scheduled, "t_done_s"))
    window = RateWindow(
        k=int(row["k"]), repeat=int(row["repeat"]), stage=stage, rate=rate, duration_s=float(row["duration_s"]),
        latency_ms=latency, ok=ok, good=met_every_slo(latency, ok, slos), late_ms=late[sent],
        held=int((held_ms > 0).sum()), not_sent=int((~sent).sum()),
        timeouts=int(errors[~ok].str.startswith(TIMEOUT_ERROR).sum()),
        # completions, not req_per_s' shares of request lives: a request queued through the window is not served
        achieved_per_s=int(row["requests"]) / float(row["duration_s"]) if float(row["duration_s"]) > 0 else math.nan,
        output_tok_per_s=float(row.get("output_tok_per_s", math.nan)),
        outstanding=(float(counts[0]), float(counts[-1])), growth=growth_through(times, counts),
        waiting=_waiting(server, t0, t1), has_slo=bool(slos), variant=str(row.get("variant", "") or ""),
        server={name: float(row[name]) if row.get(name) is not None else math.nan
                for name in SERVER_SIGNALS if name in row})
    valid, reason = _rate_validity(row, window, rules, _refused(errors[~ok]))
    return replace(window, valid=valid, invalid_reason=reason)


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
    return (row | _latency_columns(arrived[window.ok]) | window.columns(level)
            | {"valid": window.valid, "invalid_reason": window.invalid_reason})


def rate_stage_window(row: dict, t0: float, stages: pd.DataFrame, requests: pd.DataFrame, server: pd.DataFrame,
                      slos: tuple[Slo, ...], rules: WindowRules, level: float) -> tuple[dict, RateWindow] | None:
    """(the row as a rate window's, its RateWindow) where `row` (analysis.stage_windows') is a rate stage's;
    None for a user stage's."""
    if "rate" not in stages:
        return None
    match = stages[pd.to_numeric(stages["stage"], errors="coerce") == int(row["stage"])]
    if match.empty or not is_rate_stage(next(match.itertuples(index=False))):
        return None
    stage = match.iloc[0]
    scheduled, t1 = scheduled_requests(requests), float(stage["t_end_s"])
    window = rate_window(row, scheduled, server, int(row["stage"]), float(stage["rate"]), t0, t1, slos, rules)
    return rate_row(row, window, level, window_arrivals(scheduled, int(row["stage"]), t0, t1)), window
