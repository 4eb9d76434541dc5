"""Reliability matrix, the runner itself is stopped: Ctrl-C pressed twice, the terminal closing
(SIGHUP), SIGKILL of the runner, SIGKILL of the runner and its watchdog. (One SIGINT and one SIGTERM
are tests/e2e/test_runner_lives.py::test_signal_mid_load_leaves_no_process_and_resume_finishes.)

Each case: the signal lands while the second setting's Locust is loading its server; the first
setting's files must come through byte for byte, no process of the sweep may survive, and
`--resume` must rerun the cut setting only.
"""
import contextlib
import os
import signal
import time

import psutil
import pytest

from fault_kit import (FINISHED, cli, interrupt, kill_all, kill_group, life_line, no_traceback, only_run_dir,
                       processes_of, snapshot,
                       start, status, survivors, sweep_toml, unique_model, wait_for, write_config)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # four sweeps cut by signals and resumed: 89 s alone; CI runs it

STAGES = ((2, 4),)  # long enough for the signal (sent once requests.csv exists) to land mid-stage when loaded


@contextlib.contextmanager
def hangup_at_its_default():
    """SIGHUP at its default while a runner starts, as a terminal's child gets it: under nohup (this test process
    started that way: a CI run of the stop after stop 53) the runner inherits it ignored, as nohup means, and runs on
    to its end (exit 3). Restored at once: the window is the fork."""
    before = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, before)


def start_sweep(tmp_path, case, from_a_terminal: bool = False):
    model = unique_model(case)
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=STAGES))
    with hangup_at_its_default() if from_a_terminal else contextlib.nullcontext():
        runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    wait_for(lambda: any((run / "k2/r0/requests.csv").exists() for run in (tmp_path / "runs").glob("*")),
             120, "the second setting's load")
    run_dir = only_run_dir(tmp_path / "runs")
    assert status(run_dir, "k0/r0")["state"] == "done"
    return model, runner, run_dir, snapshot(run_dir / "k0/r0")


def resume_and_check(model, run_dir, kept):
    resumed = cli("sweep", "--resume", str(run_dir), timeout=180)
    no_traceback(resumed.stdout, resumed.stderr)
    assert resumed.returncode in FINISHED, resumed.stderr[-2000:]
    assert life_line(resumed.stdout, "k0/r0").endswith("k0/r0: done earlier, kept")
    assert life_line(resumed.stdout, "k2/r0").endswith("k2/r0: done")
    assert snapshot(run_dir / "k0/r0") == kept
    assert survivors(model, str(run_dir)) == []
    return resumed


def test_ctrl_c_pressed_again_and_again_still_stops_every_process(tmp_path):
    """Ctrl-C, then Ctrl-C every 0.1 s until the runner is gone: the ones arriving while the server group
    is being stopped skip its grace period instead of abandoning the stop (which would leave the engine
    processes running); the ones arriving after the unwinding are ignored (no traceback, exit 130)."""
    model, runner, run_dir, kept = start_sweep(tmp_path, "sigint2")
    try:
        deadline = time.monotonic() + 30
        while runner.poll() is None and time.monotonic() < deadline:
            try:
                os.kill(runner.pid, signal.SIGINT)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        _, stderr = runner.communicate(timeout=60)
        assert runner.returncode == 130
        no_traceback(stderr)
        assert stderr.strip().splitlines() == [
            f"lookahead-runner: interrupted; finished server lives are kept (continue with --resume {run_dir})"]
        assert survivors(model, str(run_dir)) == []
        assert status(run_dir, "k2/r0")["state"] == "running"  # cut: --resume runs it again
        resume_and_check(model, run_dir, kept)
    finally:
        kill_group(runner)
        kill_all(model)


def test_terminal_closing_sighup_unwinds_like_ctrl_c(tmp_path):
    model, runner, run_dir, kept = start_sweep(tmp_path, "sighup", from_a_terminal=True)
    try:
        interrupt(runner, signal.SIGHUP)
        _, stderr = runner.communicate(timeout=60)
        assert runner.returncode == 130
        no_traceback(stderr)
        assert "interrupted; finished server lives are kept" in stderr
        assert survivors(model, str(run_dir)) == []
        resume_and_check(model, run_dir, kept)
    finally:
        kill_group(runner)
        kill_all(model)


def test_sigkill_of_the_runner_the_watchdog_stops_its_processes(tmp_path):
    model, runner, run_dir, kept = start_sweep(tmp_path, "sigkill")
    try:
        assert processes_of(model), "the second setting's server and Locust should be running"
        assert processes_of(f"watchdog of {run_dir}"), "the sweep's watchdog should be running"
        os.kill(runner.pid, signal.SIGKILL)
        runner.communicate(timeout=30)
        # SIGTERM to the server and Locust groups at once, SIGKILL after server.stop_grace_s (5 s)
        assert survivors(model, str(run_dir), settle_s=15) == []
        resume_and_check(model, run_dir, kept)
    finally:
        kill_group(runner)
        kill_all(model)


def test_sigkill_of_runner_and_watchdog_resume_stops_the_leftovers_first(tmp_path):
    """Nothing is left to act when both are killed: the server and Locust run on (their Locust would
    even write into the run folder). `--resume` stops them before it reruns the setting."""
    model, runner, run_dir, kept = start_sweep(tmp_path, "sigkill2")
    try:
        (watchdog,) = processes_of(f"watchdog of {run_dir}")
        watchdog.kill()  # it stays a zombie of the runner: gone from processes_of() all the same
        wait_for(lambda: not processes_of(f"watchdog of {run_dir}"), 10, "the watchdog to die")
        os.kill(runner.pid, signal.SIGKILL)
        runner.communicate(timeout=30)
        left = processes_of(model)
        assert left, "with its watchdog killed too, the server and Locust outlive the runner"
        left_pids = {p.pid for p in left}
        resumed = resume_and_check(model, run_dir, kept)
        assert "stopped a process the interrupted run left behind: server pid" in resumed.stdout
        assert not [pid for pid in left_pids if psutil.pid_exists(pid)
                    and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    finally:
        kill_group(runner)
        kill_all(model)
