"""A run folder's files -> summary.csv, decision.json and report.html.

Works from files alone, so `lookahead-runner report RUN_DIR` re-renders any run, finished
or interrupted. The sweep writes the tables (`write_tables`) after every K and finalizes at its end.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from . import results
from .analysis import WindowRules, life_token_check, stage_windows, summary_frame
from .config import SweepConfig
from .decision import Cell, Decision, Window, decide, evidence, window
from .decision.ramp import ramp_decision
from .decision.confirm import judge, unconfirmed_note, with_confirmation
from .decision.schema import AxisDecision, LifeNote
from .plan import LifeResult, LifeStatus, Plan, read_plan_and_config, read_status
from .preflight import lag_advice
from .vllm.probe import Capabilities


SAME_SERVER_NOTE = "; all repeats on one server life (load.repeat_mode), so restart-to-restart variation is not in it"


def load_life(directory: Path) -> dict[str, pd.DataFrame]:
    return {
        "requests": results.read_csv(directory / "requests.csv"),
        "stages": results.read_csv(directory / "stages.csv"),
        "server": results.read_csv(directory / "server_metrics.csv"),
        "gpu": results.read_csv(directory / "gpu.csv"),
    }


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


def note_repeat_mode(decision: Decision, repeat_mode: str) -> Decision:
    """Repeats measured on one server life say so in their stability evidence: the spread they show
    leaves out what differs between server starts."""
    if repeat_mode != "same-server":
        return decision
    for item in decision.checklist:
        if item.name == "repeat stability" and item.unknown_because != "too little data" \
                and SAME_SERVER_NOTE not in item.evidence:
            item.evidence += SAME_SERVER_NOTE
    return decision


@dataclass
class RunData:
    """A run folder read back: its plan and config, each life's status, the summary rows and the evidence."""

    plan: Plan
    config: SweepConfig
    summary: pd.DataFrame
    windows: list[tuple[str, Window]]           # (grid axis value, window) for every valid window
    confirm_windows: list[Window] = field(default_factory=list)  # the confirmation life's (not evidence)
    timelines: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)
    lives: list[LifeResult] = field(default_factory=list)  # in the plan's order
    preflight: dict | None = None

    @property
    def statuses(self) -> dict[str, LifeStatus]:
        return {life.planned.dir: life.status for life in self.lives if life.status is not None}

    def report_plan(self) -> dict:
        """plan.json as the report reads it: each life with its status, reason and tokens; the pre-flight."""
        return self.plan.model_dump(mode="json") | {"lives": [life.as_row() for life in self.lives]} | (
            {"preflight": self.preflight} if self.preflight else {})

    def evidence(self, axis_value: str = ""):
        return evidence([w for value, w in self.windows if value == axis_value], self.config.target_users)

    def argv_by_k(self, axis_value: str = "") -> dict[int, list[str]]:
        return {l.k: l.argv for l in self.plan.sweep_lives(axis_value)}

    def setting_names(self, axis_value: str = "") -> dict[int, str]:
        return {l.k: l.setting for l in self.plan.sweep_lives(axis_value)}


def read_run(run_dir: Path) -> RunData:
    """Every life's raw files -> summary rows and evidence windows (pure analysis; only reads)."""
    plan, config = read_plan_and_config(run_dir)
    preflight = _preflight_of(run_dir)
    rules = WindowRules(warmup_s=config.load.warmup_s, min_requests=config.decision.min_requests,
                        expected_output_tokens=config.load.output_tokens,
                        expected_prompt_tokens=config.load.prompt_tokens,
                        max_client_lag_p99_ms=config.decision.max_client_lag_p99_ms,
                        lag_advice=lag_advice(plan.placement, preflight))
    data = RunData(plan, config, pd.DataFrame(), [], preflight=preflight)
    rows = []
    for life in plan.lives:
        directory = run_dir / life.dir
        result = LifeResult(planned=life, status=read_status(directory))
        data.lives.append(result)
        if result.status is None:
            continue
        frames = load_life(directory)
        data.timelines[life.dir] = {"server": frames["server"], "gpu": frames["gpu"], "stages": frames["stages"]}
        result.tokens = life_token_check(frames["requests"], frames["server"]) | _workload_of(directory)
        if result.state == "done" and not frames["stages"].empty and not frames["requests"].empty:
            for row, finished, ok, t0 in stage_windows(frames["requests"], frames["stages"], frames["server"],
                                                       frames["gpu"], life.setting, life.k, life.repeat, rules):
                rows.append(row)
                if row["valid"] and life.confirms:
                    data.confirm_windows.append(window(row, finished, ok, t0))
                elif row["valid"]:
                    data.windows.append((life.axis_value, window(row, finished, ok, t0)))
    data.summary = summary_frame(rows)
    if config.grid.flag:
        axis_of = {life.setting: life.axis_value for life in plan.lives}
        data.summary.insert(1, "axis_value", data.summary["setting"].map(axis_of))
    return data


