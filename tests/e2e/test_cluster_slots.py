"""The sweep's slots counted node by node, and a slot that cannot start (run/cluster/start.py), through the real CLI.

Ray accepts GPU slots without GPUs and the simulator needs none. A node "without lookahead-runner" is a Ray node of
this machine whose processes find a package of that name that fails to import first on their path (PYTHONPATH,
set while the node starts); the CLI runs from a folder of its own, since Ray puts the driver's working folder
first on its workers' path.
"""
import importlib.util
import json
import os
import socket
import time

import pandas as pd
import pytest
from fault_kit import (FINISHED, cli, kill_all, no_traceback, only_run_dir, processes_of, start, survivors,
                       sweep_toml, unique_model, wait_for, write_config)

pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it

STORE = 100 * 1024 * 1024


def ours(stderr: str) -> str:
    """The sweep's one line (the last); any other is Ray's own, logged while it starts (e.g. its token notice)."""
    lines = stderr.strip().splitlines()
    assert [line for line in lines if line.startswith("lookahead-runner")] == lines[-1:], stderr[-3000:]
    return lines[-1]


def test_a_life_larger_than_any_node_is_one_line_and_exit_2_within_60_s(tmp_path):
    model = unique_model("ray-too-big")
    toml = sweep_toml(model, [0, 4]) + "[cluster]\nengine = \"ray\"\ngpus = 2\ngpus_per_life = 4\n"
    began = time.monotonic()
    done = cli("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"), timeout=120)
    assert time.monotonic() - began < 60
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    no_traceback(done.stderr)
    assert ours(done.stderr).startswith("lookahead-runner: cluster.gpus_per_life = 4, cluster.cpus_per_life = 1: no "
                                        "node of the Ray started here holds one life"), done.stderr
    assert not (tmp_path / "runs").exists() and not processes_of(model)


def test_two_nodes_of_3_gpus_hold_2_slots_of_2_and_a_node_without_the_package_is_left_out(tmp_path):
    """Nodes a and b have 3 GPUs each, c has 2 and no lookahead-runner; another job holds c's GPUs when the sweep
    starts. At 2 GPUs a life the sweep starts 2 slots on a and b (the cluster's 8 GPUs would count 4, and the sweep
    waited forever for the third to be placed) with c's queued; once the job lets c's GPUs go, c's slot cannot
    start: it is left out in one line and the sweep ends on a and b. With c free from the start the same sweep is
    refused before any life, in one line naming the cause."""
    import ray
    from ray.cluster_utils import Cluster

    shadow = tmp_path / "shadow" / "lookahead_runner"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('lookahead_runner is not installed on this node')\n")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0, "object_store_memory": STORE})
    runner = None
    model = unique_model("ray-nodes3")
    try:
        for _ in range(2):
            cluster.add_node(num_cpus=1, num_gpus=3, object_store_memory=STORE)
        os.environ["PYTHONPATH"] = str(shadow.parent)
        try:
            cluster.add_node(num_cpus=1, num_gpus=2, resources={"no_package": 1}, object_store_memory=STORE)
        finally:
            del os.environ["PYTHONPATH"]
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False, configure_logging=False)

        @ray.remote(num_gpus=2, num_cpus=0, resources={"no_package": 1})
        class OtherJob:
            def ping(self) -> int:
                return 1

        other = OtherJob.remote()
        assert ray.get(other.ping.remote(), timeout=120) == 1
        work = tmp_path / "work"
        work.mkdir()
        toml = (sweep_toml(model, [0, 4], stages=((2, 8),), load={"repeats": 2})
                + f"[cluster]\nengine = \"ray\"\naddress = \"{cluster.address}\"\ngpus_per_life = 2\n")
        config = write_config(tmp_path, toml)
        runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), cwd=work)
        wait_for(lambda: any("locust" in " ".join(p.cmdline()) for p in processes_of(model)), 240,
                 "a life loading")
        ray.kill(other)
        stdout, stderr = runner.communicate(timeout=400)
        assert runner.returncode in FINISHED, stdout[-3000:] + stderr[-3000:]
        no_traceback(stderr)
        assert "Ray: starting 3 slots" in stdout and "Ray: 2 slots of 2 GPUs" in stdout, stdout[-3000:]
        assert "1 more join as another job releases their GPUs" in stdout, stdout[-3000:]
        left_out = [line for line in stdout.splitlines() if "could not start, left out" in line]
        assert left_out == ["Ray: a slot placed since could not start, left out: ImportError: lookahead_runner is "
                            "not installed on this node"], stdout[-3000:]
        run_dir = only_run_dir(tmp_path / "runs")
        lives = pd.read_csv(run_dir / "lives.csv")
        assert (lives["status"] == "done").all() and len(lives) == 4, lives[["life", "status", "reason"]]
        assert lives["slot"].nunique() == 2 and lives["gpus"].str.count("ray-gpu:").eq(2).all(), lives
        assert len(json.loads((run_dir / "plan.json").read_text())["cluster"]["slots"]) == 2
        assert survivors(model, settle_s=10) == []

        refused = cli("sweep", "--dry-run", "--config", str(config), timeout=240, cwd=work)
        assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
        no_traceback(refused.stderr)
        line = ours(refused.stderr)
        assert line.startswith("lookahead-runner: 1 of 3 Ray slots could not start, refused before any life (the "
                               "first on "), refused.stderr
        assert "ImportError: lookahead_runner is not installed on this node); every node needs lookahead-runner" \
            in line, line
    finally:
        if runner is not None and runner.poll() is None:
            runner.kill()
        kill_all(model)
        ray.shutdown()
        cluster.shutdown()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_a_cluster_address_nothing_answers_at_is_one_line_and_exit_2_within_60_s(tmp_path, scheme):
    """Ray's own ray.init retries an address nothing answers at for minutes (HOST:PORT), or raises a traceback
    (ray://: Ray Client's missing package, or no server)."""
    model = unique_model("ray-nobody")
    address = f"{scheme}127.0.0.1:{_free_port()}"
    toml = sweep_toml(model, [0, 4]) + f"[cluster]\nengine = \"ray\"\naddress = \"{address}\"\n"
    began = time.monotonic()
    done = cli("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"), timeout=240)
    assert time.monotonic() - began < 60
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    no_traceback(done.stderr)
    line = ours(done.stderr)
    assert line.startswith(f"lookahead-runner: cluster.address = '{address}': "), line
    assert "ray start --head" in line or "ray[client]" in line, line
    assert not (tmp_path / "runs").exists() and not processes_of(model)


