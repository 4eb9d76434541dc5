"""Server lives through real processes: SIGTERM/Ctrl-C of the runner leaves no process,
--resume keeps finished lives and reruns the cut one, early stop skips larger K, dry-run starts nothing."""
import json
import os
import signal
import subprocess
import sys
import uuid

import pytest
from fault_kit import FINISHED, interrupt, processes_of, wait_for

pytestmark = pytest.mark.e2e


def sweep_toml(model, k, stages, target, extra=""):
    stage_list = ", ".join(f"{{ users = {u}, duration_s = {d} }}" for u, d in stages)
    return f"""
name = "lives"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "128", "--sim-set", "startup_s=0.3", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = {k}
[load]
stages = [{stage_list}]
prompt_tokens = 128
output_tokens = 64
warmup_s = 1.0
preflight_s = 0
[decision]
target_users = {target}
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
min_requests = 3
{extra}
"""


def start_runner(tmp_path, toml, *extra):
    config = tmp_path / "sweep.toml"
    config.write_text(toml)
    return subprocess.Popen([sys.executable, "-m", "lookahead_runner", "sweep", "--config", str(config),
                             "--out", str(tmp_path / "runs"), *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def life_is_loading(run_root, life):
    return any((run / life / "requests.csv").exists() for run in run_root.glob("*")) if run_root.exists() else False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_mid_load_leaves_no_process_and_resume_finishes(tmp_path, sig):
    model = f"sim/lives-{uuid.uuid4().hex[:8]}"
    runner = start_runner(tmp_path, sweep_toml(model, "[0, 2]", [(4, 3), (8, 10)], 4))
    try:
        # the second life's last stage is 10 s, so the signal lands mid-load even on a host at load average 8
        wait_for(lambda: life_is_loading(tmp_path / "runs", "k2/r0"), 90, "the second life's load")
        assert processes_of(model), "the server of the second life should be running"
        interrupt(runner, sig)
        stdout, stderr = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    assert runner.returncode == 130, (stdout[-2000:], stderr[-2000:])
    assert "interrupted" in stderr and "Traceback" not in stderr
    wait_for(lambda: not processes_of(model), 10, "every server and Locust process to exit")
    (run_dir,) = list((tmp_path / "runs").iterdir())
    assert json.loads((run_dir / "k0/r0/status.json").read_text())["state"] == "done"
    assert json.loads((run_dir / "k2/r0/status.json").read_text())["state"] == "running"
    first_life = (run_dir / "k0/r0/requests.csv").stat().st_mtime_ns

    resumed = subprocess.run([sys.executable, "-m", "lookahead_runner", "sweep", "--resume", str(run_dir)],
                             capture_output=True, text=True, timeout=180)
    assert resumed.returncode in FINISHED, resumed.stderr[-2000:]
    assert "k0/r0: done earlier, kept" in resumed.stdout
    assert (run_dir / "k0/r0/requests.csv").stat().st_mtime_ns == first_life
    assert json.loads((run_dir / "k2/r0/status.json").read_text())["state"] == "done"
    summary = (run_dir / "summary.csv").read_text().splitlines()
    assert len(summary) == 1 + 2 * 2
    assert not processes_of(model)


def test_early_stop_skips_larger_k(tmp_path):
    """Tight KV at 48 users: K=8 fills the pool without raising req/s, so K=16 is never run. 12 s stages: at 6 s
    (66 requests a life) the stop was agreed by the final verdict but not yet, short of the early bar, when K=8
    ended (a fresh-clone run at load 3: K=16 ran)."""
    model = f"sim/early-{uuid.uuid4().hex[:8]}"
    runner = start_runner(tmp_path, sweep_toml(model, "[0, 4, 8, 16]", [(48, 12)], 48))
    stdout, stderr = runner.communicate(timeout=240)
    assert runner.returncode in FINISHED, stderr[-2000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["stopped_at_k"] == 8, decision["reasons"]
    assert [life["life"] for life in decision["skipped_lives"]] == ["k16/r0"]
    assert "k16/r0: skipped (early stop at K=8)" in stdout
    assert not (run_dir / "k16/r0/server.log").exists()
    assert any("Early stop" in reason for reason in decision["reasons"])


def test_dry_run_prints_every_argv_and_starts_nothing(tmp_path):
    model = f"sim/dry-{uuid.uuid4().hex[:8]}"
    runner = start_runner(tmp_path, sweep_toml(model, "[0, 4]", [(4, 3)], 4), "--dry-run")
    stdout, stderr = runner.communicate(timeout=60)
    assert runner.returncode == 0, stderr
    assert "vLLM 0.32.0" in stdout
    assert "k0/r0:" in stdout and "k4/r0:" in stdout and "--spec-tokens 4" in stdout
    assert "expected: 2 server lives (2 K x 1 repeat; the early stop may skip larger K), 2 server starts: 0.1 " \
           "server-minutes of load (3 s of stages a life)" in stdout, stdout
    assert not (tmp_path / "runs").exists()


def test_ramp_reports_the_knee_with_the_report_machinery(tmp_path):
    done = subprocess.run([sys.executable, "-m", "lookahead_runner", "ramp", "--k", "2", "--users", "2,16",
                           "--stage-s", "4", "--out", str(tmp_path / "runs"), "--set", "decision.min_requests=2",
                           "--set", "load.warmup_s=1", "--set", "load.preflight_s=0"],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = list((tmp_path / "runs").iterdir())
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["mode"] == "ramp" and decision["recommended"]["k"] == 2
    assert decision["knee"]["k"] == 2 and decision["knee"]["users"] in (None, 2)
    assert decision["verdict"].startswith(("The knee at K=2", "No knee found at K=2"))
    assert [p["users"] for p in decision["per_stage"]] == [2, 16]
    assert (run_dir / "report.html").exists() and "report:" in done.stdout
