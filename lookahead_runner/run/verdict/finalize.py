"""A run folder's files -> summary.csv, decision.json and report.html.

Works from files alone, so `lookahead-runner report RUN_DIR` re-renders any run, finished
or interrupted. The sweep writes the tables (`write_tables`) after every K and finalizes at its end.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from ...runfolder import results
from ...decision.adaptive import run_note
from ...runfolder.cost import life_costs, run_cost
from ...runfolder.price import lives_range, looks_of
from ...runfolder.frontier import frontier_points
from ...decision import Cell, Decision, decide
from ...decision.engine import verdict_at_end
from ...decision.cells.gpu_spread import LifeOnGpu, confound_line, gpu_spread_line
from ...decision.cells.rate_window import behind_findings
from ...decision.gates.in_effect import findings_from, with_settings_in_effect
from ...decision.ramp import ramp_decision
from ...decision.confirmation.confirm import judge, unconfirmed_note, with_confirmation
from ...decision.confirmation.rate_confirm import is_rate_plan
from ...decision.schema import AxisDecision, ConfirmLife, LifeNote
from ...runfolder.plan import CAPACITY_PURPOSE, LifeStatus
from ...runfolder.spread_ledger import levels_of, remember, run_date, workload_key
from ...runfolder.read import RunData, read_run
from ...decision.per_variant import by_variant, note_unconfirmed_schedules
from ...workload.request_set import METHOD_REQUEST_SET
from .rate_verdict import capacity_note, with_rate_verdict
from .request_set_run import request_set_note, request_set_summary
from ...runfolder.rate_windows import is_rate_stage
from ...vllm.probe import Capabilities
from .perfmodel_run import with_performance_model
from .steps import Steps


SAME_SERVER_NOTE = "; all repeats on one server life (load.repeat_mode), so restart-to-restart variation is not in it"


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


def decide_all(data: RunData, steps: Steps | None = None) -> Decision:
    """The decision over K; one per workload variant (decision/per_variant.py) when there are several."""
    variants = data.config.load.variants
    if len(variants) == 1:
        return decide_grid(data, steps=steps)
    return by_variant([(v.label, decide_grid(data, v.label, steps)) for v in variants])


def decide_grid(data: RunData, variant: str = "", steps: Steps | None = None) -> Decision:
    """The decision over K for one workload variant; with a grid, one per flag value and the best decided one."""
    steps = steps or Steps(enabled=False)
    config = data.config
    capability = Capabilities.from_dict(data.plan.probe).schedule_capability
    schedule_form = capability.form if capability.supported else None
    values = config.grid.values or [""]
    with steps.step("decide (resampling every stage)"):
        decisions = [(value, decide_looked(data.evidence(value, variant), config, data.argv_by_k(value),
                                           schedule_form, data.setting_names(value))) for value in values]
    decisions = [(value, note_repeat_mode(d, config.load.repeat_mode)) for value, d in decisions]
    if not config.grid.axis:
        with steps.step("performance model"):
            return with_performance_model(data, decisions[0][1])

    def score(decision: Decision) -> float:
        chosen = [c for c in decision.candidates if decision.recommended and c.k == decision.recommended.k]
        return chosen[0].objective if chosen else float("-inf")

    value, best = max(decisions, key=lambda item: score(item[1]))
    best = best.model_copy(deep=True)
    best.verdict = f"With {config.grid.axis} {value}: {best.verdict}"
    best.by_axis = [AxisDecision(flag=config.grid.axis, value=v, status=d.status,
                                 k=d.recommended.k if d.recommended else None,
                                 objective=score(d) if d.recommended else None, verdict=d.verdict)
                    for v, d in decisions]
    return best


def decide_looked(evidence, config, argv_by_k, schedule_form, setting_names) -> Decision:
    """The decision; where the sweep looked at its verdict as lives ended (the adaptive sweep, load.repeats =
    "auto"), judged at the bar of the look it stopped at (decision/gates/looks.py), which decision.json's `looks` names."""
    p, stop, tie_bar = verdict_at_end(evidence, config.decision, looks_of(config))
    decision = decide(evidence, p, argv_by_k, schedule_form, setting_names, tie_bar)
    decision.looks = stop
    return decision


