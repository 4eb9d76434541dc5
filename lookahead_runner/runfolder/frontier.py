"""The throughput-interactivity frontier's points: one per setting (K) and stage, user stages and rate stages
alike, in InferenceMAX's terms (output throughput per GPU against interactivity, its `median_intvty` = 1000 /
median TPOT). vLLM's `vllm bench sweep plot_pareto` divides by the same GPUs (TP x PP x DP) but takes tokens/s
per user as output throughput / max_concurrency (or / request_rate), a figure that also counts time to first
token and, in a closed loop, the time between a user's requests; the decode speed one user watches is 1/TPOT:

- output tokens/s per GPU: the window's output tokens per second (analysis.py's, as the report's charts) over the
  GPUs its server life held: its Ray slot's GPUs as status.json names them, else tensor x pipeline x data
  parallel of server.extra_args (`cluster.life_gpus`, as cost.py counts GPU-minutes). Where they are not known
  (a running server, server.url, or cluster.gpus_per_life = 0) the point says so (`gpus` 0) and its throughput is
  per server life;
- tokens/s per user: 1000 / the median TPOT (ms) of the window's successful requests (InferenceMAX's
  `median_intvty`), the speed one user watches tokens arrive at.

Repeats of one (setting, stage) are one point: the median of their per-GPU throughputs, the TPOT median over
their requests pooled. Only valid windows count (a user stage's invalid window is not in RunData.windows; a rate
window carries its own `valid`). Pure: `frontier_points` reads a `RunData` already read, nothing else.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ..decision import Window
from ..decision.cells.evidence import LATENCY_COLUMNS
from ..decision.cells.rate_window import RateWindow, windows_behind, windows_too_short
from .plan import LifeStatus
from .read import RunData

USERS, RATE = "users", "rate"
_TPOT = LATENCY_COLUMNS.index("tpot_ms")


@dataclass(frozen=True)
class FrontierPoint:
    """One setting at one stage: where it sits between throughput per GPU and speed per user."""

    setting: str
    k: int
    kind: str                   # USERS (closed loop) or RATE (open loop)
    load: float                 # the stage's users, or its requests per second
    tokens_per_s_per_gpu: float
    tokens_per_s_per_user: float
    tpot_p50_ms: float
    gpus: int                   # per server life; 0: not known (its throughput is then per server life)
    repeats: int
    variant: str = ""
    keeps_up: bool = True       # a rate stage: its repeats, judged pooled, did not fall behind the offered rate
    too_short: str = ""         # ... "stage too short for answers of N s; lengthen to M s": keeping up not judged

    @property
    def stage_text(self) -> str:
        return f"{self.load:g} req/s" if self.kind == RATE else f"{self.load:g} users"


@dataclass(frozen=True)
class _Measured:
    """One window's share of a point."""

    tokens_per_s: float
    tpot_ms: np.ndarray
    gpus: int
    rate: RateWindow | None = None   # a rate stage's window (its repeats are judged pooled)


def life_gpus(status: LifeStatus | None, here: int) -> int:
    """The GPUs a life held: its Ray slot's (status.json), else `here` (tensor x pipeline x data parallel; 0: not
    known)."""
    return len(status.gpus) if status is not None and status.slot and status.gpus else here


def frontier_points(data: RunData) -> list[FrontierPoint]:
    """Every (setting, workload variant, stage) of the sweep's lives with a valid window, as a frontier point."""
    config = data.config
    here = 0 if config.server.url else config.cluster.life_gpus(config.server.extra_args)  # a running server's: ?
    statuses = data.statuses
    lives = {(life.axis_value, life.k, life.repeat): life for life in data.plan.sweep_lives()}

    def owner(axis_value: str, k: int, repeat: int) -> tuple[str, int] | None:
        life = lives.get((axis_value, k, repeat))
        return None if life is None else (life.setting, life_gpus(statuses.get(life.dir), here))

    groups: dict[tuple, list[_Measured]] = {}
    for axis_value, window in data.windows:
        add_window(groups, owner(axis_value, window.k, window.repeat), window)
    for axis_value, rate in data.rate_windows:
        add_window(groups, owner(axis_value, rate.k, rate.repeat), rate)
    return points_of(groups)


def add_window(groups: dict[tuple, list[_Measured]], owner: tuple[str, int] | None,
               window: Window | RateWindow) -> None:
    """File one window under its (setting, k, variant, kind, load); `owner`: its life's (setting, GPUs)."""
    if owner is None or not getattr(window, "valid", True):
        return
    setting, gpus = owner
    if isinstance(window, RateWindow):
        key = (setting, window.k, window.variant, RATE, float(window.rate))
        measured = _Measured(window.output_tok_per_s, window.latency_ms[:, _TPOT] if len(window.latency_ms)
                             else np.empty(0), gpus, window)
    else:
        key = (setting, window.k, window.variant, USERS, float(window.users))
        measured = _Measured(window.tokens_per_s, window.latency_ms[:, _TPOT] if len(window.latency_ms)
                             else np.empty(0), gpus)
    groups.setdefault(key, []).append(measured)


def points_of(groups: Mapping[tuple, Iterable[_Measured]]) -> list[FrontierPoint]:
    """One point per group: the median per-GPU throughput over its windows (per server life where its GPUs are
    not known), 1000 / the pooled TPOT median."""
    points = []
    for (setting, k, variant, kind, load), measured in sorted(groups.items(), key=lambda item: item[0]):
        measured = list(measured)
        per_gpu = [m.tokens_per_s / (m.gpus or 1) for m in measured if math.isfinite(m.tokens_per_s)]
        tpot = np.concatenate([m.tpot_ms for m in measured])
        tpot = tpot[np.isfinite(tpot) & (tpot > 0)]
        if not per_gpu or not len(tpot):
            continue
        tpot_p50 = float(np.median(tpot))
        rates = [m.rate for m in measured if m.rate is not None]
        points.append(FrontierPoint(
            setting=setting, k=k, kind=kind, load=load, tokens_per_s_per_gpu=float(np.median(per_gpu)),
            tokens_per_s_per_user=1000.0 / tpot_p50, tpot_p50_ms=tpot_p50,
            gpus=int(np.median([m.gpus for m in measured])), repeats=len(measured), variant=variant,
            keeps_up=not windows_behind(rates), too_short=windows_too_short(rates)))
    return points
