"""Which CPUs the server and the load generator run on, when both share this host.

A vLLM server left to the OS scheduler takes every core (its CPU build pins OpenMP threads to
them), and Locust, reading hundreds of streams on one event loop, then waits for a core: its loop
lags by hundreds of ms while it uses a few % of a CPU, and every latency it reads is late by that.
Placement gives each side its own CPUs:

- `server.cpus` / `load.cpus` (CPU lists as `taskset -c` writes them, "0-3,6") are applied to the
  server's and Locust's process trees (the affinity is set in the child before exec; children and
  threads inherit it);
- `load.placement = "auto"` (the default) splits this host's CPUs for a server the runner starts
  here: the load gets the cores its processes need for the planned stages, one each, and the server
  the rest; "off" leaves both to the OS; the environment variable LOOKAHEAD_RUNNER_PLACEMENT (auto or
  off) overrides it host-wide, for hosts where several runners share the CPUs (they would all pin their
  servers to the same ones);
- a server the user places (server.url, an argv_template such as `docker run`, or a command that
  starts with taskset/numactl) keeps its placement; docker's equivalent of server.cpus is
  `--cpuset-cpus`, in the template;
- vLLM's CPU build binds its OpenMP threads itself (VLLM_CPU_OMP_THREADS_BIND), past the process
  affinity: placement sets it to the server's CPUs, and refuses a value that overlaps the load's;
- a life on a Ray slot (cluster.engine = "ray", `slot_placement`) pins nothing: the lives on one node share
  its CPUs through Ray's accounting, each holding `cluster.cpus_per_life`, and Locust's processes are
  planned (and re-sized by the pre-flight) on those, not on the driver's CPUs.

Everything here is pure planning, apart from `host_cpus` (this process's own affinity) and `pin`,
which a child process runs before exec.
"""
from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from ...contracts.cpus import format_cpus, parse_cpus
from ...runfolder.preflight import PlacementRecord
from ...vllm.cpu_binding import OMP_BIND_ENV, omp_bind_cpus, omp_bind_lists, worker_ranks

# wrappers that mean the user placed the server already
PLACING_COMMANDS = ("taskset", "numactl", "docker", "podman", "ssh", "srun")
# One Locust process's CPU per streamed chunk (the whole read path: socket, HTTP chunking, SSE,
# timeline, records), measured with benchmarks/client_accuracy.py --cases 64:0:1: 24-33 us on the
# shared 2-core box (3 runs; 44-51 us before the read path was cut). Processes are planned from it
# until the pre-flight measures this run's own figure.
CHUNK_CPU_US = 25.0
# A process is planned to use at most this share of its core: past it, the event loop queues reads.
TARGET_CPU_FRAC = 0.6
# Until measured, a stream is assumed to deliver a chunk every 10 ms (a fast GPU at a small batch).
PRIOR_CHUNKS_PER_USER_S = 100.0


class PlacementError(ValueError):
    """A placement that cannot work on this host; one line naming the setting and the fix."""


def processes_for(peak_users: int, chunks_per_user_s: float, chunk_cpu_us: float,
                  target_frac: float = TARGET_CPU_FRAC) -> int:
    """Locust processes that keep each under `target_frac` of a core at `peak_users` streams."""
    demand_cores = peak_users * chunks_per_user_s * chunk_cpu_us / 1e6
    return max(1, math.ceil(demand_cores / target_frac - 1e-9))