def priced_range(decision: Decision, config):
    """What a verdict like this one costs at best, expected (at the K's levels and the restart spread the decision
    measured, the ledger's in it) and at worst; None for a capacity search (its probes are no verdict's lives)."""
    if config.sweep.strategy == "capacity" or config.grid.axis:
        return None
    spread = decision.restart_spread.rel_sd if decision.restart_spread is not None else None
    levels = {c.k: c.objective for c in decision.candidates if c.objective is not None}
    return lives_range(config, looks_of(config), spread, levels, spread_known=True)


def confirmed(data: RunData, decision: Decision, variant: str | None = None) -> Decision:
    """The decision with the verdict of its confirmation life (decision/confirmation/confirm.py); of one workload
    variant's decision, from that variant's confirmation when `variant` is given (unchanged without one)."""
    plan = data.plan.confirm if variant is None else data.plan.confirmation(variant)
    if plan is None or is_rate_plan(plan):  # a verdict at a rate: rate_verdict.py judges its confirmation
        return decision
    lives = [life for life in data.lives if life.planned.confirms and life.planned.variant == plan.variant]
    cells = {}
    for w in sorted(data.confirm_windows, key=lambda w: (w.users, w.repeat)):
        if w.variant == plan.variant:
            cells.setdefault(w.users, []).append(w)
    states = [ConfirmLife(l.planned.dir, l.state, l.reason) for l in lives]
    verdict = judge(plan, decision, data.evidence(plan.axis_value, plan.variant),
                    {users: Cell(plan.k, users, tuple(ws)) for users, ws in cells.items()}, states,
                    lives[0].planned.argv if lives else [], data.config.decision)
    return with_confirmation(decision, verdict)


def sweep_rows(data: RunData) -> list[dict]:
    """The summary rows of the sweep's own lives (not the confirmation's)."""
    if data.summary.empty:
        return []
    settings = {life.setting for life in data.plan.sweep_lives()}
    return [row for row in data.summary.to_dict("records") if row["setting"] in settings]


def user_stage_rows(rows: list[dict]) -> list[dict]:
    """The summary rows of user stages (a rate stage's row has its rate: its in-effect finding is the rate
    verdict's, rate_verdict.py)."""
    return [row for row in rows if not is_rate_stage(SimpleNamespace(rate=row.get("rate")))]


def gpu_spread(data: RunData, users: int) -> list[str]:
    """decision/cells/gpu_spread.py's lines over the sweep's lives that ran on a Ray cluster (their status names
    GPUs): K run on different GPUs, and the spread between GPUs."""
    statuses, summary = data.statuses, data.summary
    if not users or summary.empty or not any(status.slot for status in statuses.values()):  # 0: rate stages only
        return []
    at = summary[(summary["users"] == users) & summary["valid"].astype(bool)]
    lives = []
    for row in at.itertuples():
        status = statuses.get(results.life_key(row.setting, int(row.repeat)))
        if status is not None and status.slot and status.state == "done":
            # the slot's name: its node's IP *and* Ray id (nodes may share an IP, and Ray numbers each one's GPUs
            # from 0), and its GPUs
            lives.append(LifeOnGpu(int(row.k), status.slot, float(row.req_per_s)))
    return [line for line in (confound_line(lives), gpu_spread_line(lives, users)) if line]


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


def remember_spread(data: RunData, decision: Decision, ledger: bool = True) -> str:
    """The restart spread this run's restarted lives measured, into the ledger of the server's fingerprint
    (runfolder/spread_ledger.py; once per run: a report re-rendered replaces its entry); a diagnosis line when it
    cannot be written, else "". `ledger` false: --no-ledger now (a resumed run's plan.json was made with it on)."""
    use, spread, config = data.plan.restart_spread, decision.restart_spread, data.config
    if not ledger or use is None or spread is None or not spread.ledger_df or config.grid.axis \
            or len(config.load.variants) > 1:
        return ""
    levels = levels_of(decision)
    try:  # dated by the run, not by this report: `report` on an old run re-dates nothing
        remember(use, data.plan.run_id, config.target_users, spread.ledger_squares, spread.ledger_df,
                 spread.ledger_lives, today=run_date(data.plan.created, data.plan.run_id),
                 workload=workload_key(config), levels=levels, window_squares=spread.window_squares, window_df=spread.window_df)
    except OSError as err:
        return f"The restart spread this run measured could not be remembered for this server: {err}."
    return ""


def write_tables(run_dir: Path) -> RunData:
    """summary.csv and lives.csv from the raw files so far (the sweep calls it after every K)."""
    data = read_run(run_dir)
    results.write_summary(run_dir, data.summary)
    results.write_lives(run_dir, [life.as_row() for life in data.lives])
    return data


