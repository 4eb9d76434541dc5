"""Live tabs in Locust's web UI: the vLLM server's side of the test while it runs.

Two extended tabs ("vLLM live": the values now; "vLLM history": one row a second), charts beside
their tables (the page loads plotly.js and static/live_charts.js from this web UI, which answer
charts.json) and two CSV downloads (same values), computed in `values` and shown by `tables` and
`charts` (this package) from:
- the server's /metrics (``--host`` as Locust started: the address is fixed then, whatever a form or a plugin makes of
  Locust's host later), scraped once a second by the process serving the web UI;
- GPU memory: the simulator's NVML-like file when ``LOOKAHEAD_SIM_GPU_FILE`` is set, else NVML;
- the requests.csv rows of the requests that finish: the scenario's request log on this process is
  tapped, and in distributed mode every worker's rows already reach the master's log
  (workload/distributed.py), so the master's tabs show all processes merged;
- the stage (the --stages shape) and ``--setting-name`` (the runner passes the life's setting);
- in a rate stage, the run's own schedule (the shape's `RateRun`: the arrival times its dispatchers send by)
  and the rows of its arrivals that finished: the offered and achieved rate and the requests outstanding,
  charted beside the server's waiting queue (a chart the page has only when the stages have a rate stage).

In a sweep (``--follow-sweep``: the runner serves every life's web UI on one port, run/life/load.py live_view_port)
the page also loads static/follow_sweep.js: it asks ``lookahead/life.json`` every two seconds which Locust
answers, says so while none does (the runner is between server lives), and reloads once the next life's
Locust does, so a tab left open follows the sweep from life to life.

Who may reach the web UI (every route, Locust's own too) and where its load may go: live/guard.py.
Headless runs (the runner's default) get none of this: no web UI, no extra scrapes.
Locust's tab components read ``extended_tabs``/``extended_tables``/``extended_csv_files`` from the
page's template args and the rows from ``extended_stats`` in each ``/stats/requests`` answer
(Locust's ``examples/extend_web_ui.py``). Its tabs draw tables only, so the chart script joins the
page through two script tags added to the index answer, and reads ``lookahead_charts`` from the
same template args.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import logging
import os
import time
import uuid
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gevent
from flask import Response, abort, make_response, request, send_file
from locust.env import Environment

from lookahead_runner.contracts.auth import LIVE_TOKEN_ENV, bearer_header, key_from_environment
from lookahead_runner.live import guard
from lookahead_runner.live.charts import Mark, chart_specs, chart_update, marks_between
from lookahead_runner.live.tables import (
    HISTORY_COLUMNS,
    HISTORY_TAB_COLUMNS,
    HISTORY_TAB_ROWS,
    NOW_COLUMNS,
    csv_text,
    history_row,
    history_tab_row,
    now_rows,
)
from lookahead_runner.live.values import (
    HISTORY_MAX_ROWS,
    POLL_INTERVAL_S,
    CounterWindow,
    LatencySample,
    LatencyWindow,
    LiveValues,
    RateProgress,
    arrival_of_row,
    live_values,
    sample_of_row,
    signal_lines,
    stage_now,
)
from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV
from lookahead_runner.telemetry.memory import NvmlMemory, SimMemory
from lookahead_runner.telemetry.prometheus import parse, scrape
from lookahead_runner.vllm.endpoints import METRICS_PATH
from lookahead_runner.workload import scenario
from lookahead_runner.workload.arrivals import ArrivalProcess
from lookahead_runner.workload.shape import StagedShape
from lookahead_runner.workload.stages import Stage, parse_stages

logger = logging.getLogger(__name__)

STATE_ATTRIBUTE = "lookahead_live"
NOW_TAB = "lookahead"
HISTORY_TAB = "lookahead-history"
NOW_TITLE = "vLLM live"
HISTORY_TITLE = "vLLM history"
NOW_CSV = "lookahead/now.csv"
HISTORY_CSV = "lookahead/history.csv"
CHARTS_JSON = "lookahead/charts.json"
CHARTS_JS = "lookahead/live_charts.js"
FOLLOW_JS = "lookahead/follow_sweep.js"
LIFE_JSON = "lookahead/life.json"
PLOTLY_JS = "lookahead/plotly.min.js"
CHART_POLL_S = 2.0  # as often as Locust's page asks for its own stats
STATIC = Path(__file__).resolve().parent / "static"
SCRAPE_TIMEOUT_S = 2.0


def add_options(parser: Any, **_kwargs: Any) -> None:
    """``events.init_command_line_parser`` listener."""
    parser.add_argument(
        "--setting-name", default="", env_var="LOCUST_SETTING_NAME", include_in_web_ui=False,
        help="Label of the server setting under test, shown in the web UI's live tab (the runner passes e.g. k4/r0).",
    )
    parser.add_argument(
        "--follow-sweep", action="store_true", default=False, env_var="LOCUST_FOLLOW_SWEEP", include_in_web_ui=False,
        help="This web UI is one server life's of a sweep on one port (the runner passes it): the page follows the "
             "sweep to the next life's web UI on the same port.",
    )
    parser.add_argument(
        "--variant-name", default="", env_var="LOCUST_VARIANT_NAME", include_in_web_ui=False,
        help="Label of the workload variant these stages run, shown beside the stage in the live tab "
             "(the runner passes e.g. \"4,000-token prompts\" when a sweep has several).",
    )


def on_init(environment: Environment, **_kwargs: Any) -> None:
    """``events.init`` listener, registered after the scenario's (whose request log it taps)."""
    if environment.web_ui is None:
        return
    # first: Locust logs a listener's exception and serves the web UI all the same, so whatever fails below, every
    # route is guarded (the address as Locust started, as LiveView.server_url)
    guard.install(environment.web_ui, (environment.host or "").rstrip("/"), os.environ.get(LIVE_TOKEN_ENV, ""))
    view = LiveView(environment)
    state = getattr(environment, scenario.STATE_ATTRIBUTE, None)
    if state is None:
        logger.warning("No scenario state: the live tabs show no TTFT/ITL (register webui.on_init after the "
                       "scenario's init listener)")
    else:
        state.request_log = RowTap(state.request_log, view)
    _install(environment, view)
    setattr(environment, STATE_ATTRIBUTE, view)
    view.start()


