"""A life on a Ray slot when things go wrong, through the real CLI on a local Ray of two GPU slots (Ray grants them
without GPUs; the simulator needs none): the first server dies before the pre-flight, and a slot's process is
killed mid-life. Processes are found by the model name their argv carry (fault_kit)."""
import json
import os
import signal
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from fault_kit import (FINISHED, faults_at_k, kill_all, kill_group, no_traceback, only_run_dir, processes_of, start,
                       survivors, sweep_toml, unique_model, wait_for, write_config)

from lookahead_runner.run.cluster.queue import handout_order

pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it

TWO_SLOTS = "[cluster]\nengine = \"ray\"\ngpus = 2\n"
GRACE_S = 60  # a killed slot's watchdog stops its server (stop_grace_s = 5) and Locust, then removes its files


def lenient(seed: int = 0) -> str:
    """The rest of sweep_toml's [decision]: a busy shared host's lag is not under test here."""
    return f"max_client_lag_p99_ms = 5000\nseed = {seed}\n"


def test_the_preflight_runs_on_the_next_life_when_the_first_server_dies_and_k_on_one_gpu_is_said(tmp_path):
    """K=2 fails at start and is handed out first (the seed's order). Each slot runs its own pre-flight: the one due
    on K=2's slot runs on that slot's next life, with the slot's own placement: Locust planned on the slot's CPUs,
    "auto" kept (before, the cluster ran it with the driver's process count, never re-sized, and dropped it for the
    whole sweep when the first server died). One repeat a K on two slots: each K runs on one GPU, which the start says, and the report
    too where K=0 and K=4 landed on different slots."""
    seed = next(s for s in range(100) if handout_order([0, 2, 4], int, s)[0] == 2)
    model = unique_model("ray-preflight")
    toml = sweep_toml(model, [0, 2, 4], stages=((2, 4),), load={"preflight_s": 2, "processes": "auto"},
                      env=faults_at_k({2: ["--sim-fault", "fail-start"]})) + lenient(seed) + TWO_SLOTS
    runner = start("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"))
    try:
        stdout, stderr = runner.communicate(timeout=400)
        assert runner.returncode in FINISHED, stdout[-3000:] + stderr[-3000:]
        no_traceback(stderr)
        assert "K and GPU confounded: 2 slots, but each K has 1 server life, so it runs on 1 of the 2 GPU sets" \
            in stdout, stdout[-3000:]
        run_dir = only_run_dir(tmp_path / "runs")
        assert json.loads((run_dir / "plan.json").read_text())["cluster"]["order"][0] == "k2/r0"
        lives = pd.read_csv(run_dir / "lives.csv").set_index("life")
        assert lives.loc["k2/r0", "status"] == "failed" and (lives.loc[["k0/r0", "k4/r0"], "status"] == "done").all()
        preflight = json.loads((run_dir / "preflight.json").read_text())
        assert preflight["verdict"] in ("ok", "not judged"), preflight
        before = preflight["placement_before"]
        assert (before["mode"], before["processes_auto"], before["slot_cpus"]) == ("slot", True, 1.0), before
        ran_it = [line for line in stdout.splitlines() if "pre-flight, server idle" in line]
        assert len(ran_it) == 2 and not any("[k2/r0]" in line for line in ran_it), ran_it  # once a slot, not by K=2
        diagnoses = json.loads((run_dir / "decision.json").read_text())["diagnoses"]
        confounded = [d for d in diagnoses if d.startswith("K and GPU confounded: the lives ran on 2 GPU sets")]
        apart = lives.loc["k0/r0", "slot"] != lives.loc["k4/r0", "slot"]
        assert len(confounded) == int(apart), (lives[["slot"]], diagnoses)
        assert survivors(model, settle_s=10) == []
    finally:
        kill_group(runner)
        kill_all(model)


def test_a_slot_killed_mid_life_fails_that_life_at_once_leaves_no_files_and_the_other_slot_goes_on(tmp_path):
    """A slot's process is killed with -9 while its life loads (an OOM kill reads the same): its life fails at once
    with the cause (its node is alive: not "node lost"), its node's watchdog stops its server and Locust and
    removes its scratch folder, and the other slot takes the next life without waiting (the driver used to block
    up to 60 s on any slot's death)."""
    model = unique_model("ray-slotkill")
    toml = sweep_toml(model, [0, 4], stages=((2, 8),), load={"repeats": 2}) + lenient() + TWO_SLOTS
    runner = start("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"))
    try:
        def locusts():
            return [p for p in processes_of(model) if "--requests-csv" in p.cmdline()]
        wait_for(lambda: len(locusts()) >= 2, 240, "two lives loading at once")
        locust = locusts()[0]
        requests_csv = Path(locust.cmdline()[locust.cmdline().index("--requests-csv") + 1])
        scratch = next(p for p in requests_csv.parents if p.name.startswith("lookahead-life-"))
        life = "/".join([part for part in requests_csv.relative_to(scratch).parts if part != "run"][:2])
        slot = psutil.Process(locust.ppid())
        assert "SlotWorker" in " ".join(slot.cmdline()), slot.cmdline()
        killed = time.time()
        os.kill(slot.pid, signal.SIGKILL)
        stdout, stderr = runner.communicate(timeout=400)
        assert runner.returncode in (*FINISHED, 1), stdout[-3000:] + stderr[-3000:]
        no_traceback(stderr)
        run_dir = only_run_dir(tmp_path / "runs")
        status = json.loads((run_dir / life / "status.json").read_text())
        assert status["state"] == "failed" and status["reason"].startswith("the Ray slot on ") \
            and " died: " in status["reason"] and "The actor died unexpectedly" not in status["reason"], status
        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").sum() == 3, lives[["life", "status", "reason"]]
        after = lives[lives["t_start_s"] > killed]
        assert len(after) >= 1 and after["t_start_s"].min() - killed < 45, (killed, lives[["life", "t_start_s"]])
        wait_for(lambda: not scratch.exists(), GRACE_S, f"the killed slot's watchdog to remove {scratch}")
        assert survivors(model, settle_s=GRACE_S) == [], "the killed slot's server or Locust survived"
    finally:
        kill_group(runner)
        kill_all(model)
