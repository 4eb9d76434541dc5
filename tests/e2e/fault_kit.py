"""Shared pieces of the reliability matrix (tests/e2e/test_fault_*.py, test_security.py).

Every case drives the real CLI (`python -m lookahead_runner sweep`) on the simulator, with a model
name unique to the test, so the process-table check finds exactly that test's servers and Locust
(their argv carry the model name) and its watchdog (its argv carries the run folder).
"""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil

from lookahead_runner.runfolder.results import CACHE_DIR

HERE = Path(__file__).resolve().parent
# the simulator with per-setting faults and vLLM's VLLM_API_KEY (see the file's docstring)
FAULT_SIM = [sys.executable, str(HERE / "lookahead-sim-vllm-faults.py")]


def unique_model(case: str) -> str:
    return f"sim/fault-{case}-{uuid.uuid4().hex[:8]}"


def toml_value(value) -> str:
    return json.dumps(value)  # JSON strings, numbers, lists and booleans are TOML too


FAST = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.5"]  # a 0.5 s startup instead of 1.5 s


# A sweep that ran to its end: a verdict (0) or "not decided yet" (3), which a few seconds of load usually
# are. Tests of the runner's mechanics accept both; tests of the verdict check decision.json.
FINISHED = (0, 3)


def sweep_toml(model: str, k: list[int], stages=((2, 2),), server: dict | None = None,
               load: dict | None = None, env: dict | None = None, name: str = "fault") -> str:
    """A short sweep on the fault simulator: one 2 s stage, one repeat, tiny requests, no pre-flight (a test
    about the pre-flight, or about what it writes, turns it on with load={"preflight_s": ...})."""
    server_keys = {"command": FAULT_SIM, "model": model, "extra_args": FAST,
                   "ready_timeout_s": 30, "memory_stable_window_s": 0.3, "stop_grace_s": 5} | (server or {})
    load_keys = {"prompt_tokens": 32, "output_tokens": 16, "warmup_s": 0.5, "request_timeout_s": 4,
                 "preflight_s": 0} | (load or {})
    stage_list = ", ".join(f"{{ users = {u}, duration_s = {d} }}" for u, d in stages)
    lines = [f"name = {toml_value(name)}", "[server]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in server_keys.items()]
    if env:
        lines += ["[server.env]"] + [f"{key} = {toml_value(value)}" for key, value in env.items()]
    lines += ["[speculation]", f"k = {toml_value(k)}", "[load]", f"stages = [{stage_list}]"]
    lines += [f"{key} = {toml_value(value)}" for key, value in load_keys.items()]
    lines += ["[decision]", "min_requests = 2"]
    return "\n".join(lines) + "\n"


def faults_at_k(faults: dict[int, list[str]]) -> dict:
    """server.env that gives setting K these extra `serve` arguments (fault simulator only)."""
    return {"SIM_FAULTS_AT_K": json.dumps({str(k): args for k, args in faults.items()})}


def cli(*args: str, timeout: float = 300, env: dict | None = None, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=timeout, env=os.environ | (env or {}), cwd=cwd)


def start(*args: str, env: dict | None = None, cwd=None, python_prefix: list[str] | None = None) -> subprocess.Popen:
    """The CLI in the background, in its own session (so a signal reaches only the runner)."""
    argv = [sys.executable, *(python_prefix or ["-m", "lookahead_runner"]), *args]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            env=os.environ | (env or {}), start_new_session=True)


def write_config(tmp_path: Path, toml: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(toml)
    return path


def processes_of(*markers: str) -> list[psutil.Process]:
    """Live (non-zombie) processes whose argv mentions any marker."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if any(marker in part for part in proc.info["cmdline"] or [] for marker in markers):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def survivors(*markers: str, settle_s: float = 10.0) -> list[str]:
    """What is still running after `settle_s` (stopping takes a moment): empty when all is well."""
    deadline = time.monotonic() + settle_s
    while True:
        left = processes_of(*markers)
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    described = []
    for proc in left:
        try:
            described.append(f"{proc.pid}: {' '.join(proc.cmdline())[:200]}")
        except psutil.Error:
            continue
    return described


def in_session(sid: int) -> list[str]:
    """Live processes in session `sid`: a runner started with start() leads its own, and the Ray it starts (GCS,
    raylet, its slots' workers) runs there too, whatever other sweeps run on the machine."""
    left = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if os.getsid(proc.pid) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                left.append(f"{proc.pid} {' '.join(proc.info['cmdline'] or [])[:120]}")
        except (psutil.Error, OSError):
            continue
    return left


def kill_all(*markers: str) -> None:
    """Test cleanup only: whatever a failed test left running."""
    for proc in processes_of(*markers):
        try:
            proc.kill()
        except psutil.Error:
            pass


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def only_run_dir(out: Path) -> Path:
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


def status(run_dir: Path, life: str) -> dict:
    return json.loads((run_dir / life / "status.json").read_text())


def snapshot(directory: Path) -> dict[str, str]:
    """sha256 of every file under a folder: a finished life's record must not change by one byte. Its .cache/
    holds typed copies the report may rewrite (a copy made within a second of its CSV is checked once, then marked
    so), never the record."""
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and CACHE_DIR not in p.relative_to(directory).parts}


def life_line(stdout: str, life: str) -> str:
    """The one line the runner printed for a life's outcome."""
    lines = [line for line in stdout.splitlines() if f"] {life}: " in line and "starting the server" not in line]
    assert lines, f"no outcome line for {life} in:\n{stdout[-3000:]}"
    return lines[-1]


def no_traceback(*texts: str) -> None:
    for text in texts:
        assert "Traceback" not in text, text[-3000:]


def ignored_signals(pid: int) -> set[int]:
    """The signals a live process ignores (Linux: SigIgn in /proc/PID/status); empty where that cannot be read."""
    try:
        status_text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return set()
    mask = next((int(line.split()[1], 16) for line in status_text.splitlines() if line.startswith("SigIgn:")), 0)
    return {bit + 1 for bit in range(mask.bit_length()) if mask >> bit & 1}


def interrupt(process: subprocess.Popen, sig: int) -> None:
    """Send `sig` to the runner, after checking it does not ignore it: a runner that inherited SIGINT ignored would
    run to its end (exit 3) instead of stopping (130), and the assertion on its exit code would not say why."""
    assert sig not in ignored_signals(process.pid), (
        f"the runner (pid {process.pid}) ignores {signal.Signals(sig).name}: it inherited that from the test process "
        "(pytest started as a background job of a shell without job control?); tests/conftest.py restores Ctrl-C")
    os.kill(process.pid, sig)


def kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def stop_group(process: subprocess.Popen) -> None:
    """TERM the process group, wait, then KILL and reap."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    process.wait(timeout=10)
