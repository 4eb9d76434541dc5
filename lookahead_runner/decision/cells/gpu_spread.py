"""The GPU-to-GPU spread of a sweep run on a Ray cluster: one K measured on several GPUs.

The decision treats a GPU like a restart: each life is a repeat, whatever GPU it ran on, so the
difference between GPUs is part of the repeat spread and of every interval, never averaged away nor
hidden. This line states how much of it there was, per K, from the lives' req/s at the target users.
That holds only where every K ran on the same GPUs: with fewer server lives per K than slots, each K runs
on some of them, and a difference between K can be one between GPUs. The plan says so before any life
(`confound_plan_line`) and the report says which K ran where (`confound_line`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LifeOnGpu:
    k: int
    gpus: str          # the life's GPUs (NVML UUIDs or Ray's ids) with its node: one key per device set
    req_per_s: float   # at the target users


def gpu_spread_line(lives: Sequence[LifeOnGpu], users: int) -> str:
    """One line for the report's diagnoses, or "" when no K was measured on more than one GPU."""
    parts = []
    for k in sorted({life.k for life in lives}):
        by_gpu: dict[str, list[float]] = {}
        for life in lives:
            if life.k == k:
                by_gpu.setdefault(life.gpus, []).append(life.req_per_s)
        if len(by_gpu) < 2:
            continue
        means = [float(np.mean(values)) for values in by_gpu.values()]
        median = float(np.median(means))
        spread = (max(means) - min(means)) / median if median else float("nan")
        parts.append(f"K={k} on {len(means)} GPUs {min(means):.2f}-{max(means):.2f} req/s ({spread:.1%})")
    if not parts:
        return ""
    return (f"GPU-to-GPU spread at {users} users: {'; '.join(parts)}. Each GPU counts like a restart: this spread "
            "is part of the repeat spread and of every interval.")


def confound_plan_line(lives_per_k: int, slots: int, restart: bool = True) -> str:
    """For the plan (--dry-run, the sweep's start): "" when each K has a server life for every slot."""
    if slots < 2 or lives_per_k >= slots:
        return ""
    fix = (f"set load.repeats = {slots}" if restart
           else f"set load.repeat_mode = \"restart\" and load.repeats = {slots} (same-server runs a K's repeats on "
                "one GPU)")
    return (f"K and GPU confounded: {slots} slots, but each K has {lives_per_k} server "
            f"li{'ves' if lives_per_k != 1 else 'fe'}, so it runs on {lives_per_k} of the {slots} GPU sets and a "
            f"difference between K can be one between GPUs; {fix} so that every K runs on every slot, or run on "
            f"{lives_per_k} slot{'s' if lives_per_k != 1 else ''}")


def confound_line(lives: Sequence[LifeOnGpu]) -> str:
    """One line for the report's diagnoses when the K measured did not all run on the same GPUs ("" when they
    did, or one GPU ran everything)."""
    every = {life.gpus for life in lives}
    on = {k: {life.gpus for life in lives if life.k == k} for k in sorted({life.k for life in lives})}
    partial = {k: gpus for k, gpus in on.items() if gpus != every}
    if len(every) < 2 or len(on) < 2 or not partial:
        return ""
    named = "; ".join(f"K={k} on {len(gpus)}" for k, gpus in partial.items())
    return (f"K and GPU confounded: the lives ran on {len(every)} GPU sets, but not every K on each ({named}): a "
            f"difference between these K can be one between GPUs. Run load.repeats >= {len(every)} (load.repeat_mode "
            "= \"restart\") so that every K runs on every slot.")
