"""The live tabs' tables and CSV downloads, from `LiveValues` (pure; display strings and unit-bearing columns).

"vLLM live" shows `now_rows(values)` of the last tick (in a rate stage, its rates and outstanding requests too),
"vLLM history" one `history_tab_row` per second (newest first, the last minute); the CSV downloads carry the
same values as numbers (`history_row`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from dataclasses import fields

from lookahead_runner.live.values import LIVE_WINDOW_S, LiveValues, stage_text
from lookahead_runner.vllm.metrics import SIGNALS


def _series(signal: str) -> str:
    """The series a signal is read from, newest name first (older vLLMs carry the later ones)."""
    return " or ".join(SIGNALS[signal])

HISTORY_TAB_ROWS = 60  # the history tab shows the last minute; the CSV has it all


def _num(value: float | None, digits: int = 0, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:,.{digits}f}{suffix}"


def _pair(a: float | None, b: float | None, digits: int, suffix: str) -> str:
    if a is None and b is None:
        return "–"
    return f"{_num(a, digits)} / {_num(b, digits)}{suffix}"


def _window() -> str:
    return f"last {LIVE_WINDOW_S:g} s"


def now_rows(values: LiveValues) -> list[dict[str, str]]:
    """The live tab's rows: {signal, value, meaning}."""
    v = values
    spec_missing = v.acceptance_rate is None and v.mean_acceptance_length is None
    gpu = (f"{_num(v.gpu_used_mib)} / {_num(v.gpu_total_mib)} MiB"
           + (f" ({100 * v.gpu_used_mib / v.gpu_total_mib:.1f} %)" if v.gpu_used_mib and v.gpu_total_mib else "")
           if v.gpu_used_mib is not None else f"n/a{f' ({v.gpu_note})' if v.gpu_note else ''}")
    if v.metrics_error:
        scrape = f"failing: {v.metrics_error}"
    elif v.metrics_age_s is None:
        scrape = "no scrape yet"
    else:
        scrape = f"ok, {v.metrics_age_s:.1f} s ago"
    rows = [
        ("Setting", v.setting or "(not given)",
         "the server setting under test (--setting-name; the runner passes K/repeat)"),
        ("Stage", stage_text(v.stage), "the --stages schedule: stage, target users, seconds into it"),
        ("Acceptance rate", _num(None if v.acceptance_rate is None else 100 * v.acceptance_rate, 1, " %"),
         f"accepted / drafted tokens, {_window()}" + (" (no drafts seen: K = 0 or idle)" if spec_missing else "")),
        ("Mean acceptance length", _num(v.mean_acceptance_length, 2),
         f"1 + accepted tokens / drafts: tokens per sequence per step, {_window()}"),
        ("Drafted tokens per step", _num(v.drafted_per_step, 2),
         f"draft tokens / drafts: the K the server really drafts (the setting's K, or the schedule's at this "
         f"batch; otherwise it is not in effect), {_window()}"),
        ("Real batch (running / waiting)", _pair(v.running, v.waiting, 0, ""),
         f"{_series('running')} / {_series('waiting')}, now"),
        ("KV cache usage", _num(None if v.kv_usage is None else 100 * v.kv_usage, 1, " %"),
         f"{_series('kv_usage')}, now"),
        ("Preemptions", f"{_num(v.preemptions_total)} (+{_num(v.preemptions_in_window)} in {_window()})"
         if v.preemptions_total is not None else "–", f"{_series('preemptions_total')}: requests evicted for KV space"),
        ("Generation throughput", _num(v.generation_tokens_per_s, 0, " tok/s"),
         f"delta({_series('generation_tokens_total')}) / seconds, {_window()}"),
        ("GPU memory", gpu, "used / total over the visible GPUs (NVML, or the simulator's reading)"),
        ("TTFT p50 / p99", _pair(v.ttft_p50_ms, v.ttft_p99_ms, 0, " ms"),
         f"time to first token of the requests finished in the {_window()} (client side)"),
        ("ITL p50 / p99", _pair(v.itl_p50_ms, v.itl_p99_ms, 1, " ms"),
         f"median of per-request median ITLs / p99 of per-request p99 ITLs, {_window()}"),
        ("Requests (ok / failed)", _pair(v.requests_ok, v.requests_failed, 0, ""),
         f"finished in the {_window()}, all Locust processes"),
        ("Server /metrics", scrape, "scraped once a second by this Locust process (the master when distributed)"),
    ]
    if v.stage.rate is not None:  # open loop: does the server follow the rate, and where the queue is
        rows[2:2] = [
            ("Rate (offered / achieved)", _pair(v.offered_per_s, v.achieved_per_s, 1, " req/s"),
             f"arrivals due by the schedule / arrivals that succeeded (as they finish), per second, {_window()}"),
            ("Outstanding requests", _num(v.outstanding),
             "arrived by the schedule and not finished (client side; the server's own queue: Real batch's waiting)"),
        ]
    return [{"signal": s, "value": value, "meaning": meaning} for s, value, meaning in rows]


