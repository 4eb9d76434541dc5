"""The confirmation life: after the decision, the recommendation started exactly as the report prints it
(the schedule's argv, or the single K's) and driven through the stages decision/confirmation/confirm.py plans.

It is a life like the others: its plan.json entries (role "confirm", folder confirm/r<repeat>) are written
before it starts, so --resume runs the same stages again, and a life whose status.json says done is kept.
The plan of the confirmation itself sits at plan.json's "confirm". With several workload variants, each
variant's recommendation is confirmed in lives of its own running that variant's requests alone (folder
confirm-<variant key>/r<repeat>, entries naming the variant), their plans in plan.json's "confirm_variants".
"""
from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from ...config import ResolvedServer, StageConfig, SweepConfig
from ...decision.confirmation.confirm import describe, plan as plan_confirmation
from ...decision.confirmation.rate_confirm import plan_at_rate
from ...decision.schema import ConfirmPlan, Decision
from ...runfolder.read import RunData
from ..life.launch import Life, planned_lives
from ...runfolder.plan import Plan, add_confirmation, read_plan, retire_confirmation
from ...vllm.knob import Setting
from ...vllm.probe import Capabilities

LABEL = "confirm"


def _variant(config: SweepConfig, label: str):
    return next(v for v in config.load.variants if v.label == label)


def setting_of(config: SweepConfig, plan: ConfirmPlan) -> Setting:
    label = f"{LABEL}-{_variant(config, plan.variant).key}" if plan.variant else LABEL
    return Setting(plan.k, config.speculation.raw_lookahead_slots, config.grid.flag if plan.axis_value else "",
                   plan.axis_value,
                   schedule=tuple(tuple(r) for r in plan.ranges), schedule_form=plan.form, label=label,
                   spec_key=config.grid.spec_key if plan.axis_value else "")


def config_of(config: SweepConfig, plan: ConfirmPlan) -> SweepConfig:
    """The sweep's config with the confirmation's stages (the threshold stages among them); a workload
    variant's confirmation sends that variant's requests only."""
    update: dict = {"stages": [StageConfig(**stage) for stage in plan.stages]}
    if plan.variant:
        v = _variant(config, plan.variant)
        update |= {"prompt_tokens": v.prompt_tokens, "output_tokens": v.output_setting, "temperature": v.temperature}
    return config.model_copy(update={"load": config.load.model_copy(update=update)})


def axis_value_of(data: RunData, decision: Decision) -> str:
    """With a grid, the flag value whose lives the recommendation comes from."""
    if not data.config.grid.axis or decision.recommended is None:
        return ""
    return next((value for value in data.config.grid.values
                 if data.argv_by_k(value).get(decision.recommended.k) == decision.recommended.argv), "")


def planned(data: RunData, decision: Decision, variant: str = "") -> ConfirmPlan | None:
    """What the confirmation runs, from the decision over the per-K lives (None: nothing to confirm); of one
    workload variant's decision, with several."""
    config = data.config
    if config.server.url or data.plan.mode != "sweep":
        return None  # a running server cannot be restarted with another configuration
    if decision.target_users is None and decision.target_rate is not None:  # a verdict at a rate: its stage alone
        stage = next(s for s in config.load.rate_stages if math.isclose(s.rate, decision.target_rate))
        return plan_at_rate(decision, config.decision, stage.duration_s)
    value = axis_value_of(data, decision)
    stages = [(stage.users, stage.duration_s) for stage in config.load.user_stages]
    plan = plan_confirmation(decision, data.evidence(value, variant), stages, config.decision, value)
    return plan.model_copy(update={"variant": variant}) if plan is not None and variant else plan


def add_to_plan(config: SweepConfig, caps: Capabilities, run_dir: Path, plan: ConfirmPlan,
                server: ResolvedServer) -> list[Life]:
    """plan.json gains the confirmation and one life entry per repeat (secrets as ${NAME})."""
    lives = [Life(setting_of(config, plan), repeat) for repeat in range(plan.repeats)]
    add_confirmation(run_dir, plan, planned_lives(config, caps, lives, server))
    return lives


