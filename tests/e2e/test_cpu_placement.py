"""Placement and the pre-flight through real processes: the server's and Locust's process trees run on
the CPUs the plan gives them (read from the kernel while they run), a binding that reaches Locust's
CPUs is refused before any run folder, and a starved client stops the sweep at the pre-flight with
its cause and the fix, before any life is measured."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import psutil
import pytest

from fault_kit import (FINISHED, cli, faults_at_k, kill_all, only_run_dir, processes_of, survivors, sweep_toml,
                       unique_model, write_config)

pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="placement splits two CPUs or more")]
CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture(scope="module", autouse=True)
def placement_as_configured():
    """The placement these tests check is the config's, not the parallel test run's host-wide "off"."""
    saved = os.environ.pop("LOOKAHEAD_RUNNER_PLACEMENT", None)
    yield
    if saved is not None:
        os.environ["LOOKAHEAD_RUNNER_PLACEMENT"] = saved


class AffinityWatch:
    """Records, while a sweep runs, the CPU affinity (and server environment) of its processes."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.seen: dict[int, dict] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in processes_of(self.model):
                if proc.pid in self.seen:
                    continue
                try:
                    cmd = proc.cmdline()
                    kind = "locust" if "locust" in cmd else "server" if "serve" in cmd else ""
                    if kind:
                        env = proc.environ() if kind == "server" else {}
                        self.seen[proc.pid] = {"kind": kind, "cpus": sorted(proc.cpu_affinity()),
                                               "omp": env.get("VLLM_CPU_OMP_THREADS_BIND"),
                                               "preflight": "preflight" in cmd}
                except psutil.Error:
                    continue
            self._stop.wait(0.1)

    def of(self, kind: str) -> list[dict]:
        return [seen for seen in self.seen.values() if seen["kind"] == kind]

    def __enter__(self) -> "AffinityWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def signal_all(processes: list[psutil.Process], sig: int) -> None:
    for proc in processes:
        try:
            proc.send_signal(sig)
        except psutil.Error:
            pass


def test_auto_placement_pins_the_server_and_locust_and_says_so(tmp_path):
    model = unique_model("placed")
    config = write_config(tmp_path, sweep_toml(model, [0], stages=((4, 3),), load={"preflight_s": 1.5}))
    try:
        with AffinityWatch(model) as watch:
            done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=240)
        assert done.returncode in FINISHED, done.stdout[-2000:] + done.stderr[-2000:]
        run_dir = only_run_dir(tmp_path / "runs")
        server_cpus, load_cpus = CPUS[:-1], CPUS[-1:]
        servers, locusts = watch.of("server"), watch.of("locust")
        assert servers and all(s["cpus"] == server_cpus for s in servers), servers
        assert all(s["omp"] == (f"{CPUS[0]}-{CPUS[-2]}" if len(CPUS) > 2 else str(CPUS[0])) for s in servers)
        assert {l["preflight"] for l in locusts} == {True, False}, "the pre-flight and the life both ran Locust"
        assert all(l["cpus"] == load_cpus for l in locusts), locusts
        plan = json.loads((run_dir / "plan.json").read_text())
        assert plan["placement"]["mode"] == "auto" and plan["placement"]["load_cpus"] == str(CPUS[-1])
        assert json.loads((run_dir / "k0/r0/server.json").read_text())["cpus"] == server_cpus
        preflight = json.loads((run_dir / "preflight.json").read_text())
        assert preflight["verdict"] in ("ok", "not judged") and preflight["idle"]["samples"] > 10
        assert "placement auto: server on CPU" in done.stdout and "pre-flight, server idle" in done.stdout
        report = (run_dir / "report.html").read_text()
        assert "placement auto: server on CPU" in report and "pre-flight" in report
    finally:
        kill_all(model)
    assert survivors(model) == []


