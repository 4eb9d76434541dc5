"""Reliability matrix, the environment fails: the port is taken, Locust crashes, NVML is missing,
the disk fills up while results are written. Each test is one row of docs/reliability.md."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest

from fault_kit import (FINISHED, cli, kill_all, kill_group, life_line, no_traceback, only_run_dir, processes_of, snapshot,
                       start, status, survivors, sweep_toml, unique_model, wait_for, write_config)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # five sweeps, each a failing environment: 86 s; CI runs it

ONE_STAGE = ((2, 3),)


def test_port_already_taken(tmp_path):
    """A fixed server.port held by another process: that setting fails at once with one line (no
    server start, no false "ready" from the squatter); once the port is free the sweep goes on."""
    model = unique_model("port")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    port = squatter.getsockname()[1]
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=ONE_STAGE, server={"port": port}))
    runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    try:
        wait_for(lambda: any((run / "k0/r0/status.json").exists() and json.loads(
            (run / "k0/r0/status.json").read_text())["state"] == "failed" for run in (tmp_path / "runs").glob("*")),
            60, "the first setting to fail")
        squatter.close()  # the other process lets go: the next setting can run
        stdout, stderr = runner.communicate(timeout=120)
        no_traceback(stdout, stderr)
        run_dir = only_run_dir(tmp_path / "runs")
        assert life_line(stdout, "k0/r0") == (
            f"[1/2] k0/r0: failed - server.port {port}: 127.0.0.1:{port} is in use by another process; "
            "stop it, or set server.port = 0 (a free port per server life)")
        assert not (run_dir / "k0/r0/server.log").exists(), "no server may start on a taken port"
        assert life_line(stdout, "k2/r0").endswith("k2/r0: done")
        assert survivors(model, str(run_dir)) == []
        kept = snapshot(run_dir / "k2/r0")
        resumed = cli("sweep", "--resume", str(run_dir), timeout=120)
        no_traceback(resumed.stdout, resumed.stderr)
        assert resumed.returncode in FINISHED and life_line(resumed.stdout, "k0/r0").endswith("k0/r0: done")
        assert snapshot(run_dir / "k2/r0") == kept
        assert survivors(model, str(run_dir)) == []
    finally:
        squatter.close()
        kill_group(runner)
        kill_all(model)


def test_locust_crashes_mid_stage(tmp_path):
    """Locust dies (SIGKILL) during the first setting: that setting is failed with one line, its server
    is stopped, the next setting runs; --resume reruns the first."""
    model = unique_model("locust")
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=ONE_STAGE))
    runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    try:
        wait_for(lambda: any((run / "k0/r0/requests.csv").exists() for run in (tmp_path / "runs").glob("*")),
                 120, "the first setting's load")
        (locust,) = [p for p in processes_of(model) if p.cmdline()[1:3] == ["-m", "locust"]]
        locust.send_signal(signal.SIGKILL)
        stdout, stderr = runner.communicate(timeout=120)
        no_traceback(stdout, stderr)
        run_dir = only_run_dir(tmp_path / "runs")
        assert life_line(stdout, "k0/r0") == "[1/2] k0/r0: failed - Locust was killed by signal 9 (see locust.log)"
        assert life_line(stdout, "k2/r0").endswith("k2/r0: done")
        assert json.loads((run_dir / "k0/r0/server.json").read_text())["exit_code"] is not None
        assert {f["life"] for f in json.loads((run_dir / "decision.json").read_text())["failed_lives"]} == {"k0/r0"}
        assert survivors(model, str(run_dir)) == []
        kept = snapshot(run_dir / "k2/r0")
        resumed = cli("sweep", "--resume", str(run_dir), timeout=120)
        no_traceback(resumed.stdout, resumed.stderr)
        assert resumed.returncode in FINISHED and life_line(resumed.stdout, "k0/r0").endswith("k0/r0: done")
        assert snapshot(run_dir / "k2/r0") == kept
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_group(runner)
        kill_all(model)


NO_NVML = ["-c", "import sys; sys.modules['pynvml'] = None; from lookahead_runner.cli import main; sys.exit(main())"]


def test_nvml_unavailable(tmp_path):
    """memory_source = "nvml" where NVML cannot load (here: the module is blocked in the runner, as on a
    host without the NVIDIA driver): the sweep runs, the report says memory was not measured and why."""
    model = unique_model("nvml")
    config = write_config(tmp_path, sweep_toml(model, [0], stages=ONE_STAGE, server={"memory_source": "nvml"}))
    runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), python_prefix=NO_NVML)
    try:
        stdout, stderr = runner.communicate(timeout=120)
        no_traceback(stdout, stderr)
        assert runner.returncode in FINISHED, stderr[-2000:]
        run_dir = only_run_dir(tmp_path / "runs")
        state = status(run_dir, "k0/r0")
        assert state["state"] == "done" and state["memory_source"] == "nvml"
        assert state["memory_note"].startswith("NVML unavailable ("), state
        assert "  ready in " in stdout and "memory (nvml) stable" in stdout
        gap = [d for d in json.loads((run_dir / "decision.json").read_text())["diagnoses"]
               if d.startswith("Device memory not measured in k0/r0: NVML unavailable")]
        assert gap, "the decision must say memory was not measured"
        assert "Device memory not measured in k0/r0" in (run_dir / "report.html").read_text()
        assert survivors(model, str(run_dir)) == []
        kept = snapshot(run_dir / "k0/r0")
        resumed = cli("sweep", "--resume", str(run_dir), timeout=120)
        assert resumed.returncode in FINISHED and "k0/r0: done earlier, kept" in resumed.stdout
        assert snapshot(run_dir / "k0/r0") == kept
    finally:
        kill_group(runner)
        kill_all(model)


@pytest.fixture
def small_disk(tmp_path):
    """A 48 MiB tmpfs (needs root, as in the CI container), unmounted afterwards."""
    if os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("mounting a tmpfs to fill up needs root")
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True)


def fill(directory, name="filler.bin"):
    """Write until the disk is full."""
    chunk = b"\0" * (1 << 20)
    with open(directory / name, "wb") as handle:
        try:
            while True:
                handle.write(chunk)
                handle.flush()
        except OSError:
            pass


def test_disk_full_while_writing_results(tmp_path, small_disk):
    """The disk fills up during the second setting: one line naming the file and the way out, exit 74,
    the first setting's files intact, no process left; after freeing space --resume finishes the run."""
    model = unique_model("disk")
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=ONE_STAGE))
    runner = start("sweep", "--config", str(config), "--out", str(small_disk / "runs"))
    try:
        wait_for(lambda: any((run / "k2/r0/requests.csv").exists() for run in (small_disk / "runs").glob("*")),
                 120, "the second setting's load")
        run_dir = only_run_dir(small_disk / "runs")
        kept = snapshot(run_dir / "k0/r0")
        fill(small_disk)
        stdout, stderr = runner.communicate(timeout=120)
        no_traceback(stdout, stderr)
        assert runner.returncode == 74, stderr[-2000:]
        (line,) = stderr.strip().splitlines()
        assert line.startswith(f"lookahead-runner: cannot write {run_dir}") and "No space left on device" in line
        assert line.endswith(f"the lives finished before are kept: free space, then continue with --resume {run_dir}")
        assert snapshot(run_dir / "k0/r0") == kept
        assert status(run_dir, "k0/r0")["state"] == "done"
        assert survivors(model, str(run_dir)) == []
        (small_disk / "filler.bin").unlink()
        resumed = cli("sweep", "--resume", str(run_dir), timeout=120)
        no_traceback(resumed.stdout, resumed.stderr)
        assert resumed.returncode in FINISHED, resumed.stderr[-2000:]
        assert life_line(resumed.stdout, "k0/r0").endswith("done earlier, kept")
        assert life_line(resumed.stdout, "k2/r0").endswith("k2/r0: done")
        assert snapshot(run_dir / "k0/r0") == kept
        assert (run_dir / "report.html").stat().st_size > 0
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_group(runner)
        kill_all(model)


def test_locust_is_stopped_as_soon_as_the_server_is_gone(tmp_path):
    """The mechanism behind "server dies mid-stage": run_locust asks abort() twice a second and stops
    the load group at once (SIGTERM, then SIGKILL) instead of waiting for the stages to end."""
    from lookahead_runner.run.life.load import run_locust

    started = time.monotonic()
    result = run_locust([sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "locust.log", 120,
                        abort=lambda: "the server died" if time.monotonic() - started > 1 else "")
    assert result.aborted == "the server died" and not result.timed_out
    assert time.monotonic() - started < 10
