"""The web UI's live tabs, for real: the simulated vLLM server, Locust with its web UI (--autostart) on
the real locustfile, and headless Chromium driven over the DevTools protocol (``--remote-debugging-pipe``:
JSON messages on file descriptors 3 and 4, so no extra package).

The browser test opens the "vLLM live" tab, reads its table twice while the load runs (the values
must change), takes a screenshot and checks that the tab's table is in it (the charts beside it:
test_live_charts_browser.py). The distributed test runs Locust with two worker processes and checks
that the master's tab merges the workers' requests.
Set LOOKAHEAD_WEBUI_SCREENSHOT=/some/file.png to keep the screenshot.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fault_kit import stop_group as _stop

from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV
from lookahead_runner.run.life.server import free_port as _free_port

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
LOCUSTFILE = REPO / "locustfiles" / "completions.py"
READY_TIMEOUT_S = 30.0
PAGE_TIMEOUT_S = 30.0
CDP_TIMEOUT_S = 15.0
SPEC = json.dumps({"method": "draft_model", "model": "d", "num_speculative_tokens": 4})
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--remote-debugging-pipe"]
# values that move with the load: the check that the tab is live must not rest on a clock
LIVE_SIGNALS = ("Real batch (running / waiting)", "KV cache usage", "Preemptions", "Generation throughput",
                "TTFT p50 / p99", "ITL p50 / p99", "Requests (ok / failed)", "Acceptance rate",
                "Mean acceptance length", "Stage")


def _wait_http(url: str, process: subprocess.Popen, log: Path, timeout_s: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{process.args[:4]} exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    pytest.fail(f"{url} not up within {timeout_s} s:\n{log.read_text()[-3000:]}")


def _get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _tab(web: str, key: str = "lookahead") -> dict[str, str]:
    body = _get_json(web + "/stats/requests")
    rows = next(tab["data"] for tab in body.get("extended_stats", []) if tab["key"] == key)
    return {row["signal"]: row["value"] for row in rows}


@dataclass
class Sweep:
    """A simulated server and a Locust web UI driving it."""

    server_url: str
    web_url: str
    requests_csv: Path


@pytest.fixture
def sim_and_locust(request, tmp_path) -> Iterator[Sweep]:
    """Parameters (indirect): processes (Locust workers), sim_args (extra simulator flags), stages, setting."""
    params = getattr(request, "param", {})
    processes = params.get("processes", 0)
    gpu_file = tmp_path / "sim_gpu.json"
    env = os.environ | {SIM_GPU_FILE_ENV: str(gpu_file), "PYTHONUNBUFFERED": "1"}
    server_port, web_port = _free_port(), _free_port()
    started: list[subprocess.Popen] = []
    try:
        sim_log = tmp_path / "sim.log"
        with open(sim_log, "wb") as out:
            sim = subprocess.Popen([sys.executable, "-m", "lookahead_runner.sim", "serve", "sim-model",
                                    "--port", str(server_port), "--speculative-config", SPEC,
                                    *params.get("sim_args", [])],
                                   stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        started.append(sim)
        server_url = f"http://127.0.0.1:{server_port}"
        _wait_http(server_url + "/health", sim, sim_log)
        locust_log = tmp_path / "locust.log"
        with open(locust_log, "wb") as out:
            locust = subprocess.Popen(
                [sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--host", server_url,
                 "--web-host", "127.0.0.1", "--web-port", str(web_port), "--autostart", "--autoquit", "1",
                 "--stages", params.get("stages", "3:20,6:40"), "--prompt-tokens", "64", "--output-tokens", "48",
                 "--setting-name", params.get("setting", "k4/r0"), "--requests-csv", str(tmp_path / "requests.csv"),
                 *(["--processes", str(processes)] if processes else [])],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        started.append(locust)
        web_url = f"http://127.0.0.1:{web_port}"
        _wait_http(web_url + "/", locust, locust_log)
        yield Sweep(server_url, web_url, tmp_path / "requests.csv")
    finally:
        for process in reversed(started):
            _stop(process)


def _wait_for(read, ready, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    value = None
    while time.monotonic() < deadline:
        value = read()
        if ready(value):
            return value
        time.sleep(0.5)
    pytest.fail(f"{what} within {timeout_s} s; last read: {value!r}")


class DevTools:
    """Headless Chromium over ``--remote-debugging-pipe``: requests on fd 3, answers and events on fd 4,
    each a JSON object ended by a NUL byte."""

    def __init__(self, chromium: str, profile: Path, log: Path) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def pipes_on_fds_3_and_4() -> None:  # in the child, before exec
            import fcntl

            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        with open(log, "wb") as out:
            self.process = subprocess.Popen(
                [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, close_fds=False,
                preexec_fn=pipes_on_fds_3_and_4, start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._answers: queue.Queue = queue.Queue()
        self.events: list[dict] = []  # what the browser told unasked (console messages, exceptions, ...)
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buffer = b""
        while True:
            try:
                data = os.read(self._from_browser, 1 << 16)
            except OSError:
                return
            if not data:
                return
            buffer += data
            *messages, buffer = buffer.split(b"\0")
            for message in messages:
                parsed = json.loads(message)
                if "id" in parsed:
                    self._answers.put(parsed)
                else:
                    self.events.append(parsed)

    def call(self, method: str, session: str | None = None, **params) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + CDP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                answer = self._answers.get(timeout=0.5)
            except queue.Empty:
                if self.process.poll() is not None:
                    raise RuntimeError(f"Chromium exited with {self.process.returncode}") from None
                continue
            if answer["id"] == self._next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})
        raise TimeoutError(f"{method}: no answer within {CDP_TIMEOUT_S} s")

    def evaluate(self, session: str, expression: str):
        result = self.call("Runtime.evaluate", session, expression=expression, returnByValue=True)
        return result.get("result", {}).get("value")

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for fd in (self._to_browser, self._from_browser):
            try:
                os.close(fd)
            except OSError:
                pass


READ_TAB_JS = """(() => {
  const tabs = Array.from(document.querySelectorAll('[role="tab"]')).map(t => t.textContent.trim());
  const selected = Array.from(document.querySelectorAll('[role="tab"][aria-selected="true"]'))
    .map(t => t.textContent.trim());
  const table = document.querySelector('table');
  const rows = table ? Array.from(table.querySelectorAll('tbody tr'))
    .map(tr => Array.from(tr.cells).map(td => td.innerText.trim())) : [];
  const box = table ? table.getBoundingClientRect() : null;
  return {tabs, selected, rows,
          box: box ? {x: box.x, y: box.y, width: box.width, height: box.height} : null};
})()"""


@pytest.fixture
def chromium() -> str:
    """Chromium's path, or a skip (before any server starts: request this fixture first)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed (Debian: apt-get install -y chromium); the live-tab browser test needs it")


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "not a PNG"
    return struct.unpack(">II", data[16:24])


