"""cluster.engine = "ray": server lives in parallel, each on a Ray actor (a slot) holding its GPUs.

The driver (this process) starts or joins Ray, starts one slot per `gpus_per_life` GPUs the cluster has
(per `cpus_per_life` CPUs when a life needs no GPU), and hands each free slot the next life
(cluster_queue.py); the slot runs the same life code as a local life on its node (cluster_life.py) and
sends the life's files back, which the driver writes into the run folder as each life ends. Ray's
resource accounting keeps two sweeps on one cluster off each other's GPUs: a slot holds its GPUs for the
whole sweep, and a slot that cannot get them waits.

Faults: Ctrl-C or SIGTERM (runner.sigterm_as_interrupt) kills every slot; each slot's node watchdog
(reaper.py) then stops its server and Locust. A slot whose node is lost fails its life with the reason
"node lost", so --resume reruns it; the sweep goes on with the slots left.
"""
from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..config import ConfigError, SweepConfig
from ..config.cluster import RAY_INSTALL
from ..decision.engine import next_setting
from ..runfolder import results
from ..runfolder.plan import life_state, read_status, record_cluster, write_status
from .cluster_life import LifeOrder, SlotWorker, Where, unpack
from .cluster_nodes import NodeCheck, first_line
from .cluster_queue import handout_order, next_for
from .finalize import write_tables
from .launch import Life
from .life import Outcome, kept, not_measured, skip
from .preflight import PreflightError
from .server import ServerError

NODE_LOST = "node lost"
ENDED = ("done", "failed", "skipped")
LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024
WAIT_S = 1.0  # ray.wait's timeout: the driver stays responsive to Ctrl-C
WAITING_SAY_S = 30.0      # while no slot can be placed, the sweep says so this often
NODE_DEATH_WAIT_S = 60.0  # Ray declares a silent node dead after its health checks fail (~15-30 s by default)


class ClusterError(ServerError):
    """The cluster cannot run the sweep (no slot, every slot lost): one line saying why and what to do."""


@dataclass
class Slot:
    actor: object
    where: Where
    ran: set = field(default_factory=set)   # the settings this slot has run (cluster_queue.next_for)


