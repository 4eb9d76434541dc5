"""The confirmation life: after the decision, the recommendation started exactly as the report prints it
(the schedule's argv, or the single K's) and driven through the stages decision/confirm.py plans.

It is a life like the others: its plan.json entries (role "confirm", folder confirm/r<repeat>) are written
before it starts, so --resume runs the same stages again, and a life whose status.json says done is kept.
The plan of the confirmation itself sits at plan.json's "confirm".
"""
from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from . import results
from .config import StageConfig, SweepConfig
from .decision.confirm import describe, plan as plan_confirmation
from .decision.schema import ConfirmPlan, Decision
from .finalize import CONFIRM_ROLE as ROLE, RunData
from .life import Life, plan_entry
from .masking import mask_server
from .vllm.knob import Setting
from .vllm.probe import Capabilities

LABEL = "confirm"


def setting_of(config: SweepConfig, plan: ConfirmPlan) -> Setting:
    return Setting(plan.k, False, config.grid.flag if plan.axis_value else "", plan.axis_value,
                   schedule=tuple(tuple(r) for r in plan.ranges), schedule_form=plan.form, label=LABEL)


def config_of(config: SweepConfig, plan: ConfirmPlan) -> SweepConfig:
    """The sweep's config with the confirmation's stages (the threshold stages among them)."""
    stages = [StageConfig(**stage) for stage in plan.stages]
    return config.model_copy(update={"load": config.load.model_copy(update={"stages": stages})})


def axis_value_of(data: RunData, decision: Decision) -> str:
    """With a grid, the flag value whose lives the recommendation comes from."""
    if not data.config.grid.flag or decision.recommended is None:
        return ""
    return next((value for value in data.config.grid.values
                 if data.argv_by_k(value).get(decision.recommended.k) == decision.recommended.argv), "")


def planned(data: RunData, decision: Decision) -> ConfirmPlan | None:
    """What the confirmation runs, from the decision over the per-K lives (None: nothing to confirm)."""
    config = data.config
    if config.server.url or data.plan.get("mode", "sweep") != "sweep":
        return None  # a running server cannot be restarted with another configuration
    value = axis_value_of(data, decision)
    stages = [(stage.users, stage.duration_s) for stage in config.load.stages]
    return plan_confirmation(decision, data.evidence(value), stages, config.decision, value)


def add_to_plan(config: SweepConfig, caps: Capabilities, run_dir: Path, plan: ConfirmPlan) -> list[Life]:
    """plan.json gains the confirmation and one life entry per repeat (secrets as ${NAME})."""
    document = results.read_json(run_dir / "plan.json")
    setting = setting_of(config, plan)
    lives = [Life(setting, repeat) for repeat in range(plan.repeats)]
    _, secrets = mask_server(config.server, os.environ)
    document["confirm"] = plan.model_dump(mode="json")
    document["lives"] += [results.redact(secrets.mask_value(plan_entry(config, caps, life, role=ROLE)))
                          for life in lives]
    results.write_json(run_dir / "plan.json", document)
    return lives


def lives_in(document: dict, config: SweepConfig) -> tuple[ConfirmPlan | None, list[Life]]:
    """The confirmation a plan.json holds already (a resumed run), and its lives."""
    if not document.get("confirm"):
        return None, []
    plan = ConfirmPlan.model_validate(document["confirm"])
    setting = setting_of(config, plan)
    return plan, [Life(setting, l["repeat"]) for l in document["lives"] if l.get("role") == ROLE]


def run_confirmation(config: SweepConfig, caps: Capabilities, run_dir: Path, data: RunData, decision: Decision,
                     say, run_life: Callable[[SweepConfig, Setting, list[int]], None],
                     announce: Callable[[list[Life], list[StageConfig]], None] = lambda lives, stages: None,
                     kept: Callable[[Life], None] = lambda life: None) -> list[Life]:
    """Plan the confirmation (once) and run each of its lives not done yet; returns its lives.

    `run_life(config, setting, repeats)` runs one server life as the sweep runs its own (its placement);
    `announce(lives, stages)` tells the progress display what is coming; `kept(life)`: a life done earlier."""
    plan, lives = lives_in(results.read_json(run_dir / "plan.json"), config)
    if plan is None:
        plan = planned(data, decision)
        if plan is None:
            return []
        lives = add_to_plan(config, caps, run_dir, plan)
    announce(lives, config_of(config, plan).load.stages)
    say(f"confirmation: {describe(plan)}; {plan.scope}")
    todo = []
    for life in lives:
        if results.life_state(results.life_dir(run_dir, life.setting.name, life.repeat)) == "done":
            kept(life)
        else:
            todo.append(life)
    same_server = config.load.repeat_mode == "same-server"
    for group in ([todo] if same_server and todo else [[life] for life in todo]):
        run_life(config_of(config, plan), group[0].setting, [life.repeat for life in group])
    return lives
