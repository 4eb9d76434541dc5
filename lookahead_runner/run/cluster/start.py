"""Ray started (or joined) for a sweep, and the sweep's slots on it (slots.RaySlots).

A slot holds one life's GPUs and CPUs, all on one node (Ray places an actor on one node): so slots are counted
node by node, never from the cluster's totals (2 nodes x 3 GPUs hold two lives of 2 GPUs, not three), and a life
that fits on no node is refused in one line before any life. The sweep starts once the slots the nodes' free
resources held when asked are placed; the others join as Ray places them (their GPUs held by another job). A slot
that cannot start (a node without lookahead-runner) is refused in one line naming the cause, and so is a
cluster.address that cannot be joined (Ray itself retries an address nothing answers at for minutes).
"""
from __future__ import annotations

import importlib.util
import re
import socket
import threading
from collections.abc import Iterable
from contextlib import contextmanager

from ...config import ConfigError, SweepConfig
from ...config.cluster import RAY_INSTALL
from .slots import RaySlots
from .worker_life import SlotWorker
from .nodes import cause_line
from .pool import ClusterError, Slot

LOCAL_OBJECT_STORE_BYTES = 256 * 1024 * 1024  # carries a life's files a chunk at a time (files.py)
WAITING_SAY_S = 30.0      # while no slot can be placed, the sweep says so this often
NODE_IP = re.compile(r"\bip=([0-9a-fA-F.:]+)")
CONNECT_S = 10.0          # how long the cluster's address may take to answer


