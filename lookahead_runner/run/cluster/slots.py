"""cluster.engine = "ray": server lives in parallel, each on a Ray actor (a slot) holding its GPUs.

The driver (this process) starts or joins Ray and starts one slot per life that fits on a node
(start.py), hands each free slot the next life (queue.py), and runs them on the slots
(pool.py), every slot busy from the start (each runs its own pre-flight: life/preflight_turn.py). A slot runs
the same life code as a local life on its node (worker_life.py) and its files come back into the run folder as
each life ends (files.py). Ray's resource accounting keeps two sweeps
on one cluster off each other's GPUs: a slot holds its GPUs for the whole sweep, and a slot that cannot get
them waits, joining the sweep once Ray places it.

Faults: Ctrl-C or SIGTERM (runner.sigterm_as_interrupt) kills every slot; each slot's node watchdog
(life/reaper.py) then stops its server and Locust. A slot whose node is lost fails its life with the reason
"node lost", so --resume reruns it; the sweep goes on with the slots left.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ...config import SweepConfig
from ...decision.cells.gpu_spread import confound_plan_line
from ...runfolder.plan import life_state, record_cluster
from .nodes import NodeCheck, cause_line
from .pool import ENDED, Slot, SlotPool, SweepLives, life_folder
from .queue import handout_order, next_for
from ..strategies.early_stop import skip_beyond, stop_k
from ..verdict.finalize import write_tables
from ..life.launch import Life
from ..life.life import left_to_run


@dataclass
class RaySlots:
    """The sweep's slots on a Ray cluster; `run_groups` is the parallel counterpart of runner.run_lives."""

    slots: list[Slot]
    seed: int
    address: str = ""
    lost: list[str] = field(default_factory=list)
    pending: list[tuple] = field(default_factory=list)  # (actor, its where() reference): slots Ray has not placed
    #                                                     yet, their GPUs held by another job; they join when placed
    nodes: NodeCheck | None = None   # what the probe compared (nodes.py): a slot joining later is held to it
    say: Callable[[str], None] = print
    stop_ray: Callable[[], None] = lambda: None  # starts Ray's stop beside the report (start.RayStop)
    over: bool = False                           # lives_over() was called: no slot is used after it

    def lives_over(self) -> None:
        """No life runs after this: every slot is killed and Ray shut down while the driver writes the report."""
        self.over = True
        self.stop_ray()

    def _in_use(self) -> None:
        if self.over:
            raise RuntimeError("a Ray slot was used after the sweep's lives were over (RaySlots.lives_over)")

    def join_placed(self) -> list[Slot]:
        """The pending slots Ray has placed since: each joins the sweep once it started and matches the nodes and
        slots compared before any life (else it is let go, and the sweep says why)."""
        import ray

        self._in_use()
        if not self.pending:
            return []
        ready, _ = ray.wait([ref for _, ref in self.pending], num_returns=len(self.pending), timeout=0)
        joined = []
        for actor, ref in [(a, r) for a, r in self.pending if r in ready]:
            self.pending.remove((actor, ref))
            try:
                slot = Slot(actor, ray.get(ref))
            except ray.exceptions.RayError as err:  # e.g. a node without lookahead-runner
                ray.kill(actor, no_restart=True)
                self.say(f"Ray: a slot placed since could not start, left out: {cause_line(err)}")
                continue
            problem = self.nodes.admit(slot) if self.nodes is not None else ""
            if problem:
                ray.kill(actor, no_restart=True)
                self.say(f"Ray: the slot on {slot.where.slot} is left out: {problem}")
                continue
            self.slots.append(slot)
            joined.append(slot)
            self.say(f"Ray: a slot joined the sweep (its GPUs were held by another job): {slot.where.slot}")
        return joined

    def let_go(self, slot: Slot) -> None:
        """A slot leaves the sweep, killed: its node's watchdog stops the server and Locust it may still run."""
        import ray

        self._in_use()
        if slot in self.slots:
            self.slots.remove(slot)
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:  # gone already, or its node is
            pass

    def gpu_models(self) -> tuple[str, ...] | None:
        """The models of one slot's GPUs, on the node that runs it, as the probe compared them (every slot holds
        the same); None before the probe."""
        return self.nodes.reference.gpu_models if self.nodes is not None else None

    def record(self, run_dir: Path) -> None:
        """plan.json's "cluster": the slots now in the sweep."""
        record_cluster(run_dir, self.address, [slot.where.slot for slot in self.slots], self.seed)

    def confound_warning(self, config: SweepConfig) -> str:
        """For the plan (--dry-run, the sweep's start): "" unless some K cannot run on every GPU set. Slots that hold
        the same (no GPU, on one node) are one set; a slot still waiting for its GPUs counts as one more."""
        if config.sweep.strategy == "adaptive":  # it chooses its lives as it goes: the report says where they ran
            return ""
        restart = config.load.repeat_mode == "restart"
        sets = len({slot.where.slot for slot in self.slots}) + len(self.pending)
        return confound_plan_line(config.load.planned_repeats if restart else 1, sets, restart)

    def pool(self, run_dir: Path, lives: SweepLives, tag, say, progress) -> SlotPool:
        """The slots as a pool of lives (strategies/life_pool.py): run_groups and the adaptive sweep submit to it."""
        self._in_use()
        return SlotPool(self, run_dir, lives, tag, say, progress, list(self.slots))

    def run_groups(self, config: SweepConfig, run_dir: Path, lives: list[Life], groups: list[list[Life]], tag, say,
                   progress, run_life: SweepLives, early_stop: bool) -> None:
        """Every server life (`groups`, in the plan's order) not done yet, up to one per slot at a time; with
        `early_stop`, lives of a larger K still queued are skipped once the stop rule fires at a K every life
        of which, and of every smaller K, has ended."""
        queue = handout_order([todo for group in groups if (todo := left_to_run(group, run_dir, tag, say, progress))],
                              _setting, self.seed, len)
        pool = self.pool(run_dir, run_life, tag, say, progress)
        stopped_at = _stop_rule(config, run_dir, lives, _keys(queue)) if early_stop else None  # a resumed run's
        _skip_queued(stopped_at, queue, run_dir, tag, say, progress)
        while queue or pool.busy:
            while pool.free() and queue:
                slot = pool.idle[0]
                pool.start(config, queue.pop(next_for(queue, _setting, slot.ran)), slot)
            ended = pool.wait_some()  # every slot lost: a ClusterError
            if ended and early_stop and stopped_at is None:
                stopped_at = _stop_rule(config, run_dir, lives, _keys(queue) | {l.key for l in pool.in_flight()})
                _skip_queued(stopped_at, queue, run_dir, tag, say, progress)