def finalize(run_dir: Path, render: bool = True, steps: Steps | None = None, ledger: bool = True) -> Path:
    """`steps` times each step (run/verdict/steps.py: a progress line for a long one; their times with --verbose);
    `ledger` false: the restart spread measured is not remembered (--no-ledger)."""
    run_dir = Path(run_dir)
    steps = steps or Steps(enabled=False)
    with steps.step("read the run folder"):
        data = write_tables(run_dir)
    plan, config = data.plan, data.config
    if plan.mode == "ramp":
        life = plan.lives[0]
        with steps.step("decide (resampling every stage)"):
            decision = ramp_decision(data.evidence(), life.k, life.setting, life.argv, config.decision,
                                     [window for _, window in data.rate_windows], bool(config.load.user_stages))
    else:
        decision = with_settings_in_effect(decide_all(data, steps), findings_from(user_stage_rows(sweep_rows(data))))
        if plan.confirm is not None:
            decision = confirmed(data, decision)
        elif plan.confirm_variants and decision.by_variant:
            decision = by_variant([(part.variant, confirmed(data, part, part.variant))
                                   for part in decision.by_variant])
        elif note := unconfirmed_note(decision, config.decision.confirm):
            decision.diagnoses.append(note)
        note_unconfirmed_schedules(decision, config.decision.confirm)
    for state, notes in (("failed", decision.failed_lives), ("skipped", decision.skipped_lives)):
        notes.extend(LifeNote(life=l.planned.dir, reason=l.reason) for l in data.lives if l.state == state)
    fallbacks = [l.planned.dir for l in data.lives
                 if any(block.tokens.get("prompt_method") not in (None, "", "tokenize", METHOD_REQUEST_SET)
                        for block in l.variants or [l])]
    if fallbacks:
        decision.diagnoses.append(f"Prompts in {len(fallbacks)} lives were not text calibrated through /tokenize "
                                  f"(token ids, or uncalibrated text on the chat endpoint: see lives.csv "
                                  f"prompt_note), e.g. {fallbacks[0]}.")
    if decision.skipped_lives:
        ks = sorted({l.planned.k for l in data.lives if l.state == "skipped"})
        decision.reasons.append(f"Early stop: K {ks} were not run once the stop rule fired "
                                f"(rerun with --no-early-stop to measure them).")
    decision.diagnoses += telemetry_gaps(data.statuses)
    decision.diagnoses += behind_findings([window for _, window in data.rate_windows])
    if plan.mode != "ramp":  # the verdict at the target rate, beside or instead of the users one; capacities
        decision = with_rate_verdict(decision, data)
    decision.diagnoses += gpu_spread(data, config.target_users)
    if plan.mode != "ramp" and config.load.requests:
        with steps.step("request set"):
            decision.request_set = request_set_summary(data, decision)
    if note := request_set_note(config):
        decision.diagnoses.append(note)
    costs = life_costs(plan.lives, data.statuses)
    decision.cost = run_cost(costs, config, config.sweep.strategy, plan.adaptive.stopped if plan.adaptive else "",
                             priced_range(decision, config))
    if plan.adaptive is not None and config.sweep.strategy == "capacity":
        decision.reasons.append(capacity_note(data))
    elif plan.adaptive is not None:
        lives_by_k = Counter(c.k for c in costs if not c.confirm)
        ran = {c.life for c in costs}
        probes = [entry.dir for entry in plan.lives if entry.purpose == CAPACITY_PURPOSE and entry.dir in ran]
        ended = sum(1 for life in probes if (status := data.statuses.get(life)) is not None and status.ended_early)
        decision.reasons.append(run_note(config.speculation.k, lives_by_k, decision.cost.stopped_because,
                                         plan.adaptive.stop, len(plan.cluster.slots) if plan.cluster else 1,
                                         plan.adaptive.model_skipped, len(probes), ended))
    if note := remember_spread(data, decision, ledger):
        decision.diagnoses.append(note)
    results.write_json(run_dir / "decision.json", decision.model_dump(mode="json"))
    if not render:
        return run_dir / "summary.csv"
    with steps.step("report page"):
        from ...report.render import write_report  # jinja2 + plotly load only when a page is rendered

        return write_report(run_dir, data.summary, decision, data.record(), data.timelines, frontier_points(data))

