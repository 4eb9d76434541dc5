"""Reliability matrix, server faults: one sweep through real processes where most settings meet a
different fault of the simulated vLLM, between settings that work; then `--resume` with the faults
gone. Each test below is one row of docs/reliability.md.

    K=0 clean            K=1 dies mid-stage      K=2 hangs mid-stage     K=3 too slow to be ready
    K=4 5xx, 429, short and malformed streams   K=5 /metrics slower than the scrape timeout
    K=6 a bad server flag (exits 2)             K=7 stops answering HTTP at all (/health, /metrics too)
    K=8 out of memory at a large K (oom-above-k=7)
"""
import json

import pandas as pd
import pytest

from fault_kit import (FINISHED, FAST, cli, faults_at_k, kill_all, life_line, no_traceback, only_run_dir, snapshot, status,
                       survivors, sweep_toml, unique_model, write_config)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # 15 lives (9, then 6 resumed): 123 s in CI (2026-12-06); CI runs it

K = [0, 1, 2, 3, 4, 5, 6, 7, 8]
FAULTS = {
    1: ["--sim-fault", "die-after=3"],   # seconds after ready: Locust is loading by then
    2: ["--sim-fault", "hang-after=3"],
    3: ["--sim-fault", "slow-start=30"],
    4: ["--sim-fault", "http-500=0.15", "--sim-fault", "http-429=0.15",
        "--sim-fault", "short-stream=0.15", "--sim-fault", "malformed-stream=0.15"],
    5: ["--sim-fault", "slow-metrics=3"],
    6: ["--max-num-seqs", "abc"],
    7: ["--sim-fault", "unresponsive-after=3"],
}
FAILING = {"k1/r0", "k2/r0", "k3/r0", "k6/r0", "k7/r0", "k8/r0"}
WORKING = {"k0/r0", "k4/r0", "k5/r0"}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """The faulty sweep, then its resume with the faults fixed (as a user would after reading the report)."""
    tmp = tmp_path_factory.mktemp("faults")
    model = unique_model("settings")
    server = {"extra_args": FAST + ["--sim-fault", "oom-above-k=7"], "ready_timeout_s": 4}
    # one 3 s stage: the load outlasts die-after/hang-after=3 (counted from ready) however slow Locust starts
    config = write_config(tmp, sweep_toml(model, K, stages=((2, 3),), server=server, env=faults_at_k(FAULTS)))
    try:
        first = cli("sweep", "--config", str(config), "--out", str(tmp / "runs"), "--no-early-stop", timeout=400)
        run_dir = only_run_dir(tmp / "runs")
        after_first = {"survivors": survivors(model, str(run_dir)),
                       "done_files": {life: snapshot(run_dir / life) for life in WORKING},
                       "states": {life: status(run_dir, life) for life in FAILING | WORKING},
                       "summary": pd.read_csv(run_dir / "summary.csv"),
                       "decision": json.loads((run_dir / "decision.json").read_text()),
                       "report": (run_dir / "report.html").read_text()}
        fixed = write_config(tmp, sweep_toml(model, K, stages=((2, 3),), server={"ready_timeout_s": 30}), "fixed.toml")
        resumed = cli("sweep", "--config", str(fixed), "--resume", str(run_dir), "--no-early-stop", timeout=400)
        for name, done in (("first", first), ("resumed", resumed)):  # kept for reading after a failure
            (tmp / f"{name}.out").write_text(done.stdout + "\n--- stderr ---\n" + done.stderr)
        yield {"model": model, "run_dir": run_dir, "first": first, "resumed": resumed, **after_first,
               "resume_survivors": survivors(model, str(run_dir))}
    finally:
        kill_all(model)


def test_sweep_finishes_with_one_line_per_failed_setting(sweep):
    first = sweep["first"]
    no_traceback(first.stdout, first.stderr)
    assert first.returncode in FINISHED, first.stderr[-2000:]  # the working settings are measured
    for life in FAILING | WORKING:  # every setting was tried: the sweep went on past each fault
        line = life_line(first.stdout, life)
        assert line.endswith(": done") == (life in WORKING), line
    assert first.stderr.strip().splitlines()[-1].startswith(f"{len(FAILING)} server lives failed; first: k1/r0:")


