"""The NVML memory path on a real NVIDIA GPU: what `server.memory_source = "nvml"` (or "auto" on a GPU
host) reads while a server's process tree holds device memory.

The "server" is a parent process whose child allocates device memory through the CUDA driver API
(ctypes on libcuda, no framework), in steps the test drives: as vLLM's API server and its EngineCore
child are. Skipped where NVML finds no GPU or libcuda is missing (CI, the CPU machines); run on a GPU
host with `python -m pytest -o addopts="" tests/gpu -q -s` (prints the figures it measured).
"""
from __future__ import annotations

import ctypes.util
import http.server
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lookahead_runner.telemetry.memory import NvmlMemory, open_memory_source, wait_memory_stable
from lookahead_runner.telemetry.sampler import Sampler


def _no_gpu() -> str:
    memory = NvmlMemory()
    if memory.unavailable_reason:
        return memory.unavailable_reason
    if not ctypes.util.find_library("cuda"):
        return "no libcuda (the CUDA driver library) to allocate device memory with"
    return ""


NO_GPU = _no_gpu()
pytestmark = pytest.mark.skipif(bool(NO_GPU), reason=f"needs an NVIDIA GPU: {NO_GPU}")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "vllm-0.32.0-cpu"
STEPS_MIB = (2048, 1024)  # the child's allocations, one per "go" line on its stdin
CONTEXT_MAX_MIB = 1024    # a CUDA context's own device memory (~500 MiB on current drivers), at most

# The child: a primary context on GPU 0, then one cuMemAlloc per step, each after a line on stdin.
ALLOCATOR = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(rc, what):
    if rc != 0:
        sys.exit(f"{what} failed: CUresult {rc}")
check(cuda.cuInit(0), "cuInit")
device, ctx = ctypes.c_int(), ctypes.c_void_p()
check(cuda.cuDeviceGet(ctypes.byref(device), 0), "cuDeviceGet")
check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device), "cuDevicePrimaryCtxRetain")
check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
held = []
print("context", flush=True)
for step in sys.argv[1:]:
    sys.stdin.readline()
    pointer = ctypes.c_uint64()
    check(cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(int(step) << 20)), "cuMemAlloc")
    held.append(pointer)
    print("allocated", step, flush=True)
sys.stdin.readline()
"""
# The parent: holds no context, starts the allocator as its child and waits for it.
PARENT = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
sys.exit(child.wait())
"""


class ServerTree:
    """The parent and its allocating child, driven one step at a time."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", PARENT, ALLOCATOR, *map(str, STEPS_MIB)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._line() == "context"

    def _line(self) -> str:
        line = self.proc.stdout.readline().strip()
        assert line, f"the allocator ended (exit {self.proc.poll()})"
        return line

    def allocate_next(self) -> None:
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        assert self._line().startswith("allocated")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.write("\n" * (len(STEPS_MIB) + 1))
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)


@pytest.fixture
def tree():
    server = ServerTree()
    yield server
    server.close()


@pytest.fixture
def metrics_url():
    """A /metrics that answers with real vLLM 0.32 output, for the sampler's other half."""
    body = (FIXTURES / "metrics-specdecode.txt").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/metrics"
    server.shutdown()


def test_auto_picks_nvml_and_attributes_the_childs_memory_to_the_server(tree, tmp_path, metrics_url):
    memory = open_memory_source("auto", False, tmp_path / "unused", lambda: tree.proc.pid)
    assert isinstance(memory, NvmlMemory) and not memory.unavailable_reason
    assert memory.columns[-1] == "server_process_mib" and "gpu0_used_mib" in memory.columns

    before = memory.read()
    tree.allocate_next()
    first = memory.read()
    assert first.total_mib > 1024 and first.gpus[0].total_mib > 1024
    # the context alone is listed for the child's pid; after the first step it holds the step too
    assert STEPS_MIB[0] <= first.process_mib <= STEPS_MIB[0] + CONTEXT_MAX_MIB, first
    assert first.used_mib - before.used_mib >= STEPS_MIB[0] - 64, (before, first)

    # the second step lands while the stability wait watches, which sees it and settles after it
    threading.Timer(0.5, tree.allocate_next).start()
    stable, waited_s = wait_memory_stable(memory, band_mib=64, window_s=1.5, timeout_s=20, poll_s=0.1)
    after = memory.read()
    assert stable and waited_s >= 1.5, waited_s
    assert after.process_mib - first.process_mib == pytest.approx(STEPS_MIB[1], abs=64), (first, after)

    # the sampler writes both halves: vLLM's metrics and the per-GPU and per-process memory
    with Sampler(metrics_url, memory, tmp_path, interval_s=0.2):
        time.sleep(1.0)
    rows = (tmp_path / "gpu.csv").read_text().splitlines()
    header, last = rows[0].split(","), dict(zip(rows[0].split(","), rows[-1].split(",")))
    assert header == list(memory.columns) and len(rows) >= 5, rows
    assert float(last["server_process_mib"]) == pytest.approx(after.process_mib, abs=64)
    assert (tmp_path / "server_metrics.csv").read_text().count("\n") >= 5

    reads_ms = []
    for _ in range(200):
        started = time.perf_counter()
        memory.read()
        reads_ms.append((time.perf_counter() - started) * 1000)
    reads_ms.sort()
    print(f"\nNVML on {len(after.gpus)} GPU(s), {after.total_mib:.0f} MiB total: context+steps "
          f"{first.process_mib:.0f} -> {after.process_mib:.0f} MiB for the server tree; device used "
          f"{before.used_mib:.0f} -> {after.used_mib:.0f} MiB; stable after {waited_s:.2f} s; "
          f"one read (memory info + process lists) p50 {reads_ms[100]:.2f} ms, max {reads_ms[-1]:.2f} ms")

    tree.close()
    deadline = time.monotonic() + 10
    while memory.read().process_mib is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert memory.read().process_mib is None, "memory of a server that ended is still attributed to it"


def test_memory_of_processes_outside_the_tree_is_not_the_servers(tree):
    """Another process on the GPU (a second server, a notebook) moves `used_mib`, not the server's share."""
    idle_server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        memory = NvmlMemory(pid_of_server=lambda: idle_server.pid)
        tree.allocate_next()
        reading = memory.read()
        assert reading.process_mib is None, reading
        assert reading.used_mib >= STEPS_MIB[0]
    finally:
        idle_server.kill()
        idle_server.wait(timeout=5)
