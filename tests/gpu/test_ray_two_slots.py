"""Two Ray slots on a machine with two or more NVIDIA GPUs: each slot's life samples exactly the GPU Ray gave it.

Ray hands each slot a GPU through CUDA_VISIBLE_DEVICES; NVML ignores the variable, so the slot maps it to
NVML's GPUs by UUID (telemetry/visible_gpus.py). Skipped without Ray or with fewer than two GPUs; run on a
GPU host with `python -m pytest -o addopts="" tests/gpu/test_ray_two_slots.py -q -s`.
"""
from __future__ import annotations

import pytest

from lookahead_runner.telemetry.memory import NvmlMemory

ray = pytest.importorskip("ray", reason="needs Ray: pip install 'lookahead-runner[ray]'")
ALL = NvmlMemory(cuda_visible=None)
pytestmark = pytest.mark.skipif(len(ALL.gpus) < 2, reason=f"needs two NVIDIA GPUs: NVML sees {len(ALL.gpus)}"
                                                          f"{' (' + ALL.unavailable_reason + ')' if ALL.unavailable_reason else ''}")


def test_two_slots_hold_two_gpus_and_sample_only_their_own():
    from lookahead_runner.run.cluster.worker_life import SlotWorker

    class Probe(SlotWorker):  # an actor holds its GPU while it lives, as a slot does for the sweep
        def sampled(self) -> tuple[tuple[str, ...], tuple[str, ...], tuple[int, ...]]:
            memory = NvmlMemory()  # CUDA_VISIBLE_DEVICES as Ray set it in this worker
            reading = memory.read()
            return self.where().gpus, tuple(g.uuid for g in memory.gpus), tuple(g.index for g in reading.gpus)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        slot = ray.remote(num_gpus=1, num_cpus=0)(Probe)
        slots = [slot.remote(), slot.remote()]
        first, second = ray.get([s.sampled.remote() for s in slots])
    finally:
        ray.shutdown()
    uuids = {gpu.uuid: gpu.index for gpu in ALL.gpus}
    for where, sampled_uuids, indexes in (first, second):
        assert len(where) == 1 and where == sampled_uuids and where[0] in uuids  # one GPU, by UUID, NVML's own
        assert indexes == (uuids[where[0]],)  # gpu.csv's only GPU is that one
    assert first[0] != second[0], "two slots were given the same GPU"
    print(f"slots sampled {first[0][0]} and {second[0][0]} of {len(uuids)} GPUs")
