"""A run folder -> the inputs of its performance model (decision/perfmodel/model.py), the fit, and the decision
with the model's summary and uses (decision/perfmodel/uses.py).

Reads what the pure model cannot: each life's spec_positions.csv (accepted tokens per draft position,
written by the sampler) and server_metrics.csv (drafts), differenced over the life, summed per K; the
workload's lengths from the config and --max-num-seqs from the argv each life ran.
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

from ...runfolder import results
from ...decision.perfmodel.fit import Params
from ...decision.perfmodel.model import PerformanceModel, PositionCounts, WorkloadShape, fit_performance_model
from ...decision.perfmodel.trust import HeldOut
from ...runfolder.columns import read_table
from ...runfolder.results import CACHE_DIR
from ...decision.perfmodel.uses import refined_schedule, summary
from ...decision.schema import Decision
from ...runfolder.read import RunData, read_run
from ...vllm.knob import MAX_NUM_SEQS_FLAG, flag_value


def _growth(frame: pd.DataFrame, column: str) -> float:
    values = pd.to_numeric(frame[column], errors="coerce").dropna() if column in frame else pd.Series(dtype=float)
    return float(values.iloc[-1] - values.iloc[0]) if len(values) >= 2 else math.nan


def life_positions(directory: Path) -> PositionCounts | None:
    """One life's drafts and accepted tokens per position over its whole life (None without counters)."""
    return positions_of(read_table(directory / "server_metrics.csv"), read_table(directory / "spec_positions.csv"))


def positions_of(server: pd.DataFrame, positions: pd.DataFrame) -> PositionCounts | None:
    """`life_positions` from the life's server_metrics.csv and spec_positions.csv as read."""
    drafts = _growth(server, "spec_drafts_total")
    if positions.empty or not math.isfinite(drafts) or drafts <= 0:
        return None
    accepted = []
    for _, rows in sorted(positions.groupby("position"), key=lambda item: int(item[0])):
        grown = _growth(rows, "accepted_total")
        accepted.append(grown if math.isfinite(grown) and grown >= 0 else 0.0)
    return PositionCounts(drafts, tuple(accepted))


def _sum(a: PositionCounts | None, b: PositionCounts) -> PositionCounts:
    if a is None:
        return b
    depth = max(len(a.accepted), len(b.accepted))
    pad = lambda c: list(c.accepted) + [0.0] * (depth - len(c.accepted))  # noqa: E731
    return PositionCounts(a.drafts + b.drafts, tuple(x + y for x, y in zip(pad(a), pad(b))))


def max_num_seqs(argv: list[str]) -> int | None:
    value = flag_value(argv, MAX_NUM_SEQS_FLAG)
    return int(value) if value is not None and value.isdigit() else None


def model_inputs(run_dir: Path, data: RunData,
                 axis_value: str = "") -> tuple[WorkloadShape, dict[int, PositionCounts]]:
    lives = [l for l in data.lives if not l.planned.confirms and l.planned.axis_value == axis_value]
    positions: dict[int, PositionCounts] = {}
    for life in lives:
        k = life.planned.k
        if k > 0 and life.state == "done":
            frames = data.timelines.get(life.planned.dir, {})
            counts = positions_of(frames["server"], frames["positions"]) if "positions" in frames \
                else life_positions(Path(run_dir) / life.planned.dir)
            if counts is not None:
                positions[k] = _sum(positions.get(k), counts)
    seqs = {max_num_seqs(l.planned.argv) for l in lives} - {None}
    variant = data.config.load.variants[0]  # natural outputs: their cap here; the fit uses the measured mean
    return WorkloadShape(variant.prompt_tokens, variant.output_tokens, min(seqs) if seqs else None), positions


def _file_part(value: str) -> str:
    """A grid value as part of one file's name (a draft model's path has slashes): its safe characters and a
    hash of it, so two values never share a file."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", value)[:40] + "-" + hashlib.sha256(value.encode()).hexdigest()[:8]


class FolderFitStore:
    """The performance model's bootstrap and held-out fits, kept in the run folder (FIT_FILE) under the hash of
    their inputs: a `report` that changed only thresholds reads them back instead of fitting again. A file that
    cannot be read or written is no error: the model is fitted."""

    def __init__(self, run_dir: Path, axis_value: str = "") -> None:
        self.path = Path(run_dir) / CACHE_DIR / (f"perfmodel-{_file_part(axis_value)}.json" if axis_value
                                                 else "perfmodel.json")

    def get(self, key: str) -> tuple[Params, list[HeldOut]] | None:
        try:
            data = results.read_json(self.path)
            if data.get("key") != key:
                return None
            params = Params(**{f.name: np.asarray(data["params"][f.name], dtype=float) for f in fields(Params)})
            return params, [HeldOut(**row) for row in data["held_out"]]
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def put(self, key: str, params: Params, held: list[HeldOut]) -> None:
        data = {"key": key, "params": {f.name: np.asarray(getattr(params, f.name), dtype=float).tolist()
                                       for f in fields(Params)},
                "held_out": [dataclasses.asdict(row) for row in held]}
        try:
            self.path.parent.mkdir(exist_ok=True)
            results.write_json(self.path, data)
        except OSError:
            pass  # a read-only run folder: fitted again next time


def fit_run(run_dir: Path, data: RunData | None = None, axis_value: str = "", **options) -> PerformanceModel:
    """The performance model of one run folder (one grid axis value); options go to fit_performance_model."""
    data = data if data is not None else read_run(Path(run_dir))
    options.setdefault("error_bound", data.config.decision.model_error_bound)
    shape, positions = model_inputs(run_dir, data, axis_value)
    options.setdefault("seed", data.config.decision.seed)
    options.setdefault("restart_spread", data.config.decision.restart_prior()[0])  # a K on one life: the prior
    options.setdefault("one_life_per_k", data.config.decision.one_life_per_k)   # same-server repeats: one life
    options.setdefault("store", FolderFitStore(Path(run_dir), axis_value))
    return fit_performance_model(data.evidence(axis_value), shape, positions, **options)


def with_performance_model(data: RunData, decision: Decision) -> Decision:
    """The decision with its run's performance model: the summary always (trusted or not, and why); when
    trusted, the schedule's boundaries at the model's crossovers and the not-the-lever numbers too."""
    p = data.config.decision
    if data.run_dir is None or data.plan.mode != "sweep":
        return decision
    config = data.config
    second_axis = config.grid.axis or ("workload variants" if len(config.load.variants) > 1 else "")
    if second_axis:  # each axis value or variant would be a model of its own: not fitted
        if p.production_users:
            decision = decision.model_copy(deep=True)
            decision.diagnoses.append(f"decision.production_users = {p.production_users}: no prediction in a run "
                                      f"with a second axis ({second_axis}); the model is fitted on a K sweep of one "
                                      "workload without a grid axis")
        return decision
    # a K on one life: the restart spread its verdict took, measured (decision.json) where it was, else the prior
    spread = decision.restart_spread.rel_sd if decision.restart_spread is not None else p.restart_prior()[0]
    model = fit_run(data.run_dir, data, error_bound=p.model_error_bound, restart_spread=spread)
    decision = decision.model_copy(deep=True)
    decision.performance_model = summary(model, decision, p, p.production_users)
    if model.trusted:
        decision.per_batch_size, decision.performance_model.schedule_note = \
            refined_schedule(model, decision, data.argv_by_k())
        if decision.performance_model.diagnosis:
            decision.diagnoses.append(decision.performance_model.diagnosis)
    return decision
