"""Memory readings of the serving device: NVML, the simulator's NVML-like file, process RSS, DCGM.

Every source answers `read() -> MemoryReading | None`; a source that cannot read says why in
`unavailable_reason` instead of raising, so a missing source is a line in the report, not a crash.
Every source also names the gpu.csv columns it fills in `columns`; it is fixed by the first
successful reading at the latest (DCGM learns its GPUs then), so a life's gpu.csv keeps one header.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..contracts.records import SIM_GPU_FILE_ENV
from .visible_gpus import VISIBLE_ENV, NvmlGpu, nvml_gpus, visible_gpus

MIB = 1024 * 1024
BASE_COLUMNS = ("t_s", "used_mib", "total_mib")
PROCESS_COLUMN = "server_process_mib"


@dataclass(frozen=True)
class GpuMemory:
    index: int
    used_mib: float
    total_mib: float


@dataclass(frozen=True)
class MemoryReading:
    """used/total are sums over the GPUs (what stability, analysis and the decision use); `gpus` and
    `process_mib` are detail a source may add. process_mib: device memory of the server's process
    tree, None when the source cannot see it."""

    used_mib: float
    total_mib: float
    gpus: tuple[GpuMemory, ...] = ()
    process_mib: float | None = None


def gpu_columns(indexes, with_process: bool) -> tuple[str, ...]:
    """gpu.csv's header: the sums, then used/total per GPU, then the server process's memory."""
    per_gpu = tuple(f"gpu{index}_{kind}_mib" for index in indexes for kind in ("used", "total"))
    return BASE_COLUMNS + per_gpu + ((PROCESS_COLUMN,) if with_process else ())


def reading_cells(reading: MemoryReading) -> dict[str, float]:
    """A reading as gpu.csv cells by column name (no t_s); a column missing here is an empty cell."""
    cells = {"used_mib": round(reading.used_mib, 1), "total_mib": round(reading.total_mib, 1)}
    for gpu in reading.gpus:
        cells[f"gpu{gpu.index}_used_mib"] = round(gpu.used_mib, 1)
        cells[f"gpu{gpu.index}_total_mib"] = round(gpu.total_mib, 1)
    if reading.process_mib is not None:
        cells[PROCESS_COLUMN] = round(reading.process_mib, 1)
    return cells


def process_tree_pids(pid) -> set[int]:
    """The pid and all its descendants; empty when there is no such process (yet, or any more)."""
    if not pid:
        return set()
    try:
        root = psutil.Process(pid)
        return {root.pid, *(child.pid for child in root.children(recursive=True))}
    except psutil.Error:
        return set()


class NvmlMemory:
    """Used/total memory of each NVIDIA GPU this process may use (CUDA_VISIBLE_DEVICES, mapped by UUID:
    visible_gpus.py) and their sums (nvidia-ml-py), and, given the server's pid, the device memory NVML
    attributes to the server's process tree. gpu.csv's columns carry NVML's index of each GPU."""

    name = "nvml"

    def __init__(self, pid_of_server=None, cuda_visible: str | None = None) -> None:
        self.unavailable_reason = ""
        self.columns = BASE_COLUMNS
        self._pid_of_server = pid_of_server
        self._handles: list = []
        self.gpus: list[NvmlGpu] = []
        cuda_visible = os.environ.get(VISIBLE_ENV) if cuda_visible is None else cuda_visible
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            self.gpus = visible_gpus(cuda_visible, nvml_gpus(pynvml))
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(gpu.index) for gpu in self.gpus]
            if not self._handles:
                self.unavailable_reason = "NVML found no GPU" + (
                    f" among {VISIBLE_ENV}={cuda_visible}" if cuda_visible is not None else "")
        except Exception as err:  # the NVML library or driver is missing: a normal case on CPU hosts
            self.unavailable_reason = f"NVML unavailable ({type(err).__name__}: {err})"
        if not self.unavailable_reason:
            self.columns = gpu_columns([gpu.index for gpu in self.gpus], pid_of_server is not None)

    def read(self) -> MemoryReading | None:
        if self.unavailable_reason:
            return None
        nvml = self._pynvml
        try:
            infos = [nvml.nvmlDeviceGetMemoryInfo(handle) for handle in self._handles]
        except nvml.NVMLError:  # a GPU lost or a driver reset: no reading this time, not a crash
            return None
        gpus = tuple(GpuMemory(gpu.index, info.used / MIB, info.total / MIB) for gpu, info in zip(self.gpus, infos))
        process_mib = self._process_mib() if self._pid_of_server is not None else None
        return MemoryReading(sum(g.used_mib for g in gpus), sum(g.total_mib for g in gpus), gpus, process_mib)

    def _process_mib(self) -> float | None:
        """None when NVML lists none of the tree's pids with a known usage: a server in a container has
        its own PID namespace, and some drivers report usedGpuMemory as not available."""
        pids = process_tree_pids(self._pid_of_server())
        if not pids:
            return None
        nvml = self._pynvml
        total, seen = 0, False
        for handle in self._handles:
            by_pid: dict[int, int] = {}
            for listing in (nvml.nvmlDeviceGetComputeRunningProcesses, nvml.nvmlDeviceGetGraphicsRunningProcesses):
                try:
                    found = _usage_by_pid(listing(handle), pids)
                except nvml.NVMLError:  # not supported on this GPU or driver
                    continue
                # a process with compute and graphics contexts is in both lists, with the same memory
                for pid, used in found.items():
                    by_pid[pid] = max(by_pid.get(pid, 0), used)
            total += sum(by_pid.values())
            seen = seen or bool(by_pid)
        return total / MIB if seen else None


