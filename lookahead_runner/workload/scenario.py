"""Per-process scenario state (settings, record files, lag monitor, model, prompt) and the Locust event handlers.

The locustfile registers these handlers on Locust's events; the state hangs on the Environment
(as Locust's own ``run_single_user`` hangs ``single_user_instance``), so no module-level mutable state.
Who writes what: a single process writes requests.csv, stages.csv and workload.json itself; with
workers (``--processes N`` or master/worker across hosts) the master writes all three and the
workers send their rows and prompt description to it (workload/distributed.py).

The API key comes only from the environment variable LOOKAHEAD_API_KEY (contracts/auth.py; never an option, so it
is in no argv, parsed options, web UI form or master->worker message) and is sent as a bearer
header on every request: /v1/models, /tokenize and /v1/completions.
"""

from __future__ import annotations

import gc
import logging
import os
import random
import signal
import socket
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust import log as locust_log
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from lookahead_runner.contracts.auth import bearer_header, key_from_environment, keyed_request
from lookahead_runner.contracts.records import REQUEST_COLUMNS, STAGE_COLUMNS, CsvAppender, StageRecord
from lookahead_runner.workload import distributed
from lookahead_runner.workload.lag import LoopLagMonitor
from lookahead_runner.workload.options import ScenarioSettings
from lookahead_runner.workload.prompt import (
    METHOD_TOKENIZE,
    PromptPlan,
    plan_prompt,
    token_ids_plan,
    tokenize_counter,
)
from lookahead_runner.workload.request_set import METHOD_REQUEST_SET, RequestSet, read_request_set
from lookahead_runner.workload.in_flight import OpenLoop
from lookahead_runner.workload.shape import RateRun, StagedShape
from lookahead_runner.workload.sse import model_ids
from lookahead_runner.workload.stages import Stage

logger = logging.getLogger(__name__)

STATE_ATTRIBUTE = "lookahead_scenario"
FLUSH_INTERVAL_S = 1.0
MODELS_TIMEOUT_S = 10.0


@dataclass
class ScenarioState:
    settings: ScenarioSettings
    api_key: str = field(default="", repr=False)
    client: str = ""
    request_log: Any = None  # CsvAppender, or a RowForwarder on a worker
    stage_log: CsvAppender | None = None
    workload: distributed.WorkloadRecord | None = None
    lag: LoopLagMonitor = field(default_factory=LoopLagMonitor)
    model: str = ""
    prompt: PromptPlan | None = None
    request_set: RequestSet | None = None  # --request-set: the user's requests instead of prompt plans
    users_made: int = 0                    # users created in this process: each one's index in it
    remote_stage: tuple[int, int] | None = None
    rate_run: RateRun | None = None        # on a worker: the run of rate stages its master started
    runs_dispatched: set[float] = field(default_factory=set)  # rate runs (t_start_s) this process sent: once each
    open_loop: OpenLoop = field(default_factory=OpenLoop)   # this process's rate-stage requests
    _prompt_key: tuple | None = None
    _flusher: gevent.Greenlet | None = None
    _sigterm_watcher: Any = None

    @property
    def headers(self) -> dict[str, str]:
        return bearer_header(self.api_key)

    @property
    def prepared(self) -> bool:
        return self.prompt is not None or self.request_set is not None

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
    """Read the options, open the record files, wire master/worker messages, start the lag monitor
    (``events.init``); a headless single process also resolves the model and prompt here, so the
    calibration does not eat into the first stage."""
    settings = ScenarioSettings.from_options(environment.parsed_options)
    state = ScenarioState(settings=settings, api_key=key_from_environment(),
                          client=f"{socket.gethostname()}:{os.getpid()}")
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        state.request_log = distributed.RowForwarder(runner.send_message, REQUEST_COLUMNS)
        runner.register_message(distributed.MSG_STAGE, lambda msg, **_kw: _on_stage_message(state, msg))
        runner.register_message(distributed.MSG_RATE, lambda msg, **_kw: _on_rate_message(state, msg))
    else:
        if settings.requests_csv:
            state.request_log = CsvAppender(settings.requests_csv, REQUEST_COLUMNS, FLUSH_INTERVAL_S)
        if settings.stages_csv:
            state.stage_log = CsvAppender(settings.stages_csv, STAGE_COLUMNS, FLUSH_INTERVAL_S)
        if settings.workload_json:
            state.workload = distributed.WorkloadRecord(settings.workload_json)
    if isinstance(runner, MasterRunner):
        runner.register_message(distributed.MSG_ROWS, lambda msg, **_kw: _on_rows_message(state, msg))
        runner.register_message(distributed.MSG_WORKLOAD, lambda msg, **_kw: _on_workload_message(state, msg))
    shape = _shape(environment)
    if shape is not None:
        _wire_shape(shape, state, runner)
    if not isinstance(runner, MasterRunner):
        state.lag.start()
    state._flusher = gevent.spawn(state._flush_forever)
    headless = getattr(environment.parsed_options, "headless", False)
    if shape is not None and headless:
        # Headless Locust 2.47 joins the shape before installing its own SIGTERM handler, so a SIGTERM
        # during the stages would kill the process outright: no cut rows, no open stage, no last flush.
        # Until the test stops, a SIGTERM stops the runner instead and Locust shuts down as usual.
        state._sigterm_watcher = gevent.signal_handler(signal.SIGTERM, _quit_on_sigterm, environment)
    setattr(environment, STATE_ATTRIBUTE, state)
    if headless and environment.host and not isinstance(runner, (MasterRunner, WorkerRunner)):
        try:
            prepare_requests(environment, state)
        except Exception as exc:  # test_start tries again and reports the error where Locust shows it
            logger.warning("Could not prepare requests at start-up: %s", exc)
    # A full collection walks every object Locust, gevent and Flask made at start-up: 20-40 ms during
    # which no stream is read (measured: benchmarks/client_accuracy.py). Frozen, they are skipped.
    gc.collect()
    gc.freeze()
    return state


