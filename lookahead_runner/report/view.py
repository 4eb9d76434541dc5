"""The report's view-model: plain dicts and strings built from summary, decision, plan and timelines.

Pure: no files, no clock. Strings stay raw here; the template escapes them (autoescape), and figure JSON is
made script-safe in charts.figure_entry.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import quote

import pandas as pd

from .. import __version__
from ..runfolder.analysis import SUMMARY_COLUMNS, WindowRules
from .cells import MISSING, NUMERIC_COLUMNS, as_bool, format_cell, relative_href, shell_text
from .charts import column, load_charts, setting_styles
from .confirmation import confirmation_view
from .frontier import frontier_charts, frontier_rows
from .model import model_view
from .timelines import timeline_entries
from ..config.slo import parse_slos
from ..decision.schema import Capacity, Decision
from ..runfolder.frontier import FrontierPoint
from ..runfolder.plan import LifeResult, RunRecord
from ..runfolder.preflight import SLOT_PREFLIGHTS, PlacementRecord, PreflightRecord, placement_used
from ..vllm.knob import MAX_NUM_SEQS_FLAG, flag_value
from ..vllm.probe import LOOKAHEAD_FLAG
from .variant_section import lives_tokens, variant_charts, variant_rows
from .capacity import at_rate_view, capacity_view, target_rate_text
from .rate_evidence import per_rate_rows, rate_evidence_rows
from .rate_stages import rate_knee_view, rate_rows, rate_stage_view, user_rows
from .request_set import request_set_view
from .verdict import (DECISION_STATUS_TEXT, axis_rows, candidate_rows, check_rows, confidence_text, evidence_rows,
                      failed_lives, knee_view, per_batch_size, per_stage_rows, recommendation, threshold_rows,
                      verdict_tone)

_IDENTITY = ("setting", "axis_value", "k", "repeat", "variant", "stage", "users")
# What a life folder normally holds (docs/run-folder.md); write_report drops the ones a life lacks.
LIFE_FILES = ("server.log", "server.json", "status.json", "requests.csv", "stages.csv", "gpu.csv",
              "server_metrics.csv", "locust.log", "locust_stats.csv", "locust_stats_history.csv",
              "locust_failures.csv", "locust_exceptions.csv")
RUN_FILES = ("summary.csv", "lives.csv", "decision.json", "plan.json")


def valid_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """Rows the analysis marked valid; a summary without the column is taken as all valid."""
    if "valid" not in summary.columns:
        return summary
    return summary[summary["valid"].map(as_bool).astype(bool)]


def per_k_rows(summary: pd.DataFrame, lives: list[LifeResult]) -> pd.DataFrame:
    """The rows of the per-K lives: the charts group by K, where a confirmation's rows (a schedule runs under
    its largest K, at threshold stages of its own) would blur that K's points."""
    confirming = {life.planned.setting for life in lives if life.planned.confirms}
    if not confirming or "setting" not in summary.columns:
        return summary
    return summary[~summary["setting"].astype(str).isin(confirming)]


def _sorted_summary(summary: pd.DataFrame) -> pd.DataFrame:
    keys = [key for key in ("k", "setting", "repeat", "stage") if key in summary.columns]
    if not keys or summary.empty:
        return summary
    order = pd.DataFrame({key: column(summary, key) if key != "setting" else summary[key].astype(str)
                          for key in keys}).sort_values(keys, kind="stable").index
    return summary.loc[order]


def _is_rate_row(record: dict) -> bool:
    """A rate stage's row (open loop): its users column is 0, its load the rate beside it."""
    return format_cell("rate", record.get("rate")) != MISSING


def summary_table(summary: pd.DataFrame) -> dict:
    """Cells as display text; the validity column sits right after the row's identity so it is seen (a rate
    stage's users cell is empty: it had none, its rate column says its load)."""
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
            elif name == "users" and _is_rate_row(record):
                cells.append({"text": MISSING, "kind": "num"})
            else:
                kind = "text" if name == "setting" or name not in NUMERIC_COLUMNS else "num"
                cells.append({"text": format_cell(name, record.get(name)), "kind": kind})
        rows.append({"cells": cells, "valid": valid, "invalid_reason": reason_text})
    return {"columns": shown, "rows": rows}


