"""The Locust load shape that runs the ``--stages`` schedule (parsing lives in stages.py, free of Locust)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from locust import LoadTestShape
from locust.runners import STATE_STOPPED, STATE_STOPPING, MasterRunner

from lookahead_runner.contracts.records import StageRecord
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.stages import Stage, parse_stages, stage_at

__all__ = ["Stage", "StagedShape", "parse_stages", "stage_at"]

logger = logging.getLogger(__name__)


class StagedShape(LoadTestShape):
    """Runs the ``--stages`` schedule and records each stage as it actually ran.

    ``tick()`` returns ``(users, spawn_rate=users)`` for the stage scheduled now and ``None`` after the
    last one. A stage starts when a tick first returns it (Locust polls about once a second, so the
    recorded times, not the schedule, are the stage windows) and ends when a tick moves on, or when
    the test stops (`close_open_stage`). Each ended stage goes to `stage_sink` (stages.csv); each
    started one to `on_stage_start(stage, users)` (a master tells its workers), before the tick
    returns it, so before any user of that stage spawns.
    """

    abstract = True

    stage_sink: Callable[[StageRecord], None] | None = None
    on_stage_start: Callable[[int, int], None] | None = None

    def __init__(self) -> None:
        super().__init__()
        self._reset_schedule()

    def _reset_schedule(self) -> None:
        self.stages: list[Stage] | None = None
        self.finished = False
        self._open: StageRecord | None = None
        self._last_stage: tuple[int, int] | None = None

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

    def tick(self) -> tuple[int, float] | None:
        try:
            stages = self._load_stages()
        except ValueError as exc:  # only from the web UI's form: the command line is checked by argparse
            logger.error("Not starting: %s", exc)
            return None
        index = stage_at(stages, self.get_run_time())
        now_s = time.time()
        if index is None:
            self.close_open_stage(now_s)
            self.finished = True
            self._stop_workers()
            return None
        if self._open is None or self._open.stage != index:
            self.close_open_stage(now_s)
            users = stages[index].users
            self._open = StageRecord(stage=index, users=users, t_start_s=now_s, t_end_s=float("nan"))
            self._last_stage = (index, users)
            logger.info("Stage %d: %d users for %g s", index, users, stages[index].duration_s)
            if self.on_stage_start is not None:
                self.on_stage_start(index, users)
        users = self._open.users
        return users, float(users)

    def _stop_workers(self) -> None:
        """A headless master quits at the shape's end without stopping its workers first, and waits only
        0.5 s for them: rows of requests still finishing (within --stop-timeout) would never arrive.
        Stopping them here waits until every worker has stopped, and so has sent its last rows."""
        runner = self.runner
        if isinstance(runner, MasterRunner) and runner.state not in (STATE_STOPPING, STATE_STOPPED):
            runner.stop()

    def current_stage(self) -> tuple[int, int] | None:
        """(stage index, target users) of the stage running now, or of the last one once the shape ended
        (a request sent between the end and the stop still belongs to it); None before the first tick."""
        return self._last_stage

    def close_open_stage(self, now_s: float | None = None) -> None:
        if self._open is None:
            return
        ended = StageRecord(
            stage=self._open.stage,
            users=self._open.users,
            t_start_s=self._open.t_start_s,
            t_end_s=time.time() if now_s is None else now_s,
        )
        self._open = None
        if self.stage_sink is not None:
            self.stage_sink(ended)
