"""Issue 30's last two faults on Ray, through the real CLI: a driver killed with -9 leaves nothing running after
the watchdogs' grace, and two sweeps on one cluster never hold a GPU at the same time.

Ray accepts GPU slots without GPUs and the simulator needs none; processes are found by the model name their
argv carry (fault_kit), Ray's own by the driver's session.
"""
import json
import os
import signal
import time

import pandas as pd
import pytest
from fault_kit import (FINISHED, cli, in_session, kill_group, no_traceback, only_run_dir, processes_of, start, survivors,
                       sweep_toml, unique_model, wait_for, write_config)

pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it

GRACE_S = 60   # the slots die with their driver, then each watchdog stops its server (stop_grace_s = 5) and Locust


def loading(model: str, n: int) -> bool:
    """`n` lives of this sweep loading at once: n simulated servers, each with its Locust."""
    argvs = [" ".join(p.cmdline()) for p in processes_of(model)]
    return (sum(" serve " in f" {a} " for a in argvs) >= n
            and sum("locust" in a for a in argvs) >= n)


def test_a_driver_killed_with_9_leaves_no_server_locust_or_ray_process(tmp_path):
    model = unique_model("ray-kill9")
    toml = sweep_toml(model, [0, 4], stages=((2, 30),)) + "[cluster]\nengine = \"ray\"\ngpus = 2\n"
    runner = start("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"))
    try:
        wait_for(lambda: loading(model, 2), 240, "two lives loading at once")
        ray_here = in_session(runner.pid)
        assert any("raylet" in p for p in ray_here) and any("SlotWorker" in p for p in ray_here), ray_here
        os.kill(runner.pid, signal.SIGKILL)
        runner.wait(timeout=30)
        assert survivors(model, settle_s=GRACE_S) == [], "a server or Locust outlived the killed driver"
        deadline = time.monotonic() + GRACE_S
        while in_session(runner.pid) and time.monotonic() < deadline:
            time.sleep(1.0)
        assert in_session(runner.pid) == [], "a Ray process of the killed driver is still running"
    finally:
        kill_group(runner)


def test_two_sweeps_on_one_cluster_never_hold_a_gpu_at_once(tmp_path):
    """A cluster of two one-GPU nodes; the second sweep starts while the first runs on both GPUs."""
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0,
                                                            "object_store_memory": 100 * 1024 * 1024})
    runners = []
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=100 * 1024 * 1024)
        cluster.wait_for_nodes()
        models = [unique_model("ray-share-a"), unique_model("ray-share-b")]
        for n, model in enumerate(models):
            toml = sweep_toml(model, [0, 4], stages=((2, 6),)) + f"[cluster]\nengine = \"ray\"\naddress = \"{cluster.address}\"\n"
            runners.append(start("sweep", "--config", str(write_config(tmp_path, toml, f"{n}.toml")),
                                 "--out", str(tmp_path / f"runs{n}")))
            if n == 0:
                wait_for(lambda: loading(models[0], 2), 240, "the first sweep loading on both GPUs")
        outputs = [runner.communicate(timeout=400) for runner in runners]
        for runner, (stdout, stderr) in zip(runners, outputs):
            assert runner.returncode in FINISHED, stdout[-3000:] + stderr[-3000:]
            no_traceback(stderr)
        assert "a slot waits while another sweep holds its GPUs" in outputs[1][0]

        lives = pd.concat([pd.read_csv(only_run_dir(tmp_path / f"runs{n}") / "lives.csv").assign(sweep=n)
                           for n in range(2)])
        assert (lives["status"] == "done").all() and len(lives) == 4, lives[["sweep", "life", "status"]]
        assert lives["slot"].nunique() == 2, lives[["sweep", "life", "slot"]]  # both sweeps used both GPUs
        for slot, on_gpu in lives.groupby("slot"):  # one slot string = one node's GPU
            a, b = (on_gpu[on_gpu["sweep"] == n] for n in range(2))
            for first in a.itertuples():
                for second in b.itertuples():
                    assert first.t_end_s <= second.t_start_s or second.t_end_s <= first.t_start_s, (
                        f"{slot}: sweep 0's {first.life} and sweep 1's {second.life} overlap")
        plans = [json.loads((only_run_dir(tmp_path / f"runs{n}") / "plan.json").read_text()) for n in range(2)]
        assert all(len(plan["cluster"]["slots"]) == 2 for plan in plans)
        assert all(survivors(model, settle_s=10) == [] for model in models)
    finally:
        for runner in runners:
            kill_group(runner)
        cluster.shutdown()


