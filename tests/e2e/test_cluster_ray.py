"""Server lives in parallel on a local Ray (cluster.engine = "ray", run/cluster/slots.py), through the real CLI.

Ray accepts GPU slots without GPUs (cluster.gpus = 2) and sets CUDA_VISIBLE_DEVICES in each slot; the
simulator needs none. Each test starts (and its CLI stops) one small Ray: 1 CPU a life, no dashboard.
Skipped where Ray is not installed (pip install '.[test,ray]').
"""
import json
import os
import signal

import pandas as pd
import pytest
from fault_kit import (FINISHED, cli, in_session, kill_all, kill_group, no_traceback, only_run_dir, processes_of, start,
                       survivors, unique_model, wait_for, write_config)

pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it


def sweep(model: str, cluster: str, stages: str) -> str:
    return f"""
name = "cluster"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "64", "--sim-set", "startup_s=0.3", "--sim-scenario", "tight-kv"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = {stages}
prompt_tokens = 32
output_tokens = 16
warmup_s = 1.0
preflight_s = 0
repeats = 2
[decision]
target_users = 2
max_client_lag_p99_ms = 250  # a busy shared host; not under test here
min_requests = 3
confirm = "off"
{cluster}
"""


TWO_SLOTS = "[cluster]\nengine = \"ray\"\ngpus = 2\n"
STAGES = "[{ users = 2, duration_s = 4 }, { users = 8, duration_s = 4 }]"


def verdict(run_dir):
    decision = json.loads((run_dir / "decision.json").read_text())
    return decision["status"], decision["recommended"], decision["leading_k"]


def overlap(a, b) -> bool:
    return a.t_start_s < b.t_end_s and b.t_start_s < a.t_end_s


def test_two_slots_end_in_the_serial_verdict_with_lives_overlapping(tmp_path):
    model = unique_model("ray-verdict")
    serial = cli("sweep", "--config", str(write_config(tmp_path, sweep(model, "", STAGES), "serial.toml")),
                 "--out", str(tmp_path / "serial"), timeout=400)
    assert serial.returncode in FINISHED, serial.stderr[-3000:]
    parallel = cli("sweep", "--config", str(write_config(tmp_path, sweep(model, TWO_SLOTS, STAGES), "ray.toml")),
                   "--out", str(tmp_path / "ray"), timeout=400)
    assert parallel.returncode == serial.returncode, parallel.stdout[-3000:] + parallel.stderr[-3000:]
    no_traceback(parallel.stderr)
    run_dir = only_run_dir(tmp_path / "ray")
    assert verdict(run_dir) == verdict(only_run_dir(tmp_path / "serial"))
    assert verdict(run_dir)[2] == 4  # K=4 leads on the simulator (more than twice K=0's req/s here)

    lives = pd.read_csv(run_dir / "lives.csv")
    assert (lives["status"] == "done").all() and len(lives) == 4
    assert lives["slot"].nunique() == 2 and lives["gpus"].str.startswith("ray-gpu:").all()
    rows = list(lives.itertuples())
    assert any(overlap(a, b) for i, a in enumerate(rows) for b in rows[i + 1:]), lives[["life", "t_start_s", "t_end_s"]]
    for k, repeats in lives.groupby("k"):  # K and GPU not confounded: each K's two repeats on both slots
        assert repeats["gpus"].nunique() == 2, lives[["life", "gpus"]]
    plan = json.loads((run_dir / "plan.json").read_text())
    assert sorted(plan["cluster"]["order"]) == sorted(lives["life"]) and len(plan["cluster"]["slots"]) == 2
    diagnoses = json.loads((run_dir / "decision.json").read_text())["diagnoses"]
    assert any(d.startswith("GPU-to-GPU spread at 2 users: K=0 on 2 GPUs") and "K=4 on 2 GPUs" in d
               for d in diagnoses), diagnoses
    status = json.loads((run_dir / "k0/r0/status.json").read_text())
    assert status["node"] and status["t_start_s"] < status["t_s"]
    assert not processes_of(model), "a server or Locust process of the sweep survived"


def test_each_slot_runs_its_own_preflight_and_no_slot_idles_while_lives_are_queued(tmp_path):
    """With the pre-flight on, both slots start a life at once, each running its own pre-flight on it, and a slot
    takes the next life as soon as its last one ends. Before, the first life ran alone for the sweep's one
    pre-flight while the other slot idled (lives.csv: k0/r0 alone, then two rounds, then the last life alone)."""
    model = unique_model("ray-preflights")
    toml = sweep(model, TWO_SLOTS, "[{ users = 2, duration_s = 8 }]").replace("preflight_s = 0", "preflight_s = 2")
    done = cli("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"), timeout=400)
    assert done.returncode in FINISHED, done.stdout[-3000:] + done.stderr[-3000:]
    no_traceback(done.stderr)
    ran = [line for line in done.stdout.splitlines() if "pre-flight, server idle" in line]
    assert len(ran) == 2, ran  # one a slot
    run_dir = only_run_dir(tmp_path / "runs")
    assert json.loads((run_dir / "preflight.json").read_text())["verdict"] in ("ok", "not judged")
    lives = pd.read_csv(run_dir / "lives.csv").sort_values("t_start_s")
    assert (lives["status"] == "done").all() and len(lives) == 4 and lives["slot"].nunique() == 2
    timeline = lives[["life", "slot", "t_start_s", "t_end_s"]]
    first = lives["t_start_s"].min()
    slack_s = 6.0  # a slot's next life starts once the driver has its files back (a life here is ~12 s)
    for slot, on_slot in lives.groupby("slot"):
        starts, ends = list(on_slot["t_start_s"]), list(on_slot["t_end_s"])
        assert starts[0] - first < slack_s, timeline  # busy from the start: not waiting for another's pre-flight
        assert all(start - end < slack_s for start, end in zip(starts[1:], ends)), timeline  # never idle between
    assert not processes_of(model), "a server or Locust process of the sweep survived"