NOW_COLUMNS = (("signal", "Signal"), ("value", "Value"), ("meaning", "Meaning"))

HISTORY_COLUMNS = (
    ("t_s", "Time (unix s)"), ("setting", "Setting"), ("stage", "Stage"), ("users", "Users"), ("variant", "Variant"),
    ("locust_users", "Locust users"),
    ("acceptance_rate", "Acceptance rate"), ("mean_acceptance_length", "Mean acceptance length"),
    ("drafted_per_step", "Drafted tokens per step"),
    ("running", "Running"), ("waiting", "Waiting"), ("kv_usage", "KV usage"),
    ("preemptions_total", "Preemptions"), ("generation_tokens_per_s", "Gen tok/s"),
    ("gpu_used_mib", "GPU used MiB"), ("gpu_total_mib", "GPU total MiB"),
    ("ttft_p50_ms", "TTFT p50 ms"), ("ttft_p99_ms", "TTFT p99 ms"),
    ("itl_p50_ms", "ITL p50 ms"), ("itl_p99_ms", "ITL p99 ms"),
    ("requests_ok", "Requests ok"), ("requests_failed", "Requests failed"),
    ("offered_per_s", "Offered req/s"), ("achieved_per_s", "Achieved req/s"), ("outstanding", "Outstanding"),
)

_ROUNDING = {"acceptance_rate": 4, "mean_acceptance_length": 3, "drafted_per_step": 3, "kv_usage": 4, "t_s": 1}


def history_row(values: LiveValues) -> dict[str, str]:
    """One tick as strings: unit-bearing column keys (the CSV header), empty where unknown."""
    raw = {f.name: getattr(values, f.name) for f in fields(values) if f.name != "stage"}
    raw |= {"stage": values.stage.index, "users": values.stage.users if values.stage.index is not None else None,
            "variant": values.stage.variant or None}
    row = {}
    for key, _title in HISTORY_COLUMNS:
        value = raw.get(key)
        if value is None or (isinstance(value, float) and math.isnan(value)):
            row[key] = ""
        elif isinstance(value, float):
            row[key] = f"{value:.{_ROUNDING.get(key, 2)}f}"
        else:
            row[key] = str(value)
    return row


def csv_text(columns: Sequence[str], rows: Iterable[dict[str, str]]) -> str:
    """CSV with a header of `columns` (the dict keys, as the files under reports/ name their columns)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()


HISTORY_TAB_COLUMNS = (
    ("time", "Time"), ("stage", "Stage (users)"), ("acceptance", "Acceptance"), ("length", "Mean acc. length"),
    ("drafted", "Drafted / step"), ("batch", "Running / waiting"), ("kv", "KV usage"), ("preemptions", "Preemptions"),
    ("throughput", "Gen tok/s"), ("gpu", "GPU MiB"), ("ttft", "TTFT p50 / p99 ms"), ("itl", "ITL p50 / p99 ms"),
    ("rate", "Offered / achieved req/s"),
)


def history_tab_row(values: LiveValues, clock: str) -> dict[str, str]:
    """One tick for the history tab (display strings); `clock` is the tick's local time, e.g. "12:03:04"."""
    v = values
    stage = "–" if v.stage.index is None else f"{v.stage.index + 1} ({v.stage.users if v.stage.rate is None else v.stage.load})" + (
        f" · {v.stage.variant}" if v.stage.variant else "")
    return {
        "time": clock, "stage": stage,
        "acceptance": _num(None if v.acceptance_rate is None else 100 * v.acceptance_rate, 1, " %"),
        "length": _num(v.mean_acceptance_length, 2), "drafted": _num(v.drafted_per_step, 2),
        "batch": _pair(v.running, v.waiting, 0, ""),
        "kv": _num(None if v.kv_usage is None else 100 * v.kv_usage, 1, " %"), "preemptions": _num(v.preemptions_total),
        "throughput": _num(v.generation_tokens_per_s), "gpu": _num(v.gpu_used_mib),
        "ttft": _pair(v.ttft_p50_ms, v.ttft_p99_ms, 0, ""), "itl": _pair(v.itl_p50_ms, v.itl_p99_ms, 1, ""),
        "rate": _pair(v.offered_per_s, v.achieved_per_s, 1, ""),
    }
