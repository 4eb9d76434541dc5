"""`lookahead-runner ramp --rates` end to end on the simulator: one K over three short rate stages finds its knee in
rate terms where the simulator's own open-loop model (sim/open_loop.py `holds`) puts it: it holds 20 req/s within
the TTFT SLO and falls behind at 40 (its capacity within the SLO, from the model alone, lies between them). The
report has the rate knee's table and the throughput-interactivity frontier, drawn from those rate stages."""
import json
import re
import subprocess
import sys

import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.sim.open_loop import capacity_within_slo, holds

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--max-num-seqs", "16", "--sim-scenario", "roomy-kv"]
SLO = parse_slos((("ttft_p99_ms", 500.0),))
CONFIG = f"""
name = "rates"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(SERVER_ARGS + ["--sim-set", "startup_s=0.3"])}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[load]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
[decision]
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
min_requests = 3
slo = {{ ttft_p99_ms = 500 }}
"""


@pytest.fixture(scope="module")
def ramp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ramp-rates")
    (tmp / "ramp.toml").write_text(CONFIG)
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "ramp", "--config", str(tmp / "ramp.toml"),
                           "--k", "0", "--rates", "10,20,40", "--stage-s", "4", "--out", str(tmp / "runs")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (run_dir,) = list((tmp / "runs").iterdir())
    return done, run_dir


def test_the_knee_in_rate_terms_is_where_the_simulators_model_says(ramp):
    done, run_dir = ramp
    decision = json.loads((run_dir / "decision.json").read_text())
    knee = decision["rate_knee"]
    assert decision["mode"] == "ramp" and decision["status"] == "decided", decision["verdict"]
    assert (knee["rate"], knee["next_rate"]) == (20.0, 40.0), decision["reasons"]
    held, broken = knee["steps"][1], knee["steps"][2]
    assert held["holds"] and held["attainment"] >= 0.99 and held["keeps_up"]
    assert not broken["holds"] and not broken["keeps_up"] and broken["achieved_per_s"] < 0.9 * broken["offered_per_s"]
    assert decision["verdict"].startswith("The knee at K=0 lies between 20 and 40 req/s: it holds 20")
    assert "The knee at K=0 lies between 20 and 40 req/s" in done.stdout
    # the simulator's own answer, from its engine model alone
    assert holds(SERVER_ARGS, 0, 20.0, SLO, 32, 16, duration_s=20.0)
    assert not holds(SERVER_ARGS, 0, 40.0, SLO, 32, 16, duration_s=20.0)
    assert 20.0 <= capacity_within_slo(SERVER_ARGS, 0, SLO, 32, 16, duration_s=20.0) < 40.0


def test_the_report_has_the_rate_knee_and_the_frontier_of_the_rate_stages(ramp):
    _done, run_dir = ramp
    report = (run_dir / "report.html").read_text()
    assert 'id="rate-knee-steps"' in report and "no: " in report
    assert 'id="frontier-section"' in report and 'data-chart="frontier"' in report
    figure = json.loads(re.search(r'data-chart="frontier">(.*?)</script>', report, re.S)[1])
    (line,) = [trace for trace in figure["data"] if trace["name"] == "K=0"]
    assert len(line["x"]) == 3 and all(x > 0 for x in line["x"]) and all(y > 0 for y in line["y"])
    assert line["marker"]["symbol"].count("diamond-open") == 1   # 40 req/s: it fell behind
    assert any(trace["name"] == "recommended: K=0 at 20 req/s" for trace in figure["data"])
    points = re.search(r'<table id="frontier-points">(.*?)</table>', report, re.S)[1]
    assert points.count("req/s</td>") == 3
