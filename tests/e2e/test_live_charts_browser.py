"""The charts of the live tabs in headless Chromium while load runs (the harness of test_webui.py).

A simulator with a tiny KV cache (so the second stage preempts), Locust with its web UI on the real
locustfile, and the "vLLM live" tab opened: the five charts are drawn beside the table with the
setting in their titles, grow as the load runs, mark both stages and the preemptions, come with the
"vLLM history" tab and leave with it; the page logs no error or warning and asks nothing of any
host but the web UI (plotly.js comes from it). A rate stage adds its chart: offered against achieved rate and
the queues, filled from the run's schedule and its requests as they finish. Skipped without Chromium.
Set LOOKAHEAD_WEBUI_CHARTS_SCREENSHOT=/some/file.png to keep a screenshot of the charts.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest
from test_webui import PAGE_TIMEOUT_S, DevTools, _wait_for, chromium, sim_and_locust  # noqa: F401 (fixtures)

pytestmark = pytest.mark.e2e

# A KV pool of about 1,300 tokens (five requests of 256): 24 users preempt one another within seconds.
TIGHT_KV = {"sim_args": ["--max-num-seqs", "16", "--max-model-len", "256", "--sim-set", "gpu_total_mib=21480"],
            "stages": "3:8,24:40"}
READ_CHARTS_JS = """(() => {
  const panel = document.querySelector('.lookahead-charts');
  if (!panel) return {panel: null, grids: document.querySelectorAll('.lookahead-with-charts').length};
  const box = (el) => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; };
  const table = document.querySelector('main table');
  return {
    head: panel.querySelector('.lookahead-charts-head').textContent,
    panel: box(panel), table: table ? box(table) : null,
    charts: Array.from(panel.querySelectorAll('.lookahead-chart')).map(div => ({
      key: div.dataset.chart, drawn: !!div.querySelector('.main-svg'),
      title: ((div.layout || {}).title || {}).text || '',
      points: Object.fromEntries((div.data || []).map(t => [t.name, (t.y || []).filter(v => v !== null).length])),
      stage_lines: ((div.layout || {}).shapes || []).length,
      painted: div.querySelectorAll('.scatterlayer .trace path').length})),
  };
})()"""
CLICK_TAB_JS = """Array.from(document.querySelectorAll('[role="tab"]')).find(t => t.textContent.trim() === %s).click()"""
COMPLAINTS = {"Runtime.exceptionThrown": None, "Runtime.consoleAPICalled": ("error", "warning", "assert"),
              "Log.entryAdded": ("error", "warning")}


def _charts(page: dict) -> dict[str, dict]:
    return {chart["key"]: chart for chart in (page or {}).get("charts", [])}


def _complaints(events: list[dict]) -> list[dict]:
    found = []
    for event in events:
        method, params = event.get("method"), event.get("params", {})
        if method not in COMPLAINTS:
            continue
        level = params.get("type") or params.get("entry", {}).get("level")
        if COMPLAINTS[method] is None or level in COMPLAINTS[method]:
            found.append(event)
    return found


@pytest.mark.parametrize("sim_and_locust", [TIGHT_KV], indirect=True)
def test_the_live_charts_draw_beside_the_table_follow_the_load_and_log_no_errors(chromium, sim_and_locust, tmp_path):
    web = sim_and_locust.web_url
    browser = DevTools(chromium, tmp_path / "chromium-profile", tmp_path / "chromium.log")
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime.enable", "Log.enable", "Network.enable"):
            browser.call(domain, session)
        browser.call("Emulation.setDeviceMetricsOverride", session, width=1400, height=1400,
                     deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", session, url=web + "/?tab=lookahead")

        def read() -> dict:
            return browser.evaluate(session, READ_CHARTS_JS) or {}

        first = _wait_for(read, lambda page: len(_charts(page)) == 5 and all(
            c["drawn"] and c["painted"] for c in _charts(page).values())
            and _charts(page)["batch"]["points"].get("Locust users", 0) >= 3, PAGE_TIMEOUT_S,
            "the charts were not drawn")
        charts = _charts(first)
        assert all(chart["title"].endswith("· k4/r0") for chart in charts.values()), charts  # the life's setting
        assert "setting k4/r0" in first["head"]
        panel, table = first["panel"], first["table"]
        assert panel["x"] >= table["x"] + table["width"] - 1 and panel["y"] < table["y"] + table["height"], first
        assert panel["width"] > 400 and panel["height"] > 5 * 200, first

        # while the load runs the lines grow, stage 2 begins (a line on every chart), KV fills and preemptions
        # are marked
        def moved_on(page: dict) -> bool:
            now = _charts(page)
            return (all(now[key]["points"] != charts[key]["points"] for key in ("batch", "kv", "gpu"))
                    and all(c["stage_lines"] >= 2 for c in now.values())
                    and now["kv"]["points"].get("preemptions", 0) >= 2)

        now = _charts(_wait_for(read, moved_on, PAGE_TIMEOUT_S, "the charts did not follow the load"))
        grew = {key: (charts[key]["points"], now[key]["points"]) for key in now}
        assert now["batch"]["points"]["running"] > charts["batch"]["points"]["running"], grew
        for key, series in (("acceptance", "acceptance rate %"), ("acceptance", "mean acceptance length"),
                            ("batch", "waiting"), ("kv", "KV usage %"), ("throughput", "generation tok/s"),
                            ("gpu", "used")):
            assert now[key]["points"][series] > 0, (key, series, grew)

        # the history tab has the charts too; Locust's own tabs stay as they were
        browser.evaluate(session, CLICK_TAB_JS % json.dumps("vLLM history"))
        history = _wait_for(read, lambda page: page.get("panel") is not None and len(_charts(page)) == 5
                            and all(c["painted"] for c in _charts(page).values()), PAGE_TIMEOUT_S,
                            "no charts on the history tab")
        assert history["table"] and history["panel"]["x"] > history["table"]["x"]
        browser.evaluate(session, CLICK_TAB_JS % json.dumps("Statistics"))
        _wait_for(read, lambda page: page.get("panel") is None and page.get("grids") == 0, 10,
                  "the charts stayed on Locust's Statistics tab")

        shot = base64.b64decode(browser.call("Page.captureScreenshot", session, format="png")["data"])
        keep = os.environ.get("LOOKAHEAD_WEBUI_CHARTS_SCREENSHOT")
        if keep:
            Path(keep).write_bytes(shot)
        complaints = _complaints(browser.events)
        assert not complaints, json.dumps(complaints, indent=1)[:3000]
        requested = {event["params"]["request"]["url"] for event in browser.events
                     if event.get("method") == "Network.requestWillBeSent"}
        assert requested and all(url.startswith((web, "data:", "blob:")) for url in requested), requested
    finally:
        browser.close()


LINK = '<a href="https://evil.example/">k4</a>&amp;'
READ_TITLES_JS = """Array.from(document.querySelectorAll('.lookahead-chart')).map(div => ({
  drawn: !!div.querySelector('.main-svg'), links: div.querySelectorAll('a').length,
  title: (div.querySelector('.gtitle') || {}).textContent || ''}))"""


@pytest.mark.parametrize("sim_and_locust", [{"stages": "2:30", "setting": LINK}], indirect=True)
def test_a_setting_name_with_markup_is_drawn_as_text_not_as_a_link(chromium, sim_and_locust, tmp_path):
    """plotly reads HTML in a chart's title: a setting's name (a label from the command line or a run folder)
    shows as written, with no link in any chart."""
    browser = DevTools(chromium, tmp_path / "chromium-profile", tmp_path / "chromium.log")
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        browser.call("Page.navigate", session, url=sim_and_locust.web_url + "/?tab=lookahead")
        titles = _wait_for(lambda: browser.evaluate(session, READ_TITLES_JS) or [],
                           lambda charts: len(charts) == 5 and all(c["drawn"] and "·" in c["title"] for c in charts),
                           PAGE_TIMEOUT_S, "the charts were not drawn")
        assert [chart["links"] for chart in titles] == [0] * 5, titles
        assert all(chart["title"].endswith(f"· {LINK}") for chart in titles), titles
    finally:
        browser.close()


READ_RATE_JS = """(() => {
  const div = document.querySelector('.lookahead-chart[data-chart="rate"]');
  if (!div || !div.data) return null;
  return Object.fromEntries(div.data.map(t => [t.name, (t.y || []).filter(v => v !== null)]));
})()"""


@pytest.mark.parametrize("sim_and_locust", [{"stages": "2:2,8/s:40"}], indirect=True)
def test_a_rate_stage_draws_its_offered_and_achieved_rate_and_the_queue(chromium, sim_and_locust, tmp_path):
    """A real Locust run of a rate stage (8 req/s, Poisson): the page has the rate chart, whose offered line
    follows the schedule and whose achieved line and queues fill from the requests as they finish."""
    web = sim_and_locust.web_url
    browser = DevTools(chromium, tmp_path / "chromium-profile", tmp_path / "chromium.log")
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Runtime.enable", "Log.enable"):
            browser.call(domain, session)
        browser.call("Emulation.setDeviceMetricsOverride", session, width=1400, height=1600,
                     deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", session, url=web + "/?tab=lookahead")
        page = _wait_for(lambda: browser.evaluate(session, READ_CHARTS_JS) or {},
                         lambda page: "rate" in _charts(page) and _charts(page)["rate"]["drawn"], PAGE_TIMEOUT_S,
                         "no rate chart")
        assert len(_charts(page)) == 6
        lines = _wait_for(lambda: browser.evaluate(session, READ_RATE_JS) or {},
                          lambda lines: len(lines.get("offered req/s", [])) >= 8
                          and sum(lines.get("achieved req/s", [])) > 0, PAGE_TIMEOUT_S,
                          "the rate chart did not fill")
        assert 3.0 < lines["offered req/s"][-1] < 16.0, lines     # 8 req/s over the last (up to) 10 s
        assert lines["outstanding (client)"] and min(lines["outstanding (client)"]) >= 0, lines
        assert lines["server waiting"], lines
        complaints = _complaints(browser.events)
        assert not complaints, json.dumps(complaints, indent=1)[:3000]
    finally:
        browser.close()
