"""Capacity within the SLO and the verdict at the user's rate through real processes on the simulator (issue 37,
items 3 and 4): one capacity search over K 0/2/4 (sweep.strategy = "capacity": every K once over three rate stages,
then one-rate-stage probes, the ones clearly over capacity ended early). The stages (7, 14, 56 req/s) leave a wide
bracket above K=2 and K=4, so their first probe (28 req/s, the geometric middle) is 40 % over K=2's capacity: clearly
over by the rule's margin (a queue growing by more than 20 % of the arrivals), not by chance near capacity. Each K's measured capacity lies within
10 % of the simulator's own answer (sim/open_loop.capacity_within_slo, its engine model alone, with the same SLO,
workload and window), the model's capacity inside each stated interval, and the verdicts at two target rates
(7 req/s, below K=0's capacity; 14 req/s, between K=0's and K=2's) set what the model says there (issue 46): of the K
that hold the rate, the one with the most capacity within the SLO, where every K that holds had the same goodput
(the rate) and the smallest was kept. Constant arrivals keep a 5 s window's count of arrivals exact (a Poisson
count is its own noise)."""
import json
import shutil
import subprocess
import sys

import pytest

from lookahead_runner.config.slo import parse_slos
from lookahead_runner.sim.open_loop import capacity_within_slo, holds
from lookahead_runner.workload.arrivals import ArrivalProcess

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # one capacity search of 3 K: 192 s in CI (2026-12-06); CI runs it

SERVER_ARGS = ["--max-num-seqs", "16", "--sim-scenario", "roomy-kv"]
KS = (0, 2, 4)
STAGE_S, PROMPT, OUTPUT = 5.0, 32, 48
SWEEP = f"""
name = "capacity"
[server]
model = "sim/e2e-model"
extra_args = {json.dumps(SERVER_ARGS + ["--sim-set", "startup_s=0.3"])}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = {list(KS)}
[load]
stages = [{{ rate = 7.0, duration_s = {STAGE_S} }}, {{ rate = 14.0, duration_s = {STAGE_S} }},
          {{ rate = 56.0, duration_s = {STAGE_S} }}]
prompt_tokens = {PROMPT}
output_tokens = {OUTPUT}
warmup_s = {STAGE_S / 4}
preflight_s = 0
arrival = "constant"
request_timeout_s = 6
[sweep]
strategy = "capacity"
capacity_precision = 0.15
[decision]
slo = {{ ttft_p85_ms = 500 }}   # 85 % of the arrivals within 500 ms
target_rate = 14
min_requests = 3
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
"""
SLO = parse_slos((("ttft_p85_ms", 500.0),))
CONSTANT = ArrivalProcess("constant")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("capacity")
    (tmp / "sweep.toml").write_text(SWEEP)
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(tmp / "sweep.toml"),
                           "--out", str(tmp / "runs")], capture_output=True, text=True, timeout=420)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    (run_dir,) = list((tmp / "runs").iterdir())
    return run_dir, done


def _decision(run_dir):
    return json.loads((run_dir / "decision.json").read_text())


def at_rate(run_dir, tmp_path, rate: float) -> dict:
    """The run re-decided at another target rate: a copy of its folder, decision.target_rate changed in its
    plan.json, `lookahead-runner report` (no new measurement)."""
    copy = tmp_path / f"at-{rate:g}"
    shutil.copytree(run_dir, copy)
    plan = json.loads((copy / "plan.json").read_text())
    plan["config"]["decision"]["target_rate"] = rate
    (copy / "plan.json").write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "report", str(copy)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return _decision(copy)


def truth_capacity() -> dict[int, float]:
    """Each K's capacity within the SLO by the simulator's engine model alone."""
    return {k: capacity_within_slo(SERVER_ARGS, k, SLO, PROMPT, OUTPUT, duration_s=STAGE_S, process=CONSTANT,
                                   precision=0.01) for k in KS}


def most_headroom(rate: float, truth: dict[int, float]) -> int | None:
    """The simulator's own answer at `rate`: of the K meeting the SLO there and keeping up, the one with the most
    capacity within the SLO (the headroom at the rate)."""
    held = [k for k in KS if holds(SERVER_ARGS, k, rate, SLO, PROMPT, OUTPUT, duration_s=STAGE_S, process=CONSTANT)]
    return max(held, key=lambda k: truth[k]) if held else None


