"""A server life on a Ray worker node: the same life code as a local one (life/life.py), in a scratch run folder
on that node, its files packed to go back to the driver (pool.py), which writes them into the run folder.

The life's server and Locust run on the node Ray placed the slot on: Locust drives 127.0.0.1 there, the
server's and web ports are chosen free on that node, and the node's own watchdog (life/reaper.py), one per slot,
stops both and removes the slot's scratch folder should the slot's process die (the driver interrupted and
the slot killed, or Ray stopping it). CPU placement is off on a worker: lives share its CPUs through Ray's
accounting (life.placement.slot_placement). The driver sends the slot's pre-flight turn with the life
(life/preflight_turn.py) and gets it back, run or still due. A life that raises still sends back what it wrote (the repeats it
finished), the error said. The files stay on the node until the driver has pulled them (files.py).
This module imports Ray only to ask where it runs.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ...config import ResolvedServer, SweepConfig
from ...telemetry.visible_gpus import VISIBLE_ENV, nvml_visible
from ...vllm.knob import Setting
from ...vllm.probe import Capabilities
from ..life import reaper
from .files import pack, read_chunk
from .nodes import NodeFacts, node_facts
from ..life.life import run_server_life
from ..life.preflight import PreflightError
from ..life.preflight_turn import PreflightTurn

ARCHIVE = "files.tar.gz"


@dataclass(frozen=True)
class LifeOrder:
    """What the driver sends a slot: one server life (one repeat, or every repeat of a same-server life)."""

    config: SweepConfig
    caps: Capabilities
    setting: Setting
    repeats: list[int]
    server: ResolvedServer
    turn: PreflightTurn      # the placement to run on, and whether this life runs the pre-flight
    # per life key, its purpose in the driver's plan.json (the node's scratch run folder holds none): a capacity
    # probe may end early there too (life/probe_watch.py)
    purposes: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LifeFiles:
    """What comes back: where the slot packed the life folders (and the pre-flight's files), relative to the run
    folder, for the driver to pull (SlotWorker.chunk), and what the life said."""

    archive: str
    size: int
    said: list[str] = field(default_factory=list)
    turn: PreflightTurn | None = None   # the order's turn as the life left it (the pre-flight ran, or is due)
    preflight_error: str = ""
    error: str = ""          # the life code raised (a bug): lives not finished fail with it


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
    """The body of a Ray actor holding one life's GPUs and CPUs (slots.py makes it remote); one life at a time."""

    def __init__(self) -> None:
        self._scratch: Path | None = None

    def where(self) -> Where:
        import ray

        context = ray.get_runtime_context()
        return Where(ray.util.get_node_ip_address(), context.get_node_id(), gpus_here(os.environ.get(VISIBLE_ENV)))

    def pid(self) -> int:
        return os.getpid()

    def facts(self, server: ResolvedServer, paths: dict[str, str], probe: str) -> NodeFacts:
        where = self.where()
        return node_facts(f"{where.node}/{where.node_id[:8]}", where.slot, server, paths, probe)

    def run(self, order: LifeOrder) -> LifeFiles:
        self.release()
        where = self.where()
        reaper.start_watchdog(f"watchdog of a Ray slot on {where.node}")  # lives as long as this process
        self._scratch = Path(tempfile.mkdtemp(prefix="lookahead-life-"))
        reaper.remove_at_exit(self._scratch)
        return run_here(order, where, self._scratch)

    def chunk(self, offset: int) -> bytes:
        """The next part of the last life's archive (the driver pulls it a chunk at a time)."""
        return read_chunk(self._scratch / ARCHIVE, offset)

    def release(self) -> None:
        """The last life's files are in the run folder: its scratch folder goes."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None


def run_here(order: LifeOrder, where: Where, scratch: Path) -> LifeFiles:
    """Run the life into a run folder under `scratch` on this node; pack what it wrote, whatever happened."""
    said: list[str] = []
    run_dir = scratch / "run"
    run_dir.mkdir()
    turn = PreflightTurn(order.turn.due, order.turn.placement)
    preflight_error = error = ""
    try:
        run_server_life(order.config, order.caps, order.setting, order.repeats, run_dir, said.append, order.server,
                        placement=turn.placement,
                        preflight=turn.step(order.config, run_dir, said.append, order.server.load_env),
                        where=where.status_fields(), purposes=order.purposes)
    except PreflightError as err:
        preflight_error = str(err)
    except Exception as err:  # a bug in the life code: the repeats it finished come back all the same
        error = (f"{type(err).__name__}: {err}".strip().splitlines() or [type(err).__name__])[0]
    archive = scratch / ARCHIVE
    return LifeFiles(str(archive), pack(run_dir, archive), said, turn, preflight_error, error)
