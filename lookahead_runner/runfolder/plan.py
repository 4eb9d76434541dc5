"""A run folder's plan.json and each life's status.json, typed and versioned, and the one module that reads
them, writes them, appends lives to the plan and retires them from it.

    plan.json   Plan: the probe, the config (secrets as ${NAME}), the placement (a PlacementRecord,
                runfolder/preflight.py, the contract it shares with preflight.json), one PlannedLife per
                server life (role "confirm" for the confirmation life's, with the ConfirmPlan at "confirm")
    status.json LifeStatus: running | done | failed | skipped, why, and what the life measured about itself

A field of plan.json is added here, on Plan or PlannedLife, with a default so older folders still read.
Schema history: plan 1 (untyped, before issue 23: the same keys, "role" only on confirmation entries) reads
as 2; a status.json without "version" is status 1. Fields added with a default (LifeStatus's node, gpus, slot and
t_start_s, Plan.cluster: issue 30; Plan.restart_spread and PlannedLife.purpose: issue 38; AdaptiveState.model_skipped:
issue 49) keep the version: an older folder reads with their defaults, and an older reader keeps them (Record).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from ..config import SweepConfig
from ..contracts.paths import relative_inside
from ..decision.schema import ConfirmPlan
from .preflight import PlacementRecord, PreflightRecord
from .record import Record
from .results import read_json, redact, write_json
from .spread_ledger import LedgerUse

PLAN_VERSION = 2
STATUS_VERSION = 1
CONFIRM_ROLE = "confirm"  # the confirmation life's entries (confirm_life.py plans them)
SWEEP_ROLE = ""
SPREAD_PURPOSE = "spread"  # an adaptive life chosen to measure the restart spread (PlannedLife.purpose)
CAPACITY_PURPOSE = "capacity"  # an adaptive life at a rate that probes a capacity the verdict hangs on

LifeState = Literal["running", "done", "failed", "skipped"]


class RunDirError(ValueError):
    """Not a run folder this version can read; the message says what to pass."""


class PlannedLife(Record):
    """One server life of the plan (one repeat of one setting): its argv as recorded, secrets as ${NAME}."""

    setting: str                     # Setting.name: k4, slots4, k4-max-num-seqs64, confirm
    k: int
    repeat: int
    axis_flag: str = ""
    axis_value: str = ""
    argv: list[str]
    dir: str                         # the life's folder under the run folder: <setting>/r<repeat>
    role: str = SWEEP_ROLE           # "" = a life of the sweep, "confirm" = the confirmation life
    spec_key: str = ""               # grid.spec_key: the --speculative-config key axis_value sets
    variant: str = ""                # a confirmation life of one workload variant (its label), running it alone
    stages: list[int] | None = None  # adaptive: the users of the stages it runs, when a subset (None: all)
    # capacity: the rate stage(s) a probe runs instead of the config's stages; adaptive at a rate: the target rate's
    # stage a repeat runs alone (a rate stage of the config's)
    rates: list[float] | None = None
    chosen: str = ""                 # adaptive: why the chooser picked this life
    model_trust: str = ""            # adaptive: "trusted", or why the performance model was not, when it was chosen
    purpose: str = ""                # adaptive: "spread" = chosen to measure the restart spread (cost.py counts it),
    #                                  "capacity" = a probe of a capacity the verdict at the rate hangs on

    @field_validator("dir")
    @classmethod
    def _dir_inside(cls, value: str) -> str:
        """A folder someone sends is read only inside itself: no absolute path, no "..", no empty part."""
        if not relative_inside(value):
            raise ValueError(f"{value!r} is not a folder inside the run folder (write it as k4/r0)")
        return value

    @property
    def confirms(self) -> bool:
        return self.role == CONFIRM_ROLE


class SkippedOnModel(Record):
    """A K the adaptive sweep left out on the performance model's word, with the figures it was left out on (the
    chooser's ModelSkip, decision/perfmodel/prior.py): its prediction at the target and interval, the leader's figure
    as the model predicts it and as measured, the model's held-out error and where that figure comes from."""

    k: int
    predicted: float
    low: float
    high: float
    leader: int
    leader_predicted: float
    leader_measured: float
    heldout_error: float | None = None
    error_scope: str = ""           # "" = at the target's concurrency
    unit: str = ""
    kv_fills: bool = False          # left out because its KV pool is predicted to fill at the target
    bound: float | None = None      # the error its prediction was given (None: a run from before the bound)
    level: float | None = None      # ... exceeded with this probability
    count: int = 0                  # ... on this many held-out errors


