"""Memory sources: NVML per GPU and per server process (a fake pynvml module), DCGM per GPU."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import types
from types import SimpleNamespace

import psutil
import pytest

from lookahead_runner.telemetry import memory as memory_module
from lookahead_runner.telemetry import prometheus
from lookahead_runner.telemetry.memory import (BASE_COLUMNS, DcgmMemory, GpuMemory, MemoryReading, NvmlMemory,
                                               ProcessMemory, open_memory_source, parse_dcgm, reading_cells,
                                               server_gpus_env)

MIB = 1024 * 1024
NVML_COLUMNS = ("t_s", "used_mib", "total_mib", "gpu0_used_mib", "gpu0_total_mib", "gpu1_used_mib",
                "gpu1_total_mib", "server_process_mib")


class FakeNvmlError(Exception):
    pass


def fake_pynvml(memory_mib, compute=None, graphics=None, init_error=None, failing=()):
    """A pynvml stand-in: memory_mib = [(used, total)] per GPU; compute/graphics = {gpu: [(pid, MiB or None)]};
    `failing` names functions that raise NVMLError."""
    module = types.ModuleType("pynvml")
    module.NVMLError = FakeNvmlError

    def guard(name):
        if name in failing:
            raise FakeNvmlError(f"{name}: Not Supported")

    def init():
        if init_error is not None:
            raise init_error
    module.nvmlInit = init
    module.nvmlShutdown = lambda: None
    module.nvmlDeviceGetCount = lambda: len(memory_mib)
    module.nvmlDeviceGetHandleByIndex = lambda index: ("handle", index)

    def memory_info(handle):
        guard("nvmlDeviceGetMemoryInfo")
        used, total = memory_mib[handle[1]]
        return SimpleNamespace(used=used * MIB, total=total * MIB, free=(total - used) * MIB)
    module.nvmlDeviceGetMemoryInfo = memory_info

    def listing(name, table):
        def processes(handle):
            guard(name)
            return [SimpleNamespace(pid=pid, usedGpuMemory=None if mib is None else mib * MIB,
                                    gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                    for pid, mib in (table or {}).get(handle[1], [])]
        return processes
    module.nvmlDeviceGetComputeRunningProcesses = listing("nvmlDeviceGetComputeRunningProcesses", compute)
    module.nvmlDeviceGetGraphicsRunningProcesses = listing("nvmlDeviceGetGraphicsRunningProcesses", graphics)
    return module


def install(monkeypatch, module) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", module)


@pytest.fixture(scope="module")
def server_tree():
    """A real 'server' process with one child of its own: (server pid, child pid)."""
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(60)\n")
    server = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([server.stdout], [], [], 20)
        assert ready, "the fake server did not start its child within 20 s"
        child_pid = int(server.stdout.readline())
        yield server.pid, child_pid
    finally:
        try:
            processes = [*psutil.Process(server.pid).children(recursive=True)]
        except psutil.Error:
            processes = []
        server.kill()
        server.wait(timeout=10)
        for proc in processes:  # orphaned now: init reaps them
            try:
                proc.kill()
            except psutil.Error:
                pass
        server.stdout.close()


def test_nvml_reports_each_gpu_and_the_server_process_tree(monkeypatch, server_tree):
    server_pid, child_pid = server_tree
    stranger = os.getpid()  # on the GPU, but not the server's: must not count
    install(monkeypatch, fake_pynvml(
        [(30_000.0, 80_000.0), (20_000.0, 80_000.0)],
        compute={0: [(server_pid, 1_000.0), (stranger, 500.0)], 1: [(child_pid, 2_000.0)]},
        graphics={1: [(child_pid, 2_000.0)]}))  # listed twice on GPU 1 (compute + graphics): counted once
    source = NvmlMemory(lambda: server_pid)
    assert source.unavailable_reason == ""
    assert source.columns == NVML_COLUMNS
    reading = source.read()
    assert reading == MemoryReading(50_000.0, 160_000.0,
                                    (GpuMemory(0, 30_000.0, 80_000.0), GpuMemory(1, 20_000.0, 80_000.0)), 3_000.0)


def test_nvml_pid_listed_per_instance_adds_up(monkeypatch, server_tree):
    server_pid, _ = server_tree
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], compute={0: [(server_pid, 100.0), (server_pid, 50.0)]},
                                     graphics={0: [(server_pid, 100.0)]}))
    assert NvmlMemory(lambda: server_pid).read().process_mib == 150.0


def test_nvml_process_memory_is_none_when_the_driver_hides_it(monkeypatch, server_tree):
    server_pid, child_pid = server_tree
    install(monkeypatch, fake_pynvml([(10.0, 100.0), (20.0, 100.0)],
                                     compute={0: [(server_pid, None)], 1: [(child_pid, None)]}))
    reading = NvmlMemory(lambda: server_pid).read()
    assert reading is not None and reading.process_mib is None
    assert (reading.used_mib, reading.total_mib) == (30.0, 200.0)
    assert "server_process_mib" not in reading_cells(reading)


def test_nvml_process_memory_is_none_when_no_pid_matches(monkeypatch, server_tree):
    """A server in a container: NVML lists pids of another namespace, none of them the server's."""
    server_pid, _ = server_tree
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], compute={0: [(os.getpid(), 5.0)]}))
    assert NvmlMemory(lambda: server_pid).read().process_mib is None
    assert NvmlMemory(lambda: None).read().process_mib is None  # no server process (yet)