@dataclass
class RaySlots:
    """The sweep's slots on a Ray cluster; `run_groups` is the parallel counterpart of runner.run_lives."""

    slots: list[Slot]
    seed: int
    address: str = ""
    lost: list[str] = field(default_factory=list)
    pending: list[tuple] = field(default_factory=list)  # (actor, its where() reference): slots Ray has not placed
    #                                                     yet, their GPUs held by another job; they join when placed
    nodes: NodeCheck | None = None   # what the probe compared (cluster_nodes.py): a slot joining later is held to it
    say: Callable[[str], None] = print

    def join_placed(self) -> list[Slot]:
        """The pending slots Ray has placed since: each joins the sweep, one on a node not compared yet once it
        matches the nodes compared before any life (else it is let go, and the sweep says why)."""
        import ray

        if not self.pending:
            return []
        ready, _ = ray.wait([ref for _, ref in self.pending], num_returns=len(self.pending), timeout=0)
        joined = []
        for actor, ref in [(a, r) for a, r in self.pending if r in ready]:
            self.pending.remove((actor, ref))
            slot = Slot(actor, ray.get(ref))
            problem = self.nodes.admit(slot) if self.nodes is not None else ""
            if problem:
                ray.kill(actor, no_restart=True)
                self.say(f"Ray: the slot on {slot.where.slot} is left out: {problem}")
                continue
            self.slots.append(slot)
            joined.append(slot)
            self.say(f"Ray: a slot joined the sweep (its GPUs were held by another job): {slot.where.slot}")
        return joined

    def run_groups(self, config: SweepConfig, run_dir: Path, lives: list[Life], groups: list[list[Life]], tag, say,
                   progress, run_life, early_stop: bool) -> None:
        """Every server life (`groups`, in the plan's order) not done yet, up to one per slot at a time; with
        `early_stop`, lives of a larger K still queued are skipped once the stop rule fires at a K every life
        of which, and of every smaller K, has ended."""
        queue = []
        for group in groups:
            todo = [life for life in group if life_state(_folder(run_dir, life)) != "done"]
            for life in group:
                if life not in todo:
                    kept(life, tag, say, progress)
            if todo:
                queue.append(todo)
        queue = handout_order(queue, _setting, self.seed)
        pool = self.pool(run_dir, run_life, tag, say, progress)
        stopped_at = _stop_rule(config, run_dir, lives, _keys(queue)) if early_stop else None  # a resumed run's
        _skip_beyond(stopped_at, queue, run_dir, tag, say, progress)
        while queue or pool.running:
            while pool.free() and queue:  # free() raises once every slot is lost
                slot = pool.idle[0]
                pool.start(config, queue.pop(next_for(queue, _setting, slot.ran)), slot)
            ended = pool.wait_some()
            if ended and early_stop and stopped_at is None:
                stopped_at = _stop_rule(config, run_dir, lives, _keys(queue) | _keys(list(pool.running.values()), 1))
                _skip_beyond(stopped_at, queue, run_dir, tag, say, progress)

    def pool(self, run_dir: Path, run_life, tag, say, progress) -> "SlotPool":
        """The slots as a pool of lives (life_pool.py): run_groups and the adaptive sweep submit to it."""
        return SlotPool(self, run_dir, run_life, tag, say, progress, list(self.slots))

    def _start(self, slot: Slot, group: list[Life], config: SweepConfig, run_dir: Path, run_life, tag, say, progress):
        order = LifeOrder(config, run_life.caps, group[0].setting, [life.repeat for life in group], run_life.server,
                          run_life.placement.processes, run_life.preflight_due)
        record_cluster(run_dir, handed_out=[life.key for life in group])
        for life in group:
            out = _folder(run_dir, life)
            out.mkdir(parents=True, exist_ok=True)
            write_status(out, "running", **slot.where.status_fields(), t_start_s=round(time.time(), 3))
        slot.ran.add(_setting(group))
        say(f"{tag(group[0])}: starting the server on {slot.where.slot}"
            + (f" (with {', '.join(life.key for life in group[1:])})" if len(group) > 1 else ""))
        progress.life_started(group[0].key)
        return slot.actor.run.remote(order)

    def _collect(self, ref, slot: Slot, group: list[Life], run_dir: Path, run_life, tag, say, progress) -> bool:
        """Write a finished life's files into the run folder; False when its slot is gone."""
        import ray

        try:
            files = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError) as err:
            reason = (f"{NODE_LOST}: {slot.where.node} (Ray node {slot.where.node_id[:8]})"
                      if _node_lost(slot.where.node_id)
                      else f"the Ray slot on {slot.where.node} died: {first_line(err)}")
            self.lost.append(reason)
            self.slots.remove(slot)
            for life in group:
                write_status(_folder(run_dir, life), "failed", reason, **slot.where.status_fields())
                self._finished(life, Outcome("failed", reason), tag, say, progress)
            return False
        except ray.exceptions.RayTaskError as err:  # the life code raised: a bug, told as the life's failure
            reason = f"the life failed on {slot.where.node}: {first_line(err.cause or err)}"
            for life in group:
                write_status(_folder(run_dir, life), "failed", reason, **slot.where.status_fields())
                self._finished(life, Outcome("failed", reason), tag, say, progress)
            return True
        unpack(files.archive, run_dir, [life.key for life in group])
        for line in files.said:
            say(f"  [{group[0].key}] {line.strip()}")
        if run_life.preflight_due:
            run_life.preflight_due = False
            run_life.placement = dataclasses.replace(run_life.placement, processes=files.processes)
        if files.preflight_error:  # no life was measured: each is run again by --resume
            not_measured(run_dir, group[0].setting, [life.repeat for life in group], files.preflight_error)
            raise PreflightError(files.preflight_error)
        for life in group:
            status = read_status(_folder(run_dir, life))
            self._finished(life, Outcome(status.state if status else "failed", status.reason if status else
                                         "the life's files did not come back"), tag, say, progress)
        return True

    @staticmethod
    def _finished(life: Life, outcome: Outcome, tag, say, progress) -> None:
        say(f"{tag(life)}: {outcome.state}" + (f" - {outcome.reason.splitlines()[0]}" if outcome.reason else ""))
        progress.life_finished()