class AdaptiveState(Record):
    """plan.json's "adaptive": why the adaptive sweep stopped ("" while it runs), the stop's kind, and the K it left
    out on the performance model's word when it stopped."""

    stopped: str = ""
    stop: str = ""
    model_skipped: list[SkippedOnModel] = Field(default_factory=list)


class ClusterRecord(Record):
    """plan.json's "cluster" (cluster.engine = "ray"): the slots lives ran on and the order they were handed out,
    shuffled with `seed` so that K and GPU are not confounded (run/cluster/queue.py)."""

    address: str = ""                # "" = a Ray started on the driver's machine
    slots: list[str] = Field(default_factory=list)   # each slot's node and GPUs, as it described itself
    seed: int = 0
    order: list[str] = Field(default_factory=list)   # life folders in the order they were handed to a slot


class Plan(Record):
    """plan.json: everything a resumed run or a re-rendered report needs besides the life folders."""

    version: int = PLAN_VERSION
    mode: Literal["sweep", "ramp"] = "sweep"
    run_id: str
    created: str = ""
    probe: dict[str, Any]            # vllm.probe.Capabilities.to_dict() and the knob flag
    config: dict[str, Any]           # the SweepConfig, secrets as ${NAME}
    target_users: int
    is_simulator: bool = False
    lives: list[PlannedLife] = Field(default_factory=list)
    placement: PlacementRecord | None = None  # run/life/placement.py Placement.to_record
    confirm: ConfirmPlan | None = None
    confirm_variants: list[ConfirmPlan] = Field(default_factory=list)  # each workload variant's, with several
    adaptive: AdaptiveState | None = None  # sweep.strategy "adaptive" or "capacity" (their loops); None for the grid
    cluster: ClusterRecord | None = None   # cluster.engine = "ray"; None for lives run here one at a time
    # the server's fingerprint and the restart spread earlier runs on it measured, as this run took it from the
    # ledger (spread_ledger.py): the decision reads it from here, never from the ledger again; None: not needed
    restart_spread: LedgerUse | None = None

    def sweep_config(self) -> SweepConfig:
        """The config, its decision with the restart spread this run took from earlier runs on the server."""
        config = SweepConfig.model_validate(_readable_today(self.config))
        config.decision.with_earlier(self.restart_spread.earlier_spread() if self.restart_spread else None)
        return config

    def sweep_lives(self, axis_value: str | None = None) -> list[PlannedLife]:
        """The sweep's lives (not the confirmation's), of one grid value if given."""
        return [l for l in self.lives if not l.confirms and (axis_value is None or l.axis_value == axis_value)]

    def confirm_lives(self, variant: str | None = None) -> list[PlannedLife]:
        """The confirmation lives, of one workload variant's confirmation if given ("" = the only one)."""
        return [l for l in self.lives if l.confirms and (variant is None or l.variant == variant)]

    def confirmation(self, variant: str = "") -> ConfirmPlan | None:
        """The confirmation planned: the sweep's, or that of one workload variant."""
        if not variant:
            return self.confirm
        return next((p for p in self.confirm_variants if p.variant == variant), None)


class LifeStatus(Record):
    """status.json of one life, written `running` when it starts and once more when it ends."""

    version: int = STATUS_VERSION
    state: LifeState
    reason: str = ""                 # why it failed or was skipped (one line); "" when done
    t_s: float = Field(default_factory=time.time)
    detail: str = ""                 # the whole error, when the reason is its first line
    server_life: str = ""            # same-server repeats: the life whose folder holds the server's files
    memory_source: str = ""
    memory_note: str = ""            # why device memory was not measured
    ready_s: float | None = None
    memory_stable: bool | None = None
    locust_exit: int | None = None
    metrics_errors: int = 0
    last_metrics_error: str = ""
    write_errors: int = 0
    last_write_error: str = ""
    start_s: float | None = None     # server-seconds from process start to ready, stable and warm (cost.py)
    measure_s: float | None = None   # seconds of this life's load (cost.py)
    node: str = ""                   # a life on a Ray cluster: the node it ran on (its IP); "" = here
    gpus: list[str] = Field(default_factory=list)  # ... its GPUs: NVML UUIDs, or Ray's GPU ids where NVML sees none
    slot: str = ""                   # ... the slot (a Ray actor holding those GPUs) that ran it
    t_start_s: float | None = None   # when its server started (epoch s; t_s is when it ended); older local: None
    ended_early: str = ""            # a capacity probe stopped once clearly over capacity: why (not a failure)


