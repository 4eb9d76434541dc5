"""Server lives on a Ray cluster's slots, one each: start a life (or a same-server group) on a free slot, wait for
lives to end, pull their files into the run folder (files.py) and say how each ended. The grid
(slots.RaySlots.run_groups) and the adaptive sweep (strategies.life_pool.LifePool) submit to it. Every idle slot takes a
life at once: a slot whose pre-flight is due runs its own on that life (life/preflight_turn.py), holding no other.
Each slot's pre-flight files are kept in SLOT_PREFLIGHTS/<n>-<slot>/ (preflight.json is the last to come back);
one that stops the sweep collects the lives that have ended on the other slots (done is done) and marks those
still running not measured, for --resume to rerun.

A slot whose process dies or stops answering is let go (ray.kill, so that its node's watchdog stops the server and
Locust it ran, where the node is still there) and its lives fail: "node lost" once Ray declares the node dead,
"the Ray slot ... died" at once when Ray says its process died on a live node (ActorDiedError), "... stopped
answering" when the node is still alive NODE_DEATH_WAIT_S later. The driver does not wait for that verdict: the other slots' lives are
collected and new ones started meanwhile.
"""
from __future__ import annotations

import re
import shutil
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from ...config import ResolvedServer, SweepConfig
from ...runfolder import results
from ...runfolder.plan import read_status, record_cluster, write_status
from ...runfolder.preflight import PREFLIGHT_FILE, SLOT_PREFLIGHTS
from ...vllm.probe import Capabilities
from .files import receive
from .worker_life import LifeFiles, LifeOrder, Where
from .nodes import cause_line
from ..life.launch import Life
from ..life.life import Outcome, ended, left_to_run, not_measured
from ..life.preflight import PreflightError
from ..life.preflight_turn import PreflightTurn
from ..life.probe_watch import planned_purpose
from ..life.server import ServerError

NODE_LOST = "node lost"
ENDED = ("done", "failed", "skipped")
WAIT_S = 1.0              # ray.wait's timeout: the driver stays responsive to Ctrl-C
NODE_DEATH_WAIT_S = 60.0  # Ray declares a silent node dead after its health checks fail (~15-30 s by default)
CHUNK_WAIT_S = 120.0      # one chunk of a life's files (8 MiB); a slot silent longer is let go, as one that stops
#                           answering (a stuck slot on a node Ray still counts alive would hold the driver forever)


class ClusterError(ServerError):
    """The cluster cannot run the sweep (no slot, every slot lost): one line saying why and what to do."""


@dataclass
class Slot:
    actor: object
    where: Where
    ran: set = field(default_factory=set)   # the settings this slot has run (queue.next_for)
    turn: PreflightTurn | None = None       # its own pre-flight's turn: a copy of the sweep's at its first life


class Slots(Protocol):
    """What the pool needs of the sweep's slots (slots.RaySlots)."""

    slots: list[Slot]
    lost: list[str]

    def join_placed(self) -> list[Slot]: ...

    def let_go(self, slot: Slot) -> None: ...

    def record(self, run_dir: Path) -> None: ...


class SweepLives(Protocol):
    """What a life on a slot needs of the sweep (runner.LifeRunner)."""

    caps: Capabilities
    server: ResolvedServer
    preflight: PreflightTurn


@dataclass
class Started:
    slot: Slot
    group: list[Life]
    preflight: bool          # it was handed the pre-flight's turn


@dataclass
class Unanswered:
    """A life whose slot stopped answering: failed "node lost" once Ray declares its node dead, else at `deadline`."""

    started: Started
    cause: str
    deadline: float


