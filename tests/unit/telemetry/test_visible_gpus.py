"""CUDA_VISIBLE_DEVICES -> the NVML GPUs to sample, by UUID (NVML itself ignores the variable)."""
import sys
from types import SimpleNamespace

import pytest

from lookahead_runner.telemetry.memory import MIB, NvmlMemory
from lookahead_runner.telemetry.visible_gpus import NvmlGpu, visible_gpus

UUIDS = ["GPU-0a1b2c3d-0000-0000-0000-000000000000", "GPU-5e6f7a8b-1111-1111-1111-111111111111",
         "GPU-9c0d1e2f-2222-2222-2222-222222222222", "GPU-9c0dffff-3333-3333-3333-333333333333"]
NODE = [NvmlGpu(index, uuid) for index, uuid in enumerate(UUIDS)]


def fake_pynvml(memory_mib, uuid_bytes=False):
    """A pynvml stand-in: memory_mib = [(used, total)] per GPU, UUIDS[i] as GPU i's UUID."""
    module = SimpleNamespace(NVMLError=RuntimeError, nvmlInit=lambda: None,
                             nvmlDeviceGetCount=lambda: len(memory_mib),
                             nvmlDeviceGetHandleByIndex=lambda index: ("handle", index))
    module.nvmlDeviceGetUUID = lambda handle: UUIDS[handle[1]].encode() if uuid_bytes else UUIDS[handle[1]]
    module.nvmlDeviceGetMemoryInfo = lambda handle: SimpleNamespace(used=memory_mib[handle[1]][0] * MIB,
                                                                    total=memory_mib[handle[1]][1] * MIB)
    return module


@pytest.mark.parametrize("cuda_visible, indexes", [
    (None, [0, 1, 2, 3]),                          # unset: every GPU
    ("", []),                                      # set empty: none
    ("2,0", [2, 0]),                               # indices, in CUDA's (reordered) order
    (f"{UUIDS[3]},{UUIDS[1]}", [3, 1]),            # UUIDs, reordered
    (f" {UUIDS[2]} , 0", [2, 0]),                  # mixed, spaces
    ("GPU-5e6f", [1]),                             # a unique prefix
    ("GPU-9c0d", []),                              # an ambiguous prefix names no GPU
    ("1,7,2", [1]),                                # CUDA stops at the first entry naming no GPU
    ("1,1", [1]),                                  # and at a repeat
    ("MIG-1234,0", []),                            # a MIG instance is not a whole GPU NVML lists
])
def test_visible_gpus_map_cuda_order_onto_nvml_by_uuid(cuda_visible, indexes):
    assert [gpu.index for gpu in visible_gpus(cuda_visible, NODE)] == indexes


def test_nvml_memory_samples_exactly_the_visible_gpus(monkeypatch):
    """Ray hands the life GPUs 3 and 1 by UUID: gpu.csv has those two, summed; 0 and 2 are not read."""
    module = fake_pynvml([(1.0, 100.0), (20.0, 100.0), (300.0, 1000.0), (4000.0, 8000.0)], uuid_bytes=True)
    monkeypatch.setitem(sys.modules, "pynvml", module)
    source = NvmlMemory(cuda_visible=f"{UUIDS[3]},{UUIDS[1]}")
    assert [gpu.uuid for gpu in source.gpus] == [UUIDS[3], UUIDS[1]]
    assert source.columns == ("t_s", "used_mib", "total_mib", "gpu3_used_mib", "gpu3_total_mib",
                              "gpu1_used_mib", "gpu1_total_mib")
    reading = source.read()
    assert (reading.used_mib, reading.total_mib) == (4020.0, 8100.0)
    assert [g.index for g in reading.gpus] == [3, 1]


def test_nvml_memory_with_no_visible_gpu_says_why(monkeypatch):
    module = fake_pynvml([(1.0, 100.0)])
    monkeypatch.setitem(sys.modules, "pynvml", module)
    source = NvmlMemory(cuda_visible="GPU-ffff")
    assert source.read() is None
    assert source.unavailable_reason == "NVML found no GPU among CUDA_VISIBLE_DEVICES=GPU-ffff"
