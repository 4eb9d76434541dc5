"""A run folder read back: its plan and config, each life's status and token check, the summary rows and the
evidence windows (`read_run`: only reads; the sweep, `lookahead-runner report` and the performance model use it)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..config import SweepConfig
from ..config.workload_variants import Variant
from ..contracts.paths import OutsideFolder, inside
from ..decision import Window, evidence, window
from . import results
from .columns import read_table
from .analysis import Drafting, WindowRules, block_token_check, life_token_check, stage_windows, summary_frame
from .lag_advice import lag_advice
from .plan import (LifeResult, LifeStatus, Plan, RunDirError, RunRecord, VariantTokens, read_plan_and_config,
                   read_status)
from .preflight import PreflightRecord, read_preflight, read_slot_preflights
from .rate_windows import rate_stage_window
from ..workload.arrivals import ArrivalProcess
from ..decision.cells.rate_window import RateWindow


def load_life(directory: Path, variant: str = "") -> dict[str, pd.DataFrame]:
    """A life's frames (typed columns, runfolder/columns.py); the requests and stages of one workload variant's
    block (its folder, `variant`)."""
    block = directory / variant if variant else directory
    return {
        "requests": read_table(block / "requests.csv"),
        "stages": read_table(block / "stages.csv"),
        "server": read_table(directory / "server_metrics.csv"),
        "gpu": read_table(directory / "gpu.csv"),
    }


@dataclass
class BlockRequests:
    """One life's (one workload variant's block's) requests as read, and, in a run with a request set (the only
    reader), its valid windows: (users, seconds, the successful requests that finished in it)."""

    requests: pd.DataFrame
    windows: list[tuple[int, float, pd.DataFrame]] = field(default_factory=list)


def _blocks_of(directory: Path) -> dict[str, dict]:
    """variants.json: each workload variant's block (its times), by key; {} with one variant."""
    try:
        return {b["key"]: b for b in results.read_json(directory / "variants.json")["variants"]}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _workload_of(directory: Path) -> dict:
    """How the scenario built its prompts in this life (workload.json): tokenize or token-ids."""
    try:
        data = results.read_json(directory / "workload.json")
    except (OSError, ValueError):
        return {}
    return {"prompt_method": data.get("prompt_method", ""), "prompt_note": data.get("prompt_note", "")}


@dataclass
class RunData:
    """A run folder read back: its plan and config, each life's status, the summary rows and the evidence."""

    plan: Plan
    config: SweepConfig
    summary: pd.DataFrame
    windows: list[tuple[str, Window]]           # (grid axis value, window) for every valid user-stage window
    confirm_windows: list[Window] = field(default_factory=list)  # the confirmation life's (not evidence)
    timelines: dict[str, dict[str, pd.DataFrame]] = field(default_factory=dict)
    lives: list[LifeResult] = field(default_factory=list)  # in the plan's order
    preflight: PreflightRecord | None = None
    slot_preflights: dict = field(default_factory=dict)  # a Ray run's preflight-slots/ (read_slot_preflights)
    run_dir: Path | None = None                 # where the lives' own files are (the performance model reads them)
    # (grid axis value, window) for every rate stage's window of the sweep's lives, valid or not (its .valid)
    rate_windows: list[tuple[str, RateWindow]] = field(default_factory=list)
    # with a request set (load.requests), each life's requests, read once, by (life folder, workload variant key):
    # nothing reads requests.csv again
    requests: dict[tuple[str, str], BlockRequests] = field(default_factory=dict)
    confirm_rate_windows: list[tuple[str, RateWindow]] = field(default_factory=list)  # a rate confirmation's

    @property
    def statuses(self) -> dict[str, LifeStatus]:
        return {life.planned.dir: life.status for life in self.lives if life.status is not None}

    def record(self) -> RunRecord:
        """What the report reads: the plan, each life read back, the pre-flight."""
        return RunRecord(plan=self.plan, lives=self.lives, preflight=self.preflight,
                         slot_preflights=self.slot_preflights)

    def evidence(self, axis_value: str = "", variant: str = ""):
        """The windows of one grid value and one workload variant (its label; "" = the only one)."""
        index = next((i for i, v in enumerate(self.config.load.variants) if v.label == variant), 0)
        return evidence([w for value, w in self.windows if value == axis_value and w.variant == variant],
                        self.config.target_for(index), self.invalid(axis_value, variant))

    def invalid(self, axis_value: str = "", variant: str = "") -> dict[tuple[int, int], str]:
        """Why each (K, users)'s windows are invalid (the first one's reason; "every request failed, most often
        ..." where none succeeded), so a verdict with no measurement can say why. Kept by `evidence` only where no
        window of that (K, users) is valid."""
        rows = self.summary
        if rows.empty:
            return {}
        mine = ~rows["valid"].astype(bool)
        if "axis_value" in rows:
            mine &= rows["axis_value"].fillna("").astype(str) == axis_value
        if "variant" in rows:
            mine &= rows["variant"].fillna("").astype(str) == variant
        out: dict[tuple[int, int], str] = {}
        for row in rows[mine].itertuples(index=False):
            out.setdefault((int(row.k), int(row.users)), str(row.invalid_reason))
        return out

    def argv_by_k(self, axis_value: str = "") -> dict[int, list[str]]:
        return {l.k: l.argv for l in self.plan.sweep_lives(axis_value)}

    def setting_names(self, axis_value: str = "") -> dict[int, str]:
        return {l.k: l.setting for l in self.plan.sweep_lives(axis_value)}


