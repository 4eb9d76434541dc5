"""A capacity probe's early end: above capacity an open-loop backlog grows without bound, so a probe (a life running
one rate stage: the capacity search's, or one the adaptive sweep at a rate planned as a probe, purpose "capacity" in
plan.json; not its repeats at the target rate, whose windows the verdict reads whole) stops once the server's own
queue says it is clearly over (decision/capacity/search.py `clearly_over`), instead of loading an overrun server to
the stage's end.

Asked twice a second while Locust runs (load.run_locust's `end_early`): it reads the sampler's last /metrics
reading of the server's waiting queue (vllm:num_requests_waiting), from the stage's warm-up on, the stage taken to
start when the server first holds a request (Locust's own start, its prompt calibration, take a few seconds). Not
the requests running: below capacity they rise from 0 to their steady number (arrival rate x time in the server)
through the first seconds, which is no backlog; above it the scheduler is full and the queue grows. Its reason goes
to the life's status.json (`ended_early`), the sweep's output and, in the capacity search, the run's notes; the
window it leaves is judged as any rate window (it falls behind: a finding).
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from ...config import SweepConfig
from ...decision.capacity.search import clearly_over
from ...runfolder.plan import CAPACITY_PURPOSE, RunDirError, read_plan


def is_probe(config: SweepConfig, purpose: str = "") -> bool:
    """A capacity probe: a life running one rate stage, of the capacity strategy or planned as a probe (`purpose`,
    its plan.json entry's)."""
    stages = config.load.stages
    return (config.sweep.strategy == "capacity" or purpose == CAPACITY_PURPOSE) and len(stages) == 1 \
        and stages[0].is_rate


def planned_purpose(run_dir: Path, key: str) -> str:
    """The purpose plan.json gives the life in folder `key` ("" where there is no readable plan or no such life: it
    runs whole; a Ray worker's life gets its purpose from the driver, cluster/worker_life.py `LifeOrder.purposes`)."""
    try:
        lives = read_plan(run_dir).sweep_lives()   # a missing plan.json is a RunDirError too
    except RunDirError:
        return ""
    return next((entry.purpose for entry in lives if entry.dir == key), "")


def probe_watch(config: SweepConfig, sampler, purpose: str = "") -> Callable[[], str] | None:
    """`end_early` for a probe's load (None for any other life)."""
    if not is_probe(config, purpose):
        return None
    stage = config.load.stages[0]
    warmup = config.load.warmup_s if config.load.warmup_s >= 0 else max(2.0, 0.25 * stage.duration_s)
    warmup = min(warmup, 0.9 * stage.duration_s)
    times: list[float] = []
    counts: list[float] = []
    started: list[float] = []   # when the server first held a request

    def over() -> str:
        values = sampler.last_values
        t = values.get("t_s")
        if t is None or (times and t <= times[-1]):
            return ""
        running, waiting = values.get("running"), values.get("waiting")
        if running is None or waiting is None:
            return ""
        if not started and running + waiting > 0:
            started.append(float(t))
        times.append(float(t))
        counts.append(float(waiting))
        if not started:
            return ""
        return clearly_over(np.array(times), np.array(counts), stage.rate or 0.0, started[0] + warmup,
                            stage.duration_s)

    return over
