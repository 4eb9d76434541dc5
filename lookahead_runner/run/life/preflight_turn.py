"""Whose turn the sweep's pre-flight is, and the placement every life runs on: one path for both engines.

A runner invocation runs the pre-flight (preflight.py) once, on the first server life that gets its server ready
and warm; a life whose server dies before it leaves the turn to the next one. What it settles (Locust's process
count) is the placement of every life after. Here the sweep's LifeRunner (runner.py) holds the turn. On a Ray
cluster each slot has a turn of its own (cluster.pool.Slot.turn, a copy of the sweep's at its first life): its
first life whose server gets warm runs the pre-flight on the slot's own placement (placement.slot_placement),
re-sized within the CPUs it holds, while the other slots start their servers and run theirs, so no slot waits
for another's pre-flight. The driver sends the slot's turn with a life (cluster.worker_life.LifeOrder), and the slot
hands back what became of it (`LifeFiles.turn`). The run folder's preflight.json is the last one to come back;
each slot's own is kept in preflight-slots/ (cluster.pool.keep_slot_preflight).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ...config import SweepConfig
from .life import Served, died
from .placement import Placement
from .preflight import run_preflight


@dataclass
class PreflightTurn:
    due: bool              # the pre-flight has not run yet in this invocation
    placement: Placement   # the placement lives run on (the pre-flight's, once it ran)

    def step(self, config: SweepConfig, run_dir: Path, say, load_env: dict[str, str]
             ) -> Callable[[Served, Placement], Placement] | None:
        """What a server life runs once its server is warm (run_server_life's `preflight`): None when not due."""
        if not self.due:
            return None

        def preflight(served: Served, current: Placement) -> Placement:
            alive = (lambda: "") if served.external else (
                lambda: "" if served.server.alive() else died(served.server, "the pre-flight"))
            self.placement = run_preflight(config, served.base_url, current, run_dir, say, load_env, alive)
            self.due = False
            return self.placement

        return preflight

    def taken_over(self, other: "PreflightTurn") -> None:
        """What a life's copy of the turn came back as (a Ray slot's): the pre-flight ran there, or is still due."""
        self.due, self.placement = other.due, other.placement
