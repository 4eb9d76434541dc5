"""Why Locust's loop lagged past the gate, and the fix for this run's placement: what a window's invalid
reason (analysis.py) and the pre-flight (preflight.py) say. The advice itself is made from the placement
(placement.advice_for)."""
from __future__ import annotations

from dataclasses import dataclass

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