PLAN_FILE = "plan.json"
STATUS_FILE = "status.json"


def plan_path(run_dir: Path) -> Path:
    return Path(run_dir) / PLAN_FILE


def _readable_today(config: dict[str, Any]) -> dict[str, Any]:
    """A saved config as this version reads it. Runs made before issue 46 saved decision.slo_attainment (the
    share every SLO once shared at a rate); each SLO's own percentile says it now, so a re-analysis drops it."""
    decision = config.get("decision")
    if isinstance(decision, dict) and "slo_attainment" in decision:
        return {**config, "decision": {k: v for k, v in decision.items() if k != "slo_attainment"}}
    return config


def has_plan(run_dir: Path) -> bool:
    return plan_path(run_dir).is_file()


def read_plan(run_dir: Path) -> Plan:
    """plan.json of any schema this version knows; RunDirError with what to pass otherwise."""
    try:
        data = read_json(plan_path(run_dir))
    except (OSError, ValueError):
        raise RunDirError(f"{run_dir}: no readable plan.json; pass a folder made by `lookahead-runner sweep`") from None
    if isinstance(data, dict) and isinstance(data.get("version"), int) and data["version"] > PLAN_VERSION:
        raise RunDirError(f"{run_dir}: plan.json is schema {data['version']}, newer than this lookahead-runner reads "
                          f"({PLAN_VERSION}); upgrade lookahead-runner")
    try:
        plan = Plan.model_validate(data)
        plan.probe["version"]
    except ValidationError as err:
        raise _not_a_plan(run_dir, err) from None
    except (KeyError, TypeError, ValueError):
        raise _not_a_plan(run_dir) from None
    return plan


def read_plan_and_config(run_dir: Path) -> tuple[Plan, SweepConfig]:
    """plan.json and the config it holds (which must validate as this version's SweepConfig)."""
    plan = read_plan(run_dir)
    try:
        return plan, plan.sweep_config()
    except ValidationError:
        raise _not_a_plan(run_dir) from None


def _not_a_plan(run_dir: Path, err: ValidationError | None = None) -> RunDirError:
    where = ""
    if err is not None and err.errors():  # the field at fault, e.g. restart_spread.earlier: unknown key 'x'
        first = err.errors()[0]
        where = f" ({'.'.join(map(str, first['loc']))}: {first['msg'].removeprefix('Value error, ')[:160]})"
    return RunDirError(f"{run_dir}: plan.json is not a plan this version can read{where}; "
                       "pass a folder made by `lookahead-runner sweep`")


def write_plan(run_dir: Path, plan: Plan) -> None:
    """Atomically; anything that looks like a secret and is not a ${NAME} placeholder is redacted."""
    write_json(plan_path(run_dir), redact(plan.model_dump(mode="json")))


def append_lives(run_dir: Path, lives: list[PlannedLife]) -> Plan:
    """plan.json gains these lives (secrets masked by the caller), so --resume finds them."""
    plan = read_plan(run_dir)
    plan.lives += lives
    write_plan(run_dir, plan)
    return plan


def add_confirmation(run_dir: Path, confirm: ConfirmPlan, lives: list[PlannedLife]) -> Plan:
    """plan.json gains the confirmation and its lives (role "confirm"; with the workload variant it confirms)."""
    plan = read_plan(run_dir)
    if confirm.variant:
        plan.confirm_variants.append(confirm)
    else:
        plan.confirm = confirm
    plan.lives += [life.model_copy(update={"role": CONFIRM_ROLE, "variant": confirm.variant}) for life in lives]
    write_plan(run_dir, plan)
    return plan