@dataclass
class SlotPool:
    owner: Slots
    run_dir: Path
    lives: SweepLives
    tag: Callable[[Life], str]
    say: Callable[[str], None]
    progress: object
    idle: list[Slot]
    running: dict = field(default_factory=dict)   # Ray reference -> Started
    unanswered: list[Unanswered] = field(default_factory=list)

    @property
    def slots(self) -> int:
        return len(self.owner.slots)

    @property
    def busy(self) -> bool:
        return bool(self.running or self.unanswered)

    def free(self) -> int:
        """Lives that may start now: one per idle slot (a slot whose pre-flight is due runs it on its own life, so
        it holds no other slot)."""
        return len(self.idle)

    def take_in_joined(self) -> None:
        """The slots Ray placed since (their GPUs were held by another job) become idle; a ClusterError once every
        slot is lost."""
        joined = self.owner.join_placed()
        if joined:
            self.idle += joined
            self.owner.record(self.run_dir)
        if not self.owner.slots and not self.unanswered:
            raise ClusterError(f"every Ray slot was lost ({'; '.join(self.owner.lost)}): continue with --resume "
                               f"{self.run_dir} once the cluster is back")

    def start(self, config: SweepConfig, group: list[Life], slot: Slot) -> None:
        self.idle.remove(slot)
        if slot.turn is None:
            slot.turn = PreflightTurn(self.lives.preflight.due, self.lives.preflight.placement)
        turn = slot.turn
        order = LifeOrder(config, self.lives.caps, group[0].setting, [life.repeat for life in group], self.lives.server,
                          PreflightTurn(turn.due, turn.placement),
                          {life.key: planned_purpose(self.run_dir, life.key) for life in group})
        record_cluster(self.run_dir, handed_out=[life.key for life in group])
        for life in group:
            out = life_folder(self.run_dir, life)
            out.mkdir(parents=True, exist_ok=True)
            write_status(out, "running", **slot.where.status_fields(), t_start_s=round(time.time(), 3))
        slot.ran.add(group[0].setting)
        self.say(f"{self.tag(group[0])}: starting the server on {slot.where.slot}"
                 + (f" (with {', '.join(life.key for life in group[1:])})" if len(group) > 1 else ""))
        self.progress.life_started(group[0].key)
        self.running[slot.actor.run.remote(order)] = Started(slot, group, turn.due)

    def submit(self, config: SweepConfig, life: Life) -> None:
        """One life on a free slot that has not run its setting where there is one (queue.py's rule)."""
        if left_to_run([life], self.run_dir, self.tag, self.say, self.progress):
            self.start(config, [life], next((s for s in self.idle if life.setting not in s.ran), self.idle[0]))

    def in_flight(self) -> list[Life]:
        return ([life for started in self.running.values() for life in started.group]
                + [life for item in self.unanswered for life in item.started.group])

    def wait_some(self) -> list[list[Life]]:
        """The groups that end within WAIT_S (none, often), their files written; a slot lost is not free again. The
        slots placed since join."""
        import ray

        ended_groups = []
        if self.running:
            ready, _ = ray.wait(list(self.running), num_returns=1, timeout=WAIT_S)
            for ref in ready:
                started = self.running.pop(ref)
                try:
                    collected = self._collect(ref, started)
                except PreflightError as err:
                    self._cut_in_flight(f"the sweep stopped on {started.slot.where.slot}: {err}")
                    raise
                if collected:
                    ended_groups.append(started.group)
        elif self.unanswered:
            time.sleep(WAIT_S)
        ended_groups += self._settle_unanswered()
        self.take_in_joined()
        return ended_groups

    def wait(self) -> list[Life]:
        while self.busy:
            ended_groups = self.wait_some()
            if ended_groups:
                return [life for group in ended_groups for life in group]
        self.take_in_joined()  # none in flight: a ClusterError where no slot is left, so no caller waits forever
        return []

    def _collect(self, ref, started: Started) -> bool:
        """Write a finished life's files into the run folder; False when its slot was let go with no verdict yet."""
        import ray

        slot, group = started.slot, started.group
        try:
            files = ray.get(ref)
            others = self._pull(slot, files, group)
        except ray.exceptions.RayTaskError as err:  # the slot's code raised outside the life: a bug
            self._fail(group, slot, f"the life failed on {slot.where.node}: {cause_line(err)}")
            self.idle.append(slot)
            return True
        except ray.exceptions.RayError as err:  # its process died, or it does not answer (Ray 2.11: a system error)
            return self._let_go(started, err)
        except tarfile.TarError as err:
            self._fail(group, slot, f"the life's files from {slot.where.node} could not be unpacked: {err}")
            self.idle.append(slot)
            return True
        self.idle.append(slot)
        slot.actor.release.remote()
        for line in files.said:
            self.say(f"  [{group[0].key}] {line.strip()}")
        if started.preflight and files.turn is not None:
            slot.turn.taken_over(files.turn)  # ran there, or due still: the server died before it
        if started.preflight and {PREFLIGHT_FILE, "preflight"} & set(others):
            keep_slot_preflight(self.run_dir, slot)
        if files.preflight_error:  # no life was measured: each is run again by --resume; the caller stops the sweep
            not_measured(self.run_dir, group[0].setting, [life.repeat for life in group], files.preflight_error)
            raise PreflightError(files.preflight_error)
        for life in group:
            status = read_status(life_folder(self.run_dir, life))
            if status is None or status.state not in ENDED:
                why = (f"the life failed on {slot.where.node}: {files.error}" if files.error
                       else "the life's files did not come back")
                status = write_status(life_folder(self.run_dir, life), "failed", why, **slot.where.status_fields())
            ended(life, Outcome(status.state, status.reason), self.tag, self.say, self.progress)
        return True

    def _pull(self, slot: Slot, files: LifeFiles, group: list[Life]) -> list[str]:
        """The life's archive from the slot's node, a chunk at a time, into the run folder; the names of the entries
        other than the lives' (the pre-flight's files)."""
        import ray

        def chunk_at(offset: int) -> bytes:
            return ray.get(slot.actor.chunk.remote(offset), timeout=CHUNK_WAIT_S)

        return receive(chunk_at, files.size, self.run_dir, [life.key for life in group])

    def _cut_in_flight(self, why: str) -> None:
        """The sweep stops: the lives that have ended on the other slots are collected as they ended (their references
        ready, not read yet); those still running (killed on the way out) are not measured."""
        import ray

        ready = ray.wait(list(self.running), num_returns=len(self.running), timeout=0)[0] if self.running else []
        for ref in ready:
            try:
                self._collect(ref, self.running.pop(ref))
            except PreflightError:
                pass  # that slot's pre-flight stopped the sweep too: its lives are written not measured
        for started in [*self.running.values(), *(item.started for item in self.unanswered)]:
            not_measured(self.run_dir, started.group[0].setting, [life.repeat for life in started.group], why)
        self.running.clear()
        self.unanswered.clear()

    def _let_go(self, started: Started, err) -> bool:
        """The slot leaves the sweep; its lives fail now where Ray says why, else once it has (Unanswered)."""
        import ray

        self.owner.let_go(started.slot)
        cause = cause_line(err)
        if not isinstance(err, ray.exceptions.ActorDiedError) and _node_alive(started.slot.where.node_id):
            self.unanswered.append(Unanswered(started, cause, time.monotonic() + NODE_DEATH_WAIT_S))
            return False
        self._lost(started, f"the Ray slot on {started.slot.where.node} died: {cause}")
        return True

    def _settle_unanswered(self) -> list[list[Life]]:
        settled = []
        for item in list(self.unanswered):
            if _node_alive(item.started.slot.where.node_id) and time.monotonic() < item.deadline:
                continue
            self.unanswered.remove(item)
            where = item.started.slot.where
            self._lost(item.started, f"the Ray slot on {where.node} stopped answering: {item.cause}")
            settled.append(item.started.group)
        return settled

    def _lost(self, started: Started, otherwise: str) -> None:
        where = started.slot.where
        reason = (f"{NODE_LOST}: {where.node} (Ray node {where.node_id[:8]})" if not _node_alive(where.node_id)
                  else otherwise)
        self.owner.lost.append(reason)
        self._fail(started.group, started.slot, reason)

    def _fail(self, group: list[Life], slot: Slot, reason: str) -> None:
        for life in group:
            write_status(life_folder(self.run_dir, life), "failed", reason, **slot.where.status_fields())
            ended(life, Outcome("failed", reason), self.tag, self.say, self.progress)


