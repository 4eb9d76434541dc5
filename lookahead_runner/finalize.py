"""A run folder's files -> summary.csv, decision.json and report.html.

Works from files alone, so `lookahead-runner report RUN_DIR` re-renders any run, finished
or interrupted, and the sweep calls it after every server life.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from . import results
from .analysis import WindowRules, life_token_check, stage_rows, summary_frame
from .config import SweepConfig
from .decision import Thresholds, decide
from .preflight import lag_advice
from .ramp import ramp_decision
from .vllm.probe import parse_version


class RunDirError(ValueError):
    """Not a run folder (no plan.json); the message says what to pass."""


SAME_SERVER_NOTE = "; all repeats on one server life (load.repeat_mode), so restart-to-restart variation is not in it"


def load_life(directory: Path) -> dict[str, pd.DataFrame]:
    return {
        "requests": results.read_csv(directory / "requests.csv"),
        "stages": results.read_csv(directory / "stages.csv"),
        "server": results.read_csv(directory / "server_metrics.csv"),
        "gpu": results.read_csv(directory / "gpu.csv"),
    }


def thresholds_from(config: SweepConfig) -> Thresholds:
    d = config.decision
    return Thresholds(memory_rise_frac=d.memory_rise_frac, throughput_gain_frac=d.throughput_gain_frac,
                      tie_tolerance_frac=d.tie_tolerance_frac, repeat_spread_frac=d.repeat_spread_frac,
                      low_acceptance=d.low_acceptance, kv_headroom_frac=d.kv_headroom_frac)


def _workload_of(directory: Path) -> dict:
    """How the scenario built its prompts in this life (workload.json): tokenize or token-ids."""
    try:
        data = results.read_json(directory / "workload.json")
    except (OSError, ValueError):
        return {}
    return {"prompt_method": data.get("prompt_method", ""), "prompt_note": data.get("prompt_note", "")}


def _preflight_of(run_dir: Path) -> dict | None:
    try:
        return results.read_json(run_dir / "preflight.json")
    except (OSError, ValueError):
        return None


def note_repeat_mode(decision: dict, repeat_mode: str) -> dict:
    """Repeats measured on one server life say so in their stability evidence: the spread they show
    leaves out what differs between server starts."""
    if repeat_mode != "same-server":
        return decision
    lists = [decision.get("checklist", [])] + [c.get("checklist", []) for c in decision.get("candidates", [])]
    for item in (item for items in lists for item in items):
        if (item["name"] == "repeat stability" and not item["evidence"].startswith("only one")
                and SAME_SERVER_NOTE not in item["evidence"]):
            item["evidence"] += SAME_SERVER_NOTE
    return decision


def decide_all(summary: pd.DataFrame, plan: dict, config: SweepConfig) -> dict:
    """The decision over K; with a grid, one per flag value and the best of them overall."""
    version = parse_version(plan["probe"]["version"])
    th = thresholds_from(config)
    values = config.grid.values or [""]
    decisions = []
    for value in values:
        part = summary[summary["axis_value"].astype(str) == value] if config.grid.flag else summary
        argv_by_k = {l["k"]: l["argv"] for l in plan["lives"] if l.get("axis_value", "") == value}
        decision = decide(part, plan["target_users"], th, argv_by_k, version)
        decisions.append((value, note_repeat_mode(decision, config.load.repeat_mode)))
    if not config.grid.flag:
        return decisions[0][1]

    def score(decision: dict) -> float:
        rec = decision.get("recommended")
        picked = [c for c in decision.get("candidates", []) if rec and c["k"] == rec["k"]]
        return picked[0]["conservative_req_per_s"] if picked else float("-inf")

    value, best = max(decisions, key=lambda item: score(item[1]))
    best = dict(best)
    best["verdict"] = f"With {config.grid.flag} {value}: {best['verdict']}"
    best["by_axis"] = [{"flag": config.grid.flag, "value": v, "verdict": d["verdict"],
                        "k": (d.get("recommended") or {}).get("k"), "conservative_req_per_s": score(d)}
                       for v, d in decisions]
    return best


def telemetry_gaps(statuses: dict[str, dict]) -> list[str]:
    """One line per kind of missing measurement (/metrics errors, no memory source, lost rows)."""
    lines = []
    for life, status in statuses.items():
        if status.get("state") != "done":  # a failed life is listed with its reason already
            continue
        if status.get("metrics_errors"):
            lines.append(f"/metrics failed {status['metrics_errors']} times during {life} (last: "
                         f"{status.get('last_metrics_error') or 'unknown'}): its acceptance, real batch and KV "
                         "use are missing or partial.")
        if status.get("write_errors"):
            lines.append(f"{status['write_errors']} telemetry rows of {life} could not be written "
                         f"({status.get('last_write_error') or 'unknown'}).")
    by_note: dict[str, list[str]] = {}
    for life, status in statuses.items():
        if status.get("memory_note"):
            by_note.setdefault(status["memory_note"], []).append(life)
    for note, lives in by_note.items():
        lines.append(f"Device memory not measured in {', '.join(lives)}: {note}; "
                     "the memory headroom check has no reading for them.")
    return lines


def finalize(run_dir: Path, render: bool = True) -> Path:
    run_dir = Path(run_dir)
    try:
        plan = results.read_json(run_dir / "plan.json")
    except (OSError, ValueError):
        raise RunDirError(f"{run_dir}: no readable plan.json; pass a folder made by `lookahead-runner sweep`") from None
    try:
        config = SweepConfig.model_validate(plan["config"])
        plan["lives"], plan["probe"]["version"]
    except (KeyError, TypeError, ValueError):
        raise RunDirError(f"{run_dir}: plan.json is not a plan this version can read; "
                          "pass a folder made by `lookahead-runner sweep`") from None
    preflight = _preflight_of(run_dir)
    if preflight:
        plan["preflight"] = preflight  # for the report's probe section
    rules = WindowRules(warmup_s=config.load.warmup_s, min_requests=config.decision.min_requests,
                        expected_output_tokens=config.load.output_tokens,
                        expected_prompt_tokens=config.load.prompt_tokens,
                        max_client_lag_p99_ms=config.decision.max_client_lag_p99_ms,
                        lag_advice=lag_advice(plan, preflight))
    rows, timelines, statuses = [], {}, {}
    for life in plan["lives"]:
        directory = run_dir / life["dir"]
        state = results.life_state(directory)
        status = results.read_json(directory / "status.json") if state != "missing" else {}
        statuses[life["dir"]] = status
        life["status"], life["reason"] = state, status.get("reason", "")
        if state == "missing":
            continue
        frames = load_life(directory)
        timelines[life["dir"]] = {"server": frames["server"], "gpu": frames["gpu"], "stages": frames["stages"]}
        life["tokens"] = life_token_check(frames["requests"], frames["server"]) | _workload_of(directory)
        if state == "done" and not frames["stages"].empty and not frames["requests"].empty:
            rows += stage_rows(frames["requests"], frames["stages"], frames["server"], frames["gpu"],
                               life["setting"], life["k"], life["repeat"], rules)
    summary = summary_frame(rows)
    if config.grid.flag:
        axis_of = {life["setting"]: life.get("axis_value", "") for life in plan["lives"]}
        summary.insert(1, "axis_value", summary["setting"].map(axis_of))
    results.write_summary(run_dir, summary)
    results.write_lives(run_dir, plan["lives"])
    if plan.get("mode") == "ramp":
        life = plan["lives"][0]
        decision = ramp_decision(summary, life["k"], life["argv"], config.decision.throughput_gain_frac)
    else:
        decision = decide_all(summary, plan, config)
    for state in ("failed", "skipped"):
        decision[f"{state}_lives"] = [{"life": l["dir"], "reason": l["reason"]}
                                      for l in plan["lives"] if l["status"] == state]
    fallbacks = [l["dir"] for l in plan["lives"] if l.get("tokens", {}).get("prompt_method") not in (None, "", "tokenize")]
    if fallbacks:
        decision["diagnoses"].append(f"Prompts in {len(fallbacks)} lives were token ids, not text calibrated "
                                     f"through /tokenize (see lives.csv prompt_note), e.g. {fallbacks[0]}.")
    if decision["skipped_lives"]:
        ks = sorted({l["k"] for l in plan["lives"] if l["status"] == "skipped"})
        decision["reasons"].append(f"Early stop: K {ks} were not run once the stop rule fired "
                                   f"(rerun with --no-early-stop to measure them).")
    decision["diagnoses"] = list(decision.get("diagnoses") or []) + telemetry_gaps(statuses)
    results.write_json(run_dir / "decision.json", decision)
    if not render:
        return run_dir / "summary.csv"
    from .report.render import write_report  # jinja2 + plotly load only when a page is rendered

    return write_report(run_dir, summary, decision, plan, timelines)