@pytest.mark.xfail(strict=False, reason=(
    "a known miss (issue 46): the truth is now the engine's long-run capacity (an offered rate below what it "
    "completes with a backlog it never empties), no longer the runner's own rule applied to the model; a 5 s window "
    "cannot show K=0's ~12 % overload (9.33 measured against 8.18), and the stated interval takes a window that "
    "keeps up as exact. The fix: an interval whose low end subtracts the drift the window cannot exclude"))
def test_each_ks_measured_capacity_is_within_10_percent_of_the_simulators_own(run):
    run_dir, done = run
    decision = _decision(run_dir)
    measured = {row["k"]: row["rate"] for row in decision["capacity"]}
    truth = truth_capacity()
    assert truth[4] > 2 * truth[0]   # speculation serves more within the SLO here
    print("capacity within the SLO, measured / the simulator's model:",
          ", ".join(f"K={k} {measured[k]:.2f} / {truth[k]:.2f}" for k in KS))
    for k in KS:
        assert measured[k] == pytest.approx(truth[k], rel=0.10), (k, measured, truth)
        stated = next(row["rate_range"] for row in decision["capacity"] if row["k"] == k)
        assert (stated["low"] or 0.0) <= truth[k] <= (stated["high"] or float("inf")), (k, stated, truth)
    assert decision["capacity_target"] is None   # every SLO at its own percentile (issue 46)
    k4 = next(row for row in decision["capacity"] if row["k"] == 4)
    assert k4["rate_range"]["low"] <= k4["rate"] <= k4["rate_range"]["high"] and k4["gain"] > 1.0
    assert k4["text"].startswith(f"K=4 {k4['rate']:.1f} req/s [") \
        and "requests in flight at that capacity (Little's law; not the users a closed loop holds)" in k4["text"]
    report = (run_dir / "report.html").read_text()
    assert 'id="capacity-table"' in report and k4["rate_text"] in report


def test_the_verdict_at_each_rate_sets_the_k_with_the_most_headroom_as_the_simulators_truth_does(run, tmp_path):
    run_dir, done = run
    between = _decision(run_dir)
    below = at_rate(run_dir, tmp_path, 7.0)
    truth = truth_capacity()
    wanted = most_headroom(7.0, truth), most_headroom(14.0, truth)
    assert wanted == (4, 4)     # K=0 holds 7 req/s, not 14; K=4's capacity is the highest
    assert between["status"] == "decided" and between["recommended"]["k"] == wanted[1] and done.returncode == 0
    assert between["verdict"].startswith(f"At 14 req/s: set K={wanted[1]}, decided by ")
    assert "K=0 falls behind at 14 req/s" in between["verdict"] and between["decided_by"] in ("capacity", "latency")
    assert below["status"] == "decided" and below["recommended"]["k"] == wanted[0] and below["target_rate"] == 7.0
    assert below["verdict"].startswith(f"At 7 req/s: set K={wanted[0]}, decided by ")
    # the verdict and the capacity table agree: K=0's capacity lies between the two rates
    k0 = next(row for row in between["capacity"] if row["k"] == 0)
    assert 7.0 < k0["rate"] < 14.0


def test_the_search_probes_each_k_and_a_probe_above_capacity_ends_early_and_says_so(run):
    run_dir, done = run
    plan = json.loads((run_dir / "plan.json").read_text())
    probes = [life for life in plan["lives"] if life.get("rates")]
    assert {life["k"] for life in probes} == set(KS) and plan["adaptive"]["stop"] == "decided"
    ended = [json.loads((run_dir / life["dir"] / "status.json").read_text()) for life in probes]
    early = [status for status in ended if status.get("ended_early")]
    assert early and all(status["state"] == "done" for status in ended)
    assert early[0]["ended_early"].startswith("clearly over capacity at ") and "the probe ended early" in done.stdout
    decision = _decision(run_dir)
    assert any(r.startswith("Capacity search: ") and "ended early, clearly over capacity" in r
               for r in decision["reasons"])
