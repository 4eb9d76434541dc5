"""A server life on a Ray worker node: the same life code as a local one (life.py), in a scratch run folder
on that node, its files packed to go back to the driver (cluster.py), which writes them into the run folder.

The life's server and Locust run on the node Ray placed the slot on: Locust drives 127.0.0.1 there, the
server's and web ports are chosen free on that node, and the node's own watchdog (reaper.py) stops both
should the slot's process die (the driver interrupted and the slot killed, or Ray stopping it). CPU
placement is off on a worker: lives share its CPUs through Ray's accounting (cluster.cpus_per_life), and a
pinned CPU list of the driver's machine means nothing there. This module imports Ray only to ask where it
runs.
"""
from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ResolvedServer, SweepConfig
from ..telemetry.visible_gpus import VISIBLE_ENV, nvml_visible
from ..vllm.knob import Setting
from ..vllm.probe import Capabilities
from . import reaper
from .cluster_nodes import NodeFacts, node_facts
from .life import died, run_server_life
from .placement import Placement
from .preflight import PreflightError, run_preflight


@dataclass(frozen=True)
class LifeOrder:
    """What the driver sends a slot: one server life (one repeat, or every repeat of a same-server life)."""

    config: SweepConfig
    caps: Capabilities
    setting: Setting
    repeats: list[int]
    server: ResolvedServer
    processes: int           # Locust processes (the driver's placement, after its pre-flight)
    preflight: bool = False  # the sweep's first life runs the pre-flight


@dataclass(frozen=True)
class LifeFiles:
    """What comes back: the life folders (and the pre-flight's files) packed relative to the run folder."""

    archive: bytes
    said: list[str] = field(default_factory=list)
    processes: int = 1
    preflight_error: str = ""


@dataclass(frozen=True)
class Where:
    """Where a slot runs: its node and the GPUs Ray gave it (NVML UUIDs; Ray's ids where NVML sees none)."""

    node: str
    node_id: str
    gpus: tuple[str, ...]

    @property
    def slot(self) -> str:
        """The node's IP and Ray id (nodes may share an IP), and its GPUs."""
        return f"{self.node}/{self.node_id[:8]} [{', '.join(self.gpus) or 'no GPU'}]"

    def status_fields(self) -> dict:
        return {"node": self.node, "gpus": list(self.gpus), "slot": self.slot}


def gpus_here(cuda_visible: str | None, pynvml=None) -> tuple[str, ...]:
    """This process's GPUs as UUIDs (CUDA_VISIBLE_DEVICES mapped onto NVML), or "ray-gpu:ID" per visible id
    where NVML sees none (a local Ray given GPU slots without GPUs)."""
    _, found = nvml_visible(cuda_visible, pynvml)
    if found:
        return tuple(gpu.uuid or f"nvml:{gpu.index}" for gpu in found)
    return tuple(f"ray-gpu:{part.strip()}" for part in (cuda_visible or "").split(",") if part.strip())


class SlotWorker:
    """The body of a Ray actor holding one life's GPUs and CPUs (cluster.py makes it remote); one life at a time."""

    def where(self) -> Where:
        import ray

        context = ray.get_runtime_context()
        return Where(ray.util.get_node_ip_address(), context.get_node_id(), gpus_here(os.environ.get(VISIBLE_ENV)))

    def pid(self) -> int:
        return os.getpid()

    def facts(self, server: ResolvedServer, paths: dict[str, str], full_probe: bool) -> NodeFacts:
        where = self.where()
        return node_facts(f"{where.node}/{where.node_id[:8]}", server, paths, full_probe)

    def run(self, order: LifeOrder) -> LifeFiles:
        return run_here(order, self.where())


def run_here(order: LifeOrder, where: Where) -> LifeFiles:
    """Run the life into a scratch folder on this node under its own watchdog; pack what it wrote."""
    said: list[str] = []
    placement = Placement("off", processes=order.processes)
    with tempfile.TemporaryDirectory(prefix="lookahead-life-") as scratch:
        run_dir = Path(scratch)
        resized = [placement]

        def preflight(served, current: Placement) -> Placement:
            alive = (lambda: "") if served.external else (
                lambda: "" if served.server.alive() else died(served.server, "the pre-flight"))
            resized.append(run_preflight(order.config, served.base_url, current, run_dir, said.append,
                                         order.server.load_env, alive))
            return resized[-1]

        error = ""
        with reaper.watchdog(f"watchdog of a life on {where.node}"):
            try:
                run_server_life(order.config, order.caps, order.setting, order.repeats, run_dir, said.append,
                                order.server, placement=placement, preflight=preflight if order.preflight else None,
                                where=where.status_fields())
            except PreflightError as err:
                error = str(err)
        return LifeFiles(pack(run_dir), said, resized[-1].processes, error)


def pack(run_dir: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path in sorted(run_dir.iterdir()):
            archive.add(path, arcname=path.name)
    return buffer.getvalue()


def unpack(archive: bytes, run_dir: Path, life_dirs: list[str]) -> None:
    """The life folders replace what the run folder had of them (a "running" status, a cut run's files);
    the pre-flight's files join it. Nothing lands outside the run folder (tarfile's data filter)."""
    for life_dir in life_dirs:
        shutil.rmtree(run_dir / life_dir, ignore_errors=True)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as files:
        files.extractall(run_dir, filter="data")
