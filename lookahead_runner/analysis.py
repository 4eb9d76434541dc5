"""Raw files of one server life -> one summary row per stage (pure pandas, no I/O).

A stage's steady-state window starts `warmup_s` after the stage starts (the ramp transient:
new users' first requests and the batch refilling) and ends with the stage. Requests count in
the window they completed in. Server counters are differenced between the last sample at or
before each window edge, so acceptance = delta(accepted) / delta(draft tokens) over the window.
requests.csv holds each request's ITL median and 99th percentile only, so ITL is summarised across
requests: itl_p50_ms is the median of the requests' medians, itl_p99_ms the 99th percentile of the
requests' 99th percentiles (there is no honest ITL p90 to report). TTFT and e2e are per request,
so their p50 / p90 / p99 are plain percentiles over the window's successful requests.

Failures are counted over requests that finished in the window ("cut" rows, killed by the end of
a stage or of the test, are neither completions nor failures). Timeouts and length-check failures
are recognised by the error text the scenario writes (lookahead_runner/workload/user.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from .placement import LagAdvice, lag_reason
from .records import CUT_ERROR

SUMMARY_COLUMNS = (
    "setting", "k", "repeat", "stage", "users", "duration_s", "requests", "req_per_s", "output_tok_per_s",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
    "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "failures", "failure_rate", "timeouts", "timeout_rate",
    "length_mismatches", "acceptance_rate", "mean_acceptance_length", "running_mean", "running_peak",
    "waiting_mean", "waiting_peak", "kv_usage_mean", "kv_usage_peak", "preemptions", "gpu_mem_peak_mib",
    "gpu_mem_total_mib", "client_lag_p99_ms", "client_cpu_pct", "valid", "invalid_reason",
)
NAN = float("nan")
# The error texts requests.csv carries (workload/request.py StreamFailure, workload/timeline.py judge):
# "timeout (TimeoutError)" or "timeout (over 120 s)"; "short output (completion_tokens != 64) (...)" and
# "wrong prompt length (prompt_tokens != 128) (...)". The runner side never imports the scenario side,
# so they are repeated here and pinned by tests/unit/test_analysis.py.
TIMEOUT_ERROR_PREFIX = "timeout"
LENGTH_ERROR_PREFIXES = ("short output", "wrong prompt length")


@dataclass(frozen=True)
class WindowRules:
    warmup_s: float = -1.0  # -1: max(2 s, 25% of the stage)
    min_requests: int = 10
    max_client_lag_p99_ms: float = 50.0
    max_client_cpu_pct: float = 90.0
    expected_output_tokens: int = 0
    expected_prompt_tokens: int = 0
    lag_advice: LagAdvice = LagAdvice()  # the fixes a lagging client's reason names (this run's placement)

    def warmup_for(self, stage_s: float) -> float:
        if self.warmup_s >= 0:
            return min(self.warmup_s, stage_s * 0.9)
        return min(max(2.0, 0.25 * stage_s), stage_s * 0.5)


def _pct(series: pd.Series, q: float) -> float:
    series = pd.to_numeric(series, errors="coerce").dropna()
    return float(series.quantile(q)) if len(series) else NAN


def _at_or_before(samples: pd.DataFrame, column: str, t: float) -> float:
    """Counter value at time t: the last sample at or before t (the first one if none)."""
    if samples.empty or column not in samples:
        return NAN
    frame = samples[["t_s", column]].dropna()
    if frame.empty:
        return NAN
    before = frame[frame["t_s"] <= t]
    row = before.iloc[-1] if len(before) else frame.iloc[0]
    return float(row[column])


def counter_delta(samples: pd.DataFrame, column: str, t0: float, t1: float) -> float:
    return _at_or_before(samples, column, t1) - _at_or_before(samples, column, t0)


def covering_delta(samples: pd.DataFrame, column: str, t0: float, t1: float) -> float:
    """Counter delta from the last sample at or before t0 to the first at or after t1.

    For ratios of counters (acceptance): a busy server can answer /metrics late, leaving no sample
    inside a short window; the smallest sampled interval covering the window still gives the ratio.
    """
    if samples.empty or column not in samples:
        return NAN
    frame = samples[["t_s", column]].dropna()
    after = frame[frame["t_s"] >= t1]
    end = float(after.iloc[0][column]) if len(after) else _at_or_before(samples, column, t1)
    return end - _at_or_before(samples, column, t0)


def _ratio(num: float, den: float) -> float:
    return num / den if den and not math.isnan(den) and not math.isnan(num) and den > 0 else NAN


def _server_columns(server: pd.DataFrame, t0: float, t1: float) -> dict:
    inside = server[(server["t_s"] >= t0) & (server["t_s"] <= t1)] if not server.empty else server

    def stat(column: str, how: str) -> float:
        if inside.empty or column not in inside:
            return NAN
        values = pd.to_numeric(inside[column], errors="coerce").dropna()
        return float(getattr(values, how)()) if len(values) else NAN

    accepted = covering_delta(server, "spec_accepted_total", t0, t1)
    drafted = covering_delta(server, "spec_draft_tokens_total", t0, t1)
    drafts = covering_delta(server, "spec_drafts_total", t0, t1)
    return {
        "acceptance_rate": _ratio(accepted, drafted),
        "mean_acceptance_length": 1 + _ratio(accepted, drafts) if not math.isnan(_ratio(accepted, drafts)) else NAN,
        "running_mean": stat("running", "mean"),
        "running_peak": stat("running", "max"),
        "waiting_mean": stat("waiting", "mean"),
        "waiting_peak": stat("waiting", "max"),
        "kv_usage_mean": stat("kv_usage", "mean"),
        "kv_usage_peak": stat("kv_usage", "max"),
        "preemptions": counter_delta(server, "preemptions_total", t0, t1),
    }


def _gpu_columns(gpu: pd.DataFrame, t0: float, t1: float) -> dict:
    if gpu.empty:
        return {"gpu_mem_peak_mib": NAN, "gpu_mem_total_mib": NAN}
    inside = gpu[(gpu["t_s"] >= t0) & (gpu["t_s"] <= t1)]
    return {
        "gpu_mem_peak_mib": float(inside["used_mib"].max()) if len(inside) else NAN,
        "gpu_mem_total_mib": float(gpu["total_mib"].max()),
    }


def _validity(row: dict, rules: WindowRules) -> tuple[bool, str]:
    reasons = []
    if row["requests"] < rules.min_requests:
        reasons.append(f"only {row['requests']} requests completed (< {rules.min_requests})")
    lag, cpu = row["client_lag_p99_ms"], row.get("client_cpu_pct", NAN)
    if not math.isnan(lag) and lag > rules.max_client_lag_p99_ms:  # saturated or starved: the cause and its fix
        reasons.append(lag_reason(lag, cpu, rules.max_client_lag_p99_ms, rules.lag_advice))
    elif not math.isnan(cpu) and cpu >= rules.max_client_cpu_pct:
        reasons.append(f"client saturated: Locust's busiest process at {cpu:.0f}% of a core; {rules.lag_advice.saturated}")
    if row["length_mismatches"]:
        reasons.append(f"{row['length_mismatches']} responses with the wrong token count")
    return (not reasons), "; ".join(reasons)


def _client_cpu(ok: pd.DataFrame) -> float:
    """The busiest Locust process's median CPU (% of a core) over the window's requests."""
    if "client_cpu_pct" not in ok or not len(ok):
        return NAN
    cpu = pd.to_numeric(ok["client_cpu_pct"], errors="coerce")
    by_process = cpu.groupby(ok["client"] if "client" in ok else 0).median().dropna()
    return float(by_process.max()) if len(by_process) else NAN


def error_text(requests: pd.DataFrame) -> pd.Series:
    """The error column as text, "" for none: a file where no request failed reads back as all-NaN floats."""
    if "error" not in requests.columns:
        return pd.Series("", index=requests.index, dtype="object")
    return requests["error"].astype("string").fillna("").astype("object")


def _latency_columns(ok: pd.DataFrame) -> dict:
    empty = pd.Series(dtype=float)
    ttft, e2e = ok.get("ttft_ms", empty), ok.get("e2e_ms", empty)
    itl_median, itl_tail = ok.get("itl_p50_ms", empty), ok.get("itl_p99_ms", empty)
    return {
        "ttft_p50_ms": _pct(ttft, 0.5), "ttft_p90_ms": _pct(ttft, 0.9), "ttft_p99_ms": _pct(ttft, 0.99),
        "itl_p50_ms": _pct(itl_median, 0.5), "itl_p99_ms": _pct(itl_tail, 0.99),
        "e2e_p50_ms": _pct(e2e, 0.5), "e2e_p90_ms": _pct(e2e, 0.9), "e2e_p99_ms": _pct(e2e, 0.99),
    }


def _failure_columns(finished: pd.DataFrame, ok: pd.DataFrame, expected_output_tokens: int,
                     expected_prompt_tokens: int = 0) -> dict:
    errors = error_text(finished)
    failed = errors[finished["ok"] != 1] if len(finished) else errors
    timeouts = int(failed.str.startswith(TIMEOUT_ERROR_PREFIX).sum())
    # Wrong lengths (prompt or output): responses the scenario failed for it, plus any that passed with
    # another output count (a scenario run with a different output length than the plan declares).
    mismatches = int(failed.str.startswith(LENGTH_ERROR_PREFIXES).sum())
    if expected_output_tokens and len(ok):
        mismatches += int((ok["output_tokens"] != expected_output_tokens).sum())
    if expected_prompt_tokens and len(ok) and "prompt_tokens" in ok:
        mismatches += int((pd.to_numeric(ok["prompt_tokens"], errors="coerce") != expected_prompt_tokens).sum())
    total = len(finished)
    return {"failures": int(total - len(ok)), "failure_rate": (1 - len(ok) / total) if total else 0.0,
            "timeouts": timeouts, "timeout_rate": timeouts / total if total else 0.0,
            "length_mismatches": mismatches}


def stage_rows(requests: pd.DataFrame, stages: pd.DataFrame, server: pd.DataFrame, gpu: pd.DataFrame,
               setting: str, k: int, repeat: int, rules: WindowRules) -> list[dict]:
    """One summary row per stage of one server life."""
    rows = []
    for stage in stages.itertuples(index=False):
        t0 = stage.t_start_s + rules.warmup_for(stage.t_end_s - stage.t_start_s)
        t1 = stage.t_end_s
        duration = max(t1 - t0, 1e-9)
        done = requests[(requests["t_done_s"] >= t0) & (requests["t_done_s"] <= t1)] if len(requests) else requests
        finished = done[error_text(done) != CUT_ERROR] if len(done) else done
        ok = finished[finished["ok"] == 1] if len(finished) else finished
        row = {
            "setting": setting, "k": k, "repeat": repeat, "stage": int(stage.stage), "users": int(stage.users),
            "duration_s": round(duration, 3), "requests": int(len(ok)),
            "req_per_s": len(ok) / duration,
            "output_tok_per_s": float(ok["output_tokens"].sum()) / duration if len(ok) else 0.0,
            **_latency_columns(ok),
            **_failure_columns(finished, ok, rules.expected_output_tokens, rules.expected_prompt_tokens),
            **_server_columns(server, t0, t1),
            **_gpu_columns(gpu, t0, t1),
            "client_lag_p99_ms": _pct(ok.get("lag_p99_ms", pd.Series(dtype=float)), 0.99),
            "client_cpu_pct": _client_cpu(ok),
        }
        row["valid"], row["invalid_reason"] = _validity(row, rules)
        rows.append(row)
    return rows


def summary_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    return frame.sort_values(["k", "repeat", "stage"], kind="stable").reset_index(drop=True)


def life_token_check(requests: pd.DataFrame, server: pd.DataFrame) -> dict:
    """Client-counted output tokens vs the server's generation-token counter over the whole life.

    The sampler's first sample is taken before Locust starts and its last after Locust exits,
    so the window is closed: with no request cut mid-stream the two must be equal.
    """
    client = int(pd.to_numeric(requests.get("output_tokens", pd.Series(dtype=float)), errors="coerce").fillna(0).sum())
    cut = int((error_text(requests) == CUT_ERROR).sum())
    column = server.get("generation_tokens_total", pd.Series(dtype=float)).dropna() if len(server) else pd.Series()
    served = int(column.iloc[-1] - column.iloc[0]) if len(column) >= 2 else None
    return {"client_output_tokens": client, "server_generation_tokens": served, "cut_requests": cut,
            "difference": None if served is None else served - client}