def test_nvml_without_a_server_pid_has_no_process_column(monkeypatch):
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], compute={0: [(os.getpid(), 5.0)]}))
    source = NvmlMemory()  # the Locust web UI's use: no server process to attribute memory to
    assert source.columns == BASE_COLUMNS + ("gpu0_used_mib", "gpu0_total_mib")
    assert source.read().process_mib is None


def test_nvml_init_error_is_a_reason_not_a_crash(monkeypatch):
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], init_error=FakeNvmlError("Driver Not Loaded")))
    source = NvmlMemory(lambda: os.getpid())
    assert source.unavailable_reason == "NVML unavailable (FakeNvmlError: Driver Not Loaded)"
    assert source.columns == BASE_COLUMNS
    assert source.read() is None


def test_nvml_errors_while_reading_are_not_a_crash(monkeypatch, server_tree):
    server_pid, _ = server_tree
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], compute={0: [(server_pid, 4.0)]},
                                     failing={"nvmlDeviceGetMemoryInfo"}))
    assert NvmlMemory(lambda: server_pid).read() is None
    # a GPU that cannot list compute processes: the graphics list still counts
    install(monkeypatch, fake_pynvml([(10.0, 100.0)], compute={0: [(server_pid, 4.0)]},
                                     graphics={0: [(server_pid, 3.0)]},
                                     failing={"nvmlDeviceGetComputeRunningProcesses"}))
    assert NvmlMemory(lambda: server_pid).read().process_mib == 3.0


def test_open_memory_source_gives_nvml_the_server_pid(monkeypatch, tmp_path):
    install(monkeypatch, fake_pynvml([(1.0, 2.0), (3.0, 4.0)]))
    source = open_memory_source("auto", False, tmp_path / "sim.json", lambda: None)
    assert isinstance(source, NvmlMemory) and source.columns == NVML_COLUMNS
    install(monkeypatch, fake_pynvml([(1.0, 2.0)], init_error=FakeNvmlError("no driver")))
    fallback = open_memory_source("auto", False, tmp_path / "sim.json", lambda: None)
    assert isinstance(fallback, ProcessMemory) and fallback.columns == BASE_COLUMNS


def test_nvml_reads_the_gpus_server_env_gives_the_server(monkeypatch, tmp_path):
    """[server] env = {CUDA_VISIBLE_DEVICES = "1"}: the server runs on GPU 1 alone, so NVML sums GPU 1 alone, not
    every GPU of the node; without it in server.env, this process's variable (which the server inherits) counts."""
    install(monkeypatch, fake_pynvml([(1.0, 2.0), (3.0, 4.0)]))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    source = open_memory_source("nvml", False, tmp_path / "sim.json", None, server_env={"CUDA_VISIBLE_DEVICES": "1"})
    assert [gpu.index for gpu in source.gpus] == [1]
    assert (source.read().used_mib, source.read().total_mib) == (3.0, 4.0)
    inherited = open_memory_source("nvml", False, tmp_path / "sim.json", None, server_env={"OTHER": "x"})
    assert [gpu.index for gpu in inherited.gpus] == [0, 1]