def _wire_shape(shape: StagedShape, state: ScenarioState, runner: Any) -> None:
    stage_log = state.stage_log
    if stage_log is not None:

        def write_stage(record: StageRecord) -> None:
            stage_log.append(record.as_row())
            stage_log.flush()

        shape.stage_sink = write_stage
    if isinstance(runner, MasterRunner):
        shape.on_stage_start = lambda stage, users: runner.send_message(distributed.MSG_STAGE, [stage, users])

        def tell_joining_worker(client_id: str, **_kwargs: Any) -> None:
            current = shape.current_stage()
            if current is not None and not shape.finished:
                runner.send_message(distributed.MSG_STAGE, list(current), client_id=client_id)

        runner.environment.events.worker_connect.add_listener(tell_joining_worker)
        shape.on_rate_run = lambda run: runner.send_message(distributed.MSG_RATE, rate_message(run))


def rate_message(run: RateRun) -> dict:
    """The rate run a master's workers dispatch, with the stages it runs as numbers (exactly the master's)."""
    return run.as_message() | {"stages": [[stage.users, stage.duration_s, stage.rate] for stage in run.stages]}


def _on_rate_message(state: ScenarioState, msg: Any) -> None:
    data = msg.data
    try:
        stages = tuple(Stage(int(users), float(duration_s), None if rate is None else float(rate))
                       for users, duration_s, rate in data["stages"])
        state.rate_run = RateRun(int(data["first"]), int(data["last"]), float(data["t_start_s"]),
                                 int(data["dispatchers"]), stages, tuple(int(w) for w in data.get("workers", ())))
    except (KeyError, TypeError, ValueError) as exc:
        logger.error("Dropping a malformed %s message (%s): %r", distributed.MSG_RATE, exc, data)


def _on_stage_message(state: ScenarioState, msg: Any) -> None:
    stage = distributed.stage_from_message(msg.data)
    if stage is not None:
        state.remote_stage = stage


def _on_rows_message(state: ScenarioState, msg: Any) -> None:
    if state.request_log is None:
        return
    for row in distributed.rows_from_message(msg.data, REQUEST_COLUMNS):
        state.request_log.append(row)


def _on_workload_message(state: ScenarioState, msg: Any) -> None:
    if state.workload is not None and isinstance(msg.data, dict):
        state.workload.add(msg.data)


def _quit_on_sigterm(environment: Environment) -> None:
    logger.warning("Got SIGTERM during the stages: stopping the test")
    if environment.runner is not None:
        environment.runner.quit()


def state_of(environment: Environment) -> ScenarioState:
    state = getattr(environment, STATE_ATTRIBUTE, None)
    return state if state is not None else on_init(environment)


def on_test_start(environment: Environment) -> None:
    """Re-read the options (the web UI, or the master, may have changed them), then resolve the model
    and the prompt before users spawn (``events.test_start``). The record files stay those opened at init."""
    state = state_of(environment)
    try:
        state.settings = ScenarioSettings.from_options(environment.parsed_options)
    except ValueError as exc:
        logger.error("Keeping the previous scenario options: %s", exc)
    if isinstance(environment.runner, MasterRunner):
        return
    prepare_requests(environment, state)


def prepare_requests(environment: Environment, state: ScenarioState) -> None:
    """Model and prompt plan for this host and settings (calibrated once, then reused), and workload.json."""
    settings, host = state.settings, environment.host or ""
    key = (host, settings.model, settings.prompt_tokens, settings.prompt_file, settings.endpoint,
           settings.chat_template_kwargs, settings.request_set)
    if settings.request_set and (state.request_set is None or state._prompt_key != key):
        state.model = settings.model or first_model_id(host, state.headers)
        state.request_set, state.prompt = read_request_set(settings.request_set), None
        state._prompt_key = key
        logger.info("Model %s; %s", state.model, "; ".join(state.request_set.notes(settings.exact_output_tokens,
                                                                                                "--output-tokens")))
    elif not settings.request_set and (state.prompt is None or state._prompt_key != key):
        state.model = settings.model or first_model_id(host, state.headers)
        state.prompt, state.request_set = _plan(host, state), None
        state._prompt_key = key
        plan = state.prompt
        if plan.method == METHOD_TOKENIZE:
            how = f"via /tokenize{' with the chat template' if plan.chat else ''}, {plan.source} corpus"
        else:
            how = "as uncalibrated text" if plan.chat else "as token ids"
        logger.log(logging.INFO if plan.method == METHOD_TOKENIZE and not plan.note else logging.WARNING,
                   "Model %s; prompts of %d tokens %s%s", state.model, plan.prompt_tokens, how,
                   f" ({plan.note})" if plan.note else "")
    # reported at every start: the web UI may have changed the sampling options since the last one
    described = state.prompt.describe() if state.prompt is not None else _describe_set(state.request_set)
    info = {**described, "model": state.model, "output_tokens": settings.output_tokens,
            "temperature": settings.temperature, "top_p": settings.top_p, "seed": settings.seed,
            "client": state.client, "endpoint": settings.endpoint,
            "chat_template_kwargs": settings.template_kwargs}
    if isinstance(environment.runner, WorkerRunner):
        environment.runner.send_message(distributed.MSG_WORKLOAD, info)
    elif state.workload is not None:
        state.workload.add(info)


