"""The report's view-model: plain dicts and strings built from summary, decision, plan and timelines.

Pure: no files, no clock. Strings stay raw here; the template escapes them (autoescape), and figure JSON is
made script-safe in charts.figure_entry.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Mapping
from urllib.parse import quote

import pandas as pd

from .. import __version__
from .charts import column, setting_styles, summary_charts
from .timelines import timeline_entries

SUMMARY_COLUMNS = (
    "setting", "k", "repeat", "stage", "users", "duration_s", "requests", "req_per_s", "output_tok_per_s",
    "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms", "e2e_p99_ms", "failure_rate",
    "acceptance_rate", "mean_acceptance_length", "running_mean", "running_peak", "waiting_mean",
    "kv_usage_mean", "kv_usage_peak", "preemptions", "gpu_mem_peak_mib", "gpu_mem_total_mib",
    "client_lag_p99_ms", "valid", "invalid_reason",
)
# How each summary column is shown; columns not listed are shown as text.
_INTEGER = {"k", "repeat", "stage", "users", "requests", "preemptions", "gpu_mem_peak_mib", "gpu_mem_total_mib"}
_PERCENT = {"failure_rate", "acceptance_rate", "kv_usage_mean", "kv_usage_peak"}
_ONE_DECIMAL = {"duration_s", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms", "e2e_p50_ms",
                "e2e_p99_ms", "output_tok_per_s", "running_mean", "running_peak", "waiting_mean",
                "client_lag_p99_ms"}
_TWO_DECIMALS = {"req_per_s", "mean_acceptance_length"}
_NUMERIC = _INTEGER | _PERCENT | _ONE_DECIMAL | _TWO_DECIMALS
_IDENTITY = ("setting", "k", "repeat", "stage", "users")
_TRUE_TEXT = {"true", "1", "yes", "y", "t"}
# What a life folder normally holds (design.md); a failed life may lack some of them.
LIFE_FILES = ("server.log", "server.json", "status.json", "requests.csv", "stages.csv", "gpu.csv",
              "server_metrics.csv")
RUN_FILES = ("summary.csv", "decision.json", "plan.json")
MISSING = "–"


def format_cell(name: str, value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return MISSING
    if name == "valid":
        return "yes" if as_bool(value) else "no"
    if name not in _NUMERIC:
        return str(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return MISSING
    if name in _INTEGER:
        return f"{number:,.0f}"
    if name in _PERCENT:
        return f"{number * 100:.1f}%"
    return f"{number:,.1f}" if name in _ONE_DECIMAL else f"{number:,.2f}"


def as_bool(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_TEXT
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return False
    return bool(value)


def valid_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows the analysis marked valid; a summary without the column is taken as all valid."""
    if "valid" not in summary.columns:
        return summary
    return summary[summary["valid"].map(as_bool).astype(bool)]


def shell_text(argv: object) -> str:
    if not isinstance(argv, (list, tuple)):
        return "" if argv is None else str(argv)
    return shlex.join(str(part) for part in argv)


def relative_href(path: object) -> str:
    """A relative link: percent-encoding ':' keeps any scheme ('javascript:', 'http:') from surviving."""
    return quote(str(path).replace("\\", "/"), safe="/")


def _sorted_summary(summary: pd.DataFrame) -> pd.DataFrame:
    keys = [key for key in ("k", "setting", "repeat", "stage") if key in summary.columns]
    if not keys or summary.empty:
        return summary
    order = pd.DataFrame({key: column(summary, key) if key != "setting" else summary[key].astype(str)
                          for key in keys}).sort_values(keys, kind="stable").index
    return summary.loc[order]


def summary_table(summary: pd.DataFrame) -> dict:
    """Cells as display text; the validity column sits right after the row's identity so it is seen."""
    present = [name for name in SUMMARY_COLUMNS if name in summary.columns]
    present += [name for name in summary.columns if name not in SUMMARY_COLUMNS]
    identity = [name for name in _IDENTITY if name in present]
    shown = identity + ["valid"] + [name for name in present if name not in {*identity, "valid", "invalid_reason"}]
    rows = []
    for record in _sorted_summary(summary).to_dict("records"):
        valid = as_bool(record.get("valid", True))
        reason = record.get("invalid_reason")
        reason_text = "" if format_cell("invalid_reason", reason) == MISSING else str(reason)
        reason_text = reason_text or ("" if valid else "marked invalid (no reason given)")
        cells = []
        for name in shown:
            if name == "valid":
                cells.append({"text": "yes" if valid else f"no: {reason_text}", "kind": "flag"})
            else:
                kind = "text" if name == "setting" or name not in _NUMERIC else "num"
                cells.append({"text": format_cell(name, record.get(name)), "kind": kind})
        rows.append({"cells": cells, "valid": valid, "invalid_reason": reason_text})
    return {"columns": shown, "rows": rows}


def checklist_rows(decision: Mapping) -> list[dict]:
    rows = []
    for item in decision.get("checklist") or []:
        passed = as_bool(item.get("passed"))
        rows.append({"name": str(item.get("name", "")), "passed": passed,
                     "status": "passed" if passed else "failed", "evidence": str(item.get("evidence", ""))})
    return rows


