"""How values are shown in the report: one text per cell, units in the column names."""

from __future__ import annotations

import math
from urllib.parse import quote

import pandas as pd

from ..config.masking import shell_join

INTEGER_COLUMNS = {"k", "repeat", "stage", "users", "requests", "failures", "timeouts", "length_mismatches",
                   "preemptions", "gpu_mem_peak_mib", "gpu_mem_total_mib", "client_output_tokens",
                   "server_generation_tokens", "cut_requests", "arrivals", "held", "not_sent", "missing",
                   "outstanding_start", "outstanding_end", "waiting_start", "waiting_end"}
PERCENT_COLUMNS = {"failure_rate", "timeout_rate", "acceptance_rate", "kv_usage_mean", "kv_usage_peak",
                   "slo_attainment", "slo_attainment_low", "slo_attainment_high"}
ONE_DECIMAL_COLUMNS = {"duration_s", "ttft_p50_ms", "ttft_p90_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms",
                       "e2e_p50_ms", "e2e_p90_ms", "e2e_p99_ms", "output_tok_per_s", "tok_per_s", "running_mean",
                       "running_peak", "waiting_mean", "waiting_peak", "client_lag_p99_ms", "late_p50_ms",
                       "late_p99_ms"}
TWO_DECIMAL_COLUMNS = {"req_per_s", "conservative_req_per_s", "mean_acceptance_length", "drafted_per_step",
                       "drafted_per_step_requests", "drafted_expected", "rate", "offered_per_s", "achieved_per_s",
                       "goodput_per_s"}
NUMERIC_COLUMNS = INTEGER_COLUMNS | PERCENT_COLUMNS | ONE_DECIMAL_COLUMNS | TWO_DECIMAL_COLUMNS
_TRUE_TEXT = {"true", "1", "yes", "y", "t"}
MISSING = "–"


def is_missing(value: object) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def format_cell(name: str, value: object) -> str:
    if is_missing(value):
        return MISSING
    if name in ("valid", "in_effect"):
        return "yes" if as_bool(value) else "no"
    if name not in NUMERIC_COLUMNS:
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return MISSING
    if name in INTEGER_COLUMNS:
        return f"{number:,.0f}"
    if name in PERCENT_COLUMNS:
        return f"{number * 100:.1f}%"
    return f"{number:,.1f}" if name in ONE_DECIMAL_COLUMNS else f"{number:,.2f}"


def as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_TEXT
    if is_missing(value):
        return False
    return bool(value)


def shell_text(argv: object) -> str:
    """A paste-ready command line: every argument quoted for a POSIX shell, each secret read from the
    shell's environment (`--api-key "$VLLM_API_KEY"`) where the recorded argv holds `${VLLM_API_KEY}`."""
    if not isinstance(argv, (list, tuple)):
        return "" if argv is None else str(argv)
    return shell_join(argv)


def relative_href(path: object) -> str:
    """A relative link: percent-encoding ':' keeps any scheme ('javascript:', 'http:') from surviving."""
    return quote(str(path).replace("\\", "/"), safe="/")