@dataclass(frozen=True)
class Placement:
    """Where this run puts its processes. Empty CPU tuples mean "not pinned" (the OS schedules it)."""

    mode: str  # auto | manual | off | user (the server is placed by its own command) | single-cpu | slot (Ray)
    server_cpus: tuple[int, ...] = ()
    load_cpus: tuple[int, ...] = ()
    processes: int = 1
    processes_auto: bool = False
    server_env: dict[str, str] = field(default_factory=dict)  # what placement adds to the server's env
    host_cpus: tuple[int, ...] = ()
    processes_why: str = ""
    slot_cpus: float = 0.0  # mode "slot": the Ray CPUs a life holds on its node (cluster.cpus_per_life)

    def load_room(self) -> int:
        """The most Locust processes this placement gives a CPU each: its load CPUs, a slot's, or the host's."""
        if self.load_cpus:
            return len(self.load_cpus)
        return max(1, int(self.slot_cpus)) if self.mode == "slot" else max(1, len(self.host_cpus))

    def describe(self) -> str:
        """One line for the progress output, plan.json and the report."""
        procs = f"{self.processes} process{'es' if self.processes != 1 else ''}"
        load = f"Locust ({procs}) on CPU{'s' if len(self.load_cpus) != 1 else ''} {format_cpus(self.load_cpus)}" \
            if self.load_cpus else f"Locust ({procs}) on any CPU"
        if self.mode == "user":
            server = "the server placed by its own command (server.url, argv_template or a wrapper)"
        elif self.mode == "slot":
            server = (f"server and Locust unpinned on a Ray slot's {self.slot_cpus:g} CPU"
                      f"{'s' if self.slot_cpus != 1 else ''} (cluster.cpus_per_life)")
        elif self.server_cpus:
            bind = self.server_env.get(OMP_BIND_ENV)
            server = (f"server on CPU{'s' if len(self.server_cpus) != 1 else ''} {format_cpus(self.server_cpus)}"
                      + (f" ({OMP_BIND_ENV}={bind})" if bind else ""))
        else:
            server = "server on any CPU"
        host = f" of {format_cpus(self.host_cpus)}" if self.host_cpus else ""
        why = f"; {self.processes_why}" if self.processes_why else ""
        return f"placement {self.mode}: {server}, {load}{host}{why}"

    def with_processes(self, processes: int, why: str) -> "Placement":
        return replace(self, processes=processes, processes_why=why)

    def to_record(self) -> PlacementRecord:
        """What plan.json and preflight.json hold of it (runfolder/preflight.py), with the line describe() says."""
        return PlacementRecord(mode=self.mode, server_cpus=format_cpus(self.server_cpus),
                               load_cpus=format_cpus(self.load_cpus), processes=self.processes,
                               processes_auto=self.processes_auto, server_env=dict(self.server_env),
                               host_cpus=format_cpus(self.host_cpus), processes_why=self.processes_why,
                               slot_cpus=self.slot_cpus, description=self.describe())

    @classmethod
    def from_record(cls, record: PlacementRecord) -> "Placement":
        def cpus(text: str) -> tuple[int, ...]:
            return parse_cpus(text) if text else ()

        return cls(record.mode, cpus(record.server_cpus), cpus(record.load_cpus), record.processes,
                   record.processes_auto, dict(record.server_env), cpus(record.host_cpus), record.processes_why,
                   record.slot_cpus)


def host_cpus() -> tuple[int, ...]:
    """The CPUs this process may run on (a container's or taskset's limit included)."""
    return tuple(sorted(os.sched_getaffinity(0)))


def user_places_server(server) -> bool:
    """A server this runner does not start as a plain child here: an external URL, a launcher template,
    or a command wrapped in taskset/numactl/docker/ssh."""
    command = os.path.basename(server.command[0]) if server.command else ""
    return bool(server.url or server.argv_template) or command in PLACING_COMMANDS


PLACEMENT_ENV = "LOOKAHEAD_RUNNER_PLACEMENT"


def placement_setting(load, environ=os.environ) -> str:
    """load.placement, or the host-wide override in the environment."""
    override = environ.get(PLACEMENT_ENV, "")
    if override and override not in ("auto", "off"):
        raise PlacementError(f"{PLACEMENT_ENV}={override!r}: use auto or off (or unset it to follow "
                             "load.placement)")
    return override or load.placement


def sweep_placement(config) -> Placement:
    """The placement a sweep's lives start from: on a Ray slot with cluster.engine = "ray", else on this host."""
    return slot_placement(config) if config.cluster.engine == "ray" else plan_placement(config, host_cpus())


def slot_placement(config) -> Placement:
    """A life on a Ray slot: nothing pinned, Locust's processes planned on the CPUs the slot holds."""
    placement = Placement("slot", slot_cpus=config.cluster.cpus_per_life)
    processes, auto, why = _processes(config.load, placement.load_room())
    return replace(placement, processes=processes, processes_auto=auto, processes_why=why)


def _wanted(load) -> int:
    """Locust processes for the highest stage before the pre-flight measures them (load.processes when given)."""
    if load.processes != "auto":
        return int(load.processes)
    return processes_for(load.peak_users, PRIOR_CHUNKS_PER_USER_S, CHUNK_CPU_US)


def _processes(load, room: int) -> tuple[int, bool, str]:
    """Locust's process count before the pre-flight (one CPU each, at most `room`), whether it is "auto", and why."""
    wanted = _wanted(load)
    if load.processes != "auto":
        return wanted, False, ""
    processes = min(wanted, room)  # two processes sharing a core are no headroom
    return processes, True, (f"processes auto: {wanted} planned for {_planned_for(load)} from {CHUNK_CPU_US:g} us "
                             "per chunk "
                             f"until the pre-flight measures it" + (f", {room} CPU{'s' if room != 1 else ''} for the "
                                                                    "load" if processes < wanted else ""))


