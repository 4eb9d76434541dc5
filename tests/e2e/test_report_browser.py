"""The report in a real browser: headless Chromium opens report.html from file:// with the network unreachable.

A run folder is written from synthetic raw files (hostile strings in the model name, a setting name, a server flag
and a failure reason) and finalize() renders it from those files alone, as `lookahead-runner report RUN_DIR`
does; then Chromium:
- dumps the DOM after the scripts ran: every chart div holds plotly's `.main-svg`, no hostile markup became an
  element, and the NetLog shows the page itself requested nothing over the network;
- logs the console to stderr (`--enable-logging=stderr`): the page writes nothing there, so any CONSOLE line fails
  (the stderr log does not carry the level, and an error is what it would be);
- takes a screenshot, decoded here with zlib + numpy (no Pillow): not one colour, and the chart palette is painted.
The report of a recorded rate sweep (tests/fixtures/rate-sweep-sim/) is opened too: every chart against the offered
rate is drawn, and each life's bands read their rate.

With LOOKAHEAD_SCREENSHOT_DIR set, one more test screenshots the report of a real run folder (LOOKAHEAD_SCREENSHOT_RUN,
else a fresh `lookahead-runner demo`, about 4 minutes) and saves it there as report.png, the picture
docs/reading-the-report.md shows:

    LOOKAHEAD_SCREENSHOT_DIR=docs/img python -m pytest -n 0 tests/e2e/test_report_browser.py -k real_run

Skipped when no Chromium binary is installed (Debian: `apt-get install -y chromium`).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import pandas as pd

from lookahead_runner.config import SweepConfig
from lookahead_runner.decision.schema import Decision
from lookahead_runner.report.render import write_report
from lookahead_runner.run.verdict.finalize import finalize
from lookahead_runner.contracts.records import REQUEST_COLUMNS
from lookahead_runner.report.charts import PALETTE
from lookahead_runner.runfolder.plan import LifeResult, RunRecord, read_plan, read_status

pytestmark = pytest.mark.e2e

CHROMIUM_NAMES = ("chromium", "chromium-headless-shell", "chromium-browser")
CHROMIUM_TIMEOUT_S = 120
# Executed if it ever reaches the DOM as markup: the image fails to load (no network), so onerror runs.
HOSTILE = """<script>document.body.setAttribute("data-pwned","script")</script>""" \
          """<img src=x onerror="document.body.setAttribute('data-pwned','img')">"""
HOSTILE_SETTING = 'k4"><svg onload="document.body.setAttribute(\'data-pwned\',\'svg\')">'
T0_S = 1_760_000_000.0
STAGES = ((0, 4), (1, 16), (2, 32))
STAGE_S = 12.0


def chromium_binary() -> str | None:
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


@pytest.fixture(scope="module")
def chromium() -> str:
    binary = chromium_binary()
    if binary is None:
        pytest.skip(f"no Chromium binary on PATH (looked for {', '.join(CHROMIUM_NAMES)}); "
                    "install Debian's package: apt-get update && apt-get install -y chromium")
    return binary


def _write_csv(path: Path, columns: list[str], rows: list[list]) -> None:
    lines = [",".join(columns)] + [",".join("" if v is None else str(v) for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_life(folder: Path, k: int, repeat: int) -> None:
    """Raw files of one server life: the real batch saturates at 24, K speeds decoding up."""
    folder.mkdir(parents=True)
    rng = np.random.default_rng(k * 10 + repeat)
    requests, stages, server, gpu = [], [], [], []
    for stage, users in STAGES:
        t_start = T0_S + stage * STAGE_S
        stages.append([stage, users, t_start, t_start + STAGE_S])
        per_s = min(users, 24) * (1 + 0.12 * k) / (1 + 0.01 * k * k) / 1.5
        for index, t_done in enumerate(np.sort(rng.uniform(t_start, t_start + STAGE_S, int(per_s * STAGE_S)))):
            timeout = stage == 2 and index == 0 and k == 8
            e2e_ms = 1500.0 / (1 + 0.1 * k) + rng.normal(0, 20)
            requests.append([stage, users, t_done - e2e_ms / 1000, t_done - e2e_ms / 1000 + 0.05, t_done, 50.0 + users,
                             e2e_ms, 20.0, 30.0, 22.0, 128, 40 if timeout else 64, 64, 0 if timeout else 1,
                             "timeout (over 120 s)" if timeout else "", 1.0])
    for second in range(int(len(STAGES) * STAGE_S) + 1):
        users = STAGES[min(int(second // STAGE_S), len(STAGES) - 1)][1]
        running = min(users, 24)
        drafts = second * running * 10 if k else None
        server.append([T0_S + second, running, users - running, min(0.2 + 0.02 * k + running / 60, 0.9), 0,
                       second * running * 40, drafts, drafts * k if k else None, drafts * k * 0.7 if k else None])
        gpu.append([T0_S + second, 70_000 + 300 * k + 10 * running, 81_559])
    _write_csv(folder / "requests.csv", list(REQUEST_COLUMNS), requests)
    _write_csv(folder / "stages.csv", ["stage", "users", "t_start_s", "t_end_s"], stages)
    _write_csv(folder / "server_metrics.csv", ["t_s", "running", "waiting", "kv_usage", "preemptions_total",
                                               "generation_tokens_total", "spec_drafts_total",
                                               "spec_draft_tokens_total", "spec_accepted_total"], server)
    _write_csv(folder / "gpu.csv", ["t_s", "used_mib", "total_mib"], gpu)
    (folder / "status.json").write_text(json.dumps({"state": "done", "reason": ""}), encoding="utf-8")


def write_run(run_dir: Path) -> None:
    config = SweepConfig.model_validate({
        "name": "browser", "server": {"model": HOSTILE, "extra_args": ["--served-model-name", HOSTILE]},
        "speculation": {"k": [0, 4, 8]},
        "load": {"stages": [{"users": users, "duration_s": STAGE_S} for _, users in STAGES], "repeats": 2,
                 "warmup_s": 2.0, "output_tokens": 64},
        "decision": {"target_users": 16},
    })
    lives = []
    for k in (0, 4, 8):
        for repeat in (0, 1):
            setting = HOSTILE_SETTING if k == 4 else f"k{k}"
            argv = ["vllm", "serve", HOSTILE, "--served-model-name", HOSTILE]
            if k:
                argv += ["--speculative-config", json.dumps({"method": "ngram", "num_speculative_tokens": k})]
            lives.append({"setting": setting, "k": k, "repeat": repeat, "argv": argv, "dir": f"k{k}/r{repeat}"})
            if (k, repeat) == (8, 1):  # a failed life: its folder holds only the status and the server log
                folder = run_dir / "k8" / "r1"
                folder.mkdir(parents=True)
                (folder / "status.json").write_text(json.dumps({"state": "failed", "reason": f"exit 1 {HOSTILE}"}))
                (folder / "server.log").write_text("RuntimeError: boom\n")
            else:
                _write_life(run_dir / f"k{k}" / f"r{repeat}", k, repeat)
    plan = {"version": 1, "run_id": "browser-test", "created": "2025-01-01T00:00:00+0000",
            "probe": {"version": "0.33.0", "help_source": "--help=all", "flags": ["--speculative-config", HOSTILE],
                      "flags_count": 2, "knob": "--speculative-config", "lookahead_flag": "absent",
                      "command": ["vllm"]},
            "config": config.model_dump(mode="json"), "target_users": 16, "is_simulator": False, "lives": lives}
    (run_dir / "plan.json").write_text(json.dumps(plan, indent=1), encoding="utf-8")


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    write_run(run_dir)
    return finalize(run_dir)  # what `lookahead-runner report RUN_DIR` runs


def run_chromium(binary: str, profile: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    """One headless Chromium run with a fresh profile; DNS fails and the proxy is a closed port: no network."""
    argv = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
            "--hide-scrollbars", "--virtual-time-budget=15000", *extra, url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHROMIUM_TIMEOUT_S)
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return done


def console_messages(stderr: str) -> list[str]:
    # e.g. [29026:29026:1129/230850.532745:INFO:CONSOLE:2] "Uncaught ReferenceError: ...", source: file:///... (2)
    return re.findall(r":CONSOLE[^\]]*\] (.*)", stderr)


def page_requests(net_log: Path) -> list[str]:
    """URLs the page asked for; the browser's own requests carry the initiator 'not an origin'."""
    log = json.loads(net_log.read_text(encoding="utf-8"))
    start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    starts = [event.get("params", {}) for event in log["events"] if event.get("type") == start_job]
    return [params["url"] for params in starts if "url" in params and params.get("initiator") != "not an origin"]