def _node_alive(node_id: str) -> bool:
    """Does Ray still count the node alive? (A slot's calls fail before its health checks mark it dead.)"""
    import ray

    try:
        return any(node["NodeID"] == node_id and node["Alive"] for node in ray.nodes())
    except Exception:  # the cluster cannot say: count it as lost
        return False


def keep_slot_preflight(run_dir: Path, slot: Slot) -> None:
    """The pre-flight files a slot's life just brought back (preflight.json, preflight/), copied into a folder of
    their own, so that the next slot's do not replace them."""
    kept = run_dir / SLOT_PREFLIGHTS
    kept.mkdir(exist_ok=True)
    number = 1 + max((int(entry.name[:3]) for entry in kept.iterdir() if entry.name[:3].isdigit()), default=0)
    into = kept / f"{number:03d}-{re.sub(r'[^A-Za-z0-9._-]+', '_', slot.where.slot).strip('_')}"
    into.mkdir()
    if (run_dir / PREFLIGHT_FILE).is_file():
        shutil.copy2(run_dir / PREFLIGHT_FILE, into / PREFLIGHT_FILE)
    if (run_dir / "preflight").is_dir():
        shutil.copytree(run_dir / "preflight", into / "preflight")


def life_folder(run_dir: Path, life: Life) -> Path:
    return results.life_dir(run_dir, life.setting.name, life.repeat)
