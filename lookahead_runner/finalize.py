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
from .vllm.probe import parse_version


class RunDirError(ValueError):
    """Not a run folder (no plan.json); the message says what to pass."""


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


def finalize(run_dir: Path, render: bool = True) -> Path:
    run_dir = Path(run_dir)
    try:
        plan = results.read_json(run_dir / "plan.json")
    except (OSError, ValueError):
        raise RunDirError(f"{run_dir}: no readable plan.json; pass a folder made by `lookahead-runner sweep`") from None
    config = SweepConfig.model_validate(plan["config"])
    rules = WindowRules(warmup_s=config.load.warmup_s, min_requests=config.decision.min_requests,
                        expected_output_tokens=config.load.output_tokens)
    rows, timelines = [], {}
    for life in plan["lives"]:
        directory = run_dir / life["dir"]
        state = results.life_state(directory)
        status = results.read_json(directory / "status.json") if state != "missing" else {}
        life["status"], life["reason"] = state, status.get("reason", "")
        if state == "missing":
            continue
        frames = load_life(directory)
        timelines[life["dir"]] = {"server": frames["server"], "gpu": frames["gpu"], "stages": frames["stages"]}
        life["tokens"] = life_token_check(frames["requests"], frames["server"])
        if state == "done" and not frames["stages"].empty and not frames["requests"].empty:
            rows += stage_rows(frames["requests"], frames["stages"], frames["server"], frames["gpu"],
                               life["setting"], life["k"], life["repeat"], rules)
    summary = summary_frame(rows)
    results.write_summary(run_dir, summary)
    results.write_lives(run_dir, plan["lives"])
    argv_by_k = {life["k"]: life["argv"] for life in plan["lives"]}
    decision = decide(summary, plan["target_users"], thresholds_from(config), argv_by_k,
                      parse_version(plan["probe"]["version"]))
    decision["failed_lives"] = [{"life": l["dir"], "reason": l["reason"]} for l in plan["lives"] if l["status"] == "failed"]
    results.write_json(run_dir / "decision.json", decision)
    if not render:
        return run_dir / "summary.csv"
    from .report.render import write_report  # jinja2 + plotly load only when a page is rendered

    return write_report(run_dir, summary, decision, plan, timelines)