def lives_on(resources: dict, gpus_per_life: int, cpus_per_life: float) -> int:
    """The lives one node's resources hold: by GPUs when a life needs some, and by CPUs in any case."""
    by_cpu = int(resources.get("CPU", 0) // cpus_per_life)
    return min(by_cpu, int(resources.get("GPU", 0) // gpus_per_life)) if gpus_per_life else by_cpu


def slots_on(nodes: Iterable[dict], gpus_per_life: int, cpus_per_life: float) -> int:
    """The slots a cluster's nodes (each one's resources) hold: node by node."""
    return sum(lives_on(resources, gpus_per_life, cpus_per_life) for resources in nodes)


def no_fit_line(nodes: list[dict], gpus_per_life: int, cpus_per_life: float, address: str) -> str:
    """Why not one life fits (no node holds its GPUs and CPUs), and the fix."""
    where = f"the Ray cluster at {address}" if address else "the Ray started here"
    largest = max(nodes, key=lambda r: (r.get("GPU", 0), r.get("CPU", 0)), default={})
    fix = ("lower them (a life's GPUs are on one node)" if address
           else "set cluster.gpus (the GPU slots of a Ray started here) or lower them")
    return (f"cluster.gpus_per_life = {gpus_per_life}, cluster.cpus_per_life = {cpus_per_life:g}: no node of {where} "
            f"holds one life ({len(nodes)} node{'s' if len(nodes) != 1 else ''}, the largest with "
            f"{largest.get('GPU', 0):g} GPUs and {largest.get('CPU', 0):g} CPUs); {fix}")


def no_gpu_problem(nodes: list[dict], gpus_per_life: int, simulated: bool, address: str) -> str:
    """Lives of no GPU on nodes that have some: Ray keeps a slot of num_gpus = 0 off none of them (it leaves
    CUDA_VISIBLE_DEVICES as it was, or empties it), so a real server would use its node's GPUs beside the other
    slots' servers, their memory in its own. The simulator needs none."""
    gpus = sum(node.get("GPU", 0) for node in nodes)
    if gpus_per_life or simulated or not gpus:
        return ""
    where = f"the Ray cluster at {address}" if address else "the Ray started here"
    return (f"cluster.gpus_per_life = 0: {where} has {gpus:g} GPUs, and a life that holds none is kept off none of "
            "them (its server would use them beside the other slots'); set it to the GPUs a server uses, or run on "
            "nodes without GPUs")


@contextmanager
def ray_slots(config: SweepConfig, lives_planned: int, say):
    """Ray started (or joined) for the sweep and one slot per life it can run at once; every slot killed and
    Ray shut down once: in the background while the driver writes the report (RaySlots.lives_over), else on the way
    out, however the sweep ends."""
    try:
        import ray
    except ImportError:
        raise ConfigError(f"cluster.engine = \"ray\" needs Ray on this machine: {RAY_INSTALL}") from None
    cluster = config.cluster
    gpus_per_life = cluster.life_gpus(config.server.extra_args)
    options = dict(include_dashboard=False, log_to_driver=False, configure_logging=False)
    if cluster.address:
        join(ray, cluster.address, options)
    else:
        # "local": a Ray of the sweep's own, even where another runs on this machine (ray.init() would join that
        # one, and refuse num_gpus); None: Ray counts the GPUs NVML sees; the object store carries only the files
        ray.init(address="local", num_gpus=cluster.gpus, object_store_memory=LOCAL_OBJECT_STORE_BYTES, **options)
    actors: list = []
    stop = RayStop(ray, actors, say)
    try:
        nodes = [node["Resources"] for node in ray.nodes() if node["Alive"]]
        fits = slots_on(nodes, gpus_per_life, cluster.cpus_per_life)
        if fits < 1:
            raise ConfigError(no_fit_line(nodes, gpus_per_life, cluster.cpus_per_life, cluster.address))
        if problem := no_gpu_problem(nodes, gpus_per_life, config.server.is_simulator, cluster.address):
            raise ConfigError(problem)
        count = min(fits, max(lives_planned, 1))
        remote = ray.remote(num_gpus=gpus_per_life, num_cpus=cluster.cpus_per_life, max_restarts=0,
                            max_task_retries=0)(SlotWorker)
        say(f"Ray: starting {count} slot{'s' if count != 1 else ''} (a slot waits while another sweep holds its GPUs)")
        free_now = min(count, slots_on(_free_per_node(ray), gpus_per_life, cluster.cpus_per_life))
        actors.extend(remote.remote() for _ in range(count))
        refs = [actor.where.remote() for actor in actors]
        placed = _placed(refs, max(free_now, 1), say)
        slots = [Slot(actor, where) for actor, where in _started(actors, refs, placed)]
        pending = [(actor, ref) for actor, ref in zip(actors, refs) if ref not in placed]
        say(f"Ray: {len(slots)} slot{'s' if len(slots) != 1 else ''} of {gpus_per_life} "
            f"GPU{'s' if gpus_per_life != 1 else ''} and "
            f"{cluster.cpus_per_life:g} CPU each: {'; '.join(slot.where.slot for slot in slots)}"
            + (f"; {len(pending)} more join as another job releases their GPUs" if pending else ""))
        yield RaySlots(slots, config.decision.seed, cluster.address, pending=pending, say=say,
                       stop_ray=stop.start)
    finally:
        stop.finish()


class RayStop:
    """Every slot killed and Ray shut down, once. Ray's shutdown waits a second or more for its processes (a local
    Ray's GCS and raylet), so once the lives are over it runs beside the report (`start`); `finish`, on the way
    out, waits for it, or stops Ray itself where the sweep ended another way (an error, Ctrl-C, a dry run). A stop
    that fails is one line, never a traceback from its thread."""

    def __init__(self, ray, actors: list, say) -> None:
        self.ray, self.actors, self.say = ray, actors, say
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.claimed = False
        self.error: Exception | None = None

    def start(self) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._stop, name="ray-stop")
            self.thread.start()

    def finish(self) -> None:
        if self.thread is not None and self.thread.ident is not None:  # started (Ctrl-C may fall in between)
            self.thread.join()
        self._stop()  # nothing where the thread stopped Ray
        if self.error is not None:
            self.say(f"Ray: its stop failed ({cause_line(self.error)}); a Ray started here ends with this process")

    def _stop(self) -> None:
        with self.lock:
            if self.claimed:
                return
            self.claimed = True
        try:
            for actor in self.actors:
                try:
                    self.ray.kill(actor, no_restart=True)  # its node's watchdog stops a server it was running
                except Exception:
                    pass
            self.ray.shutdown()
        except Exception as err:
            self.error = err


def join(ray, address: str, options: dict) -> None:
    """ray.init on the cluster at `address`; a ConfigError (one line) where it cannot be joined: a ray:// address
    without Ray Client's package, an address nothing answers at within CONNECT_S, or one Ray refuses."""
    if address.startswith("ray://") and importlib.util.find_spec("grpc") is None:
        raise ConfigError(f"cluster.address = {address!r}: a ray:// address needs Ray Client: pip install "
                          "'ray[client]' (or give the head's HOST:6379, or \"auto\" on a node of the cluster)")
    if address != "auto":
        host, _, port = address.removeprefix("ray://").rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_S).close()
        except OSError as err:
            raise ConfigError(f"cluster.address = {address!r}: nothing answers at {host}:{port} "
                              f"({err.strerror or err}); start the cluster there (ray start --head) or fix the "
                              "address") from None
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as err:
        raise ConfigError(f"cluster.address = {address!r}: Ray could not join it: {cause_line(err)}") from None


def _free_per_node(ray) -> list[dict]:
    """Each node's free resources now; [] where Ray does not say (Ray Client: the sweep then starts on the first slot
    placed, and the others join as they are)."""
    try:
        return list(ray._private.state.available_resources_per_node().values())
    except Exception:  # a private API, not served through ray://
        return []


def _started(actors: list, refs: list, placed: list) -> list[tuple]:
    """(actor, where) of each placed slot; a ClusterError (one line) when one of them could not start."""
    import ray

    started, failed = [], []
    for actor, ref in zip(actors, refs):
        if ref not in placed:
            continue
        try:
            started.append((actor, ray.get(ref)))
        except ray.exceptions.RayError as err:
            node = NODE_IP.search(str(err))
            failed.append(f"{' on ' + node.group(1) if node else ''}: {cause_line(err)}")
    if failed:
        raise ClusterError(f"{len(failed)} of {len(placed)} Ray slots could not start, refused before any life (the "
                           f"first{failed[0]}); every node needs lookahead-runner installed in the Python Ray runs "
                           "there (docs/cluster.md)")
    return started


def _placed(refs: list, free_now: int, say) -> list:
    """The slots' where() references of those Ray has placed: the `free_now` the nodes' free resources held when
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