def chart_ids(page: str) -> list[str]:
    return re.findall(r'data-chart="([\w-]+)"', page)


def test_page_loads_offline_renders_every_chart_and_escapes_hostile_strings(chromium, report, tmp_path):
    net_log = tmp_path / "net.json"
    done = run_chromium(chromium, tmp_path / "profile", report.as_uri(), "--enable-logging=stderr", "--v=0",
                        f"--log-net-log={net_log}", "--dump-dom")
    dom = done.stdout
    assert console_messages(done.stderr) == []
    assert page_requests(net_log) == []

    ids = chart_ids(report.read_text(encoding="utf-8"))
    assert len(ids) >= 1 + 6 + 5  # the frontier, six summary charts, five lives with samples
    assert ids[0] == "frontier"   # the frontier first: every stage of every K, per GPU against per user
    starts = [(match.start(), match[1]) for match in re.finditer(r'<div class="chart[^"]*" id="([\w-]+)"', dom)]
    assert [chart for _, chart in starts] == ids
    for (start, chart), (end, _) in zip(starts, starts[1:] + [(len(dom), "")]):
        assert 'class="main-svg"' in dom[start:end], f"chart {chart} did not render"
        assert "js-plotly-plot" in dom[start:dom.index(">", start)], f"chart {chart} was never plotted"

    assert not re.search(r"<body[^>]*data-pwned", dom), "a hostile string ran as markup"
    assert HOSTILE not in dom and "<svg onload" not in dom
    assert "&lt;script&gt;document.body.setAttribute" in dom  # shown as text, in the verdict area and tables
    assert "Decision per concurrency stage" in dom and "without results" in dom