def invalid_windows(summary: pd.DataFrame) -> list[dict]:
    """Every window the decision left out, and why."""
    if summary.empty or "valid" not in summary.columns:
        return []
    rows = []
    for record in _sorted_summary(summary).to_dict("records"):
        if not as_bool(record.get("valid")):
            reason = record.get("invalid_reason")
            load = {"users": f"{float(record['rate']):g} req/s"} if _is_rate_row(record) else {}
            rows.append({**{key: format_cell(key, record.get(key)) for key in _IDENTITY}, **load,
                         "reason": MISSING if format_cell("invalid_reason", reason) == MISSING else str(reason)})
    return rows


def window_rule(config: Mapping) -> str:
    """How a stage becomes its steady-state window (analysis.py), with this run's numbers."""
    load = config.get("load") if isinstance(config.get("load"), Mapping) else {}
    rules = config.get("decision") if isinstance(config.get("decision"), Mapping) else {}
    warmup_s = load.get("warmup_s")
    if isinstance(warmup_s, (int, float)) and warmup_s >= 0:
        skipped = f"the first {warmup_s:g} s of each stage (at most 90% of it)"
    else:
        skipped = ("the first max(2 s, 25%) of each stage (at most half of it; in a users stage at least until every "
                   "user's first request of it has ended)")
    text = (f"Steady-state windows: {skipped} is the ramp transient and is left out. A request's latency and "
            "failure count in the window it completed in; req/s and tokens/s count every successful request by "
            "the share of its life (its tokens by the share of its decode) inside the window; cut requests (killed "
            "by the end of a stage or run) are neither completions "
            "nor failures. Server gauges are averaged over the samples inside the window; counters (acceptance, "
            "preemptions) are differenced between the last samples at or before its edges.")
    if isinstance(rules.get("min_requests"), int):
        text += f" A window is invalid with fewer than {rules['min_requests']} completions"
        lag = rules.get("max_client_lag_p99_ms", WindowRules().max_client_lag_p99_ms)
        text += (f", a saturated client (event-loop lag p99 over {lag:g} ms) "
                 "or any response of the wrong length.")
    return text


def _flags_in(argv: object) -> list[str]:
    return [str(part).split("=", 1)[0] for part in argv or [] if str(part).startswith("--")]


def flags_used(lives: list[LifeResult]) -> list[str]:
    """The server flags this run passed, in first-seen order over every life's argv."""
    seen: dict[str, None] = {}
    for life in lives:
        seen.update(dict.fromkeys(_flags_in(life.planned.argv)))
    return list(seen)


def probe_rows(probe: Mapping, lives: list[LifeResult], run: RunRecord | None = None) -> list[dict]:
    fields = (("vLLM version", "version"), ("help source", "help_source"), ("flags found", "flags_count"),
              ("how K is written", "knob"), (LOOKAHEAD_FLAG, "lookahead_flag"))
    rows = [{"label": label, "value": str(probe.get(key, MISSING))} for label, key in fields]
    rows.append({"label": "command", "value": shell_text(probe.get("command")) or MISSING})
    rows.append({"label": "flags used by this run", "value": " ".join(flags_used(lives)) or MISSING})
    return rows + (placement_rows(run.preflight, run.plan.placement, run.slot_preflights) if run else [])


def _one(value: object) -> str:
    """A measured figure with one decimal; MISSING when absent or not a number."""
    return format_cell("client_lag_p99_ms", value)