def _usage_by_pid(procs, pids: set[int]) -> dict[int, int]:
    """Bytes per pid of `pids` listed with a known usage; summed should one pid be listed more than once (once
    per MIG instance it uses)."""
    usage: dict[int, int] = {}
    for proc in procs:
        if proc.pid in pids and proc.usedGpuMemory is not None:
            usage[proc.pid] = usage.get(proc.pid, 0) + proc.usedGpuMemory
    return usage


class SimMemory:
    """The simulated server's NVML-like reading, a JSON file it rewrites every ~100 ms."""

    name = "sim"
    columns = BASE_COLUMNS

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.unavailable_reason = ""

    def read(self) -> MemoryReading | None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            return MemoryReading(float(data["used_mib"]), float(data["total_mib"]))
        except (OSError, ValueError, KeyError):
            return None


class ProcessMemory:
    """RSS of the server's process tree: the memory a CPU build of vLLM uses."""

    name = "process"
    columns = BASE_COLUMNS

    def __init__(self, pid_of_server) -> None:
        self._pid_of_server = pid_of_server
        self.unavailable_reason = ""

    def read(self) -> MemoryReading | None:
        pid = self._pid_of_server()
        if not pid:
            return None
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return None
        used = 0
        for proc in procs:
            try:
                used += proc.memory_info().rss
            except psutil.Error:
                continue
        return MemoryReading(used / MIB, psutil.virtual_memory().total / MIB)


class DcgmMemory:
    """Framebuffer memory from a DCGM exporter's /metrics (for a server on another host)."""

    name = "dcgm"

    def __init__(self, url: str) -> None:
        self.url = url
        self.unavailable_reason = "" if url else "memory_source = \"dcgm\" needs server.dcgm_url"
        self.columns = BASE_COLUMNS
        self._columns_fixed = False

    def read(self) -> MemoryReading | None:
        if not self.url:
            return None
        from .prometheus import scrape

        try:
            reading = parse_dcgm(scrape(self.url))
        except (OSError, ValueError):
            return None
        if reading is not None and not self._columns_fixed:
            self.columns = gpu_columns([gpu.index for gpu in reading.gpus], with_process=False)
            self._columns_fixed = True
        return reading


_FB = ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")