def test_server_fails_to_start_bad_flag(sweep):
    line = life_line(sweep["first"].stdout, "k6/r0")
    assert line == ("[7/9] k6/r0: failed - server exited with code 2 before it was ready: "
                    "vllm serve: error: argument --max-num-seqs: invalid int value: 'abc'")
    assert sweep["states"]["k6/r0"]["state"] == "failed" and "invalid int value" in sweep["states"]["k6/r0"]["reason"]


def test_server_fails_to_start_out_of_memory_at_large_k(sweep):
    line = life_line(sweep["first"].stdout, "k8/r0")
    assert line.startswith("[9/9] k8/r0: failed - server exited with code 1 before it was ready: "
                           "ValueError: No available memory for the cache blocks."), line
    failed = {f["life"]: f["reason"] for f in sweep["decision"]["failed_lives"]}
    assert "No available memory for the cache blocks" in failed["k8/r0"]


def test_server_dies_mid_stage(sweep):
    state = sweep["states"]["k1/r0"]
    assert state["state"] == "failed"
    assert state["reason"].startswith("the server died during the load (exit code 1): "
                                      "EngineCore encountered a fatal error"), state["reason"]
    # Locust was stopped when the server died, not left loading a dead port to the end of its stages
    assert "k1/r0" in life_line(sweep["first"].stdout, "k1/r0")


def test_server_hangs_mid_stage(sweep):
    state = sweep["states"]["k2/r0"]
    assert state["state"] == "failed" and state["reason"].startswith("the server hung: "), state["reason"]


def test_server_stops_answering_http(sweep):
    state = sweep["states"]["k7/r0"]
    assert state["state"] == "failed" and state["reason"] == (
        "the server hung: a 1-token completion got no answer within 4 s after the load"), state["reason"]


def test_server_slow_to_become_ready(sweep):
    line = life_line(sweep["first"].stdout, "k3/r0")
    assert line == "[4/9] k3/r0: failed - server not ready after 4 s (raise server.ready_timeout_s, or see server.log)"


def test_error_answers_and_broken_streams_are_recorded_not_fatal(sweep):
    assert sweep["states"]["k4/r0"]["state"] == "done"
    requests = pd.read_csv(sweep["run_dir"] / "k4/r0/requests.csv")
    errors = " ".join(requests["error"].dropna().astype(str))
    for kind in ("HTTP 500", "HTTP 429", "malformed chunk", "short output"):
        assert kind in errors, errors[:2000]
    rows = sweep["summary"][sweep["summary"]["setting"] == "k4"]
    assert (rows["failures"] > 0).any() and (rows["failure_rate"] > 0).any()
    assert (rows["length_mismatches"] > 0).any() or not rows["valid"].all()


def test_slow_metrics_is_a_recorded_gap_not_a_failure(sweep):
    state = sweep["states"]["k5/r0"]
    assert state["state"] == "done" and state["metrics_errors"] > 0, state
    assert any(d.startswith("/metrics failed") and "k5/r0" in d for d in sweep["decision"]["diagnoses"])
    assert "/metrics failed" in sweep["report"]


def test_report_lists_every_failed_setting_with_its_reason(sweep):
    failed = {f["life"] for f in sweep["decision"]["failed_lives"]}
    assert failed == FAILING
    for life in FAILING:
        assert life in sweep["report"]


def test_no_process_of_the_sweep_survives(sweep):
    assert sweep["survivors"] == []
    assert sweep["resume_survivors"] == []


def test_resume_reruns_only_the_failed_settings_and_keeps_the_rest(sweep):
    resumed, run_dir = sweep["resumed"], sweep["run_dir"]
    no_traceback(resumed.stdout, resumed.stderr)
    assert resumed.returncode in FINISHED, resumed.stderr[-2000:]
    for life in WORKING:
        assert life_line(resumed.stdout, life).endswith(": done earlier, kept")
        assert snapshot(run_dir / life) == sweep["done_files"][life], f"{life} changed on resume"
    for life in FAILING:
        assert life_line(resumed.stdout, life).endswith(": done"), life_line(resumed.stdout, life)
        assert status(run_dir, life)["state"] == "done"
    summary = pd.read_csv(run_dir / "summary.csv")
    assert sorted(summary["setting"].unique()) == sorted(f"k{k}" for k in K)