@dataclass
class SlotPool:
    """Server lives on the slots, one each: start a life (or a same-server group) on a free slot, wait for lives to
    end and write their files into the run folder. The first life runs the pre-flight alone."""

    owner: RaySlots
    run_dir: Path
    run_life: object
    tag: object
    say: object
    progress: object
    idle: list[Slot]
    running: dict = field(default_factory=dict)   # Ray reference -> (slot, group)

    @property
    def slots(self) -> int:
        return len(self.owner.slots)

    def free(self) -> int:
        joined = self.owner.join_placed()
        if joined:
            self.idle += joined
            record_cluster(self.run_dir, self.owner.address, [slot.where.slot for slot in self.owner.slots],
                           self.owner.seed)
        if not self.owner.slots:
            raise ClusterError(f"every Ray slot was lost ({'; '.join(self.owner.lost)}): continue with --resume "
                               f"{self.run_dir} once the cluster is back")
        if self.run_life.preflight_due:
            return 0 if self.running else min(len(self.idle), 1)
        return len(self.idle)

    def start(self, config: SweepConfig, group: list[Life], slot: Slot) -> None:
        self.idle.remove(slot)
        ref = self.owner._start(slot, group, config, self.run_dir, self.run_life, self.tag, self.say, self.progress)
        self.running[ref] = (slot, group)

    def submit(self, config: SweepConfig, life: Life) -> None:
        """One life on a free slot that has not run its setting where there is one (cluster_queue.py's rule)."""
        if life_state(_folder(self.run_dir, life)) == "done":
            kept(life, self.tag, self.say, self.progress)
            return
        self.start(config, [life], next((s for s in self.idle if life.setting not in s.ran), self.idle[0]))

    def in_flight(self) -> list[Life]:
        return [life for _, group in self.running.values() for life in group]

    def wait_some(self) -> list[list[Life]]:
        """The groups that end within WAIT_S (none, often), their files written; a slot lost is not free again."""
        import ray

        if not self.running:
            return []
        ready, _ = ray.wait(list(self.running), num_returns=1, timeout=WAIT_S)
        ended = []
        for ref in ready:
            slot, group = self.running.pop(ref)
            if self.owner._collect(ref, slot, group, self.run_dir, self.run_life, self.tag, self.say, self.progress):
                self.idle.append(slot)
            ended.append(group)
        return ended

    def wait(self) -> list[Life]:
        while self.running:
            ended = self.wait_some()
            if ended:
                return [life for group in ended for life in group]
        return []


def _skip_beyond(stopped_at: int | None, queue: list[list[Life]], run_dir: Path, tag, say, progress) -> None:
    """The lives of a K above the early stop leave the queue, skipped (those running finish)."""
    if stopped_at is None:
        return
    for group in [g for g in queue if g[0].setting.k > stopped_at]:
        queue.remove(group)
        for life in group:
            skip(_folder(run_dir, life), stopped_at)
            say(f"{tag(life)}: skipped (early stop at K={stopped_at})")
            progress.life_finished()


def _keys(groups, at: int | None = None) -> set[str]:
    """The life keys of queued groups, or of (slot, group) pairs with `at` = 1."""
    return {life.key for item in groups for life in (item if at is None else item[at])}


def _folder(run_dir: Path, life: Life) -> Path:
    return results.life_dir(run_dir, life.setting.name, life.repeat)


def _setting(group: list[Life]):
    return group[0].setting


def _node_lost(node_id: str, wait_s: float = NODE_DEATH_WAIT_S) -> bool:
    """Has the slot's node left the cluster? A slot's calls fail (actor unavailable) before Ray's health checks
    mark its node dead, so this waits up to `wait_s` for the node to be declared dead."""
    import ray

    deadline = time.monotonic() + wait_s
    while True:
        try:
            if not any(node["NodeID"] == node_id and node["Alive"] for node in ray.nodes()):
                return True
        except Exception:  # the cluster cannot say: count it as lost
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(1.0)


def _stop_rule(config: SweepConfig, run_dir: Path, lives: list[Life], pending: set[str]) -> int | None:
    """The early stop over the K whose lives have all ended (none `pending`: queued or running), from the smallest
    up (runner.run_lives's rule)."""
    ks = sorted({life.setting.k for life in lives})
    ended = [k for k in ks if all(l.key not in pending and life_state(_folder(run_dir, l)) in ENDED
                                  for l in lives if l.setting.k == k)]
    prefix = [k for n, k in enumerate(ks) if ks[:n + 1] == ended[:n + 1]]
    if not prefix:
        return None
    data = write_tables(run_dir)
    stops = [next_setting(data.evidence(variant=v.label), config.decision, config.speculation.k)[1]
             for v in config.load.variants]
    if None in stops or max(stops) > prefix[-1]:
        return None
    return max(stops)