def _planned_for(load) -> str:
    """What Locust's processes are planned for (load.peak_users): the most users of a users stage, or with rate
    stages only the requests in flight, the cap or the highest rate's arrivals in a second."""
    peak = load.peak_users
    if load.user_stages:
        return f"{peak} users"
    if load.max_in_flight:
        return f"{peak} requests in flight (load.max_in_flight)"
    rate = max(stage.rate or 0.0 for stage in load.stages)
    return f"{peak} requests in flight ({rate:g} requests per second for a second)"


def plan_placement(config, cpus: Sequence[int]) -> Placement:
    """The placement of `config` on a host whose usable CPUs are `cpus` (see the module docstring)."""
    server, load = config.server, config.load
    placement = placement_setting(load)
    cpus = tuple(sorted(cpus))
    server_cpus = _on_host("server.cpus", server.cpus, cpus)
    load_cpus = _on_host("load.cpus", load.cpus, cpus)
    if user_places_server(server):
        mode = "user"
    elif server_cpus or load_cpus:
        mode = "manual"
        if placement == "auto":  # one side given: the other gets the rest
            server_cpus = server_cpus or _rest("server", cpus, load_cpus)
            load_cpus = load_cpus or _rest("load", cpus, server_cpus)
    elif placement == "off":
        mode = "off"
    elif len(cpus) < 2:
        mode = "single-cpu"
    else:
        mode = "auto"
        take = min(_wanted(load), len(cpus) - 1)  # the server keeps at least one core
        load_cpus, server_cpus = cpus[-take:], cpus[:-take]
    processes, auto, why = _processes(load, len(load_cpus) if load_cpus else len(cpus))
    env = _omp_env(server.env, server_cpus, load_cpus, worker_ranks(server.extra_args))
    return Placement(mode, server_cpus, load_cpus, processes, auto, env, cpus, why)


def _on_host(name: str, text: str, cpus: tuple[int, ...]) -> tuple[int, ...]:
    if not text:
        return ()
    wanted = parse_cpus(text)
    missing = sorted(set(wanted) - set(cpus))
    if missing:
        raise PlacementError(f"{name} = {text!r}: CPU {format_cpus(missing)} is not usable here "
                             f"(this host's CPUs: {format_cpus(cpus)}); pick CPUs from that list")
    return wanted


def _rest(side: str, cpus: tuple[int, ...], taken: tuple[int, ...]) -> tuple[int, ...]:
    rest = tuple(c for c in cpus if c not in taken)
    if not rest:
        other = "load" if side == "server" else "server"
        raise PlacementError(f"{other}.cpus = {format_cpus(taken)!r} takes every CPU of this host; leave "
                             f"at least one for the {side}, or set {side}.cpus too")
    return rest


def omp_bind_value(cpus: tuple[int, ...], ranks: int) -> str:
    """VLLM_CPU_OMP_THREADS_BIND for `ranks` workers sharing `cpus`: contiguous, equal lists joined by "|"."""
    if ranks > len(cpus):
        raise PlacementError(f"the server gets {len(cpus)} CPU{'s' if len(cpus) != 1 else ''} ({format_cpus(cpus)}) "
                             f"for {ranks} vLLM workers (tensor x pipeline parallel); give it at least {ranks} "
                             "with server.cpus")
    return omp_bind_lists(cpus, ranks)


def _omp_env(env: dict[str, str], server_cpus: tuple[int, ...], load_cpus: tuple[int, ...],
             ranks: int = 1) -> dict[str, str]:
    """What placement adds to the server's environment: the OpenMP binding on the server's CPUs.
    A binding the user set that reaches the load's CPUs is refused."""
    value = env.get(OMP_BIND_ENV)
    try:
        bound = omp_bind_cpus(value) if value is not None else None
    except ValueError:
        raise PlacementError(f"server.env.{OMP_BIND_ENV} = {value!r} is not a CPU list; write e.g. \"0-3\", "
                             "or remove it (placement sets it to the server's CPUs)") from None
    if bound is not None:
        clash = sorted(set(bound) & set(load_cpus))
        if clash:
            fix = (f"set it to the server's CPUs {format_cpus(server_cpus)!r} or remove it (placement sets it)"
                   if server_cpus else "set it to CPUs outside load.cpus")
            raise PlacementError(f"server.env.{OMP_BIND_ENV} = {value!r} binds vLLM's compute threads to "
                                 f"CPU {format_cpus(clash)}, which load.cpus gives Locust; {fix}")
        return {}
    if server_cpus and (value is None or value.strip() in ("", "auto", "all")):
        return {OMP_BIND_ENV: omp_bind_value(server_cpus, ranks)}
    return {}


def pin(cpus: Sequence[int]):
    """A preexec_fn that sets the child's CPU affinity before exec (None when not pinned)."""
    if not cpus:
        return None
    mask = frozenset(cpus)

    def set_affinity() -> None:
        os.sched_setaffinity(0, mask)

    return set_affinity