def parse_dcgm(text: str) -> MemoryReading | None:
    """DCGM_FI_DEV_FB_USED/FREE/RESERVED (MiB per GPU), summed over GPUs, and per GPU by the `gpu`
    label (a sample without a numeric one counts in the sums only)."""
    from prometheus_client.parser import text_string_to_metric_families

    sums = dict.fromkeys(_FB, 0.0)
    per_gpu: dict[int, dict[str, float]] = {}
    used_seen: set[int] = set()  # GPUs with a USED sample: only they get per-GPU detail
    seen = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name not in sums:
                continue
            value = float(sample.value)
            sums[sample.name] += value
            seen = seen or sample.name == _FB[0]
            label = str(sample.labels.get("gpu", "")).strip()
            if label.isdecimal():
                per_gpu.setdefault(int(label), dict.fromkeys(_FB, 0.0))[sample.name] += value
                if sample.name == _FB[0]:
                    used_seen.add(int(label))
    if not seen:
        return None
    gpus = tuple(GpuMemory(index, fb[_FB[0]], sum(fb.values())) for index, fb in sorted(per_gpu.items())
                 if index in used_seen)
    return MemoryReading(sums[_FB[0]], sum(sums.values()), gpus)


class NoMemory:
    name = "none"
    columns = BASE_COLUMNS

    def __init__(self, reason: str = "memory sampling switched off (server.memory_source = \"none\")") -> None:
        self.unavailable_reason = reason

    def read(self) -> MemoryReading | None:
        return None


def open_memory_source(kind: str, is_simulator: bool, sim_file: Path, pid_of_server, dcgm_url: str = "",
                       server_env: dict[str, str] | None = None):
    """auto: the simulator's file for the simulator, DCGM when a URL is given, NVML when a GPU is
    visible, else process RSS. NVML reads the GPUs the server sees: CUDA_VISIBLE_DEVICES of its environment
    overlay (`server_env`, server.env), else this process's, which the server inherits."""
    if kind == "none":
        return NoMemory()
    if kind == "dcgm" or (kind == "auto" and dcgm_url):
        return DcgmMemory(dcgm_url)
    if kind == "sim" or (kind == "auto" and is_simulator):
        return SimMemory(sim_file)
    if kind in ("nvml", "auto"):
        nvml = NvmlMemory(pid_of_server, (server_env or {}).get(VISIBLE_ENV))
        if kind == "nvml" or not nvml.unavailable_reason:
            return nvml
    return ProcessMemory(pid_of_server)


def server_gpus_env(server_env: dict[str, str]) -> dict[str, str]:
    """CUDA_VISIBLE_DEVICES of the server's environment overlay, for Locust's environment: its live view reads GPU
    memory through NVML (NvmlMemory() there), which must sum the server's GPUs, as open_memory_source does."""
    return {VISIBLE_ENV: server_env[VISIBLE_ENV]} if VISIBLE_ENV in server_env else {}


def sim_file_env(sim_file: Path) -> dict[str, str]:
    return {SIM_GPU_FILE_ENV: os.fspath(sim_file)}


def wait_memory_stable(source, band_mib: float, window_s: float, timeout_s: float,
                       poll_s: float = 0.2, alive=lambda: True,
                       history: list[tuple[float, float]] | None = None) -> tuple[bool, float]:
    """Wait until readings stay within `band_mib` for `window_s`. Returns (stable, seconds waited).

    `history` holds (monotonic time, MiB) readings taken while the server was starting, so memory
    that settled before /health answered needs no second wait. A source that cannot read counts
    as stable at once: there is nothing to wait for.
    """
    import time

    started = time.monotonic()
    window: list[tuple[float, float]] = list(history or [])
    while time.monotonic() - started < timeout_s and alive():
        reading = source.read()
        now = time.monotonic()
        if reading is None:
            if source.unavailable_reason or now - started > 2.0:
                return True, now - started
        else:
            window.append((now, reading.used_mib))
            window = [(t, v) for t, v in window if now - t <= window_s + poll_s * 1.5]
            values = [v for _, v in window]
            if window[0][0] <= now - window_s + poll_s * 1.5 and max(values) - min(values) <= band_mib:
                return True, now - started
        time.sleep(poll_s)
    return False, time.monotonic() - started
