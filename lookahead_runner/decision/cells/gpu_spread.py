"""The GPU-to-GPU spread of a sweep run on a Ray cluster: one K measured on several GPUs.

The decision treats a GPU like a restart: each life is a repeat, whatever GPU it ran on, so the
difference between GPUs is part of the repeat spread and of every interval, never averaged away nor
hidden. This line states how much of it there was, per K, from the lives' req/s at the target users.
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
