"""Per-process scenario state (settings, record files, lag monitor, model) and the Locust event handlers.

The locustfile registers these handlers on Locust's events; the state hangs on the Environment
(as Locust's own ``run_single_user`` hangs ``single_user_instance``), so no module-level mutable state.
"""

from __future__ import annotations

import json
import logging
import signal
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust import log as locust_log
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from lookahead_runner.records import REQUEST_COLUMNS, STAGE_COLUMNS, CsvAppender, StageRecord
from lookahead_runner.workload.lag import LoopLagMonitor
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.shape import StagedShape

logger = logging.getLogger(__name__)

STATE_ATTRIBUTE = "lookahead_scenario"
FLUSH_INTERVAL_S = 1.0
MODELS_TIMEOUT_S = 10.0


@dataclass
class ScenarioState:
    settings: ScenarioSettings
    request_log: CsvAppender | None = None
    stage_log: CsvAppender | None = None
    lag: LoopLagMonitor = field(default_factory=LoopLagMonitor)
    model: str = ""
    _flusher: gevent.Greenlet | None = None
    _sigterm_watcher: Any = None

    def flush(self) -> None:
        for log in (self.request_log, self.stage_log):
            if log is not None:
                log.flush()

    def _flush_forever(self) -> None:
        # Appends flush when the last flush is a second old; this tick bounds the wait of rows
        # appended just after one, so a reader never sees rows older than about a second missing.
        while True:
            gevent.sleep(FLUSH_INTERVAL_S)
            self.flush()

    def cancel_sigterm_watcher(self) -> None:
        if self._sigterm_watcher is not None:
            self._sigterm_watcher.cancel()
            self._sigterm_watcher = None

    def close(self) -> None:
        self.cancel_sigterm_watcher()
        if self._flusher is not None:
            self._flusher.kill(block=False)
            self._flusher = None
        self.lag.stop()
        for log in (self.request_log, self.stage_log):
            if log is not None:
                log.close()


def _shape(environment: Environment) -> StagedShape | None:
    shape = environment.shape_class
    return shape if isinstance(shape, StagedShape) else None


def on_init(environment: Environment) -> ScenarioState:
    """Read the options, open the record files and start the lag monitor (``events.init``)."""
    settings = ScenarioSettings.from_options(environment.parsed_options)
    state = ScenarioState(settings=settings)
    runner = environment.runner
    distributed = isinstance(runner, (MasterRunner, WorkerRunner))
    if distributed and settings.requests_csv:
        logger.warning("--requests-csv is written in single-process runs only; distributed workers skip it")
    if settings.requests_csv and not distributed:
        state.request_log = CsvAppender(settings.requests_csv, REQUEST_COLUMNS, FLUSH_INTERVAL_S)
    if settings.stages_csv and not isinstance(runner, WorkerRunner):
        state.stage_log = CsvAppender(settings.stages_csv, STAGE_COLUMNS, FLUSH_INTERVAL_S)
    shape = _shape(environment)
    if shape is not None and state.stage_log is not None:
        stage_log = state.stage_log

        def write_stage(record: StageRecord) -> None:
            stage_log.append(record.as_row())
            stage_log.flush()

        shape.stage_sink = write_stage
    if not isinstance(runner, MasterRunner):
        state.lag.start()
    state._flusher = gevent.spawn(state._flush_forever)
    if shape is not None and getattr(environment.parsed_options, "headless", False):
        # Headless Locust 2.47 joins the shape before installing its own SIGTERM handler, so a SIGTERM
        # during the stages would kill the process outright: no cut rows, no open stage, no last flush.
        # Until the test stops, a SIGTERM stops the runner instead and Locust shuts down as usual.
        state._sigterm_watcher = gevent.signal_handler(signal.SIGTERM, _quit_on_sigterm, environment)
    setattr(environment, STATE_ATTRIBUTE, state)
    return state


def _quit_on_sigterm(environment: Environment) -> None:
    logger.warning("Got SIGTERM during the stages: stopping the test")
    if environment.runner is not None:
        environment.runner.quit()


def state_of(environment: Environment) -> ScenarioState:
    state = getattr(environment, STATE_ATTRIBUTE, None)
    return state if state is not None else on_init(environment)


def on_test_start(environment: Environment) -> None:
    """Re-read the options (the web UI may have edited them) and resolve the model, before users spawn
    (``events.test_start``). The record files stay those opened at init."""
    state = state_of(environment)
    try:
        state.settings = ScenarioSettings.from_options(environment.parsed_options)
    except ValueError as exc:
        logger.error("Keeping the previous scenario options: %s", exc)
    if isinstance(environment.runner, MasterRunner):
        return
    state.model = state.settings.model or first_model_id(environment.host or "")
    logger.info("Model: %s", state.model)


def on_test_stop(environment: Environment) -> None:
    """End the open stage (a stop from the web UI or Ctrl-C) and flush (``events.test_stop``)."""
    shape = _shape(environment)
    if shape is not None:
        shape.close_open_stage()
    state = state_of(environment)
    state.cancel_sigterm_watcher()  # from here on Locust's own SIGTERM handler applies
    state.flush()


def on_quitting(environment: Environment) -> None:
    """Close the files; exit 0 when every stage ran, whatever the request failures (``events.quitting``).

    Failed requests are data here (requests.csv holds them with their reason), and the runner judges
    them; an unhandled exception in the scenario code, or an interrupted run, keeps Locust's exit code.
    """
    on_test_stop(environment)
    state_of(environment).close()
    shape = _shape(environment)
    runner = environment.runner
    completed = shape is not None and shape.finished
    clean = runner is not None and not runner.exceptions and not locust_log.unhandled_greenlet_exception
    if completed and clean:
        environment.process_exit_code = 0
    elif not completed:
        logger.warning("The stages did not all run; keeping Locust's exit code")


def stage_now(environment: Environment) -> tuple[int, int]:
    """(stage index, target users) to tag a request sent now; stage 0 at the runner's target without a shape."""
    shape = _shape(environment)
    current = shape.current_stage() if shape is not None else None
    if current is not None:
        return current
    runner: Any = environment.runner
    return 0, int(getattr(runner, "target_user_count", 0) or 1)


def first_model_id(host: str, timeout_s: float = MODELS_TIMEOUT_S) -> str:
    """The first model id served at `host` (GET /v1/models), as vLLM lists the served model first."""
    url = host.rstrip("/") + "/v1/models"
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        body = json.loads(response.read())
    models = body.get("data") or []
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise RuntimeError(f"GET {url} listed no model; pass --model")
    return str(models[0]["id"])