def test_placement_off_leaves_both_to_the_os(tmp_path):
    model = unique_model("unplaced")
    config = write_config(tmp_path, sweep_toml(model, [0], stages=((2, 2),),
                                               load={"placement": "off", "preflight_s": 0}))
    try:
        with AffinityWatch(model) as watch:
            done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=240)
        assert done.returncode in FINISHED, done.stderr[-2000:]
        for seen in watch.of("server") + watch.of("locust"):
            assert seen["cpus"] == CPUS and seen["omp"] is None, seen
        assert not (only_run_dir(tmp_path / "runs") / "preflight.json").exists()
    finally:
        kill_all(model)


def test_an_openmp_binding_on_locusts_cpus_is_refused_before_anything_starts(tmp_path):
    model = unique_model("omp")
    config = write_config(tmp_path, sweep_toml(model, [0], env={"VLLM_CPU_OMP_THREADS_BIND": str(CPUS[-1])}))
    done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert lines[0].startswith(f"lookahead-runner: server.env.VLLM_CPU_OMP_THREADS_BIND = '{CPUS[-1]}' binds vLLM's "
                               f"compute threads to CPU {CPUS[-1]}, which load.cpus gives Locust")
    assert not (tmp_path / "runs").exists()


def test_a_starved_client_stops_the_sweep_at_the_preflight_with_the_fix(tmp_path):
    """The pre-flight's Locust is stopped 150 ms in every 200 ms (as a busy neighbour on its CPU would):
    its loop lags while it uses little CPU, so the sweep stops there, naming starvation and the setting,
    and no life is measured (--resume runs them all)."""
    model = unique_model("starved")
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=((4, 3),), load={"preflight_s": 4}))
    stop = threading.Event()

    def starve() -> None:
        while not stop.is_set():
            victims = [p for p in processes_of(model) if "preflight" in " ".join(p.info["cmdline"] or [])]
            signal_all(victims, signal.SIGSTOP)
            time.sleep(0.15)
            signal_all(victims, signal.SIGCONT)
            time.sleep(0.05)

    thread = threading.Thread(target=starve, daemon=True)
    thread.start()
    try:
        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=240)
    finally:
        stop.set()
        thread.join(timeout=5)
        signal_all(processes_of(model), signal.SIGCONT)
    try:
        assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert lines[0].startswith("lookahead-runner: pre-flight at 4 users: client starved: the typical request's "
                                   "loop lag p99 "), lines[0]
        assert f"other processes run on the load's CPUs {CPUS[-1]}" in lines[0]
        run_dir = only_run_dir(tmp_path / "runs")
        preflight = json.loads((run_dir / "preflight.json").read_text())
        assert preflight["verdict"] == "stop" and preflight["reason"] == lines[0][len("lookahead-runner: "):]
        status = json.loads((run_dir / "k0/r0/status.json").read_text())  # its server hosted the pre-flight
        assert status["state"] == "failed" and status["reason"].startswith("not measured: pre-flight")
        assert not (run_dir / "k0/r0/requests.csv").exists() and not (run_dir / "k2").exists()
    finally:
        kill_all(model)
    assert survivors(model) == []


def test_a_server_dying_in_the_preflight_fails_its_life_and_the_next_server_runs_it(tmp_path):
    model = unique_model("preflight-death")
    env = faults_at_k({0: ["--sim-fault", "die-after=1"]})
    config = write_config(tmp_path, sweep_toml(model, [0, 2], stages=((2, 2),), env=env, load={"preflight_s": 3}))
    try:
        done = cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), "--no-early-stop", timeout=240)
        assert done.returncode in FINISHED and "Traceback" not in done.stderr, done.stderr[-2000:]
        run_dir = only_run_dir(tmp_path / "runs")
        first = json.loads((run_dir / "k0/r0/status.json").read_text())
        assert first["state"] == "failed"
        assert first["reason"].startswith("the server died during the pre-flight (exit code 1): "), first["reason"]
        assert json.loads((run_dir / "k2/r0/status.json").read_text())["state"] == "done"
        assert json.loads((run_dir / "preflight.json").read_text())["verdict"] == "ok"
    finally:
        kill_all(model)
    assert survivors(model) == []
