"""The Locust load shape that runs the ``--stages`` schedule (parsing lives in stages.py, free of Locust)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from locust import LoadTestShape
from locust.runners import STATE_STOPPED, STATE_STOPPING, MasterRunner

from lookahead_runner.contracts.records import StageRecord
from lookahead_runner.workload.arrivals import ArrivalProcess, stage_offsets
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.stages import (DRAIN_GRACE_S, Stage, parse_stages, rate_run, stage_at,
                                             stage_start_s)

__all__ = ["RateRun", "Stage", "StagedShape", "parse_stages", "stage_at"]

logger = logging.getLogger(__name__)
DRAIN_SPAWN_RATE = 10_000.0   # users stopped per second when a stage of the other kind comes: all at once


@dataclass(frozen=True)
class RateRun:
    """Consecutive rate stages, run by the dispatchers as one schedule from `t_start_s` (unix seconds; the
    moment the shape opened the first of them): stage `i` of it starts `offset_s(i)` later. `workers`: Locust's
    worker indexes of the processes that send it, as the master saw them then (() in a single process)."""

    first: int
    last: int
    t_start_s: float
    dispatchers: int
    stages: tuple[Stage, ...]
    workers: tuple[int, ...] = ()

    def offset_s(self, index: int) -> float:
        return stage_start_s(self.stages, index) - stage_start_s(self.stages, self.first)

    def start_s(self, index: int) -> float:
        return self.t_start_s + self.offset_s(index)

    @property
    def end_s(self) -> float:
        return self.start_s(self.last) + self.stages[self.last].duration_s

    def arrival_times(self, process: ArrivalProcess) -> np.ndarray:
        """Every arrival of the run (unix seconds, ascending): the schedule its dispatchers send by, together."""
        return np.concatenate([np.empty(0)] + [
            self.start_s(i) + stage_offsets(self.stages[i].rate or 0.0, self.stages[i].duration_s, process, i)
            for i in range(self.first, self.last + 1)])

    def as_message(self) -> dict:
        return {"first": self.first, "last": self.last, "t_start_s": self.t_start_s, "dispatchers": self.dispatchers,
                "workers": list(self.workers)}


class StagedShape(LoadTestShape):
    """Runs the ``--stages`` schedule and records each stage as it actually ran.

    A user stage: ``tick()`` returns ``(users, spawn_rate=users, [user_class])``. A stage starts when a tick
    first returns it (Locust polls about once a second, so the recorded times, not the schedule, are the stage
    windows) and ends when a tick moves on, or when the test stops (`close_open_stage`).

    Rate stages: a tick returns one `dispatcher_class` user per Locust process (`dispatcher_workers()`: the
    workers, or this one), and the run of consecutive rate stages goes by its own clock: it starts when a tick opens
    its first stage (`rate_run`), every later stage of it starts and ends on schedule from there (the shape's
    clock is shifted by the tick's delay, so the next user stage waits for the run's end), and its records
    carry those scheduled times: the times the dispatchers send by.

    Each ended stage goes to `stage_sink` (stages.csv); each started one to `on_stage_start(stage, users)` and
    a started rate run to `on_rate_run(run)` (a master tells its workers), before the tick returns it, so
    before any user of that stage spawns.
    """

    abstract = True

    stage_sink: Callable[[StageRecord], None] | None = None
    on_stage_start: Callable[[int, int], None] | None = None
    on_rate_run: Callable[[RateRun], None] | None = None
    # the users a stage spawns: set by the locustfile (None: whatever user classes Locust runs)
    user_class: type | None = None
    dispatcher_class: type | None = None

    def __init__(self) -> None:
        super().__init__()
        self._reset_schedule()

    def _reset_schedule(self) -> None:
        self.stages: list[Stage] | None = None
        self.finished = False
        self._open: StageRecord | None = None
        self._last_stage: tuple[int, int] | None = None
        self.rate_run: RateRun | None = None
        self._shift_s = 0.0                      # the clock's shift: stages that waited start late, last whole
        self._spawned_rate: bool | None = None   # the kind of stage the last tick spawned for (None: no users)
        self._pending: int | None = None         # the stage to open once the other kind's users have stopped
        self._drain_until: float | None = None   # when a drain gives up waiting for them (unix seconds)

    def reset_time(self) -> None:
        # Locust calls this when a shape run starts, so a second run from the web UI starts afresh.
        # A master calls it once more when its first spawn goes out, just after the first tick opened
        # stage 0. That one is ignored: restarting the clock a few ms after the tick would put every
        # later (once a second) tick just before a whole second of run time, and so every stage
        # change a second late, with the last stage a second short.
        if self._open is not None and self._open.stage == 0 and not self.finished:
            return
        super().reset_time()
        self._reset_schedule()

    def _load_stages(self) -> list[Stage]:
        if self.stages is None:
            options = self.runner.environment.parsed_options if self.runner is not None else None
            self.stages = parse_stages(getattr(options, "stages", None) or ScenarioSettings.stages)
        return self.stages

    def dispatcher_workers(self) -> tuple[int, ...]:
        """One dispatcher per Locust process that runs users: each connected worker of a master, by its Locust
        worker index (ascending; gaps where workers quit), else this process alone: ()."""
        runner = self.runner
        if isinstance(runner, MasterRunner):
            nodes = runner.clients.ready + runner.clients.spawning + runner.clients.running
            return tuple(sorted(runner.get_worker_index(node.id) for node in nodes))
        return ()

    def tick(self) -> tuple | None:
        try:
            stages = self._load_stages()
        except ValueError as exc:  # only from the web UI's form: the command line is checked by argparse
            logger.error("Not starting: %s", exc)
            return None
        run_s = self.get_run_time() - self._shift_s
        index = self._pending if self._pending is not None else stage_at(stages, run_s)
        now_s = time.time()
        if index is None:
            self.close_open_stage(now_s)
            self.finished = True
            self._stop_workers()
            return None
        if self._open is None or self._open.stage != index:
            if self._spawned_rate is not None and self._spawned_rate != stages[index].is_rate:
                # Locust keeps the users it has when the classes change (it only adds of the new class): the
                # users of the other kind stop first, and the stage opens once they have (`_draining`), with its
                # full length
                self.close_open_stage(now_s)
                self.rate_run, self._spawned_rate, self._pending = None, None, index
                stop_timeout = float(getattr(self.runner.environment, "stop_timeout", 0.0) or 0.0)
                self._drain_until = now_s + stop_timeout + DRAIN_GRACE_S
                return 0, DRAIN_SPAWN_RATE
            if self._pending is not None and self._draining(now_s):
                return 0, DRAIN_SPAWN_RATE
            self._open_stage(stages, index, run_s, now_s)
        self._spawned_rate = stages[index].is_rate
        return self._users_of(stages[index])

    def _draining(self, now_s: float) -> bool:
        """Users of the last kind are still stopping: closed-loop users finishing their requests, a dispatcher
        its arrivals in flight (Locust waits --stop-timeout for them; a worker's count comes with its report).
        The next stage opens on a drained server, or once that wait is over."""
        return bool(getattr(self.runner, "user_count", 0)) and now_s < (self._drain_until or now_s)

    def _open_stage(self, stages: list[Stage], index: int, run_s: float, now_s: float) -> None:
        stage = stages[index]
        run = self.rate_run
        if run is not None and run.first <= index <= run.last:
            start_s = run.start_s(index)  # the next stage of a rate run: on the run's schedule
        else:
            start_s, run = now_s, None
            if stage.is_rate or self._pending is not None:  # it starts now, and lasts its whole length from here
                self._shift_s += run_s - stage_start_s(stages, index)
            if stage.is_rate:
                span = rate_run(stages, index)
                workers = self.dispatcher_workers()
                run = RateRun(index, span[-1], now_s, max(len(workers), 1), tuple(stages), workers)
        self._pending, self._drain_until = None, None
        self.close_open_stage(start_s)
        self.rate_run = run
        self._open = StageRecord(stage=index, users=stage.users, t_start_s=start_s, t_end_s=float("nan"),
                                 rate=stage.rate)
        self._last_stage = (index, stage.users)
        logger.info("Stage %d: %s for %g s", index, stage.label, stage.duration_s)
        if run is not None and run.first == index and self.on_rate_run is not None:
            self.on_rate_run(run)
        if self.on_stage_start is not None:
            self.on_stage_start(index, stage.users)

    def _users_of(self, stage: Stage) -> tuple:
        if stage.is_rate:
            count = self.rate_run.dispatchers if self.rate_run is not None else 1
            return (count, float(count), [self.dispatcher_class]) if self.dispatcher_class else (count, float(count))
        users = stage.users
        return (users, float(users), [self.user_class]) if self.user_class else (users, float(users))

    def _stop_workers(self) -> None:
        """A headless master quits at the shape's end without stopping its workers first, and waits only
        0.5 s for them: rows of requests still finishing (within --stop-timeout) would never arrive.
        Stopping them here waits until every worker has stopped, and so has sent its last rows."""
        runner = self.runner
        if isinstance(runner, MasterRunner) and runner.state not in (STATE_STOPPING, STATE_STOPPED):
            runner.stop()

    def current_stage(self) -> tuple[int, int] | None:
        """(stage index, target users) of the stage running now, or of the last one once the shape ended
        (a request sent between the end and the stop still belongs to it); None before the first tick.
        A rate stage's users are 0."""
        return self._last_stage

    def close_open_stage(self, now_s: float | None = None) -> None:
        if self._open is None:
            return
        end_s = time.time() if now_s is None else now_s
        run = self.rate_run
        if run is not None and run.first <= self._open.stage <= run.last:  # its schedule's end, or earlier if cut
            end_s = min(end_s, run.start_s(self._open.stage) + run.stages[self._open.stage].duration_s)
        ended = StageRecord(stage=self._open.stage, users=self._open.users, t_start_s=self._open.t_start_s,
                            t_end_s=end_s, rate=self._open.rate)
        self._open = None
        if self.stage_sink is not None:
            self.stage_sink(ended)