def test_a_ray_client_address_without_ray_client_names_the_install(tmp_path):
    """ray:// needs Ray Client's package (grpcio), which lookahead-runner[ray] does not install: one line naming it,
    though the address answers."""
    if importlib.util.find_spec("grpc") is not None:
        pytest.skip("Ray Client's package is installed here")
    with socket.socket() as head:
        head.bind(("127.0.0.1", 0))
        head.listen()
        address = f"ray://127.0.0.1:{head.getsockname()[1]}"
        toml = sweep_toml(unique_model("ray-client"), [0]) + f"[cluster]\nengine = \"ray\"\naddress = \"{address}\"\n"
        done = cli("sweep", "--dry-run", "--config", str(write_config(tmp_path, toml)), timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    no_traceback(done.stderr)
    line = ours(done.stderr)
    assert line.startswith(f"lookahead-runner: cluster.address = '{address}': ") and "pip install 'ray[client]'" \
        in line, line


def test_lives_of_no_gpu_on_nodes_with_gpus_are_one_line_and_exit_2_before_any_slot(tmp_path):
    """Ray does not keep a slot of num_gpus = 0 off its node's GPUs (it leaves CUDA_VISIBLE_DEVICES as it was, or
    empties it): every real server would use the node's GPUs beside the other slots', its memory sampled there."""
    toml = ("name = \"zero\"\n[server]\ncommand = [\"vllm-not-here\"]\nmodel = \"facebook/opt-125m\"\n"
            "[speculation]\nk = [0, 2]\nmethod = \"ngram\"\n[load]\nstages = [{ users = 2, duration_s = 2 }]\n"
            "preflight_s = 0\n[cluster]\nengine = \"ray\"\ngpus = 2\ngpus_per_life = 0\n")
    done = cli("sweep", "--dry-run", "--config", str(write_config(tmp_path, toml)), timeout=120)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    no_traceback(done.stderr)
    assert ours(done.stderr).startswith("lookahead-runner: cluster.gpus_per_life = 0: the Ray started here has "
                                        "2 GPUs"), done.stderr
    assert "Ray: starting" not in done.stdout, done.stdout