def lives_in(document: Plan, config: SweepConfig, variant: str = "") -> tuple[ConfirmPlan | None, list[Life]]:
    """The confirmation a plan.json holds already (a resumed run), and its lives."""
    plan = document.confirmation(variant)
    if plan is None:
        return None, []
    setting = setting_of(config, plan)
    return plan, [Life(setting, l.repeat) for l in document.confirm_lives(variant)]


def retire(run_dir: Path, plan: ConfirmPlan) -> str:
    """A confirmation planned for what the decision no longer recommends (a resumed run re-measured): its
    folder is kept under another name, its entries leave plan.json, so a fresh one is planned."""
    name = next((l.dir.split("/")[0] for l in read_plan(run_dir).confirm_lives(plan.variant)), LABEL)
    folder, n = run_dir / name, 1
    while (run_dir / f"{name}-stale{n}").exists():
        n += 1
    if folder.exists():
        folder.rename(run_dir / f"{name}-stale{n}")
    retire_confirmation(run_dir, plan.variant)
    return f"{name}-stale{n}"


def switch_off(run_dir: Path, say) -> None:
    """decision.confirm = "off" (--no-confirm on a resumed run): a confirmation planned before is retired, so the
    decision stands without it and the report says so."""
    document = read_plan(run_dir)
    for plan in ([document.confirm] if document.confirm else []) + document.confirm_variants:
        say(f"confirmation: off (decision.confirm = \"off\"); {describe(plan)}, planned before, is kept in "
            f"{retire(run_dir, plan)}/")


def run_confirmations(config: SweepConfig, caps: Capabilities, run_dir: Path, data: RunData, decision: Decision,
                      say, run_lives: Callable[[SweepConfig, list[Life]], None], server: ResolvedServer,
                      announce: Callable[[list[Life], list[StageConfig]], None] = lambda lives, stages: None) -> list[Life]:
    """run_confirmation of the decision, or of each workload variant's decision in turn."""
    if not decision.by_variant:
        return run_confirmation(config, caps, run_dir, data, decision, say, run_lives, server, announce)
    return [life for part in decision.by_variant
            for life in run_confirmation(config, caps, run_dir, data, part, say, run_lives, server, announce,
                                         part.variant)]


def run_confirmation(config: SweepConfig, caps: Capabilities, run_dir: Path, data: RunData, decision: Decision,
                     say, run_lives: Callable[[SweepConfig, list[Life]], None], server: ResolvedServer,
                     announce: Callable[[list[Life], list[StageConfig]], None] = lambda lives, stages: None,
                     variant: str = "") -> list[Life]:
    """Plan the confirmation (once; again when the decision changed since) and run each of its lives not done
    yet with `run_lives(config, lives)`, the sweep's own loop; returns its lives. `announce(lives, stages)`
    tells the progress display what is coming. `variant`: the workload variant `decision` is for."""
    plan, lives = lives_in(read_plan(run_dir), config, variant)
    fresh = planned(data, decision, variant)
    what = f"confirmation of {variant}" if variant else "confirmation"
    if plan is not None and (fresh is None or (fresh.kind, fresh.k, fresh.ranges) != (plan.kind, plan.k, plan.ranges)):
        say(f"{what}: the decision changed since {describe(plan)} was planned; its lives are kept in "
            f"{retire(run_dir, plan)}/")
        plan = None
    if plan is None:
        if fresh is None:
            return []
        plan, lives = fresh, add_to_plan(config, caps, run_dir, fresh, server)
    announce(lives, config_of(config, plan).load.stages)
    say(f"{what}: {describe(plan)}; {plan.scope}")
    run_lives(config_of(config, plan), lives)
    return lives
