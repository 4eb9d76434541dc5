"""One probe for the cluster (run/cluster/nodes.py), through the real CLI on a Ray cluster of this machine's
processes (ray.cluster_utils.Cluster): the head holds no slot, each worker node one GPU slot.

A node's vLLM is what its processes see: the simulator answers `--version` with the vLLM it emulates, which
LOOKAHEAD_SIM_VLLM_VERSION in a node's environment (set while that node starts) chooses. The driver keeps
the default (0.32.0), so a probe that says 0.10.2 ran on a worker.
"""
import os

import pytest
from fault_kit import cli, no_traceback, processes_of, sweep_toml, unique_model, write_config

pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.slow]  # a local Ray a test: minutes a file; CI runs it

WORKER_VLLM = "0.10.2"   # a profile of the simulator other than the driver's default
NODE = {"num_cpus": 1, "num_gpus": 1, "object_store_memory": 100 * 1024 * 1024}


def add_node(cluster, vllm: str | None):
    """A worker node whose processes see `vllm` as the simulator's version (None: the default)."""
    before = os.environ.get("LOOKAHEAD_SIM_VLLM_VERSION")
    if vllm:
        os.environ["LOOKAHEAD_SIM_VLLM_VERSION"] = vllm
    try:
        node = cluster.add_node(**NODE)
    finally:
        os.environ.pop("LOOKAHEAD_SIM_VLLM_VERSION", None)
        if before is not None:
            os.environ["LOOKAHEAD_SIM_VLLM_VERSION"] = before
    cluster.wait_for_nodes()
    return node


def config(tmp_path, model: str, address: str, name: str, server: dict | None = None):
    toml = sweep_toml(model, [0, 2], server=server, load={"repeats": 2}) + f"[cluster]\nengine = \"ray\"\naddress = \"{address}\"\n"
    return write_config(tmp_path, toml, name)


def test_the_probe_runs_on_a_worker_and_nodes_that_differ_or_miss_the_model_are_refused(tmp_path):
    from ray.cluster_utils import Cluster

    model = unique_model("ray-nodes")
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "num_gpus": 0,
                                                            "object_store_memory": 100 * 1024 * 1024})
    try:
        nodes = [add_node(cluster, WORKER_VLLM), add_node(cluster, WORKER_VLLM)]
        env = {"LOOKAHEAD_SIM_VLLM_VERSION": ""}  # the driver: the simulator's default vLLM

        dry = cli("sweep", "--dry-run", "--config", str(config(tmp_path, model, cluster.address, "dry.toml")),
                  timeout=240, env=env)
        assert dry.returncode == 0, dry.stdout[-2000:] + dry.stderr[-2000:]
        assert f"vLLM {WORKER_VLLM} " in dry.stdout, dry.stdout[-2000:]  # the workers' vLLM, not the driver's

        absent = tmp_path / "models" / "not-copied-here"
        out = tmp_path / "runs"
        missing = cli("sweep", "--config", str(config(tmp_path, model, cluster.address, "path.toml",
                                                      {"model": str(absent)})), "--out", str(out),
                      timeout=240, env=env)
        assert missing.returncode == 2, missing.stdout[-2000:] + missing.stderr[-2000:]
        no_traceback(missing.stderr)
        line = missing.stderr.strip().splitlines()[-1]
        assert line.startswith(f"lookahead-runner: server.model = {absent}: not readable on node "), line
        assert any(node.node_id[:8] in line for node in nodes) and "(and 1 more node)" in line, line

        odd = add_node(cluster, None)  # a third node left on another vLLM
        refused = cli("sweep", "--config", str(config(tmp_path, model, cluster.address, "odd.toml")),
                      "--out", str(out), timeout=240, env=env)
        assert refused.returncode == 2, refused.stdout[-2000:] + refused.stderr[-2000:]
        no_traceback(refused.stderr)
        line = refused.stderr.strip().splitlines()[-1]
        assert "the cluster's nodes differ in vLLM" in line and "refused before any life" in line, line
        assert f"0.32.0 on {cluster.head_node.node_ip_address}/{odd.node_id[:8]}" in line, line
        assert all(node.node_id[:8] in line for node in nodes), line
        assert not out.exists() or not any(out.iterdir()), "a run folder was made for a refused cluster"
        assert not processes_of(model), "a server of the refused sweep is running"
    finally:
        cluster.shutdown()