def test_a_sweep_starts_on_the_gpu_free_now_and_a_gpu_released_later_joins(tmp_path):
    """Two one-GPU nodes, one GPU held by another job (an actor of this test process, a Ray driver of its own): the
    sweep starts at once on the other GPU, and when the job lets its GPU go a slot there joins and runs lives."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0,
                                                            "object_store_memory": 100 * 1024 * 1024})
    runner = None
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, num_gpus=1, object_store_memory=100 * 1024 * 1024)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)

        @ray.remote(num_gpus=1, num_cpus=0)
        class OtherJob:
            def ping(self) -> int:
                return 1

        other = OtherJob.remote()
        assert ray.get(other.ping.remote(), timeout=60) == 1
        model = unique_model("ray-join")
        toml = (sweep_toml(model, [0, 4], stages=((2, 6),), load={"repeats": 2})
                + f"[cluster]\nengine = \"ray\"\naddress = \"{cluster.address}\"\n")
        runner = start("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"))
        wait_for(lambda: loading(model, 1), 240, "a life loading on the free GPU")
        released = time.time()
        ray.kill(other)
        stdout, stderr = runner.communicate(timeout=400)
        assert runner.returncode in FINISHED, stdout[-3000:] + stderr[-3000:]
        no_traceback(stderr)
        assert "1 more join as another job releases their GPUs" in stdout, stdout[-3000:]
        assert "Ray: a slot joined the sweep" in stdout, stdout[-3000:]
        run_dir = only_run_dir(tmp_path / "runs")
        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").all() and len(lives) == 4, lives[["life", "status", "reason"]]
        assert lives["t_start_s"].min() < released, "the sweep waited for the held GPU"
        first_slot = lives.sort_values("t_start_s")["slot"].iloc[0]
        joined = lives[lives["slot"] != first_slot]
        assert len(joined) >= 1 and (joined["t_start_s"] > released).all(), lives[["life", "slot", "t_start_s"]]
        assert len(json.loads((run_dir / "plan.json").read_text())["cluster"]["slots"]) == 2
        assert survivors(model, settle_s=10) == []
    finally:
        if runner is not None:
            kill_group(runner)
        ray.shutdown()
        cluster.shutdown()


def test_a_ray_started_here_is_the_sweeps_own_while_another_runs_on_the_machine(tmp_path):
    """cluster.address = "" starts a Ray for the sweep even where another Ray runs here (ray.init() alone would join
    that one, the address in /tmp/ray/ray_current_cluster, and refuse cluster.gpus): seen when two tests ran at once."""
    from ray.cluster_utils import Cluster

    other = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "num_gpus": 0,
                                                          "object_store_memory": 100 * 1024 * 1024})
    try:
        model = unique_model("ray-own")
        toml = sweep_toml(model, [0, 4]) + "[cluster]\nengine = \"ray\"\ngpus = 2\n"
        done = cli("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"),
                   timeout=400)
        assert done.returncode in FINISHED, done.stdout[-3000:] + done.stderr[-3000:]
        no_traceback(done.stderr)
        lives = pd.read_csv(only_run_dir(tmp_path / "runs") / "lives.csv")
        assert (lives["status"] == "done").all() and lives["gpus"].str.startswith("ray-gpu:").all()
        assert "2 slots of 1 GPU" in done.stdout, done.stdout[-2000:]   # the GPUs asked for: its own Ray's
    finally:
        other.shutdown()
