"""Rate stages end to end on the simulator: one sweep of K 0 / 4 mixing a user stage with two short rate stages.
Every K gets the same arrivals; each rate window has its offered and achieved rate, SLO attainment with its
interval, goodput and queue; at 40 req/s K=0 falls behind (a finding with its figures, the window still valid)
and K=4 keeps up, as the simulator's own open-loop model says they should (sim/open_loop.py)."""
import json
import subprocess
import sys

import pandas as pd
import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.sim.open_loop import holds

pytestmark = pytest.mark.e2e

SERVER_ARGS = ["--max-num-seqs", "16", "--sim-scenario", "roomy-kv"]
SWEEP = f"""
name = "rate"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(SERVER_ARGS + ["--sim-set", "startup_s=0.3"])}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{{ users = 2, duration_s = 3 }}, {{ rate = 4.0, duration_s = 4 }}, {{ rate = 40.0, duration_s = 4 }}]
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
arrival_seed = 3
[decision]
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
min_requests = 3
slo = {{ ttft_p99_ms = 500 }}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rate")
    (tmp / "sweep.toml").write_text(SWEEP)
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(tmp / "sweep.toml"),
                           "--out", str(tmp / "runs")], capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 3), done.stdout[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (run_dir,) = list((tmp / "runs").iterdir())
    return run_dir


def _rate_rows(run_dir) -> pd.DataFrame:
    summary = pd.read_csv(run_dir / "summary.csv")
    return summary[summary["rate"].notna()].set_index(["k", "rate"])


def test_every_k_gets_the_same_arrivals(run):
    scheduled = {}
    for k in (0, 4):
        requests = pd.read_csv(run / f"k{k}" / "r0" / "requests.csv")
        rate = requests[requests["t_scheduled_s"].notna()]
        stages = pd.read_csv(run / f"k{k}" / "r0" / "stages.csv")
        start = stages.set_index("stage")["t_start_s"]
        # each arrival's time from its stage's start, by its place in the schedule
        scheduled[k] = sorted((int(r.stage), int(r.arrival), r.t_scheduled_s - start[r.stage])
                              for r in rate.itertuples())
        assert (rate["users"] == 0).all() and requests[requests["t_scheduled_s"].isna()]["stage"].eq(0).all()
        assert stages["rate"].tolist()[1:] == [4.0, 40.0] and pd.isna(stages["rate"].iloc[0])
    assert [a[:2] for a in scheduled[0]] == [a[:2] for a in scheduled[4]] and len(scheduled[0]) > 150
    # to the microsecond the files keep
    assert all(abs(a[2] - b[2]) < 3e-6 for a, b in zip(scheduled[0], scheduled[4]))


def test_each_rate_window_has_its_rates_attainment_goodput_and_queue(run):
    rows = _rate_rows(run)
    assert len(rows) == 4 and rows["valid"].all(), rows["invalid_reason"].tolist()
    for (k, rate), row in rows.iterrows():
        # the same arrivals at every K: offered as scheduled (Poisson around the rate, in a 3 s window)
        assert row["offered_per_s"] == rows.loc[(0, rate), "offered_per_s"]
        assert 0.5 * rate < row["offered_per_s"] < 1.5 * rate
        assert row["slo_attainment_low"] <= row["slo_attainment"] <= row["slo_attainment_high"]
        assert row["goodput_per_s"] == pytest.approx(row["slo_attainment"] * row["offered_per_s"], rel=1e-3)
        assert row["late_p99_ms"] < 250 and row["held"] == 0 and row["not_sent"] == 0
    low = rows.xs(4.0, level="rate")
    assert low["keeps_up"].all() and (low["slo_attainment"] == 1.0).all()


def test_k0_falls_behind_at_40_req_s_where_k4_keeps_up_as_the_simulators_model_says(run):
    rows = _rate_rows(run)
    behind, ahead = rows.loc[(0, 40.0)], rows.loc[(4, 40.0)]
    assert not behind["keeps_up"] and ahead["keeps_up"]
    assert behind["achieved_per_s"] < 0.9 * behind["offered_per_s"]
    assert behind["waiting_end"] > behind["waiting_start"] + 10
    assert behind["behind"] == (f"falls behind at 40 req/s: {behind['achieved_per_s']:.1f} served, waiting "
                                f"{behind['waiting_start']:.0f} -> {behind['waiting_end']:.0f}")
    assert ahead["slo_attainment"] > behind["slo_attainment"]
    decision = json.loads((run / "decision.json").read_text())
    assert f"K=0 {behind['behind']}." in decision["diagnoses"]
    # the simulator's own answer, from its engine model alone
    slo = parse_slos((("ttft_p99_ms", 500.0),))
    assert not holds(SERVER_ARGS, 0, 40.0, slo, 32, 16, duration_s=20.0)
    assert holds(SERVER_ARGS, 4, 40.0, slo, 32, 16, duration_s=20.0)
    report = (run / "report.html").read_text()
    assert 'id="rate-stages"' in report and "falls behind at 40 req/s" in report