class RowTap:
    """The scenario's request log (a CsvAppender, or None without --requests-csv) with every appended
    row also handed to the live view; the same append / flush / close interface."""

    def __init__(self, log: Any, view: LiveView) -> None:
        self.log = log
        self.view = view

    def append(self, row: Sequence[str]) -> None:
        if self.log is not None:
            self.log.append(row)
        sample = sample_of_row(row)
        if sample is not None:
            self.view.observe(sample)
        arrival = arrival_of_row(row)
        if arrival is not None:
            self.view.observe_arrival(*arrival)

    def flush(self) -> None:
        if self.log is not None:
            self.log.flush()

    def close(self) -> None:
        if self.log is not None:
            self.log.close()


class LiveView:
    """On the process serving the web UI: scrapes, windows and the latest values for the tabs."""

    def __init__(self, environment: Environment) -> None:
        self.environment = environment
        # the server this Locust was started for: the scrapes (and the key) go there, never to a host set later
        self.server_url = (environment.host or "").rstrip("/")
        self.counters = CounterWindow()
        self.latency = LatencyWindow()
        self.history: deque[LiveValues] = deque(maxlen=HISTORY_MAX_ROWS)
        self.marks: deque[Mark] = deque(maxlen=HISTORY_MAX_ROWS)
        self.session = uuid.uuid4().hex[:12]
        self.life = uuid.uuid4().hex[:12]  # this Locust process: a page of another one reloads (follow_sweep.js)
        self.values: LiveValues | None = None
        self.metrics_error = ""
        self.memory, self.memory_note = _open_memory()
        self._greenlet: gevent.Greenlet | None = None
        self._rate: RateProgress | None = None

    def observe(self, sample: LatencySample) -> None:
        self.latency.add(time.time(), [sample])

    def observe_arrival(self, scheduled_s: float, ok: bool) -> None:
        """A rate stage's arrival finished (its row reached this process)."""
        progress = self.rate_progress()
        if progress is not None:
            progress.observe(time.time(), scheduled_s, ok)

    def rate_progress(self) -> RateProgress | None:
        """The run of rate stages the shape has going (on a master: the one its workers dispatch), followed
        from its own schedule; None outside one."""
        shape = self.environment.shape_class
        run = shape.rate_run if isinstance(shape, StagedShape) else None
        if run is None:
            return None
        if self._rate is None or self._rate.t_start_s != run.t_start_s:
            state = getattr(self.environment, scenario.STATE_ATTRIBUTE, None)
            process = state.settings.arrival_process if state is not None else ArrivalProcess()
            self._rate = RateProgress(run.t_start_s, run.arrival_times(process),
                                      stage_starts_s=[run.start_s(i) for i in range(run.first, run.last + 1)])
        return self._rate

    def reset(self, **_kwargs: Any) -> None:
        self.latency.clear()
        self.history.clear()
        self.marks.clear()
        self.session = uuid.uuid4().hex[:12]

    def start(self) -> None:
        self.environment.events.reset_stats.add_listener(self.reset)
        self._greenlet = gevent.spawn(self._run)

    def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                self.tick()
            except Exception:  # never let the live view take the test down
                logger.exception("Live view tick failed")
            gevent.sleep(max(POLL_INTERVAL_S - (time.monotonic() - started), 0.05))

    def tick(self) -> None:
        if self.server_url:
            try:
                text = scrape(self.server_url + METRICS_PATH, SCRAPE_TIMEOUT_S, bearer_header(key_from_environment()))
                self.counters.add(time.time(), parse(signal_lines(text)))
                self.metrics_error = ""
            except Exception as exc:  # refused, timeout, HTTP error, unparsable text
                self.metrics_error = f"{type(exc).__name__}: {exc}"[:200]
        else:
            self.metrics_error = "no --host"
        reading = self.memory.read() if self.memory is not None else None
        now_s = time.time()
        previous = self.history[-1] if self.history else None
        self.values = live_values(
            now_s, self.setting, self._stage(), self.counters, self.latency,
            None if reading is None else (reading.used_mib, reading.total_mib),
            self.memory_note if reading is None else "", self.metrics_error,
            getattr(self.environment.runner, "user_count", None), self.rate_progress(),
        )
        self.history.append(self.values)
        self.marks.extend(marks_between(previous, self.values))

    @property
    def setting(self) -> str:
        return getattr(self.environment.parsed_options, "setting_name", "") or ""

    def stages(self) -> list[Stage] | None:
        """The --stages schedule: the shape's, or parsed from the options before its first tick."""
        shape = self.environment.shape_class
        if not isinstance(shape, StagedShape):
            return None
        if shape.stages is not None:
            return shape.stages
        try:
            return parse_stages(getattr(self.environment.parsed_options, "stages", "") or "")
        except ValueError:
            return None

    def _stage(self):
        runner = self.environment.runner
        state = str(getattr(runner, "state", "") or "")
        shape = self.environment.shape_class
        variant = getattr(self.environment.parsed_options, "variant_name", "") or ""
        if not isinstance(shape, StagedShape):
            return stage_now(state, None, None, 0.0, False, variant)
        stages = self.stages()
        run_time_s = shape.get_run_time() if shape.current_stage() is not None else 0.0
        return stage_now(state, stages, shape.current_stage(), run_time_s, shape.finished, variant)

    def extended_stats(self) -> list[dict]:
        if self.values is None:
            return [{"key": NOW_TAB, "data": []}, {"key": HISTORY_TAB, "data": []}]
        newest_first = itertools.islice(reversed(self.history), HISTORY_TAB_ROWS)
        return [
            {"key": NOW_TAB, "data": now_rows(self.values)},
            {"key": HISTORY_TAB, "data": [history_tab_row(v, _clock(v.t_s)) for v in newest_first]},
        ]

    def now_csv(self) -> str:
        rows = now_rows(self.values) if self.values is not None else []
        return csv_text([key for key, _ in NOW_COLUMNS], rows)

    def history_csv(self) -> str:
        variant = getattr(self.environment.parsed_options, "variant_name", "")  # a column only with variants
        return csv_text([key for key, _ in HISTORY_COLUMNS if key != "variant" or variant],
                        (history_row(v) for v in self.history))

    def life_json(self) -> str:
        return json.dumps({"life": self.life, "setting": self.setting})

    def charts_json(self, after_t_s: float) -> str:
        return json.dumps(chart_update(self.history, self.marks, after_t_s, self.session, self.setting))


