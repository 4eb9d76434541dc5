"""Memory readings of the serving device: NVML, the simulator's NVML-like file, process RSS.

Every source answers `read() -> MemoryReading | None`; a source that cannot read says why in
`unavailable_reason` instead of raising, so a missing source is a line in the report, not a crash.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

MIB = 1024 * 1024


@dataclass(frozen=True)
class MemoryReading:
    used_mib: float
    total_mib: float


class NvmlMemory:
    """Used/total memory summed over the visible NVIDIA GPUs (nvidia-ml-py)."""

    name = "nvml"

    def __init__(self) -> None:
        self.unavailable_reason = ""
        self._handles: list = []
        try:
            import pynvml

            pynvml.nvmlInit()
            self._pynvml = pynvml
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
            if not self._handles:
                self.unavailable_reason = "NVML found no GPU"
        except Exception as err:  # the NVML library or driver is missing: a normal case on CPU hosts
            self.unavailable_reason = f"NVML unavailable ({type(err).__name__}: {err})"

    def read(self) -> MemoryReading | None:
        if self.unavailable_reason:
            return None
        used = total = 0.0
        for handle in self._handles:
            info = self._pynvml.nvmlDeviceGetMemoryInfo(handle)
            used += info.used / MIB
            total += info.total / MIB
        return MemoryReading(used, total)


class SimMemory:
    """The simulated server's NVML-like reading, a JSON file it rewrites every ~100 ms."""

    name = "sim"

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

    def read(self) -> MemoryReading | None:
        if not self.url:
            return None
        from .prometheus import scrape

        try:
            return parse_dcgm(scrape(self.url))
        except (OSError, ValueError):
            return None


def parse_dcgm(text: str) -> MemoryReading | None:
    """DCGM_FI_DEV_FB_USED/FREE/RESERVED (MiB per GPU), summed over GPUs."""
    from prometheus_client.parser import text_string_to_metric_families

    sums = {"DCGM_FI_DEV_FB_USED": 0.0, "DCGM_FI_DEV_FB_FREE": 0.0, "DCGM_FI_DEV_FB_RESERVED": 0.0}
    seen = False
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in sums:
                sums[sample.name] += float(sample.value)
                seen = seen or sample.name == "DCGM_FI_DEV_FB_USED"
    if not seen:
        return None
    used = sums["DCGM_FI_DEV_FB_USED"]
    return MemoryReading(used, used + sums["DCGM_FI_DEV_FB_FREE"] + sums["DCGM_FI_DEV_FB_RESERVED"])


class NoMemory:
    name = "none"

    def __init__(self, reason: str = "memory sampling switched off (server.memory_source = \"none\")") -> None:
        self.unavailable_reason = reason

    def read(self) -> MemoryReading | None:
        return None


def open_memory_source(kind: str, is_simulator: bool, sim_file: Path, pid_of_server, dcgm_url: str = ""):
    """auto: the simulator's file for the simulator, DCGM when a URL is given, NVML when a GPU is
    visible, else process RSS."""
    if kind == "none":
        return NoMemory()
    if kind == "dcgm" or (kind == "auto" and dcgm_url):
        return DcgmMemory(dcgm_url)
    if kind == "sim" or (kind == "auto" and is_simulator):
        return SimMemory(sim_file)
    if kind in ("nvml", "auto"):
        nvml = NvmlMemory()
        if kind == "nvml" or not nvml.unavailable_reason:
            return nvml
    return ProcessMemory(pid_of_server)


def sim_file_env(sim_file: Path) -> dict[str, str]:
    return {"LOOKAHEAD_SIM_GPU_FILE": os.fspath(sim_file)}


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