def slots_wanted(resources: dict, gpus_per_life: int, cpus_per_life: float) -> int:
    """Slots the cluster's resources hold: by GPUs when a life needs some, and by CPUs in any case."""
    by_cpu = int(resources.get("CPU", 0) // cpus_per_life)
    return min(by_cpu, int(resources.get("GPU", 0) // gpus_per_life)) if gpus_per_life else by_cpu


@contextmanager
def ray_slots(config: SweepConfig, lives_planned: int, say):
    """Ray started (or joined) for the sweep and one slot per life it can run at once; every slot killed and
    Ray shut down on the way out, however the sweep ends."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"cluster.engine = \"ray\" needs Ray on this machine: {RAY_INSTALL}") from None
    cluster = config.cluster
    gpus_per_life = cluster.life_gpus(config.server.extra_args)
    options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if cluster.address:
        ray.init(address=cluster.address, **options)
    else:
        # "local": a Ray of the sweep's own, even where another runs on this machine (ray.init() would join that
        # one, and refuse num_gpus); None: Ray counts the GPUs NVML sees; the object store carries only the files
        ray.init(address="local", num_gpus=cluster.gpus, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **options)
    actors: list = []
    try:
        resources = ray.cluster_resources()
        count = min(slots_wanted(resources, gpus_per_life, cluster.cpus_per_life), max(lives_planned, 1))
        if count < 1:
            where = f"the Ray cluster at {cluster.address}" if cluster.address else "the Ray started here"
            raise ConfigError(f"cluster.gpus_per_life = {gpus_per_life}: {where} has {resources.get('GPU', 0):g} "
                              f"GPUs and {resources.get('CPU', 0):g} CPUs, not enough for one life (cpus_per_life "
                              f"= {cluster.cpus_per_life:g}); set cluster.gpus (a Ray started here) or lower them")
        remote = ray.remote(num_gpus=gpus_per_life, num_cpus=cluster.cpus_per_life, max_restarts=0,
                            max_task_retries=0)(SlotWorker)
        say(f"Ray: starting {count} slot{'s' if count != 1 else ''} (a slot waits while another sweep holds its GPUs)")
        free_now = min(count, slots_wanted(ray.available_resources(), gpus_per_life, cluster.cpus_per_life))
        actors = [remote.remote() for _ in range(count)]
        refs = [actor.where.remote() for actor in actors]
        placed = _placed(refs, max(free_now, 1), say)
        slots = [Slot(actor, ray.get(ref)) for actor, ref in zip(actors, refs) if ref in placed]
        pending = [(actor, ref) for actor, ref in zip(actors, refs) if ref not in placed]
        say(f"Ray: {len(slots)} slot{'s' if len(slots) != 1 else ''} of {gpus_per_life} "
            f"GPU{'s' if gpus_per_life != 1 else ''} and "
            f"{cluster.cpus_per_life:g} CPU each: {'; '.join(slot.where.slot for slot in slots)}"
            + (f"; {len(pending)} more join as another job releases their GPUs" if pending else ""))
        yield RaySlots(slots, config.decision.seed, cluster.address, pending=pending, say=say)
    finally:
        for actor in actors:
            try:
                ray.kill(actor, no_restart=True)  # its node's watchdog stops a server it was running
            except Exception:
                pass
        ray.shutdown()


def _placed(refs: list, free_now: int, say) -> list:
    """The slots' where() references of those Ray has placed: the `free_now` the cluster's free resources held when
    they were asked for (a slot's worker may take a while to start on a busy node: all of them are waited for,
    at least one however long another job holds the GPUs; Ctrl-C stops the wait), and any other placed by then."""
    import ray

    while True:
        ready, _ = ray.wait(refs, num_returns=free_now, timeout=WAITING_SAY_S)
        if len(ready) >= free_now:
            break
        say(f"Ray: {len(ready)} of {len(refs)} slots placed, waiting for {free_now - len(ready)} more: their workers "
            "are starting, or another job took their GPUs (Ctrl-C gives up)")
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
    return ready