def recommendation(decision: Mapping) -> dict | None:
    chosen = decision.get("recommended")
    if not isinstance(chosen, Mapping):
        return None
    argv = [str(part) for part in chosen.get("argv") or []]
    return {"k": chosen.get("k"), "setting": str(chosen.get("setting", "")), "argv": argv,
            "argv_shell": shell_text(argv)}


def verdict_tone(chosen: dict | None, checklist: list[dict]) -> str:
    if chosen is None or chosen.get("k") is None:
        return "bad"
    return "ok" if checklist and all(row["passed"] for row in checklist) else "warn"


def per_stage_rows(decision: Mapping) -> list[dict]:
    return [{"users": format_cell("users", row.get("users")), "best_k": format_cell("k", row.get("best_k")),
             "running_mean": format_cell("running_mean", row.get("running_mean"))}
            for row in decision.get("per_stage") or [] if isinstance(row, Mapping)]


def probe_rows(probe: Mapping) -> list[dict]:
    fields = (("vLLM version", "version"), ("help source", "help_source"), ("flags found", "flags_count"),
              ("how K is written", "knob"), ("--num-lookahead-slots", "lookahead_flag"))
    rows = [{"label": label, "value": str(probe.get(key, MISSING))} for label, key in fields]
    rows.append({"label": "command", "value": shell_text(probe.get("command")) or MISSING})
    return rows


def life_rows(lives: list[dict]) -> list[dict]:
    rows = []
    for life in lives:
        folder = str(life.get("dir", "") or "")
        href = relative_href(folder.rstrip("/")) if folder else ""
        rows.append({
            "setting": str(life.get("setting", "")), "k": format_cell("k", life.get("k")),
            "repeat": format_cell("repeat", life.get("repeat")), "status": str(life.get("status", "")),
            "reason": str(life.get("reason", "") or ""), "argv_shell": shell_text(life.get("argv")),
            "dir": folder, "dir_href": href + "/" if href else "",
            "files": [{"name": name, "href": f"{href}/{quote(name)}"} for name in LIFE_FILES] if href else [],
        })
    return rows


def max_num_seqs_from(lives: list[dict]) -> int | None:
    """The --max-num-seqs shared by every life, if there is exactly one; it caps the real batch."""
    values = set()
    for life in lives:
        argv = [str(part) for part in life.get("argv") or []]
        for index, part in enumerate(argv):
            if part == "--max-num-seqs" and index + 1 < len(argv):
                values.add(argv[index + 1])
            elif part.startswith("--max-num-seqs="):
                values.add(part.split("=", 1)[1])
    try:
        return int(values.pop()) if len(values) == 1 else None
    except ValueError:
        return None


def model_name(config: Mapping) -> str:
    for scope in (config, *(value for value in config.values() if isinstance(value, Mapping))):
        if isinstance(scope.get("model"), str):
            return scope["model"]
    return ""


def _strings(values: object) -> list[str]:
    return [str(value) for value in values] if isinstance(values, (list, tuple)) else []


def build_view(summary: pd.DataFrame, decision: dict, plan: dict,
               timelines: dict[str, dict[str, pd.DataFrame]]) -> dict:
    summary = summary if isinstance(summary, pd.DataFrame) else pd.DataFrame()
    decision, plan = decision or {}, plan or {}
    config = plan.get("config") if isinstance(plan.get("config"), Mapping) else {}
    lives = [life for life in plan.get("lives") or [] if isinstance(life, Mapping)]
    valid = valid_rows(summary)
    checklist = checklist_rows(decision)
    chosen = recommendation(decision)
    return {
        "title": f"lookahead-runner report: {plan.get('run_id', 'run')}",
        "run_id": str(plan.get("run_id", "")), "created": str(plan.get("created", "")),
        "model": model_name(config), "tool_version": __version__,
        "verdict": {"text": str(decision.get("verdict", "") or "no verdict recorded"),
                    "tone": verdict_tone(chosen, checklist)},
        "recommended": chosen,
        "target_users": format_cell("users", decision.get("target_users")),
        "stopped_at_k": format_cell("k", decision.get("stopped_at_k")),
        "reasons": _strings(decision.get("reasons")), "diagnoses": _strings(decision.get("diagnoses")),
        "checklist": checklist,
        "checklist_passed": sum(row["passed"] for row in checklist),
        "per_stage": per_stage_rows(decision),
        "charts": summary_charts(valid, setting_styles(summary), max_num_seqs_from(lives)),
        "timelines": timeline_entries(timelines, lives),
        "summary_table": summary_table(summary),
        "row_count": len(summary), "invalid_count": len(summary) - len(valid),
        "probe": probe_rows(plan.get("probe") if isinstance(plan.get("probe"), Mapping) else {}),
        "lives": life_rows(lives),
        "run_files": [{"name": name, "href": name} for name in RUN_FILES],
        "config_json": json.dumps(config, indent=2, sort_keys=True, default=str),
    }