def placement_rows(preflight: PreflightRecord | None, planned: PlacementRecord | None,
                   slots: Mapping[str, PreflightRecord | None] | None = None) -> list[dict]:
    """Where the server and Locust ran (plan.json; the pre-flight's when it settled one), and what the pre-flight
    measured (preflight.json; no row when none ran); on a Ray cluster where several slots ran one (`slots`), each
    slot's verdict and Locust count, for preflight.json is the last slot's alone."""
    placed = placement_used(preflight, planned)
    rows = []
    if placed is not None:
        rows.append({"label": "placement", "value": placed.description or MISSING})
    if preflight is not None:
        idle_p99 = preflight.idle.lag_p99_ms if preflight.idle is not None else None
        text = f"{preflight.verdict or MISSING}; server idle: Locust's CPUs wake late by p99 {_one(idle_p99)} ms"
        if preflight.runs:
            last = preflight.runs[-1]
            text += (f"; at {last.users} users: loop lag p99 {_one(last.lag_p99_ms)}"
                     f" ms, busiest process {_one(last.busiest_cpu_pct)}% of a core, "
                     f"{_one(last.chunk_cpu_us)} us per chunk")
        if preflight.reason:
            text += f"; {preflight.reason}"
        rows.append({"label": "pre-flight", "value": text})
    if slots and len(slots) > 1:
        rows.append({"label": "pre-flight per slot",
                     "value": "; ".join(_slot_preflight(name, record) for name, record in slots.items())
                     + f" ({SLOT_PREFLIGHTS}/)"})
    return rows


def _slot_preflight(name: str, record: PreflightRecord | None) -> str:
    if record is None:
        return f"{name}: {MISSING}"
    processes = record.placement.processes if record.placement is not None else None
    count = f", {processes} Locust process{'es' if processes != 1 else ''}" if processes is not None else ""
    return f"{name}: {record.verdict or MISSING}{count}"


def life_rows(lives: list[LifeResult]) -> list[dict]:
    rows = []
    for life in lives:
        planned = life.planned
        folder = planned.dir
        href = relative_href(folder.rstrip("/")) if folder else ""
        rows.append({
            "setting": planned.setting, "k": format_cell("k", planned.k),
            "repeat": format_cell("repeat", planned.repeat), "status": life.state,
            "reason": life.reason, "argv_shell": shell_text(planned.argv),
            "tokens": lives_tokens(life),
            "dir": folder, "dir_href": href + "/" if href else "",
            "files": [{"name": name, "href": f"{href}/{quote(name)}"} for name in LIFE_FILES] if href else [],
        })
    return rows


def max_num_seqs_from(lives: list[LifeResult]) -> int | None:
    """The --max-num-seqs shared by every life, if there is exactly one; it caps the real batch."""
    values = {flag_value(life.planned.argv, MAX_NUM_SEQS_FLAG) for life in lives}
    values.discard(None)
    try:
        return int(values.pop()) if len(values) == 1 else None
    except ValueError:
        return None


def model_name(config: Mapping) -> str:
    for scope in (config, *(value for value in config.values() if isinstance(value, Mapping))):
        if isinstance(scope.get("model"), str):
            return scope["model"]
    return ""


def slos_of(config: Mapping) -> tuple:
    """decision.slo of the run's config (a dict), parsed; () where it has none or an unreadable one."""
    decision = config.get("decision") if isinstance(config.get("decision"), Mapping) else {}
    slo = decision.get("slo") if isinstance(decision.get("slo"), Mapping) else {}
    try:
        return parse_slos(tuple(sorted((str(key), float(value)) for key, value in slo.items())))
    except (TypeError, ValueError):
        return ()