def test_the_live_view_reads_the_gpus_the_server_env_gives_the_server(monkeypatch, tmp_path):
    """Locust's live view (live/webui.py) opens NvmlMemory() from its own environment: the runner hands it the
    server's CUDA_VISIBLE_DEVICES (server_gpus_env), so its GPU memory row sums the GPUs gpu.csv does."""
    install(monkeypatch, fake_pynvml([(1.0, 2.0), (3.0, 4.0)]))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)  # the runner sees both GPUs
    server_env = {"CUDA_VISIBLE_DEVICES": "1", "OTHER": "x"}
    assert server_gpus_env(server_env) == {"CUDA_VISIBLE_DEVICES": "1"} and server_gpus_env({"OTHER": "x"}) == {}
    for key, value in server_gpus_env(server_env).items():  # as Locust's environment holds it
        monkeypatch.setenv(key, value)
    live = NvmlMemory()
    assert [gpu.index for gpu in live.gpus] == [1]
    assert [gpu.index for gpu in live.gpus] == \
        [gpu.index for gpu in open_memory_source("nvml", False, tmp_path / "s.json", None, server_env=server_env).gpus]

DCGM_TEXT = """\
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-a",Hostname="h"} 30000
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-b",Hostname="h"} 20000
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-a",Hostname="h"} 49000
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-b",Hostname="h"} 59000
# TYPE DCGM_FI_DEV_FB_RESERVED gauge
DCGM_FI_DEV_FB_RESERVED{gpu="0",UUID="GPU-a",Hostname="h"} 1000
DCGM_FI_DEV_FB_RESERVED{gpu="1",UUID="GPU-b",Hostname="h"} 1000
"""


def test_dcgm_per_gpu_and_sums():
    reading = parse_dcgm(DCGM_TEXT)
    assert (reading.used_mib, reading.total_mib) == (50_000.0, 160_000.0)
    assert reading.gpus == (GpuMemory(0, 30_000.0, 80_000.0), GpuMemory(1, 20_000.0, 80_000.0))
    assert reading.process_mib is None


def test_dcgm_sample_without_gpu_label_counts_in_the_sums_only():
    text = ('DCGM_FI_DEV_FB_USED{gpu="3"} 10\nDCGM_FI_DEV_FB_FREE{gpu="3"} 90\n'
            'DCGM_FI_DEV_FB_USED{gpu="x"} 5\nDCGM_FI_DEV_FB_USED 7\nDCGM_FI_DEV_FB_FREE 3\n')
    reading = parse_dcgm(text)
    assert (reading.used_mib, reading.total_mib) == (22.0, 115.0)
    assert reading.gpus == (GpuMemory(3, 10.0, 100.0),)
    assert parse_dcgm('DCGM_FI_DEV_FB_FREE{gpu="0"} 90\n') is None


def test_dcgm_columns_are_fixed_by_the_first_reading(monkeypatch):
    texts = iter([DCGM_TEXT, 'DCGM_FI_DEV_FB_USED{gpu="0"} 1\nDCGM_FI_DEV_FB_FREE{gpu="0"} 1\n'])
    monkeypatch.setattr(prometheus, "scrape", lambda url, *args, **kwargs: next(texts))
    source = DcgmMemory("http://dcgm:9400/metrics")
    assert source.columns == BASE_COLUMNS
    source.read()
    expected = NVML_COLUMNS[:-1]  # no process column: DCGM does not see the server's pids
    assert source.columns == expected
    assert source.read().gpus == (GpuMemory(0, 1.0, 2.0),)
    assert source.columns == expected


def test_dcgm_unreachable_is_no_reading(monkeypatch):
    def refused(url, *args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")
    monkeypatch.setattr(prometheus, "scrape", refused)
    source = DcgmMemory("http://dcgm:9400/metrics")
    assert source.read() is None and source.columns == BASE_COLUMNS
    assert memory_module.DcgmMemory("").unavailable_reason
