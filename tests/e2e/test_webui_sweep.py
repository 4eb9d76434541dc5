"""`lookahead-runner sweep --web` on the simulator: each server life prints its Locust web UI's URL,
the live tab and its charts there name the life and follow its stage, and the life still ends by itself."""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest
from fault_kit import FINISHED

pytestmark = pytest.mark.e2e

URL_TIMEOUT_S = 90.0
SWEEP_TIMEOUT_S = 120.0
TOML = """
name = "web"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [2]
[load]
stages = [{{ users = 4, duration_s = 8 }}]
prompt_tokens = 64
output_tokens = 32
warmup_s = 1.0
preflight_s = 0
[decision]
target_users = 4
min_requests = 3
"""


def _tab(web: str) -> dict[str, str]:
    with urllib.request.urlopen(web + "/stats/requests", timeout=5) as response:
        body = json.loads(response.read())
    rows = next(tab["data"] for tab in body.get("extended_stats", []) if tab["key"] == "lookahead")
    return {row["signal"]: row["value"] for row in rows}


def test_sweep_web_prints_a_live_url_per_life_and_still_finishes(tmp_path):
    config = tmp_path / "sweep.toml"
    config.write_text(TOML.format(model=f"sim/web-{uuid.uuid4().hex[:8]}"))
    runner = subprocess.Popen([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                               "--out", str(tmp_path / "runs"), "--web"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in runner.stdout], daemon=True).start()
    seen: list[str] = []
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
            match = re.search(r"live view: (http://127\.0\.0\.1:\d+/\?tab=lookahead)", line)
            url = match.group(1) if match else None
        assert url, f"no live view URL within {URL_TIMEOUT_S} s:\n{''.join(seen)}"
        web = url.split("/?", 1)[0]
        tab: dict[str, str] = {}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                tab = _tab(web)
                if tab.get("Stage", "").startswith("1 of 1") and tab.get("Acceptance rate", "–") != "–":
                    break
            except (OSError, StopIteration):
                pass
            time.sleep(0.5)
        assert tab.get("Setting") == "k2/r0", tab
        assert tab["Stage"].startswith("1 of 1: 4 users"), tab
        assert tab["Acceptance rate"].endswith("%"), tab
        assert tab["GPU memory"].endswith("%)"), tab  # the life's simulator memory file reached Locust
        with urllib.request.urlopen(web + "/lookahead/charts.json", timeout=5) as response:
            charts = json.loads(response.read())
        assert charts["setting"] == "k2/r0", charts["setting"]  # every chart's title carries it
        assert charts["columns"]["t_s"] and any(v is not None for v in charts["columns"]["acceptance_pct"])
        assert {"kind": "stage", "label": "stage 1: 4 users"}.items() <= charts["marks"][0].items()
        runner.wait(timeout=SWEEP_TIMEOUT_S)
    finally:
        if runner.poll() is None:  # SIGTERM: the runner stops its server and Locust on the way out
            runner.terminate()
            try:
                runner.wait(timeout=60)
            except subprocess.TimeoutExpired:
                runner.kill()
                runner.wait(timeout=30)
    output = "".join(seen) + "".join(iter_queue(lines))
    assert runner.returncode in (*FINISHED, 1), output  # the web UI is under test, not the verdict
    status = json.loads(next((tmp_path / "runs").glob("*/k2/r0/status.json")).read_text())
    assert status["state"] == "done", status
    with pytest.raises(OSError):  # Locust quit after the stages: its UI is gone
        urllib.request.urlopen(web + "/", timeout=2)


def iter_queue(lines: queue.Queue):
    while True:
        try:
            yield lines.get_nowait()
        except queue.Empty:
            return
