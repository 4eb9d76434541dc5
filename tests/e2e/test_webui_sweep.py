"""`lookahead-runner sweep --web` on the simulator: one live-view URL for the whole sweep, printed once. Every
server life's Locust web UI answers at it in turn; the live tab and its charts there name the life and follow
its stage; a browser tab opened during the first life (headless Chromium, where installed) follows the sweep to
the second life by itself, saying so between the two; and each life still ends by itself."""

from __future__ import annotations

import json
import queue
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from fault_kit import FINISHED
from test_webui import READ_TAB_JS, DevTools

pytestmark = pytest.mark.e2e

URL_TIMEOUT_S = 90.0
FOLLOW_TIMEOUT_S = 120.0
SWEEP_TIMEOUT_S = 120.0
TOML = """
name = "web"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 2]
[load]
stages = [{{ users = 4, duration_s = 8 }}]
prompt_tokens = 64
output_tokens = 32
warmup_s = 1.0
preflight_s = 0
[decision]
target_users = 4
min_requests = 3
confirm = "off"
"""
READ_BAR_JS = """(() => { const bar = document.querySelector('.lookahead-follow');
  return bar && bar.style.display !== 'none' ? bar.textContent : ''; })()"""


def _tab(web: str, token: str) -> dict[str, str]:
    with urllib.request.urlopen(f"{web}/stats/requests?token={token}", timeout=5) as response:
        body = json.loads(response.read())
    rows = next(tab["data"] for tab in body.get("extended_stats", []) if tab["key"] == "lookahead")
    return {row["signal"]: row["value"] for row in rows}


def _seen(values: list, value) -> None:
    if value and (not values or values[-1] != value):
        values.append(value)


def test_sweep_web_serves_one_live_url_that_follows_every_life(tmp_path):
    chromium = next(filter(None, (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome"))), None)
    config = tmp_path / "sweep.toml"
    config.write_text(TOML.format(model=f"sim/web-{uuid.uuid4().hex[:8]}"))
    runner = subprocess.Popen([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                               "--out", str(tmp_path / "runs"), "--web"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in runner.stdout], daemon=True).start()
    seen: list[str] = []
    browser = None
    try:
        deadline = time.monotonic() + URL_TIMEOUT_S
        url = None
        while url is None and time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                assert runner.poll() is None, "".join(seen)
                continue
            seen.append(line)
            match = re.search(r"live view, one address for every server life: "
                              r"(http://127\.0\.0\.1:\d+/\?tab=lookahead&token=[\w-]+)", line)
            url = match.group(1) if match else None
        assert url, f"no live view URL within {URL_TIMEOUT_S} s:\n{''.join(seen)}"
        web, token = url.split("/?", 1)[0], url.rsplit("token=", 1)[1]
        session = None
        if chromium:  # opened once, before the first life's load: the test never navigates it again
            browser = DevTools(chromium, tmp_path / "chromium-profile", tmp_path / "chromium.log")
            target = browser.call("Target.createTarget", url="about:blank")["targetId"]
            session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            browser.call("Page.navigate", session, url=url)
        by_http: list[str] = []
        in_page: list[str] = []
        bars: list[str] = []
        tab: dict[str, str] = {}
        live: dict[str, str] = {}   # the tab as first read with k2/r0's stage running (the browser may lag it)
        deadline = time.monotonic() + FOLLOW_TIMEOUT_S
        while time.monotonic() < deadline and runner.poll() is None:
            try:
                tab = _tab(web, token)
                _seen(by_http, tab.get("Setting"))
            except (OSError, StopIteration, ValueError):
                pass
            if browser is not None:
                page = browser.evaluate(session, READ_TAB_JS) or {}
                _seen(in_page, {row[0]: row[1] for row in page.get("rows", []) if len(row) >= 2}.get("Setting"))
                _seen(bars, browser.evaluate(session, READ_BAR_JS))
            done = tab.get("Setting") == "k2/r0" and tab.get("Stage", "").startswith("1 of 1") \
                and tab.get("Acceptance rate", "–") != "–"
            live = live or (dict(tab) if done else {})
            if done and (browser is None or in_page[-1:] == ["k2/r0"]):
                break
            time.sleep(0.5)
        assert by_http == ["k0/r0", "k2/r0"], by_http  # the same address, one life after the other
        tab = live or tab   # read while the stage ran, not after it ended while the browser caught up
        assert tab["Stage"].startswith("1 of 1: 4 users"), tab
        assert tab["Acceptance rate"].endswith("%"), tab
        assert tab["GPU memory"].endswith("%)"), tab  # the life's simulator memory file reached Locust
        with urllib.request.urlopen(f"{web}/lookahead/charts.json?token={token}", timeout=5) as response:
            charts = json.loads(response.read())
        assert charts["setting"] == "k2/r0", charts["setting"]  # every chart's title carries it
        assert charts["columns"]["t_s"] and any(v is not None for v in charts["columns"]["acceptance_pct"])
        assert {"kind": "stage", "label": "stage 1: 4 users"}.items() <= charts["marks"][0].items()
        if browser is not None:  # the tab followed the sweep by itself, and said why it waited
            assert in_page == ["k0/r0", "k2/r0"], in_page
            assert any(bar.startswith("k0/r0 is over: the sweep is starting its next server life") for bar in bars), \
                bars
        runner.wait(timeout=SWEEP_TIMEOUT_S)
    finally:
        if browser is not None:
            browser.close()
        if runner.poll() is None:  # SIGTERM: the runner stops its server and Locust on the way out
            runner.terminate()
            try:
                runner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait(timeout=30)
    output = "".join(seen) + "".join(iter_queue(lines))
    assert runner.returncode in (*FINISHED, 1), output  # the web UI is under test, not the verdict
    assert output.count("live view") == 1 and output.count(web) == 1, output  # printed once, for every life
    for life in ("k0", "k2"):
        status = json.loads(next((tmp_path / "runs").glob(f"*/{life}/r0/status.json")).read_text())
        assert status["state"] == "done", status
    with pytest.raises(OSError):  # Locust quit after the stages: its UI is gone
        urllib.request.urlopen(web + "/", timeout=2)


def iter_queue(lines: queue.Queue):
    while True:
        try:
            yield lines.get_nowait()
        except queue.Empty:
            return