def decide_all(data: RunData) -> Decision:
    """The decision over K; with a grid, one per flag value and the best decided one overall."""
    config = data.config
    capability = Capabilities.from_dict(data.plan.probe).schedule_capability
    schedule_form = capability.form if capability.supported else None
    values = config.grid.values or [""]
    decisions = [(value, decide(data.evidence(value), config.decision, data.argv_by_k(value), schedule_form,
                                data.setting_names(value))) for value in values]
    decisions = [(value, note_repeat_mode(d, config.load.repeat_mode)) for value, d in decisions]
    if not config.grid.flag:
        return decisions[0][1]

    def score(decision: Decision) -> float:
        chosen = [c for c in decision.candidates if decision.recommended and c.k == decision.recommended.k]
        return chosen[0].objective if chosen else float("-inf")

    value, best = max(decisions, key=lambda item: score(item[1]))
    best = best.model_copy(deep=True)
    best.verdict = f"With {config.grid.flag} {value}: {best.verdict}"
    best.by_axis = [AxisDecision(flag=config.grid.flag, value=v, status=d.status,
                                 k=d.recommended.k if d.recommended else None,
                                 objective=score(d) if d.recommended else None, verdict=d.verdict)
                    for v, d in decisions]
    return best


def confirmed(data: RunData, decision: Decision) -> Decision:
    """The decision with the verdict of its confirmation life (decision/confirm.py)."""
    plan = data.plan.confirm
    lives = [life for life in data.lives if life.planned.confirms]
    cells = {}
    for w in sorted(data.confirm_windows, key=lambda w: (w.users, w.repeat)):
        cells.setdefault(w.users, []).append(w)
    states = [(l.planned.dir, l.state, l.reason) for l in lives]
    verdict = judge(plan, decision, data.evidence(plan.axis_value),
                    {users: Cell(plan.k, users, tuple(ws)) for users, ws in cells.items()}, states,
                    lives[0].planned.argv if lives else [], data.config.decision)
    return with_confirmation(decision, verdict)


def telemetry_gaps(statuses: dict[str, LifeStatus]) -> list[str]:
    """One line per kind of missing measurement (/metrics errors, no memory source, lost rows)."""
    lines = []
    for life, status in statuses.items():
        if status.state != "done":  # a failed life is listed with its reason already
            continue
        if status.metrics_errors:
            lines.append(f"/metrics failed {status.metrics_errors} times during {life} (last: "
                         f"{status.last_metrics_error or 'unknown'}): its acceptance, real batch and KV "
                         "use are missing or partial.")
        if status.write_errors:
            lines.append(f"{status.write_errors} telemetry rows of {life} could not be written "
                         f"({status.last_write_error or 'unknown'}).")
    by_note: dict[str, list[str]] = {}
    for life, status in statuses.items():
        if status.memory_note:
            by_note.setdefault(status.memory_note, []).append(life)
    for note, lives in by_note.items():
        lines.append(f"Device memory not measured in {', '.join(lives)}: {note}; "
                     "the memory headroom check has no reading for them.")
    return lines


def write_tables(run_dir: Path) -> RunData:
    """summary.csv and lives.csv from the raw files so far (the sweep calls it after every K)."""
    data = read_run(run_dir)
    results.write_summary(run_dir, data.summary)
    results.write_lives(run_dir, [life.as_row() for life in data.lives])
    return data


def finalize(run_dir: Path, render: bool = True) -> Path:
    run_dir = Path(run_dir)
    data = write_tables(run_dir)
    plan, config = data.plan, data.config
    if plan.mode == "ramp":
        life = plan.lives[0]
        decision = ramp_decision(data.evidence(), life.k, life.setting, life.argv, config.decision)
    else:
        decision = decide_all(data)
        if plan.confirm is not None:
            decision = confirmed(data, decision)
        elif note := unconfirmed_note(decision, config.decision.confirm):
            decision.diagnoses.append(note)
    for state, notes in (("failed", decision.failed_lives), ("skipped", decision.skipped_lives)):
        notes.extend(LifeNote(life=l.planned.dir, reason=l.reason) for l in data.lives if l.state == state)
    fallbacks = [l.planned.dir for l in data.lives if l.tokens.get("prompt_method") not in (None, "", "tokenize")]
    if fallbacks:
        decision.diagnoses.append(f"Prompts in {len(fallbacks)} lives were token ids, not text calibrated "
                                  f"through /tokenize (see lives.csv prompt_note), e.g. {fallbacks[0]}.")
    if decision.skipped_lives:
        ks = sorted({l.planned.k for l in data.lives if l.state == "skipped"})
        decision.reasons.append(f"Early stop: K {ks} were not run once the stop rule fired "
                                f"(rerun with --no-early-stop to measure them).")
    decision.diagnoses += telemetry_gaps(data.statuses)
    results.write_json(run_dir / "decision.json", decision.model_dump(mode="json"))
    if not render:
        return run_dir / "summary.csv"
    from .report.render import write_report  # jinja2 + plotly load only when a page is rendered

    return write_report(run_dir, data.summary, decision, data.report_plan(), data.timelines)