def read_run(run_dir: Path) -> RunData:
    """Every life's raw files -> summary rows and evidence windows (pure analysis; only reads)."""
    plan, config = read_plan_and_config(run_dir)
    preflight = read_preflight(run_dir)
    rules = WindowRules(warmup_s=config.load.warmup_s, min_requests=config.decision.min_requests,
                        expected_output_tokens=config.load.variants[0].expected_output_tokens,
                        expected_prompt_tokens=config.load.variants[0].expected_prompt_tokens,
                        max_client_lag_p99_ms=config.decision.max_client_lag_p99_ms,
                        lag_advice=lag_advice(plan.placement, preflight))
    data = RunData(plan, config, pd.DataFrame(), [], preflight=preflight, run_dir=run_dir,
                   slot_preflights=read_slot_preflights(run_dir))
    rows = []
    variants = config.load.variants
    for life in plan.lives:
        directory = _life_folder(run_dir, life.dir)
        result = LifeResult(planned=life, status=read_status(directory))
        data.lives.append(result)
        if result.status is None:
            continue
        # a workload variant's confirmation life runs that variant alone: one block, in the life's own folder
        alone = [v for v in variants if life.variant and v.label == life.variant]
        blocks = [(v, load_life(directory)) for v in alone] or [(v, load_life(directory, v.key)) for v in variants]
        server, gpu = blocks[0][1]["server"], blocks[0][1]["gpu"]
        stages = [frames["stages"].assign(variant=v.label) if v.label and not frames["stages"].empty
                  else frames["stages"] for v, frames in blocks]
        data.timelines[life.dir] = {"server": server, "gpu": gpu, "stages": pd.concat(stages, ignore_index=True),
                                    "positions": read_table(directory / "spec_positions.csv")}
        if config.load.requests:  # the request set's figures read them (run/verdict/request_set_run.py); else not kept
            for variant, frames in blocks:
                data.requests[(life.dir, "" if alone else variant.key)] = BlockRequests(frames["requests"])
        result.tokens = life_token_check(pd.concat([f["requests"] for _, f in blocks], ignore_index=True),
                                         server) | _workload_of(directory / ("" if alone else variants[0].key))
        if variants[0].key and not alone:
            times = _blocks_of(directory)
            result.variants = [VariantTokens(variant=v.label, tokens=block_token_check(f["requests"], server,
                                                                                       times.get(v.key))
                                             | _workload_of(directory / v.key)) for v, f in blocks]
        for order, (variant, frames) in enumerate(blocks):
            if result.state != "done" or frames["stages"].empty or frames["requests"].empty:
                continue
            mine = _rules_for(rules, variant)
            for row, finished, ok, t0 in stage_windows(frames["requests"], frames["stages"], server, gpu,
                                                       life.setting, life.k, life.repeat, mine, variant.label,
                                                       _drafting(plan, config, life)):
                rated = rate_stage_window(row, t0, frames["stages"], frames["requests"], server,
                                          config.decision.slos, mine, config.decision.interval_level,
                                          ArrivalProcess(config.load.arrival, config.load.burstiness,
                                                         config.load.arrival_seed))
                if rated is not None:  # a rate stage: its own window (open loop), not a users cell's evidence
                    row, rate = rated
                    rows.append(row | ({"variant_order": order} if variant.key else {}))
                    (data.confirm_rate_windows if life.confirms else data.rate_windows).append((life.axis_value, rate))
                    continue
                rows.append(row | ({"variant_order": order} if variant.key else {}))
                if row["valid"] and config.load.requests:  # the request set's figures read them (run/verdict/request_set_run)
                    data.requests[(life.dir, "" if alone else variant.key)].windows.append(
                        (row["users"], row["duration_s"], ok))
                if row["valid"] and life.confirms:
                    data.confirm_windows.append(window(row, finished, ok, t0))
                elif row["valid"]:
                    data.windows.append((life.axis_value, window(row, finished, ok, t0)))
    data.summary = summary_frame(rows)
    if config.grid.axis:
        axis_of = {life.setting: life.axis_value for life in plan.lives}
        data.summary.insert(1, "axis_value", data.summary["setting"].map(axis_of))
    return data


def _life_folder(run_dir: Path, name: str) -> Path:
    """A life's folder, inside the run folder whatever links it holds (plan.json's `dir` is checked as it is read)."""
    try:
        return inside(run_dir, name)
    except OutsideFolder:
        raise RunDirError(f"{run_dir}: the life folder {name} leads outside the run folder (a link); pass a folder "
                          "made by `lookahead-runner sweep`, or copy it with its links resolved") from None


def _drafting(plan: Plan, config: SweepConfig, life) -> Drafting:
    """What the life should draft per step: its K (raw lookahead slots draft nothing), or the confirmation's
    schedule, whose windows the confirmation judges itself (not invalid for it)."""
    if life.confirms:
        confirm = plan.confirmation(life.variant)
        ranges = tuple(tuple(r) for r in confirm.ranges) if confirm is not None and confirm.kind == "schedule" else ()
        return Drafting(life.k, ranges, invalidates=False)
    return Drafting(0 if config.speculation.raw_lookahead_slots else life.k)


def _rules_for(rules: WindowRules, variant: Variant) -> WindowRules:
    return dataclasses.replace(rules, expected_output_tokens=variant.expected_output_tokens,
                               expected_prompt_tokens=variant.expected_prompt_tokens)