def test_ctrl_c_mid_sweep_leaves_no_process_on_any_slot_and_resume_finishes(tmp_path):
    model = unique_model("ray-ctrlc")
    # 20 s stages: on a host crowded by other tests a slot's Locust may start seconds after the other's
    config = write_config(tmp_path, sweep(model, TWO_SLOTS, "[{ users = 2, duration_s = 20 }]"))
    runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    try:
        # both slots busy: two simulated servers of this sweep, each with its Locust (their argv carry the model)
        wait_for(lambda: len([p for p in processes_of(model) if "lookahead_runner.sim" in " ".join(p.cmdline())]) >= 2
                 and len([p for p in processes_of(model) if "locust" in " ".join(p.cmdline())]) >= 2,
                 240, "two lives loading at once")
        os.kill(runner.pid, signal.SIGINT)
        _, stderr = runner.communicate(timeout=120)
        assert runner.returncode == 130, stderr[-3000:]
        no_traceback(stderr)
        run_dir = only_run_dir(tmp_path / "runs")
        assert stderr.strip().splitlines()[-1] == (
            f"lookahead-runner: interrupted; finished server lives are kept (continue with --resume {run_dir})")
        assert survivors(model, settle_s=20) == []
        wait_for(lambda: not in_session(runner.pid), 60, "the interrupted sweep's Ray processes to end")
        states = {life: json.loads((run_dir / life / "status.json").read_text())["state"]
                  for life in ("k0/r0", "k4/r0")}
        assert list(states.values()) == ["running", "running"], states  # cut: --resume runs them again

        resumed = cli("sweep", "--resume", str(run_dir), timeout=400)
        assert resumed.returncode in FINISHED, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").all() and len(lives) == 4
        assert survivors(model, settle_s=10) == []
    finally:
        kill_group(runner)
        kill_all(model)


def test_a_node_lost_mid_life_fails_that_life_and_resume_reruns_it(tmp_path):
    """Two worker nodes of one GPU slot each (ray.cluster_utils.Cluster on this machine, the head holding no
    slot); the node running a life is removed mid-load."""
    from ray.cluster_utils import Cluster

    model = unique_model("ray-node")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0,
                                                            "object_store_memory": 100 * 1024 * 1024})
    runner = None
    try:
        nodes = [cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=100 * 1024 * 1024) for _ in range(2)]
        cluster.wait_for_nodes()
        at = f"[cluster]\nengine = \"ray\"\naddress = \"{cluster.address}\"\n"
        config = write_config(tmp_path, sweep(model, at, "[{ users = 2, duration_s = 8 }]"))
        runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
        victim = nodes[1].node_id[:8]

        def running_on_victim():
            for status_file in (tmp_path / "runs").glob("*/k*/r*/status.json"):
                status = json.loads(status_file.read_text())
                if status["state"] == "running" and f"/{victim} " in status.get("slot", ""):
                    return status_file.parent
            return None
        wait_for(lambda: running_on_victim() is not None
                 and len([p for p in processes_of(model) if "locust" in " ".join(p.cmdline())]) >= 2,
                 240, "a life loading on the second node")
        lost = running_on_victim()
        cluster.remove_node(nodes[1], allow_graceful=False)
        stdout, stderr = runner.communicate(timeout=300)
        no_traceback(stderr)
        run_dir = only_run_dir(tmp_path / "runs")
        status = json.loads((lost / "status.json").read_text())
        assert status["state"] == "failed" and status["reason"].startswith("node lost: "), status
        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").sum() == 3, lives[["life", "status", "reason"]]  # the other slot went on
        assert survivors(model, settle_s=20) == [], "a simulator or Locust of the lost node survived"

        resumed = cli("sweep", "--resume", str(run_dir), timeout=400)
        assert resumed.returncode in FINISHED, resumed.stdout[-3000:] + resumed.stderr[-3000:]
        assert json.loads((lost / "status.json").read_text())["state"] == "done"
        assert survivors(model, settle_s=10) == []
    finally:
        if runner is not None:
            kill_group(runner)
        kill_all(model)
        cluster.shutdown()