def decode_png(data: bytes) -> tuple[int, int, list[bytes]]:
    """(width, height, rows of RGB(A) bytes) of an 8-bit, non-interlaced RGB/RGBA PNG (Chromium's)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        position += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
    assert header is not None
    width, height, depth, color, _compression, _filter, interlace = header
    assert depth == 8 and color in (2, 6) and interlace == 0, f"unexpected PNG format {header}"
    bpp = 3 if color == 2 else 4
    raw, stride = zlib.decompress(idat), width * bpp
    rows, prior = [], bytearray(stride)
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride) if kind else ():
            left = line[i - bpp] if i >= bpp else 0
            up, up_left = prior[i], prior[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + ((left + up) >> 1)) & 0xFF
            else:
                p = left + up - up_left
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
                line[i] = (line[i] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(bytes(line))
        prior = line
    return width, height, rows


def text_lines(png: bytes) -> int:
    """How many separate bands of text-like (high-contrast) pixel rows the image holds."""
    width, _height, rows = decode_png(png)
    bpp = len(rows[0]) // width
    bands, inside = 0, False
    for row in rows:
        lum = [(row[i] * 3 + row[i + 1] * 6 + row[i + 2]) // 10 for i in range(0, len(row), bpp)]
        background = sorted(lum)[len(lum) // 2]
        ink = sum(1 for value in lum if abs(value - background) > 90) >= 2
        bands += ink and not inside
        inside = ink
    return bands


def test_the_live_tab_in_a_real_browser_changes_and_shows_in_a_screenshot(chromium, sim_and_locust, tmp_path):
    web = sim_and_locust.web_url
    _wait_for(lambda: _tab(web).get("Requests (ok / failed)", "–"), lambda v: not v.startswith(("–", "0 /")),
              PAGE_TIMEOUT_S, "no request finished")
    browser = DevTools(chromium, tmp_path / "chromium-profile", tmp_path / "chromium.log")
    try:
        target = browser.call("Target.createTarget", url="about:blank")["targetId"]
        session = browser.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        # tall enough for the whole table: beside the charts it has half the width, so its cells wrap
        browser.call("Emulation.setDeviceMetricsOverride", session, width=1400, height=1400,
                     deviceScaleFactor=1, mobile=False)
        browser.call("Page.navigate", session, url=web + "/?tab=lookahead")

        def read() -> dict:
            return browser.evaluate(session, READ_TAB_JS) or {}

        def has_live_rows(page: dict) -> bool:
            values = {row[0]: row[1] for row in page.get("rows", []) if len(row) >= 2}
            return values.get("Setting") == "k4/r0" and values.get("TTFT p50 / p99", "–") != "–"

        first = _wait_for(read, has_live_rows, PAGE_TIMEOUT_S, "the vLLM live tab did not fill")
        assert "vLLM live" in first["tabs"] and "vLLM history" in first["tabs"]
        assert first["selected"] == ["vLLM live"]
        before = {row[0]: row[1] for row in first["rows"]}
        assert before["Mean acceptance length"] != "–", before
        assert before["GPU memory"].endswith("%)"), before  # the simulator's memory file is read
        assert "MiB" in before["GPU memory"]
        time.sleep(4.0)  # the page polls /stats/requests every 2 s; the server moves on meanwhile
        second = read()
        after = {row[0]: row[1] for row in second["rows"]}
        changed = [name for name in LIVE_SIGNALS if before.get(name) != after.get(name)]
        assert changed, f"no live value changed in 4 s:\nbefore {before}\nafter  {after}"

        shot = base64.b64decode(browser.call("Page.captureScreenshot", session, format="png")["data"])
        keep = os.environ.get("LOOKAHEAD_WEBUI_SCREENSHOT")
        (Path(keep) if keep else tmp_path / "webui_tab.png").write_bytes(shot)
        box = second["box"]
        assert box and box["width"] > 300 and box["height"] > 200, second
        assert png_size(shot) == (1400, 1400)
        table_shot = base64.b64decode(browser.call(
            "Page.captureScreenshot", session, format="png", optimizeForSpeed=True,
            clip={"x": box["x"], "y": box["y"], "width": box["width"], "height": box["height"], "scale": 1},
        )["data"])
        lines = text_lines(table_shot)
        # the header plus one band per row at least (a wrapped "meaning" cell adds a band)
        rows = len(second["rows"])
        assert lines >= rows + 1, f"{lines} text lines in the tab's screenshot for {rows} rows"
    finally:
        browser.close()


@pytest.mark.parametrize("sim_and_locust", [{"processes": 2}], indirect=True)
def test_distributed_master_shows_the_workers_requests_merged(sim_and_locust):
    web = sim_and_locust.web_url
    tab = _wait_for(lambda: _tab(web), lambda t: t.get("TTFT p50 / p99", "–") != "–", PAGE_TIMEOUT_S,
                    "the master's tab got no request samples from its workers")
    assert _get_json(web + "/stats/requests")["worker_count"] == 2
    assert tab["Setting"] == "k4/r0"
    assert tab["Stage"].startswith(("1 of 2", "2 of 2"))
    assert tab["Real batch (running / waiting)"] != "–"
    with urllib.request.urlopen(web + "/lookahead/history.csv", timeout=5) as response:
        history = list(csv.DictReader(io.StringIO(response.read().decode())))
    assert history and any(row["ttft_p50_ms"] for row in history)
    with urllib.request.urlopen(web + "/lookahead/now.csv", timeout=5) as response:
        now = {row["signal"]: row["value"] for row in csv.DictReader(io.StringIO(response.read().decode()))}
    assert now["Setting"] == "k4/r0"
    # the tabs tap the master's request log: requests.csv still gets every worker's rows
    requests_csv = sim_and_locust.requests_csv
    _wait_for(lambda: requests_csv.read_text().count("\n") if requests_csv.exists() else 0,
              lambda lines: lines > 3, 10, "requests.csv got no rows")