@pytest.fixture(scope="module")
def rate_report(tmp_path_factory) -> Path:
    """The page of a recorded rate sweep (K 0 / 4 at 12, 36 and 48 req/s, two repeats), rendered from its
    summary, decision, plan and each life's samples (its requests are not recorded: nothing to re-analyse)."""
    folder = Path(__file__).parents[1] / "fixtures" / "rate-sweep-sim"
    plan = read_plan(folder)
    lives = [LifeResult(planned=p, status=read_status(folder / p.dir)) for p in plan.lives]
    timelines = {p.dir: {name: pd.read_csv(folder / p.dir / f"{file}.csv") for name, file in
                         (("stages", "stages"), ("server", "server_metrics"), ("gpu", "gpu"))} for p in plan.lives}
    decision = Decision.model_validate_json((folder / "decision.json").read_text(encoding="utf-8"))
    return write_report(tmp_path_factory.mktemp("rate-run"), pd.read_csv(folder / "summary.csv"), decision,
                        RunRecord(plan=plan, lives=lives), timelines)


def test_a_rate_sweep_draws_every_chart_against_the_offered_rate(chromium, rate_report, tmp_path):
    done = run_chromium(chromium, tmp_path / "profile", rate_report.as_uri(), "--enable-logging=stderr", "--v=0",
                        "--dump-dom")
    dom = done.stdout
    assert console_messages(done.stderr) == []
    ids = chart_ids(rate_report.read_text(encoding="utf-8"))
    assert ids == ["rate-output-tokens", "rate-requests", "rate-acceptance", "rate-real-batch", "rate-memory",
                   "rate-latency", "timeline-0", "timeline-1", "timeline-2", "timeline-3"]
    starts = [(match.start(), match[1]) for match in re.finditer(r'<div class="chart[^"]*" id="([\w-]+)"', dom)]
    for (start, chart), (end, _) in zip(starts, starts[1:] + [(len(dom), "")]):
        assert 'class="main-svg"' in dom[start:end], f"chart {chart} did not render"
        if chart == "rate-acceptance":  # against K, a line per offered rate
            assert all(f">{rate} req/s<" in dom[start:end] for rate in (12, 36, 48)), chart
        elif chart.startswith("rate-"):
            assert "offered arrival rate" in dom[start:end], f"chart {chart} is not against the offered rate"
        else:  # each life's bands, labelled by their rate (SVG text)
            assert all(f">{rate} req/s<" in dom[start:end] for rate in (12, 36, 48)), chart
    assert "no data" not in dom and "0 users" not in dom
    assert 'id="per-rate"' in dom and 'id="rate-evidence"' in dom