def _clock(t_s: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t_s))


def _open_memory():
    """(source, why it may read nothing): the simulator's file when named, else NVML, else None."""
    sim_file = os.environ.get(SIM_GPU_FILE_ENV, "")
    if sim_file:
        return SimMemory(Path(sim_file)), f"no reading in {SIM_GPU_FILE_ENV}={sim_file}"
    nvml = NvmlMemory()
    if nvml.unavailable_reason:
        return None, nvml.unavailable_reason
    return nvml, "NVML gave no reading"


def _install(environment: Environment, view: LiveView) -> None:
    """Add the tabs, their charts, the CSV routes and the ``extended_stats`` of ``/stats/requests`` to the web UI."""
    web_ui = environment.web_ui
    assert web_ui is not None
    web_ui.template_args.update(
        extended_tabs=[{"title": NOW_TITLE, "key": NOW_TAB}, {"title": HISTORY_TITLE, "key": HISTORY_TAB}],
        extended_tables=[
            {"key": NOW_TAB, "structure": [{"key": k, "title": t} for k, t in NOW_COLUMNS]},
            {"key": HISTORY_TAB, "structure": [{"key": k, "title": t} for k, t in HISTORY_TAB_COLUMNS]},
        ],
        extended_csv_files=[
            {"href": f"./{NOW_CSV}", "title": "Download vLLM live values CSV"},
            {"href": f"./{HISTORY_CSV}", "title": "Download vLLM live history CSV (one row a second)"},
        ],
        # read by static/live_charts.js from the page's window.templateArgs
        lookahead_charts={"tabs": [NOW_TITLE, HISTORY_TITLE], "url": f"./{CHARTS_JSON}",
                          "charts": chart_specs(rate_stages=any(stage.is_rate for stage in view.stages() or ())),
                          "poll_ms": int(CHART_POLL_S * 1000), "max_points": HISTORY_MAX_ROWS},
    )
    follow = bool(getattr(environment.parsed_options, "follow_sweep", False))
    if follow:  # read by static/follow_sweep.js
        web_ui.template_args["lookahead_follow"] = {"life": view.life, "setting": view.setting,
                                                    "url": f"./{LIFE_JSON}", "poll_ms": int(CHART_POLL_S * 1000)}
    base = (getattr(environment.parsed_options, "web_base_path", "") or "").rstrip("/")
    routes = {
        NOW_CSV: lambda: _csv_response(view.now_csv(), "lookahead_live"),
        HISTORY_CSV: lambda: _csv_response(view.history_csv(), "lookahead_history"),
        CHARTS_JSON: lambda: _json_response(view.charts_json(request.args.get("after", 0.0, type=float))),
        CHARTS_JS: lambda: send_file(STATIC / "live_charts.js", mimetype="text/javascript", max_age=0),
        FOLLOW_JS: lambda: send_file(STATIC / "follow_sweep.js", mimetype="text/javascript", max_age=0),
        LIFE_JSON: lambda: _json_response(view.life_json()),
        PLOTLY_JS: lambda: send_file(_plotly_js_path(), mimetype="text/javascript", max_age=3600),
    }
    for path, answer in routes.items():
        endpoint = "lookahead_" + path.replace("/", "_").replace(".", "_")
        web_ui.app.add_url_rule(f"{base}/{path}", endpoint, web_ui.auth_required_if_enabled(answer))
    scripts = f'<script src="./{PLOTLY_JS}"></script><script src="./{CHARTS_JS}"></script>' + \
        (f'<script src="./{FOLLOW_JS}"></script>' if follow else "")

    @web_ui.app.after_request
    def extend_answers(response: Response) -> Response:
        if response.status_code != 200 or response.direct_passthrough:
            return response
        if request.path.rstrip("/").endswith("/stats/requests"):
            body = response.get_json(silent=True)
            if isinstance(body, dict):
                body["extended_stats"] = view.extended_stats()
                response.set_data(json.dumps(body))
        elif request.path == f"{base}/" and response.mimetype == "text/html":
            page = response.get_data(as_text=True)
            response.set_data(page.replace("</body>", scripts + "</body>", 1))
        return response


def _csv_response(text: str, name: str) -> Response:
    response = make_response(text)
    response.headers["Content-Type"] = "text/csv"
    response.headers["Content-Disposition"] = f"attachment;filename={name}_{int(time.time())}.csv"
    return response


def _json_response(text: str) -> Response:
    response = make_response(text)
    response.headers["Content-Type"] = "application/json"
    response.headers["Cache-Control"] = "no-store"
    return response


def _plotly_js_path() -> Path:
    """plotly.js as the installed plotly package ships it (what the report embeds), without importing plotly."""
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        abort(404)
    return Path(next(iter(spec.submodule_search_locations))) / "package_data" / "plotly.min.js"