def retire_confirmation(run_dir: Path, variant: str = "") -> Plan:
    """The confirmation (of one workload variant, if given) and its lives leave plan.json (their folder is
    kept by the caller)."""
    plan = read_plan(run_dir)
    plan.lives = [l for l in plan.lives if not (l.confirms and l.variant == variant)]
    if variant:
        plan.confirm_variants = [p for p in plan.confirm_variants if p.variant != variant]
    else:
        plan.confirm = None
    write_plan(run_dir, plan)
    return plan


def record_adaptive_stop(run_dir: Path, stopped: str, stop: str, skipped=()) -> Plan:
    """The adaptive sweep's stop and why, in plan.json, with the K the model ruled out (`skipped`: the chooser's
    ModelSkip, each field kept)."""
    plan = read_plan(run_dir)
    plan.adaptive = AdaptiveState(stopped=stopped, stop=stop, model_skipped=[
        SkippedOnModel.written(dataclasses.asdict(s)) for s in skipped])
    write_plan(run_dir, plan)
    return plan


def record_cluster(run_dir: Path, address: str = "", slots: list[str] | None = None, seed: int | None = None,
                   handed_out: list[str] | None = None) -> Plan:
    """plan.json's "cluster": the slots (set when the sweep starts them), lives appended in the order they are
    handed to a slot."""
    plan = read_plan(run_dir)
    record = plan.cluster or ClusterRecord()
    if slots is not None:
        record = record.model_copy(update={"address": address, "slots": slots, "seed": seed or 0})
    if handed_out:
        record = record.model_copy(update={"order": record.order + handed_out})
    plan.cluster = record
    write_plan(run_dir, plan)
    return plan


def write_status(directory: Path, state: LifeState, reason: str = "", **fields) -> LifeStatus:
    """Written strictly (Record.written): a field LifeStatus does not name is a mistake here."""
    status = LifeStatus.written({"state": state, "reason": reason, **fields})
    write_json(Path(directory) / STATUS_FILE, status.model_dump(mode="json"))
    return status


def read_status(directory: Path) -> LifeStatus | None:
    """The life's status.json, or None: never started, cut before it was written, or unreadable."""
    try:
        return LifeStatus.model_validate(read_json(Path(directory) / STATUS_FILE))
    except (OSError, ValueError, ValidationError):
        return None


def life_state(directory: Path) -> str:
    """done | failed | skipped | running | missing (never started or cut half-way: both are rerun on resume)."""
    status = read_status(directory)
    return status.state if status else "missing"


class VariantTokens(BaseModel):
    """One workload variant's block of a life: its token accounting (analysis.block_token_check) and prompts."""

    variant: str
    tokens: dict[str, Any] = Field(default_factory=dict)


class LifeResult(BaseModel):
    """A planned life read back from its folder: its status.json and its token accounting (analysis.py)."""

    planned: PlannedLife
    status: LifeStatus | None = None           # None: never started, or cut before status.json was written
    tokens: dict[str, Any] = Field(default_factory=dict)
    variants: list[VariantTokens] = Field(default_factory=list)  # each workload variant's block, with several

    @property
    def state(self) -> str:
        return self.status.state if self.status else "missing"

    @property
    def reason(self) -> str:
        return self.status.reason if self.status else ""

    def as_row(self) -> dict[str, Any]:
        """The planned entry with what its folder says (the report's and lives.csv's row)."""
        row = self.planned.model_dump(mode="json") | {"status": self.state, "reason": self.reason,
                                                      "tokens": self.tokens}
        row |= {"start_s": self.status.start_s if self.status else None,
                "measure_s": self.status.measure_s if self.status else None}
        if self.status and self.status.slot:  # a life on a Ray cluster: where and when it ran
            row |= {"node": self.status.node, "gpus": ";".join(self.status.gpus), "slot": self.status.slot,
                    "t_start_s": self.status.t_start_s, "t_end_s": self.status.t_s}
        return row | ({"variants": [v.model_dump(mode="json") for v in self.variants]} if self.variants else {})


class RunRecord(BaseModel):
    """A run folder as the report reads it: the plan, each planned life read back, the pre-flight's record."""

    plan: Plan
    lives: list[LifeResult] = Field(default_factory=list)
    preflight: PreflightRecord | None = None  # preflight.json (runfolder/preflight.py); None: no pre-flight ran
    slot_preflights: dict[str, PreflightRecord | None] = Field(default_factory=dict)  # a Ray run's, by slot
