"""A run folder's preflight.json and the placement record it shares with plan.json, typed and versioned.

    preflight.json  PreflightRecord: the placement the pre-flight started from, the client-lag gate, the idle
                    probe (IdleLag), each loaded Locust run (PreflightRun), the verdict (ok | not judged | stop),
                    why it stopped, and the placement the lives use
    plan.json       Plan.placement: a PlacementRecord (run/life/placement.py Placement.to_record writes it)

run/life/preflight.py writes it (write_preflight); finalize and the report read it (read_preflight). On a Ray cluster each
slot's own is kept in preflight-slots/<n>-<slot>/ too (read_slot_preflights), preflight.json being the last. Every field has a
default, so a file cut short or written by another version still reads; fields this version does not name are
kept. Floats the pre-flight did not measure are NaN, written as JSON's NaN token (as results.write_json always
wrote them) and read back as NaN.
Schema history: preflight 1 (the first; a file without "version", written before the records were typed, has
the same keys and reads as 1).
"""
from __future__ import annotations

import math
from pathlib import Path

from pydantic import Field, ValidationError

from .record import Record
from .results import read_json, write_json

PREFLIGHT_VERSION = 1
PREFLIGHT_FILE = "preflight.json"
SLOT_PREFLIGHTS = "preflight-slots"  # a Ray run: each slot's own pre-flight, <n>-<slot>/ in the order they came back

NAN = math.nan


class PlacementRecord(Record):
    """Where a run put its processes (run/life/placement.py Placement), CPU lists as `taskset -c` writes them."""

    mode: str = "off"                 # auto | manual | off | user | single-cpu | slot (a Ray slot: nothing pinned)
    server_cpus: str = ""             # "" = not pinned
    load_cpus: str = ""
    processes: int = 1                # Locust processes
    processes_auto: bool = False      # load.processes = "auto"
    server_env: dict[str, str] = Field(default_factory=dict)  # what placement adds to the server's env
    host_cpus: str = ""
    processes_why: str = ""
    slot_cpus: float = 0.0            # mode "slot": the Ray CPUs a life holds (cluster.cpus_per_life)
    description: str = ""             # Placement.describe(): the line the progress output and the report show


class IdleLag(Record):
    """The idle probe (run/life/lagprobe.py) on the load's CPUs: how late a sleep wakes there while the server is idle.
    lagprobe's other figures (samples, lag_max_ms, cpu_pct) are kept as they come."""

    lag_p50_ms: float = NAN
    lag_p99_ms: float = NAN
    error: str = ""                   # why the probe did not run ("" when it ran); its lags then read as 0


class PreflightRun(Record):
    """One loaded Locust run of the pre-flight: run/life/preflight.py LoadedFigures, the process count it ran with and
    the CPU cost of one chunk it measured (NaN: not measured)."""

    users: int = 0
    requests: int = 0
    lag_p99_ms: float = NAN           # over requests, of each request's loop lag p99
    lag_p50_ms: float = NAN           # the typical request's
    busiest_cpu_pct: float = NAN
    total_cpu_pct: float = NAN
    chunks_per_s: float = NAN
    processes_seen: int = 0
    processes: int = 1
    chunk_cpu_us: float = NAN


class PreflightRecord(Record):
    """preflight.json: what the pre-flight measured and decided (run/life/preflight.py's module docstring)."""

    version: int = PREFLIGHT_VERSION
    placement_before: PlacementRecord | None = None  # the placement it started from
    gate_ms: float = NAN              # decision.max_client_lag_p99_ms
    idle: IdleLag | None = None
    runs: list[PreflightRun] = Field(default_factory=list)
    verdict: str = ""                 # ok | not judged | stop ("" : cut before it was decided)
    reason: str = ""                  # why it stopped (one line); "" otherwise
    placement: PlacementRecord | None = None  # the placement the lives use; None when it stopped


def preflight_path(run_dir: Path) -> Path:
    return Path(run_dir) / PREFLIGHT_FILE


def write_preflight(run_dir: Path, record: PreflightRecord) -> None:
    """Atomically (results.write_json); NaN stays NaN."""
    write_json(preflight_path(run_dir), record.model_dump(mode="json"))


def read_preflight(run_dir: Path) -> PreflightRecord | None:
    """The run's preflight.json, or None: no pre-flight ran, or the file is unreadable or not a record."""
    try:
        return PreflightRecord.model_validate(read_json(preflight_path(run_dir)))
    except (OSError, ValueError, ValidationError):
        return None


def read_slot_preflights(run_dir: Path) -> dict[str, PreflightRecord | None]:
    """A Ray run's SLOT_PREFLIGHTS: each slot's record by its folder's name, in the order they came back (None:
    unreadable); {} where there is none."""
    folder = Path(run_dir) / SLOT_PREFLIGHTS
    if not folder.is_dir():
        return {}
    return {entry.name: read_preflight(entry) for entry in sorted(folder.iterdir()) if entry.is_dir()}


def placement_used(preflight: PreflightRecord | None, planned: PlacementRecord | None) -> PlacementRecord | None:
    """The placement a run's lives ran with: the one the pre-flight settled on, else plan.json's."""
    return preflight.placement if preflight is not None and preflight.placement is not None else planned
