"""Raw files of one server life -> one summary row per stage (pure pandas, no I/O).

A stage's steady-state window starts `warmup_s` after the stage starts (the ramp transient:
new users' first requests and the batch refilling) and ends with the stage; by default a users stage's starts
no sooner than every user's first request of the stage has ended (users_warmup.py). Latencies and failures
count in the window a request completed in; throughput counts every successful request by the share
of its life inside the window (its tokens by the share of its decode). Server counters are differenced between the last sample at or
before each window edge, so acceptance = delta(accepted) / delta(draft tokens) over the window.
requests.csv holds each request's ITL median and 99th percentile only, so ITL is summarised across
requests: itl_p50_ms is the median of the requests' medians, itl_p99_ms the 99th percentile of the
requests' 99th percentiles (there is no honest ITL p90 to report). TTFT and e2e are per request,
so their p50 / p90 / p99 are plain percentiles over the window's successful requests.

A users stage's window counts the users' requests only, a rate stage's its arrivals only (requests.csv's
t_scheduled_s): a rate stage's backlog finishing in the users stage after it is not those users' work.

Failures are counted over requests that finished in the window ("cut" rows, killed by the end of
a stage or of the test, are neither completions nor failures). Timeouts and length-check failures
are recognised by how the error text starts (records.TIMEOUT_ERROR, records.LENGTH_ERRORS).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .lag_advice import LagAdvice, lag_reason
from .users_warmup import UsersWarmup, users_warmup
from ..contracts.records import ALL_FAILED_REASON, CUT_ERROR, LENGTH_ERRORS, TIMEOUT_ERROR
from ..decision.cells.rate_window import RATE_SUMMARY_COLUMNS
from ..telemetry.drafting import check_window, drafted_per_step, drafting_share, expected_drafts
from ..telemetry.signals import ACCEPTANCE_COUNTERS, counter_signals

SUMMARY_COLUMNS = (
    "setting", "k", "repeat", "stage", "users", "duration_s", "requests", "req_per_s", "output_tok_per_s",
    "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
    "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "failures", "failure_rate", "timeouts", "timeout_rate",
    "length_mismatches", "acceptance_rate", "mean_acceptance_length", "drafted_per_step",
    "drafted_per_step_requests", "drafted_source", "drafted_expected", "in_effect", "running_mean", "running_peak",
    "waiting_mean", "waiting_peak", "kv_usage_mean", "kv_usage_peak", "preemptions", "kv_pool_tokens", "gpu_mem_peak_mib",
    "gpu_mem_total_mib", "client_lag_p99_ms", "client_cpu_pct", "valid", "invalid_reason", "top_error",
) + RATE_SUMMARY_COLUMNS   # a rate stage's (runfolder/rate_windows.py); empty in a user stage's row
NAN = float("nan")


@dataclass(frozen=True)
class WindowRules:
    warmup_s: float = -1.0  # -1: max(2 s, 25% of the stage); a users stage's at least its first cycle (users_warmup.py)
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


def _numbers(values) -> np.ndarray:
    """A column as floats (anything not a number: NaN)."""
    try:
        return np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)


def _pct(series: pd.Series, q: float) -> float:
    values = _numbers(series)
    values = values[~np.isnan(values)]
    return float(np.quantile(values, q)) if len(values) else NAN


def _readings(samples: pd.DataFrame, column: str) -> tuple[np.ndarray, np.ndarray]:
    """(t_s, value) of the samples that have both, in file order."""
    t, values = _numbers(samples["t_s"]), _numbers(samples[column])
    keep = ~np.isnan(t) & ~np.isnan(values)
    return t[keep], values[keep]


def _at_or_before(samples: pd.DataFrame, column: str, t: float) -> float:
    """Counter value at time t: the last sample at or before t (the first one if none)."""
    if samples.empty or column not in samples:
        return NAN
    times, values = _readings(samples, column)
    if not len(times):
        return NAN
    before = np.nonzero(times <= t)[0]
    return float(values[before[-1] if len(before) else 0])


def counter_delta(samples: pd.DataFrame, column: str, t0: float, t1: float) -> float:
    return _at_or_before(samples, column, t1) - _at_or_before(samples, column, t0)


def covering_delta(samples: pd.DataFrame, column: str, t0: float, t1: float) -> float:
    """Counter delta from the last sample at or before t0 to the first at or after t1.

    For ratios of counters (acceptance): a busy server can answer /metrics late, leaving no sample
    inside a short window; the smallest sampled interval covering the window still gives the ratio.
    """
    if samples.empty or column not in samples:
        return NAN
    times, values = _readings(samples, column)
    after = np.nonzero(times >= t1)[0]
    end = float(values[after[0]]) if len(after) else _at_or_before(samples, column, t1)
    return end - _at_or_before(samples, column, t0)


def _nan_if_none(value: float | None) -> float:
    return NAN if value is None else value


@dataclass(frozen=True)
class Drafting:
    """What a life should draft per step (telemetry/drafting.py): K (0: nothing, as a raw-slots life), or the
    schedule's K at the window's real batch ([[lo, hi, K], ...]; K = its largest)."""

    k: int
    schedule: tuple[tuple[int, int, int], ...] = ()
    invalidates: bool = True    # False: the confirmation life's windows, which its judgment checks itself


def _drafting_columns(row: dict, server: pd.DataFrame, t0: float, t1: float, drafting: Drafting | None,
                      sent_from: float = NAN) -> dict:
    """The K expected in the window and whether it was in effect (the reason when not): the counters' drafted tokens
    per step, else the requests' own (drafted_source says which), judged on a schedule at the batches read while
    those requests ran (`sent_from`: the first one's send)."""
    if drafting is None:
        return {"drafted_source": "", "drafted_expected": NAN, "in_effect": True, "not_in_effect": ""}

    def batches_from(start: float) -> list[float]:
        inside = server[(server["t_s"] >= start) & (server["t_s"] <= t1)] if len(server) and "t_s" in server \
            else server
        return pd.to_numeric(inside["running"], errors="coerce").dropna().tolist() if "running" in inside else []

    batches = batches_from(t0)
    expected = expected_drafts(drafting.k, drafting.schedule, batches)
    counters, requests = (None if math.isnan(row[name]) else row[name]
                          for name in ("drafted_per_step", "drafted_per_step_requests"))
    share = drafting_share(*(covering_delta(server, name, t0, t1) for name in
                             ("spec_drafts_total", "generation_tokens_total", "spec_accepted_total")))
    check = check_window(drafting.k, counters, requests, expected, drafting.schedule, share,
                         batches_from(min(t0, sent_from)) if math.isfinite(sent_from) else batches)
    return {"drafted_source": check.source, "drafted_expected": round(expected.value, 3), "in_effect": not check.reason,
            "not_in_effect": check.reason, "not_in_effect_invalidates": drafting.invalidates,
            "drafted_note": check.note}


def _requests_drafted(ok: pd.DataFrame) -> float:
    """Drafted tokens per step from the window's successful requests' own metrics (vLLM 0.32
    --per-request-spec-decode-metrics): sum(num_draft_tokens) / sum(num_spec_steps) over those that carry them;
    NaN where none does, 0 where they do and none drafted (as the counters read)."""
    if not len(ok) or "spec_steps" not in ok or "spec_draft_tokens" not in ok:
        return NAN
    steps, drafted = (pd.to_numeric(ok[name], errors="coerce") for name in ("spec_steps", "spec_draft_tokens"))
    carried = steps.notna() & drafted.notna()
    if not carried.any():
        return NAN
    per_step = drafted_per_step(float(drafted[carried].sum()), float(steps[carried].sum()))
    return 0.0 if per_step is None else per_step


def _server_columns(server: pd.DataFrame, t0: float, t1: float) -> dict:
    inside = server[(server["t_s"] >= t0) & (server["t_s"] <= t1)] if not server.empty else server

    def stat(column: str, how: str) -> float:
        if inside.empty or column not in inside:
            return NAN
        values = _numbers(inside[column])
        values = values[~np.isnan(values)]
        return float(getattr(np, how)(values)) if len(values) else NAN

    deltas = {name: covering_delta(server, name, t0, t1) for name in ACCEPTANCE_COUNTERS}
    spec = counter_signals(deltas)
    drafts = deltas["spec_drafts_total"]  # counters there and no draft made: 0 tokens per step, not unknown
    drafted = spec.drafted_per_step if spec.drafted_per_step is not None or math.isnan(drafts) or drafts else 0.0
    return {
        "acceptance_rate": _nan_if_none(spec.acceptance_rate),
        "mean_acceptance_length": _nan_if_none(spec.mean_acceptance_length),
        "drafted_per_step": _nan_if_none(drafted),
        "running_mean": stat("running", "mean"),
        "running_peak": stat("running", "max"),
        "waiting_mean": stat("waiting", "mean"),
        "waiting_peak": stat("waiting", "max"),
        "kv_usage_mean": stat("kv_usage", "mean"),
        "kv_usage_peak": stat("kv_usage", "max"),
        "preemptions": counter_delta(server, "preemptions_total", t0, t1),
        "kv_pool_tokens": stat("kv_pool_tokens", "min"),
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
    if not row["requests"] and row["failures"]:  # the server refused or failed them all: say with what
        reasons.append(f"{ALL_FAILED_REASON}, most often {row['top_error']}")
    elif row["requests"] < rules.min_requests:
        reasons.append(f"only {row['requests']} requests completed (< {rules.min_requests})")
    lag, cpu = row["client_lag_p99_ms"], row.get("client_cpu_pct", NAN)
    if not math.isnan(lag) and lag > rules.max_client_lag_p99_ms:  # saturated or starved: the cause and its fix
        reasons.append(lag_reason(lag, cpu, rules.max_client_lag_p99_ms, rules.lag_advice))
    elif not math.isnan(cpu) and cpu >= rules.max_client_cpu_pct:
        reasons.append(f"client saturated: Locust's busiest process at {cpu:.0f}% of a core; {rules.lag_advice.saturated}")
    if row.get("first_cycle_too_short"):   # a users stage's first request cycle left less than one to measure
        reasons.append(row["first_cycle_too_short"])
    if row["length_mismatches"]:
        reasons.append(f"{row['length_mismatches']} responses with the wrong token count")
    if row.get("not_in_effect") and row.get("not_in_effect_invalidates"):  # the server ran another setting
        reasons.append(f"not in effect: {row['not_in_effect']}")
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
    column = requests["error"]
    if isinstance(column.dtype, pd.StringDtype):  # text as pandas reads it: "" for a gap, kept in its own storage
        return column.fillna("")
    if column.dtype == object and pd.api.types.infer_dtype(column, skipna=False) == "string":
        return column
    if column.dtype.kind == "f" and column.isna().all():  # no request failed: "" for each, as text
        return pd.Series("", index=column.index, dtype=object)
    return column.astype("string").fillna("").astype("object")


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
    timeouts = int(failed.str.startswith(TIMEOUT_ERROR).sum())
    # Wrong lengths (prompt or output): responses the scenario failed for it, plus any that passed with
    # another output count (a scenario run with a different output length than the plan declares).
    mismatches = int(failed.str.startswith(LENGTH_ERRORS).sum())
    if expected_output_tokens and len(ok):
        mismatches += int((ok["output_tokens"] != expected_output_tokens).sum())
    if expected_prompt_tokens and len(ok) and "prompt_tokens" in ok:
        mismatches += int((pd.to_numeric(ok["prompt_tokens"], errors="coerce") != expected_prompt_tokens).sum())
    total = len(finished)
    return {"failures": int(total - len(ok)), "failure_rate": (1 - len(ok) / total) if total else 0.0,
            "timeouts": timeouts, "timeout_rate": timeouts / total if total else 0.0,
            "length_mismatches": mismatches, "top_error": _top_error(failed, total)}


def error_kind(error: str) -> str:
    """A failed request's error without its own detail: requests.csv holds "reason (detail)" (workload/request.py's
    StreamFailure), and the detail differs per request (a short output's token counts, a timeout's clock), so only
    the reason says which errors are alike. An HTTP error is the server's own words: its status ("HTTP 404")."""
    if error.startswith("HTTP "):
        return error.split(":", 1)[0]
    if error.endswith(")"):
        depth = 0
        for at in range(len(error) - 1, 0, -1):  # the detail's "(" that closes the text
            depth += {")": 1, "(": -1}.get(error[at], 0)
            if depth == 0:
                return error[:at].rstrip() if error[at - 1] == " " else error
    return error


def _top_error(failed: pd.Series, total: int) -> str:
    """The most common kind of error with its count ("HTTP 404: The model ... (27 of 30)"); an HTTP error shows the
    server's message its requests met most often, any other kind its reason alone."""
    if not len(failed):
        return ""
    kinds = failed.map(error_kind)
    counts = kinds.value_counts()
    top = str(counts.index[0])
    shown = str(failed[kinds == top].value_counts().index[0]) if top.startswith("HTTP ") else top
    return f"{shown} ({int(counts.iloc[0])} of {total})"


def _share_inside(start: np.ndarray, end: np.ndarray, t0: float, t1: float) -> np.ndarray:
    """The share of each [start, end] interval that lies inside [t0, t1]."""
    inside = np.maximum(np.minimum(end, t1) - np.maximum(start, t0), 0)
    return inside / np.maximum(end - start, 1e-9)


def _throughput_columns(requests: pd.DataFrame, t0: float, t1: float, duration: float) -> dict:
    """Requests and output tokens served inside the window: every successful request counts by the share of
    its life inside it (its tokens by the share of its decode, first token to last). Counting completions
    instead makes a window a few requests long read a whole wave high or low: users that started together
    with fixed-length outputs finish together."""
    if not len(requests):
        return {"req_per_s": 0.0, "output_tok_per_s": 0.0}
    ok = requests[(requests["ok"] == 1) & (error_text(requests) != CUT_ERROR)]
    ok = ok[(ok["t_send_s"] < t1) & (ok["t_done_s"] > t0)]
    if not len(ok):
        return {"req_per_s": 0.0, "output_tok_per_s": 0.0}
    sent, done = _numbers(ok["t_send_s"]), _numbers(ok["t_done_s"])
    first = _numbers(ok["t_first_token_s"]) if "t_first_token_s" in ok else sent
    first = np.where(np.isnan(first), sent, first)
    tokens = np.nan_to_num(_numbers(ok["output_tokens"]), nan=0.0)
    return {"req_per_s": float(_share_inside(sent, done, t0, t1).sum()) / duration,
            "output_tok_per_s": float((tokens * _share_inside(first, done, t0, t1)).sum()) / duration}


def is_rate_stage(stage) -> bool:
    """A stages.csv row of a rate stage (its rate column set; files before issue 37 have none)."""
    rate = getattr(stage, "rate", None)
    return rate is not None and not (isinstance(rate, float) and math.isnan(rate)) and str(rate) != ""


def is_arrival(requests: pd.DataFrame) -> pd.Series:
    """Per row: a rate stage's arrival (it has a scheduled time), not a user's request."""
    if "t_scheduled_s" not in requests:
        return pd.Series(False, index=requests.index)
    return pd.to_numeric(requests["t_scheduled_s"], errors="coerce").notna()


def stage_windows(requests: pd.DataFrame, stages: pd.DataFrame, server: pd.DataFrame, gpu: pd.DataFrame,
                  setting: str, k: int, repeat: int, rules: WindowRules,
                  variant: str = "", drafting: Drafting | None = None
                  ) -> list[tuple[dict, pd.DataFrame, pd.DataFrame, float]]:
    """Per stage of one server life (of one workload variant's block: its label in the row's "variant"):
    its summary row, the requests that finished in its window, the successful ones among them, and the
    window's start (unix seconds). `drafting`: what the life should draft per step; a window whose counters say
    otherwise is not in effect, and invalid for it (None: not checked)."""
    out = []
    if len(requests) and "error" in requests:
        requests = requests.assign(error=error_text(requests))  # as text once, not once per stage
    arrivals = is_arrival(requests).to_numpy(dtype=bool)   # a rate stage's window counts its arrivals only
    t_done = _numbers(requests["t_done_s"]) if len(requests) else np.empty(0)
    kept = (error_text(requests) != CUT_ERROR).to_numpy(dtype=bool) if len(requests) else np.empty(0, dtype=bool)
    succeeded = kept & (requests["ok"] == 1).to_numpy(dtype=bool) if len(requests) else kept
    sent = _numbers(requests["t_send_s"]) if len(requests) and "t_send_s" in requests else np.full(len(t_done), NAN)
    carried = 0   # users the stage before left running: they are in steady state when the next stage opens
    for stage in stages.itertuples(index=False):
        warmup = None if is_rate_stage(stage) else _users_warmup(stage, rules, sent, t_done, ~arrivals, ~kept, carried)
        carried = 0 if is_rate_stage(stage) else _whole(stage.users)
        t0 = warmup.window_start_s if warmup else stage.t_start_s + rules.warmup_for(stage.t_end_s - stage.t_start_s)
        t1 = stage.t_end_s
        duration = max(t1 - t0, 1e-9)
        mine = arrivals == is_rate_stage(stage)   # and a users stage its users' requests only
        inside = (t_done >= t0) & (t_done <= t1)
        finished = requests[inside & kept & mine] if len(requests) else requests
        ok = requests[inside & succeeded & mine] if len(requests) else requests
        served = requests[succeeded & mine] if len(requests) else requests   # what throughput counts
        row = {
            "setting": setting, "k": k, "repeat": repeat, **({"variant": variant} if variant else {}),
            "stage": int(stage.stage), "users": int(stage.users),
            "duration_s": round(duration, 3), "requests": int(len(ok)),
            **_throughput_columns(served, t0, t1, duration),
            **_latency_columns(ok),
            **_failure_columns(finished, ok, rules.expected_output_tokens, rules.expected_prompt_tokens),
            **_server_columns(server, t0, t1),
            **_gpu_columns(gpu, t0, t1),
            "client_lag_p99_ms": _pct(ok.get("lag_p99_ms", pd.Series(dtype=float)), 0.99),
            "client_cpu_pct": _client_cpu(ok),
            "drafted_per_step_requests": _requests_drafted(ok),
        }
        row |= _drafting_columns(row, server, t0, t1, drafting,
                                 float(_numbers(ok["t_send_s"]).min()) if len(ok) and "t_send_s" in ok else NAN)
        row["first_cycle_too_short"] = warmup.too_short if warmup else ""   # not a summary column: invalid_reason's
        row["valid"], row["invalid_reason"] = _validity(row, rules)
        out.append((row, finished, ok, t0))
    return out


def _whole(value) -> int:
    """A stage's users as a whole count (0 where stages.csv left it blank)."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


def _users_warmup(stage, rules: WindowRules, sent: np.ndarray, done: np.ndarray, users_requests: np.ndarray,
                  cut: np.ndarray, carried: int) -> UsersWarmup:
    """A users stage's warm-up (users_warmup.py) from its users' requests sent in it, `carried` of its users
    running since the stage before (only the new ones start a first cycle); an explicit one as set."""
    stage_s = stage.t_end_s - stage.t_start_s
    if rules.warmup_s >= 0:
        return UsersWarmup(stage.t_start_s + rules.warmup_for(stage_s), NAN)
    in_stage = users_requests & (sent >= stage.t_start_s) & (sent < stage.t_end_s)
    return users_warmup(stage.t_start_s, stage.t_end_s, rules.warmup_for(stage_s), _whole(stage.users) - carried,
                        sent[in_stage], done[in_stage], cut[in_stage])


def stage_rows(requests: pd.DataFrame, stages: pd.DataFrame, server: pd.DataFrame, gpu: pd.DataFrame,
               setting: str, k: int, repeat: int, rules: WindowRules, drafting: Drafting | None = None) -> list[dict]:
    """One summary row per stage of one server life."""
    return [row for row, *_ in stage_windows(requests, stages, server, gpu, setting, k, repeat, rules, "", drafting)]


def summary_frame(rows: list[dict]) -> pd.DataFrame:
    """The rows in (K, repeat, stage) order; with workload variants, a "variant" column after "repeat" and the
    variants' blocks in their order ("variant_order", not kept)."""
    if not any("variant" in row for row in rows):
        frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
        return frame.sort_values(["k", "repeat", "stage"], kind="stable").reset_index(drop=True)
    columns = list(SUMMARY_COLUMNS)
    columns.insert(columns.index("stage"), "variant")
    frame = pd.DataFrame(rows, columns=columns + ["variant_order"])
    frame = frame.sort_values(["k", "repeat", "variant_order", "stage"], kind="stable").reset_index(drop=True)
    return frame.drop(columns="variant_order")


def block_token_check(requests: pd.DataFrame, server: pd.DataFrame, block: dict | None) -> dict:
    """life_token_check over one workload variant's block: its requests against the server's counter from the
    last sample at or before the block started to the first at or after it ended (both taken by the life)."""
    if not block or server.empty or "t_s" not in server:
        return life_token_check(requests, server.iloc[0:0])
    t = pd.to_numeric(server["t_s"], errors="coerce")
    before, after = t[t <= block["t_start_s"]], t[t >= block["t_end_s"]]
    if before.empty or after.empty:
        return life_token_check(requests, server.iloc[0:0])
    return life_token_check(requests, server[(t >= before.max()) & (t <= after.min())])


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