def _skip_queued(stopped_at: int | None, queue: list[list[Life]], run_dir: Path, tag, say, progress) -> None:
    """The queued lives of a K above the early stop leave the queue, skipped (those running finish)."""
    skipped = skip_beyond(stopped_at, [life for group in queue for life in group], run_dir, tag, say, progress)
    queue[:] = [group for group in queue if group[0] not in skipped]


def _keys(groups: list[list[Life]]) -> set[str]:
    return {life.key for group in groups for life in group}


def _setting(group: list[Life]):
    return group[0].setting


def _stop_rule(config: SweepConfig, run_dir: Path, lives: list[Life], pending: set[str]) -> int | None:
    """The early stop (strategies/early_stop.py) over the K whose lives have all ended (none `pending`: queued or
    running), from the smallest up, where it fires at one of them."""
    ks = sorted({life.setting.k for life in lives})
    ended = [k for k in ks if all(l.key not in pending and life_state(life_folder(run_dir, l)) in ENDED
                                  for l in lives if l.setting.k == k)]
    prefix = [k for n, k in enumerate(ks) if ks[:n + 1] == ended[:n + 1]]
    if not prefix:
        return None
    stop = stop_k(config, write_tables(run_dir))
    return stop if stop is not None and stop <= prefix[-1] else None
