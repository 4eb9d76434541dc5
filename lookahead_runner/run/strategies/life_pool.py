"""Where the adaptive sweep's lives run: a pool of slots it submits lives to (adaptive_sweep.py asks it).

A pool says how many lives may start now (`free`), starts one (`submit`: a life done earlier is kept, not
rerun), names the lives in flight, and waits until one of them has ended. Here one life runs at a time: `submit`
returns when the life has ended, so one slot is free and none is ever in flight (the sweep's loop is then the
serial one). On a Ray cluster (cluster.pool.SlotPool) each slot runs one life and `submit` returns at once; slots
Ray places later join while it waits.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ...config import SweepConfig
from ..life.launch import Life


class LifePool(Protocol):
    slots: int        # how many lives it can run at once

    def free(self) -> int:
        """Lives that may start now."""

    def submit(self, config: SweepConfig, life: Life) -> None:
        """Start `life` with `config`'s stages (kept when it is done already)."""

    def in_flight(self) -> list[Life]:
        """Lives started and not ended."""

    def wait(self) -> list[Life]:
        """Until at least one life in flight has ended: those that have."""


def drain(pool: LifePool) -> None:
    """Until no life is in flight: each ends and counts (a life left running is killed with the slots)."""
    while pool.in_flight():
        pool.wait()


@dataclass
class OneAtATime:
    """This machine: `run_one(config, life)` runs a life to its end (runner.run_lives)."""

    run_one: Callable[[SweepConfig, Life], None]
    slots: int = 1

    def free(self) -> int:
        return 1

    def submit(self, config: SweepConfig, life: Life) -> None:
        self.run_one(config, life)

    def in_flight(self) -> list[Life]:
        return []

    def wait(self) -> list[Life]:
        return []
