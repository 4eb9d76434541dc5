"""The web UI extension (live/webui.py) in-process: Locust's real WebUI (Flask test client, no socket),
a canned /metrics text instead of a server, the simulator's memory file from tmp_path; and the runner's
Locust argv parsed by Locust's own parser with the locustfile's options.

Importing Locust monkey-patches the whole process with gevent, and no test session here imports it: the
checks below run in a child interpreter (`test_in_a_child_interpreter`), defined only when
LOOKAHEAD_WEBUI_CHILD=1.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CHILD_ENV = "LOOKAHEAD_WEBUI_CHILD"
IN_CHILD = os.environ.get(CHILD_ENV) == "1"
REPO = Path(__file__).resolve().parents[2]


def test_in_a_child_interpreter():
    if IN_CHILD:
        pytest.skip("this is the child")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__],
                          cwd=REPO, env=os.environ | {CHILD_ENV: "1"}, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout


if IN_CHILD:
    import csv
    import io
    import json
    import textwrap
    import time
    from types import SimpleNamespace

    from locust import FastHttpUser, task
    from locust.argument_parser import get_empty_argument_parser, setup_parser_arguments
    from locust.env import Environment

    from lookahead_runner.contracts.auth import LIVE_TOKEN_ENV, LOAD_KEY_ENV
    from lookahead_runner.run.life.load import WEB_HOST, locust_argv
    from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV, RequestRecord
    from lookahead_runner.live import webui
    from lookahead_runner.workload import scenario
    from lookahead_runner.workload.options import add_scenario_options
    from lookahead_runner.workload.shape import RateRun, StagedShape

    METRICS = textwrap.dedent("""\
    # TYPE vllm:num_requests_running gauge
    vllm:num_requests_running{{engine="0",model_name="m"}} {running}
    vllm:num_requests_waiting{{engine="0",model_name="m"}} 3.0
    vllm:kv_cache_usage_perc{{engine="0",model_name="m"}} 0.25
    vllm:num_preemptions_total{{engine="0",model_name="m"}} 1.0
    vllm:generation_tokens_total{{engine="0",model_name="m"}} {generated}
    vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
    vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {draft_tokens}
    vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
    """)

    class _User(FastHttpUser):
        @task
        def nothing(self) -> None:
            pass

    class _Shape(StagedShape):
        pass

    @pytest.fixture
    def live_token():
        """The sweep's token the runner hands Locust (LOOKAHEAD_LIVE_TOKEN); none here unless a test says."""
        return ""

    @pytest.fixture
    def live(tmp_path, monkeypatch, request, live_token):
        """Parameter (indirect): more Locust arguments."""
        if live_token:
            monkeypatch.setenv(LIVE_TOKEN_ENV, live_token)
        gpu = tmp_path / "sim_gpu.json"
        gpu.write_text(json.dumps({"used_mib": 1000.0, "total_mib": 4000.0}))
        monkeypatch.setenv(SIM_GPU_FILE_ENV, str(gpu))
        scrapes = iter([
            METRICS.format(running=4.0, generated=0.0, drafts=0.0, draft_tokens=0.0, accepted=0.0),
            METRICS.format(running=6.0, generated=500.0, drafts=100.0, draft_tokens=400.0, accepted=200.0),
        ])
        monkeypatch.setattr(webui, "scrape", lambda url, timeout_s, headers: next(scrapes))
        # Locust's page rendering re-parses sys.argv for the form's extra options: not pytest's argv
        monkeypatch.setattr("sys.argv", ["locust", "-f", "x.py"])
        parser = get_empty_argument_parser(default_config_files=[])
        setup_parser_arguments(parser)
        add_scenario_options(parser)
        webui.add_options(parser)
        options = parser.parse_args(["-f", "x.py", "--setting-name", "k4/r0", "--stages", "2:10,4:10",
                                     *getattr(request, "param", [])])
        environment = Environment(user_classes=[_User], shape_class=_Shape(), host="http://sim.invalid",
                                  parsed_options=options)
        environment.create_local_runner()
        environment.create_web_ui("127.0.0.1", 0, delayed_start=True)  # delayed: never binds the port
        scenario.on_init(environment)  # the locustfile's order: the scenario first, then the live tabs
        webui.on_init(environment)
        view = getattr(environment, webui.STATE_ATTRIBUTE)
        view._greenlet.kill(block=True)  # ticks are driven by hand below
        yield environment, view
        scenario.on_quitting(environment)
        environment.runner.quit()

    def _row(**overrides) -> list[str]:
        values = dict(stage=0, users=2, t_send_s=1.0, t_first_token_s=1.1, t_done_s=2.0, ttft_ms=100.0,
                      e2e_ms=900.0, itl_p50_ms=10.0, itl_p99_ms=30.0, tpot_ms=12.0, prompt_tokens=32,
                      output_tokens=16, chunks=8, ok=True, error="", lag_p99_ms=0.1)
        return RequestRecord(**{**values, **overrides}).as_row()

    def _rows(client) -> dict[str, list[dict]]:
        body = client.get("/stats/requests").get_json()
        return {tab["key"]: tab["data"] for tab in body["extended_stats"]}

    def test_tabs_tables_and_csv_links_reach_the_page(live):
        environment, _view = live
        page = environment.web_ui.app.test_client().get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert [tab["key"] for tab in args["extended_tabs"]] == [webui.NOW_TAB, webui.HISTORY_TAB]
        assert {table["key"] for table in args["extended_tables"]} == {webui.NOW_TAB, webui.HISTORY_TAB}
        links = [link["href"] for link in args["extended_csv_files"]]
        assert links == ["./lookahead/now.csv", "./lookahead/history.csv"]

    def test_the_tab_rows_follow_the_server_and_the_requests(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        view.tick()
        first = {row["signal"]: row["value"] for row in _rows(client)[webui.NOW_TAB]}
        assert first["Setting"] == "k4/r0"
        assert first["Real batch (running / waiting)"] == "4 / 3"
        assert first["GPU memory"] == "1,000 / 4,000 MiB (25.0 %)"
        assert first["Acceptance rate"] == "–"  # one scrape: no delta yet
        # rows reach the scenario's request log from this process's users, or from the workers
        log = getattr(environment, scenario.STATE_ATTRIBUTE).request_log
        log.append(_row(ttft_ms=80.0, itl_p50_ms=9.0, itl_p99_ms=20.0))
        log.append(_row(ttft_ms=120.0, itl_p50_ms=11.0, itl_p99_ms=30.0))
        log.append(_row(ok=False, error="cut"))  # stopped mid-request: neither ok nor failed
        view.tick()
        rows = _rows(client)
        second = {row["signal"]: row["value"] for row in rows[webui.NOW_TAB]}
        assert second["Real batch (running / waiting)"] == "6 / 3"
        assert second["Acceptance rate"] == "50.0 %"
        assert second["Mean acceptance length"] == "3.00"
        assert second["TTFT p50 / p99"] == "100 / 120 ms"
        assert second["Requests (ok / failed)"] == "2 / 0"
        assert second["KV cache usage"] == "25.0 %"
        assert [row["batch"] for row in rows[webui.HISTORY_TAB]] == ["6 / 3", "4 / 3"]  # newest first

    def test_the_csv_downloads_hold_the_same_values(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        view.tick()
        view.tick()
        now = client.get("/lookahead/now.csv")
        assert now.headers["Content-Type"].startswith("text/csv")
        assert "attachment" in now.headers["Content-Disposition"]
        now_rows = {row["signal"]: row["value"] for row in csv.DictReader(io.StringIO(now.get_data(as_text=True)))}
        assert now_rows == {row["signal"]: row["value"] for row in _rows(client)[webui.NOW_TAB]}
        history = list(csv.DictReader(io.StringIO(client.get("/lookahead/history.csv").get_data(as_text=True))))
        assert [row["running"] for row in history] == ["4.00", "6.00"]
        assert history[-1]["acceptance_rate"] == "0.5000"
        assert history[-1]["setting"] == "k4/r0"

    def test_the_page_loads_plotly_and_the_chart_script_from_this_web_ui(live):
        environment, _view = live
        client = environment.web_ui.app.test_client()
        page = client.get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        charts = args["lookahead_charts"]
        assert charts["tabs"] == [tab["title"] for tab in args["extended_tabs"]]  # the script finds its tabs by title
        assert [chart["key"] for chart in charts["charts"]] == ["acceptance", "batch", "kv", "throughput", "gpu"]
        # after the template args (the script reads them), before </body>; relative, as the CSV links
        scripts = page.index('<script src="./lookahead/plotly.min.js"></script>')
        assert page.index("window.templateArgs") < scripts < page.index('src="./lookahead/live_charts.js"')
        assert page.count("lookahead/plotly.min.js") == 1 and page.index("</body>") > scripts
        plotly = client.get("/lookahead/plotly.min.js")
        assert plotly.status_code == 200 and plotly.mimetype == "text/javascript"
        body = plotly.get_data()
        assert body.startswith(b"/**\n* plotly.js v") and len(body) > 1_000_000  # the package's own copy
        plotly.close()
        script = client.get("/lookahead/live_charts.js")
        assert script.status_code == 200 and b"lookahead_charts" in script.get_data()
        script.close()

    def test_alone_the_page_does_not_follow_a_sweep(live):
        environment, _view = live
        page = environment.web_ui.app.test_client().get("/").get_data(as_text=True)
        assert "follow_sweep.js" not in page and "lookahead_follow" not in page

    @pytest.mark.parametrize("live", [["--follow-sweep"]], indirect=True)
    def test_in_a_sweep_the_page_asks_which_life_answers_and_follows_it(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        page = client.get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert args["lookahead_follow"] == {"life": view.life, "setting": "k4/r0", "url": "./lookahead/life.json",
                                            "poll_ms": 2000}
        assert page.index('src="./lookahead/live_charts.js"') < page.index('src="./lookahead/follow_sweep.js"') \
            < page.index("</body>")
        assert client.get("/lookahead/life.json").get_json() == {"life": view.life, "setting": "k4/r0"}
        environment.events.reset_stats.fire()  # Reset Stats is the same life: the page must not reload for it
        assert client.get("/lookahead/life.json").get_json()["life"] == view.life
        script = client.get("/lookahead/follow_sweep.js")
        assert script.status_code == 200 and b"lookahead_follow" in script.get_data()
        script.close()

    def test_charts_json_gives_the_ticks_newer_than_asked_with_the_setting(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        view.tick()
        view.tick()
        update = client.get("/lookahead/charts.json").get_json()
        assert update["setting"] == "k4/r0"
        assert update["columns"]["running"] == [4.0, 6.0]
        assert update["columns"]["acceptance_pct"] == [None, 50.0]
        assert [mark["kind"] for mark in update["marks"]] == []  # the shape has not started: no stage yet
        newest = update["columns"]["t_s"][-1]
        assert client.get(f"/lookahead/charts.json?after={newest!r}").get_json()["columns"]["t_s"] == []
        assert client.get(f"/lookahead/charts.json?after={update['columns']['t_s'][0]!r}").get_json()[
            "columns"]["t_s"] == [newest]
        session = update["session"]
        environment.events.reset_stats.fire()  # Locust's Reset Stats: the history starts again
        assert client.get("/lookahead/charts.json").get_json()["session"] != session

    @pytest.mark.parametrize("live", [["--stages", "2:5,4/s:10", "--arrival", "constant"]], indirect=True)
    def test_a_rate_stage_charts_its_offered_and_achieved_rate_and_the_queue(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        page = client.get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        (rate_chart,) = [chart for chart in args["lookahead_charts"]["charts"] if chart["key"] == "rate"]
        assert [s["column"] for s in rate_chart["series"]] == ["offered_per_s", "achieved_per_s", "waiting",
                                                                "outstanding"]
        # the shape opened the rate stage 5 s ago: 4 req/s, constant gaps, so 20 arrivals are due by now
        shape = environment.shape_class
        start = time.time() - 5.0
        shape.rate_run = RateRun(first=1, last=1, t_start_s=start, dispatchers=1, stages=tuple(view.stages()))
        shape._last_stage = (1, 0)
        log = getattr(environment, scenario.STATE_ATTRIBUTE).request_log
        for i in range(12):   # 12 of them finished: 10 well, one failed, one cut at the end
            error = "" if i < 10 else ("HTTP 500" if i == 10 else "cut")
            log.append(_row(stage=1, users=0, t_scheduled_s=start + 0.25 * (i + 1), ok=not error, error=error))
        view.tick()
        update = client.get("/lookahead/charts.json").get_json()["columns"]
        assert update["offered_per_s"][-1] == pytest.approx(4.0, rel=0.05)
        # served in step: every arrival due one median time in the system (3.6 s) ago was served, so the stage is
        # served at the 4 req/s it offered, counted over the 1.4 s since its answers settled (one arrival in it is
        # 18 %); rows forwarded at once read 8.7 before, twice the rate offered
        assert update["achieved_per_s"][-1] == pytest.approx(4.0, rel=0.2)
        assert (update["outstanding"][-1], update["waiting"][-1]) == (8.0, 3.0)
        rows = {row["signal"]: row["value"] for row in _rows(client)[webui.NOW_TAB]}
        assert rows["Outstanding requests"] == "8" and rows["Rate (offered / achieved)"].endswith(" req/s")

    def test_user_stages_alone_get_no_rate_chart_and_no_rate_values(live):
        environment, view = live
        client = environment.web_ui.app.test_client()
        page = client.get("/").get_data(as_text=True)
        args = json.loads(page.split("window.templateArgs = ", 1)[1].split("\n", 1)[0])
        assert "rate" not in [chart["key"] for chart in args["lookahead_charts"]["charts"]]
        view.tick()
        assert client.get("/lookahead/charts.json").get_json()["columns"]["offered_per_s"] == [None]

    def test_a_failing_scrape_is_shown_not_raised(live, monkeypatch):
        environment, view = live

        def refuse(url, timeout_s, headers):
            raise ConnectionRefusedError(111, "Connection refused")

        monkeypatch.setattr(webui, "scrape", refuse)
        view.tick()
        rows = {row["signal"]: row["value"] for row in _rows(environment.web_ui.app.test_client())[webui.NOW_TAB]}
        assert rows["Server /metrics"].startswith("failing: ConnectionRefusedError")

    FORM = {"user_count": "1", "spawn_rate": "1"}
    EVIL = "https://evil.example"
    TOKEN = "tok-0123456789abcdef"

    def test_the_scrape_goes_to_the_server_the_life_started_whatever_the_host_becomes(live, monkeypatch):
        """A /swarm with another host (its form sets Locust's host) is refused, and however the host changes the
        scrape, key and all, goes to the address the life started with."""
        environment, view = live
        seen = []

        def record(url, timeout_s, headers):
            seen.append((url, headers))
            return METRICS.format(running=1.0, generated=0.0, drafts=0.0, draft_tokens=0.0, accepted=0.0)

        monkeypatch.setattr(webui, "scrape", record)
        monkeypatch.setenv(LOAD_KEY_ENV, "sk-LIVE-SECRET-123456")
        client = environment.web_ui.app.test_client()
        answer = client.post("/swarm", data=FORM | {"host": "http://127.0.0.1:9"})
        assert answer.status_code == 403 and environment.host == "http://sim.invalid"
        environment.host = "http://127.0.0.1:9"  # however it changes (a Locust of another version, a plugin)
        view.tick()
        assert seen == [("http://sim.invalid/metrics", {"Authorization": "Bearer sk-LIVE-SECRET-123456"})]

    def test_a_cross_origin_request_is_refused_and_answered_without_cors(live):
        environment, _view = live
        client = environment.web_ui.app.test_client()
        evil = client.get("/lookahead/life.json", headers={"Origin": EVIL})
        assert evil.status_code == 403 and "Access-Control-Allow-Origin" not in evil.headers
        assert client.post("/swarm", data=FORM | {"host": "http://sim.invalid"}, headers={"Origin": EVIL}).status_code \
            == 403
        assert client.post("/stop", headers={"Origin": "null"}).status_code == 403
        assert client.get("/stats/requests", headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
        # a name of the attacker's that resolves to this host (DNS rebinding): the browser calls it same-origin
        assert client.get("/", headers={"Host": "evil.example:8089"}).status_code == 403
        own = client.get("/lookahead/life.json", headers={"Origin": "http://localhost"})
        assert own.status_code == 200 and "Access-Control-Allow-Origin" not in own.headers
        assert own.headers["Referrer-Policy"] == "no-referrer"

    @pytest.mark.parametrize("live_token", [TOKEN])
    def test_with_the_sweep_s_token_every_route_needs_it(live):
        environment, _view = live
        client = environment.web_ui.app.test_client()
        for method, path in [("get", "/"), ("get", "/stats/requests"), ("get", "/lookahead/charts.json"),
                             ("get", "/lookahead/now.csv"), ("post", "/swarm"), ("post", "/stop"),
                             ("post", "/stats/reset")]:
            assert getattr(client, method)(path).status_code == 403, path
        assert client.get("/?tab=lookahead&token=wrong").status_code == 403
        page = client.get(f"/?tab=lookahead&token={TOKEN}")
        assert page.status_code == 200
        cookie = page.headers["Set-Cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN in cookie
        assert client.get("/stats/requests").status_code == 200  # the page's own requests carry the cookie
        assert client.post("/stop", headers={"Origin": EVIL}).status_code == 403  # the cookie is not enough

    def test_without_a_web_ui_nothing_is_installed():
        environment = Environment(user_classes=[_User], host="http://sim.invalid",
                                  parsed_options=SimpleNamespace(headless=True))
        environment.create_local_runner()
        log = object()
        setattr(environment, scenario.STATE_ATTRIBUTE, SimpleNamespace(request_log=log))
        webui.on_init(environment)
        assert getattr(environment, webui.STATE_ATTRIBUTE, None) is None
        assert getattr(environment, scenario.STATE_ATTRIBUTE).request_log is log  # untouched
        environment.runner.quit()

    def test_a_live_view_that_fails_to_start_still_leaves_every_route_guarded(monkeypatch):
        """Locust logs an init listener's exception and serves its web UI all the same: the guard goes on first."""
        from locust import log as locust_log

        monkeypatch.setattr(locust_log, "unhandled_greenlet_exception", False)  # Locust's flag, set by the failure
        monkeypatch.setattr("sys.argv", ["locust", "-f", "x.py"])
        parser = get_empty_argument_parser(default_config_files=[])
        setup_parser_arguments(parser)
        add_scenario_options(parser)
        webui.add_options(parser)
        environment = Environment(user_classes=[_User], shape_class=_Shape(), host="http://sim.invalid",
                                  parsed_options=parser.parse_args(["-f", "x.py", "--stages", "2:10"]))
        environment.create_local_runner()
        environment.create_web_ui("127.0.0.1", 0, delayed_start=True)

        def fails(*_args, **_kwargs):
            raise RuntimeError("the live view could not start")

        monkeypatch.setattr(webui.LiveView, "__init__", fails)
        environment.events.init.add_listener(webui.on_init)
        environment.events.init.fire(environment=environment, runner=environment.runner, web_ui=environment.web_ui)
        evil = environment.web_ui.app.test_client().get("/stats/requests", headers={"Origin": EVIL})
        assert evil.status_code == 403 and "Access-Control-Allow-Origin" not in evil.headers
        environment.runner.quit()

    LOAD = SimpleNamespace(stages=[SimpleNamespace(users=2, duration_s=5.0)], prompt_tokens=32, output_tokens=16,
                           temperature=0.0, request_timeout_s=30.0, processes=1, locust_extra_args=[])

    def _locust_options(argv: list[str]):
        """Parse a runner-built argv with Locust's own parser plus the locustfile's options."""
        parser = get_empty_argument_parser(default_config_files=[])
        setup_parser_arguments(parser)
        add_scenario_options(parser)
        webui.add_options(parser)
        assert argv[1:3] == ["-m", "locust"]
        return parser.parse_args(args=argv[3:])

    def test_the_runner_argv_parses_headless_by_default_with_the_setting_name(tmp_path):
        options = _locust_options(locust_argv("http://127.0.0.1:8000", tmp_path, "m", LOAD, setting_name="k4/r0"))
        assert options.headless is True
        assert options.setting_name == "k4/r0"

    def test_the_runner_argv_in_web_mode_serves_the_ui_and_runs_the_stages_unattended(tmp_path):
        argv = locust_argv("http://127.0.0.1:8000", tmp_path, "m", LOAD, setting_name="k2/r1", web_port=18089)
        options = _locust_options(argv)
        assert options.headless is False
        assert options.autostart is True
        assert options.autoquit >= 0  # Locust quits by itself after the last stage
        assert (options.web_host, options.web_port) == (WEB_HOST, 18089)
        assert options.setting_name == "k2/r1"
        assert options.stages == "2:5"
        assert options.follow_sweep is True