def _describe_set(request_set: RequestSet | None) -> dict[str, Any]:
    """workload.json's account of a request set: which file, how many requests, of which categories, its hash."""
    assert request_set is not None
    return {"prompt_method": METHOD_REQUEST_SET, "prompt_source": request_set.path, "prompt_tokens": None,
            "request_set_size": len(request_set), "request_set_categories": request_set.categories,
            "request_set_fingerprint": request_set.fingerprint, "prompt_note": ""}


def _plan(host: str, state: ScenarioState) -> PromptPlan:
    settings = state.settings
    counter = tokenize_counter(host, state.model, state.headers, chat=settings.chat,
                               template_kwargs=settings.template_kwargs)
    try:
        return plan_prompt(counter, settings.prompt_tokens, settings.prompt_file, random.Random(), settings.chat)
    except (OSError, ValueError) as exc:  # e.g. a worker host without the master's --prompt-file
        logger.error("Prompt corpus unusable (%s): sending %s", exc, "built-in text" if settings.chat else "token ids")
        if settings.chat:
            return plan_prompt(counter, settings.prompt_tokens, "", random.Random(), chat=True)
        return token_ids_plan(settings.prompt_tokens, f"prompt corpus unusable: {exc}")


def on_test_stop(environment: Environment) -> None:
    """End the open stage (a stop from the web UI or Ctrl-C) and flush; a worker sends its last rows
    here, before it reports to the master that it stopped (``events.test_stop``)."""
    shape = _shape(environment)
    if shape is not None:
        shape.close_open_stage()
    state = state_of(environment)
    state.cancel_sigterm_watcher()  # from here on Locust's own SIGTERM handler applies
    # a rate stage's requests run apart from the users Locust stopped: they finish as --stop-timeout allows
    state.open_loop.finish(float(getattr(environment, "stop_timeout", 0.0) or 0.0))
    state.flush()
    if isinstance(environment.runner, WorkerRunner):
        # Its users are stopped (Locust waited up to --stop-timeout for them) and its rows sent. Locust
        # 2.47 then sleeps --stop-timeout once more before the worker can handle the master's quit,
        # so a worker would outlive its master by that long; the next spawn message sets it again.
        environment.stop_timeout = 0.0


def on_quitting(environment: Environment) -> None:
    """Close the files; exit 0 when every stage ran, whatever the request failures (``events.quitting``).

    Failed requests are data here (requests.csv holds them with their reason), and the runner judges
    them; an unhandled exception in the scenario code, or an interrupted run, keeps Locust's exit code.
    A worker has no shape of its own: it exits 0 unless its code raised.
    """
    on_test_stop(environment)
    state_of(environment).close()
    shape = _shape(environment)
    runner = environment.runner
    clean = runner is not None and not runner.exceptions and not locust_log.unhandled_greenlet_exception
    if isinstance(runner, WorkerRunner):
        if clean:
            environment.process_exit_code = 0
        return
    completed = shape is not None and shape.finished
    if completed and clean:
        environment.process_exit_code = 0
    elif not completed:
        logger.warning("The stages did not all run; keeping Locust's exit code")


def stage_now(environment: Environment) -> tuple[int, int]:
    """(stage index, target users) to tag a request sent now: from the shape, or on a worker from the
    master's last stage message; stage 0 at the runner's target without either."""
    shape = _shape(environment)
    current = shape.current_stage() if shape is not None else None
    if current is not None:
        return current
    state = getattr(environment, STATE_ATTRIBUTE, None)
    if state is not None and state.remote_stage is not None:
        return state.remote_stage
    runner: Any = environment.runner
    return 0, int(getattr(runner, "target_user_count", 0) or 1)


def first_model_id(host: str, headers: dict[str, str] | None = None, timeout_s: float = MODELS_TIMEOUT_S) -> str:
    """The first model id served at `host` (GET /v1/models), as vLLM lists the served model first."""
    url = host.rstrip("/") + "/v1/models"
    request = keyed_request(url, headers)
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        models = model_ids(response.read())
    if not models:
        raise RuntimeError(f"GET {url} listed no model; pass --model")
    return models[0]
