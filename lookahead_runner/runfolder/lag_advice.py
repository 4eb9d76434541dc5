"""Why Locust's loop lagged past the gate, and the fix for this run's placement: what a window's invalid
reason (analysis.py) and the pre-flight (preflight.py) say. The advice itself is made from the placement
(advice_for)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..contracts.cpus import format_cpus, parse_cpus
from .preflight import PlacementRecord, PreflightRecord, placement_used

# Locust lagging while its busiest process uses at least this share of a core is saturated (it has
# more to do than a core gives); below it, it is starved (it had work, but no CPU to run on).
HIGH_CPU_PCT = 60.0


@dataclass(frozen=True)
class LagAdvice:
    """The exact fix for each cause, from this run's placement."""

    saturated: str = "raise load.processes (\"auto\" sizes it), with a CPU each (load.cpus)"
    starved: str = "give Locust CPUs the server does not use (load.placement = \"auto\", or server.cpus and load.cpus)"


def lag_reason(lag_p99_ms: float, cpu_pct: float, gate_ms: float, advice: LagAdvice,
               what: str = "Locust's loop lag p99") -> str:
    """Why Locust's loop lagged past the gate, and the fix: saturated (busy) or starved (waiting for a CPU)."""
    lag = f"{what} {lag_p99_ms:.0f} ms > {gate_ms:g} ms"
    if cpu_pct != cpu_pct:  # NaN: the CPU was not measured
        return (f"client lag: {lag} (its CPU use was not measured); if it was busy, {advice.saturated}; "
                f"if not, {advice.starved}")
    if cpu_pct >= HIGH_CPU_PCT:
        return f"client saturated: {lag} with its busiest process at {cpu_pct:.0f}% of a core; {advice.saturated}"
    return (f"client starved: {lag} while it used only {cpu_pct:.0f}% of a core (other processes took its CPU); "
            f"{advice.starved}")


def _cpus(text: str) -> tuple[int, ...]:
    return parse_cpus(text) if text else ()


def split_suggestion(cpus: Sequence[int]) -> tuple[str, str]:
    """(server CPUs, load CPUs) that auto placement would pick for one Locust process on `cpus`."""
    cpus = tuple(sorted(cpus))
    return format_cpus(cpus[:-1]), format_cpus(cpus[-1:])


def advice_for(placement: PlacementRecord | None) -> LagAdvice:
    """The fixes for this placement (plan.json's or preflight.json's record of run/life/placement.py Placement)."""
    if placement is None:
        return LagAdvice()
    if placement.mode == "slot":  # a Ray slot: nothing pinned, its CPUs held through Ray's accounting
        return LagAdvice(
            saturated=(f"raise cluster.cpus_per_life (now {placement.slot_cpus:g}: the CPUs a life holds, server and "
                       f"Locust, at most one Locust process each) and load.processes (\"auto\" sizes it)"),
            starved=("raise cluster.cpus_per_life: nothing is pinned on a Ray slot, so the other lives on its node "
                     "share its CPUs, and more CPUs a life means fewer lives a node"))
    host, load_cpus = _cpus(placement.host_cpus), _cpus(placement.load_cpus)
    procs = placement.processes
    if load_cpus and procs >= len(load_cpus) and len(host) > len(load_cpus) + 1:
        saturated = (f"give the load more CPUs: load.cpus = \"{format_cpus(load_cpus)}\" holds {procs} "
                     f"process{'es' if procs != 1 else ''} at one per CPU; add CPUs there and set load.processes "
                     "to match (or \"auto\")")
    elif load_cpus and procs >= len(load_cpus):
        saturated = (f"the load's {len(load_cpus)} CPU{'s' if len(load_cpus) != 1 else ''} cannot "
                     f"read this many streams: run fewer users per stage, or Locust on a host of its own "
                     "(its master/worker mode)")
    else:
        saturated = (f"raise load.processes above {procs} (\"auto\" sizes it), one per CPU"
                     + (f" of load.cpus \"{format_cpus(load_cpus)}\"" if load_cpus else ""))
    if len(host) < 2:
        starved = "this host has one CPU for Locust and the server: run Locust on another host"
    elif placement.mode in ("off",) or (placement.mode != "user" and not load_cpus):
        server, load = split_suggestion(host)
        starved = (f"set load.placement = \"auto\" (here: server.cpus = \"{server}\", load.cpus = \"{load}\")")
    elif placement.mode == "user":
        server, load = split_suggestion(host)
        starved = (f"keep the server off Locust's CPUs: load.cpus = \"{load}\" and the server on CPU {server} "
                   f"(docker: --cpuset-cpus \"{server}\" in server.argv_template; else taskset -c {server})")
    else:
        starved = (f"other processes run on the load's CPUs {format_cpus(load_cpus)}: stop them, or move "
                   f"Locust with load.cpus to CPUs nothing else uses")
    return LagAdvice(saturated, starved)


def lag_advice(planned: PlacementRecord | None, preflight: PreflightRecord | None = None) -> LagAdvice:
    """The fixes a run's windows name, from the placement its lives ran with (plan.json's, or the one the
    pre-flight settled on)."""
    return advice_for(placement_used(preflight, planned))