def build_view(summary: pd.DataFrame, decision: Decision, run: RunRecord | None,
               timelines: dict[str, dict[str, pd.DataFrame]], frontier: list[FrontierPoint] | None = None) -> dict:
    """The page's values from the typed run folder (`run` None: a page with no run behind it); `frontier`: the
    frontier's points (runfolder/frontier.py), None for a page without them."""
    summary = summary if isinstance(summary, pd.DataFrame) else pd.DataFrame()
    config, probe = (run.plan.config, run.plan.probe) if run else ({}, {})
    lives = run.lives if run else []
    run_id, created = (run.plan.run_id, run.plan.created) if run else ("", "")
    valid = valid_rows(summary)
    styles = setting_styles(summary)
    rates = rate_rows(per_k_rows(valid, lives))
    view = {
        "title": f"lookahead-runner report: {run_id or 'run'}",
        "run_id": run_id, "created": created,
        "model": model_name(config), "tool_version": __version__,
        **decision_view(decision, rates=rates),
        "failed_lives": failed_lives(decision, lives),
        "by_variant": variant_rows(decision),
        "charts": variant_charts(per_k_rows(valid, lives), decision,
                                 lambda rows: load_charts(user_rows(rows), rate_rows(rows), styles,
                                                          max_num_seqs_from(lives))),
        "frontier": None if frontier is None else {
            "charts": frontier_charts(frontier, styles, decision, slos_of(config)),
            "rows": frontier_rows(frontier, styles)},
        "timelines": timeline_entries(timelines, lives),
        "window_rule": window_rule(config),
        "summary_table": summary_table(summary),
        "rate_stages": rate_stage_view(summary),
        "invalid_windows": invalid_windows(summary),
        "row_count": len(summary), "invalid_count": len(summary) - len(valid),
        "probe": probe_rows(probe, lives, run),
        "probe_flags": [str(flag) for flag in probe.get("flags") or []],
        "lives": life_rows(lives),
        "run_files": [{"name": name, "href": name} for name in RUN_FILES],
        "config_json": json.dumps(config, indent=2, sort_keys=True, default=str),
    }
    # the decision section is rendered once per workload variant: the whole view with that variant's decision
    view["decisions"] = [view | decision_view(d, f"-v{i}", _of_variant(rates, d.variant), decision.capacity)
                         | {"failed_lives": view["failed_lives"] if not i else []}
                         for i, d in enumerate(decision.by_variant)] or [dict(view)]
    return view


def _of_variant(rows: pd.DataFrame, variant: str) -> pd.DataFrame:
    if not variant or "variant" not in rows.columns:
        return rows
    return rows[rows["variant"].astype(str) == variant]


def decision_view(decision: Decision, id_suffix: str = "", rates: pd.DataFrame | None = None,
                  capacity: list[Capacity] | None = None) -> dict:
    """What the decision section shows of one decision (the sweep's, or one workload variant's); `rates`: the valid
    rate windows of its variant (summary.csv's rate rows), read at each offered rate; `capacity`: the run's capacity
    rows, where a variant's decision does not carry its own."""
    checklist = check_rows(decision.checklist)
    rates = rates if rates is not None else pd.DataFrame()
    return {
        "variant": decision.variant, "id_suffix": id_suffix,
        "verdict": {"text": decision.verdict or "no verdict recorded", "tone": verdict_tone(decision),
                    "status": DECISION_STATUS_TEXT[decision.status], "confidence": confidence_text(decision)},
        "recommended": recommendation(decision),
        "confirmation": confirmation_view(decision),
        "leading_k": "" if decision.leading_k is None else str(decision.leading_k),
        "mode": decision.mode,
        "objective": decision.objective,
        "target_users": format_cell("users", decision.target_users),
        "stopped_at_k": (format_cell("k", decision.stopped_at_k) if decision.stopped_at_k is not None
                         else "not stopped: every K was kept" if decision.candidates else MISSING),
        "cost": decision.cost.text if decision.cost else MISSING,
        "cost_stopped": decision.cost.stopped_because if decision.cost else "",
        "reasons": list(decision.reasons), "diagnoses": list(decision.diagnoses), "next_runs": list(decision.next_runs),
        "checklist": checklist,
        "checklist_passed": sum(row["status"] == "pass" for row in checklist),
        "candidates": candidate_rows(decision),
        "evidence": evidence_rows(decision),
        "rate_evidence": rate_evidence_rows(rates),
        # a rate ramp (one K) answers per rate with its knee's table
        "per_rate": [] if decision.mode == "ramp" else per_rate_rows(rates, decision, capacity),
        "candidates_at": (f"the target rate ({decision.target_rate:g} req/s)"
                          if decision.target_rate is not None and decision.target_users is None
                          else f"the target concurrency ({decision.target_users} users)" if decision.target_users
                          else "the target concurrency"),
        "by_axis": axis_rows(decision),
        "per_stage": per_stage_rows(decision),
        "per_batch_size": per_batch_size(decision),
        "knee": knee_view(decision),
        "rate_knee": rate_knee_view(decision),
        "perf_model": model_view(decision),
        "request_set": request_set_view(decision.request_set),
        "thresholds": threshold_rows(decision),
        "capacity": capacity_view(decision),
        "at_rate": at_rate_view(decision),
        "target_rate": target_rate_text(decision),
    }