def decode_png(data: bytes) -> np.ndarray:
    """8-bit RGB / RGBA, non-interlaced PNG -> (height, width, channels); what Chromium writes."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, chunks = 8, []
    while pos < len(data):
        (size,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + size]
        pos += 12 + size
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
        elif kind == b"IDAT":
            chunks.append(body)
    bpp = 3 if colour == 2 else 4
    stride = width * bpp
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8).reshape(height, stride + 1)
    pixels = np.zeros((height, stride), dtype=np.uint8)
    prev = np.zeros(stride, dtype=np.uint8)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:]
        if kind == 0:
            row = line.copy()
        elif kind == 1:  # Sub: a running sum per channel
            row = (np.cumsum(line.reshape(-1, bpp), axis=0, dtype=np.int64) % 256).astype(np.uint8).ravel()
        elif kind == 2:  # Up
            row = line + prev
        else:  # Average and Paeth depend on the pixel to the left: byte by byte
            out, up = bytearray(line.tobytes()), prev.tobytes()
            for i in range(stride):
                a = out[i - bpp] if i >= bpp else 0
                b = up[i]
                if kind == 3:
                    out[i] = (out[i] + ((a + b) >> 1)) & 255
                    continue
                c = up[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
            row = np.frombuffer(bytes(out), dtype=np.uint8)
        pixels[y], prev = row, row
    return pixels.reshape(height, width, bpp)


def screenshot(chromium: str, report: Path, shot: Path, width: int, height: int) -> np.ndarray:
    """The report as Chromium paints it in a width x height window, written to `shot`; its pixels."""
    run_chromium(chromium, shot.parent / f"{shot.stem}-profile", report.as_uri(), f"--window-size={width},{height}",
                 f"--screenshot={shot}")
    image = decode_png(shot.read_bytes())
    assert image.shape[:2] == (height, width)
    return image


def assert_painted(image: np.ndarray) -> np.ndarray:
    """The screenshot is a page, not a blank window; its pixels as RGB rows."""
    rgb = image[..., :3].reshape(-1, 3)
    colours, counts = np.unique(rgb, axis=0, return_counts=True)
    assert len(colours) > 200, "the screenshot is nearly one colour"
    assert counts.max() / counts.sum() < 0.9, "the page is mostly blank"
    return rgb


def test_screenshot_shows_the_charts(chromium, report, tmp_path):
    rgb = assert_painted(screenshot(chromium, report, tmp_path / "report.png", 1280, 4000))
    # The first two series colours are painted by the charts (lines, markers, legend), nowhere else.
    for hex_colour in PALETTE[:2]:
        target = np.array([int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.uint8)
        assert (rgb == target).all(axis=1).sum() > 200, f"no chart series in {hex_colour} on the screenshot"


SCREENSHOT_DIR_ENV = "LOOKAHEAD_SCREENSHOT_DIR"   # where the real run's screenshot goes (docs/img)
SCREENSHOT_RUN_ENV = "LOOKAHEAD_SCREENSHOT_RUN"   # that run folder; default: a fresh demo
DOCS_SHOT = ("report.png", 1000, 1300)            # name, width, height: the page's top, verdict to diagnoses
DOCS_SHOT_MAX_BYTES = 300_000


@pytest.mark.skipif(not os.environ.get(SCREENSHOT_DIR_ENV), reason=f"{SCREENSHOT_DIR_ENV} not set: no screenshot "
                                                                    "for the docs asked for")
def test_screenshot_of_a_real_run_for_the_docs(chromium, tmp_path):
    """The report of a real run (the demo's, on the simulated vLLM), re-rendered from its folder as `lookahead-runner
    report` does, painted by Chromium and saved for docs/reading-the-report.md."""
    given = os.environ.get(SCREENSHOT_RUN_ENV)
    if given:
        run_dir = tmp_path / "run"
        shutil.copytree(given, run_dir)   # re-rendered in a copy: the given folder stays as it was
    else:  # the simulator by its console script, so the paste-ready commands name no path of this machine
        env = os.environ | {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run([sys.executable, "-m", "lookahead_runner", "demo", "--out", str(tmp_path / "runs"),
                               "--set", 'server.command=["lookahead-sim-vllm"]'],
                              capture_output=True, text=True, timeout=900, env=env)
        assert done.returncode in (0, 3), done.stderr[-2000:]
        (run_dir,) = (tmp_path / "runs").iterdir()
    name, width, height = DOCS_SHOT
    shot = tmp_path / name
    assert_painted(screenshot(chromium, finalize(run_dir), shot, width, height))
    size = shot.stat().st_size
    assert size < DOCS_SHOT_MAX_BYTES, f"{name} is {size} bytes: make DOCS_SHOT smaller"
    out = Path(os.environ[SCREENSHOT_DIR_ENV])
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shot, out / name)
