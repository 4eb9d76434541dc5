"""Which GPUs each life ran on, read from the run folder's statuses (run/verdict/finalize.gpu_spread)."""
from types import SimpleNamespace

import pandas as pd

from lookahead_runner.run.verdict.finalize import gpu_spread
from lookahead_runner.runfolder.plan import LifeStatus


def _data(lives: dict[str, tuple[str, str, float]]) -> SimpleNamespace:
    """`lives`: key -> (node id, GPU ids, req/s); every node on one IP, as Ray's nodes of one machine are."""
    statuses, rows = {}, []
    for key, (node_id, gpus, rate) in lives.items():
        setting, repeat = key.split("/")
        statuses[key] = LifeStatus(state="done", node="10.0.0.1", gpus=gpus.split(","),
                                   slot=f"10.0.0.1/{node_id} [{gpus}]")
        rows.append({"setting": setting, "repeat": int(repeat[1:]), "k": int(setting[1:]), "users": 8,
                     "valid": True, "req_per_s": rate})
    return SimpleNamespace(statuses=statuses, summary=pd.DataFrame(rows))


def test_gpus_of_two_nodes_that_share_an_ip_and_ray_s_gpu_ids_are_two_gpu_sets():
    """Ray numbers each node's GPUs from 0 and nodes may share an IP (the slot's name carries the node's id): K=0 on
    node a and K=4 on node b ran on different GPUs, though both read "10.0.0.1 ray-gpu:0"."""
    lines = gpu_spread(_data({"k0/r0": ("aaaaaaaa", "ray-gpu:0", 3.0), "k4/r0": ("bbbbbbbb", "ray-gpu:0", 7.0)}), 8)
    assert [line for line in lines if line.startswith("K and GPU confounded: the lives ran on 2 GPU sets")], lines


def test_a_k_on_both_nodes_has_its_spread_stated():
    lines = gpu_spread(_data({"k0/r0": ("aaaaaaaa", "ray-gpu:0", 3.0), "k0/r1": ("bbbbbbbb", "ray-gpu:0", 2.8),
                              "k4/r0": ("aaaaaaaa", "ray-gpu:0", 7.0), "k4/r1": ("bbbbbbbb", "ray-gpu:0", 6.6)}), 8)
    assert len(lines) == 1 and lines[0].startswith("GPU-to-GPU spread at 8 users: K=0 on 2 GPUs"), lines
