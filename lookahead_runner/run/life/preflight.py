"""The pre-flight: before any life is measured, can Locust read this server's streams on time here?

Run by each runner invocation (a sweep, its --resume) on its first server life (on a Ray cluster, each
slot's first: preflight_turn.py), once the server is ready and warm, and again on the next life when that
server died first:

1. idle: `lagprobe` on the load's CPUs for a second while the server is idle. A late wake-up here
   means other processes on this host hold those CPUs, whatever the server does.
2. loaded: Locust exactly as the lives run it (same argv, CPUs and process count) for
   `load.preflight_s` at the highest stage's users, with outputs of at most 16 tokens so that
   requests finish inside it. From its requests.csv: the loop lag p99 (as the windows judge it),
   each process's CPU and chunk rate, and so the CPU cost of one chunk on this host.
3. verdict: with `load.processes = "auto"` the count is re-sized from the measured cost (each
   process under 60% of a core at the highest stage, at most one per load CPU), and measured once
   more if it grew; a lag past `decision.max_client_lag_p99_ms` that remains stops the sweep here
   with its cause (saturated or starved, placement.lag_reason) and the exact setting that fixes it,
   instead of spending every life on windows that would all be invalid.

Files: RUN_DIR/preflight.json (figures, verdict, the placement the lives use: a PreflightRecord,
runfolder/preflight.py) and RUN_DIR/preflight/ (the Locust run's files).
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from ...runfolder import results
from ...config import StageConfig, SweepConfig
from .load import locust_argv, locust_deadline_s, run_locust
from ...contracts.cpus import format_cpus
from ...runfolder.lag_advice import lag_reason
from ...runfolder.preflight import IdleLag, PreflightRecord, PreflightRun, write_preflight
from .placement import TARGET_CPU_FRAC, Placement, pin, processes_for
from ...runfolder.lag_advice import advice_for
from .server import ServerError

OUTPUT_TOKENS = 16
IDLE_PROBE_S = 1.0
SATURATED_CPU_PCT = 90.0  # a process this busy read fewer chunks than were sent: its rate is a lower bound


class PreflightError(RuntimeError):
    """The run cannot give valid windows as placed: one line with the cause and the fix."""


@dataclass(frozen=True)
class LoadedFigures:
    users: int
    requests: int
    lag_p99_ms: float  # over requests, of each request's loop lag p99: what the windows are judged by
    lag_p50_ms: float  # the typical request's: above the gate, nearly every window would be invalid
    busiest_cpu_pct: float
    total_cpu_pct: float
    chunks_per_s: float
    processes_seen: int

    @property
    def chunk_cpu_us(self) -> float:
        """CPU time one chunk costs Locust here, in microseconds (NaN when not measured)."""
        if not self.chunks_per_s or math.isnan(self.total_cpu_pct):
            return float("nan")
        return self.total_cpu_pct / 100.0 / self.chunks_per_s * 1e6

    def describe(self) -> str:
        cpu = "n/a" if math.isnan(self.busiest_cpu_pct) else f"{self.busiest_cpu_pct:.0f}%"
        cost = "" if math.isnan(self.chunk_cpu_us) else f", {self.chunk_cpu_us:.0f} us per chunk"
        return (f"{self.users} users: loop lag p99 {self.lag_p99_ms:.1f} ms (typical request "
                f"{self.lag_p50_ms:.1f} ms), busiest Locust process {cpu} of a "
                f"core ({self.processes_seen} process{'es' if self.processes_seen != 1 else ''}), "
                f"{self.chunks_per_s:.0f} chunks/s{cost}")

    def to_record(self, processes: int) -> PreflightRun:
        """preflight.json's entry for this run, made with `processes` Locust processes."""
        return PreflightRun.written(asdict(self) | {"processes": processes, "chunk_cpu_us": round(self.chunk_cpu_us, 2)})


def loaded_figures(requests: pd.DataFrame, stages: pd.DataFrame, users: int) -> LoadedFigures | None:
    """The pre-flight stage's figures from its requests.csv / stages.csv; None when no request finished
    after the first second (the spawn burst) of the stage."""
    if requests.empty or stages.empty:
        return None
    t_start, t_end = float(stages["t_start_s"].iloc[0]), float(stages["t_end_s"].iloc[-1])
    settle = min(1.0, 0.3 * (t_end - t_start))
    ok = requests[(requests["ok"] == 1) & (requests["t_done_s"] >= t_start + settle)]
    if ok.empty:
        return None
    span = max(float(ok["t_done_s"].max()) - (t_start + settle), 1e-3)
    lag = pd.to_numeric(ok["lag_p99_ms"], errors="coerce").dropna()
    by_process = ok.groupby(ok["client"].astype(str))
    cpu = by_process["client_cpu_pct"].median().dropna()
    return LoadedFigures(
        users=users, requests=len(ok), lag_p99_ms=float(lag.quantile(0.99)) if len(lag) else float("nan"),
        lag_p50_ms=float(lag.quantile(0.5)) if len(lag) else float("nan"),
        busiest_cpu_pct=float(cpu.max()) if len(cpu) else float("nan"),
        total_cpu_pct=float(cpu.sum()) if len(cpu) else float("nan"),
        chunks_per_s=float(pd.to_numeric(ok["chunks"], errors="coerce").sum()) / span,
        processes_seen=int(by_process.ngroups))


def resized(figures: LoadedFigures, placement: Placement, peak_users: int) -> tuple[int, str]:
    """The process count "auto" settles on from the measured cost per chunk, and why."""
    room = placement.load_room()
    cost = figures.chunk_cpu_us
    if math.isnan(cost):
        return placement.processes, "processes auto: kept (the pre-flight measured no CPU)"
    needed = processes_for(peak_users, figures.chunks_per_s / figures.users, cost, TARGET_CPU_FRAC)
    if figures.busiest_cpu_pct >= SATURATED_CPU_PCT:
        needed = max(needed, placement.processes + 1)
    processes = min(needed, room)
    why = (f"processes auto: {processes} from the pre-flight ({cost:.0f} us per chunk, "
           f"{figures.chunks_per_s / figures.users:.0f} chunks/s per user at {figures.users} users)")
    if processes < needed:
        why += f"; {needed} wanted, {room} CPU{'s' if room != 1 else ''} for the load"
    return processes, why


def run_preflight(config: SweepConfig, base_url: str, placement: Placement, run_dir: Path, say,
                  env: dict[str, str], alive=lambda: "") -> Placement:
    """Measure, decide, write preflight.json; the placement the lives use (see the module docstring).
    Raises PreflightError when the run cannot be valid, ServerError when the server died meanwhile."""
    gate = config.decision.max_client_lag_p99_ms
    advice = advice_for(placement.to_record())
    peak = config.load.peak_users
    at = preflight_stage(config).label
    idle = idle_lag(placement.load_cpus)
    record = PreflightRecord(placement_before=placement.to_record(), gate_ms=gate, idle=idle)
    say(f"  pre-flight, server idle: Locust's CPUs wake late by p50 {idle.lag_p50_ms:.1f} ms, "
        f"p99 {idle.lag_p99_ms:.1f} ms")
    if idle.lag_p50_ms > gate:
        where = f"CPUs {format_cpus(placement.load_cpus)}" if placement.load_cpus else "CPUs"
        _stop(run_dir, record, f"pre-flight: Locust's {where} are busy while the server is idle (a sleep wakes "
                               f"{idle.lag_p50_ms:.0f} ms late at p50 > {gate:g} ms): other processes on this host "
                               f"hold them; {advice.starved}")
    for attempt in range(2):
        figures = loaded(config, base_url, placement, run_dir / "preflight" / f"run{attempt}", env, alive)
        if figures is None:
            say(f"  pre-flight: no request finished within {config.load.preflight_s:g} s at {at}; not judged")
            record.verdict = "not judged"
            break
        record.runs.append(figures.to_record(placement.processes))
        say(f"  pre-flight at {figures.describe()}")
        processes, why = resized(figures, placement, peak) if placement.processes_auto else (placement.processes, "")
        # a stall now and then (a busy neighbour) spoils some windows; a lagging typical request spoils all
        lagging = not math.isnan(figures.lag_p50_ms) and figures.lag_p50_ms > gate
        spiky = not math.isnan(figures.lag_p99_ms) and figures.lag_p99_ms > gate
        if (lagging or spiky) and processes > placement.processes and attempt == 0:
            placement = placement.with_processes(processes, why)
            say(f"  pre-flight: {why}; measuring again")
            continue
        if lagging:
            _stop(run_dir, record, f"pre-flight at {at}: "
                                   + lag_reason(figures.lag_p50_ms, figures.busiest_cpu_pct, gate,
                                                advice_for(placement.to_record()),
                                                "the typical request's loop lag p99"))
        if spiky:
            say(f"  pre-flight: some requests lagged (p99 {figures.lag_p99_ms:.0f} ms > {gate:g} ms): windows "
                f"with such stalls will be invalid; if they are many, "
                + lag_reason(figures.lag_p99_ms, figures.busiest_cpu_pct, gate,
                             advice_for(placement.to_record())).split("; ", 1)[-1])
        if processes != placement.processes:
            placement = placement.with_processes(processes, why)
            say(f"  pre-flight: {why}")
        record.verdict = "ok"
        break
    record.placement = placement.to_record()
    write_preflight(run_dir, record)
    return placement


def _stop(run_dir: Path, record: PreflightRecord, reason: str) -> None:
    record.verdict, record.reason = "stop", reason
    write_preflight(run_dir, record)
    raise PreflightError(reason)


def idle_lag(cpus: tuple[int, ...], seconds: float = IDLE_PROBE_S) -> IdleLag:
    """lagprobe's figures, run on `cpus` (a failed probe reads as no lag: it must not stop a sweep)."""
    try:
        done = subprocess.run([sys.executable, "-m", "lookahead_runner.run.life.lagprobe", "--seconds", f"{seconds:g}"],
                              capture_output=True, text=True, timeout=seconds + 30, preexec_fn=pin(cpus))
        return IdleLag.model_validate(json.loads(done.stdout.strip().splitlines()[-1]))
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):  # pydantic's ValidationError is a ValueError
        return IdleLag(lag_p50_ms=0.0, lag_p99_ms=0.0, error="the lag probe did not run")


def loaded(config: SweepConfig, base_url: str, placement: Placement, out: Path, env: dict[str, str],
           alive) -> LoadedFigures | None:
    """One Locust run at the highest stage's users, placed as the lives will be; its figures."""
    out.mkdir(parents=True, exist_ok=True)
    stage = preflight_stage(config)
    # with workload variants, the shortest: its requests turn around fastest, the most chunks a second to read
    variant = min(config.load.variants, key=lambda v: v.context_tokens)
    load = config.load.model_copy(update={
        "stages": [stage],
        "prompt_tokens": variant.prompt_tokens, "temperature": variant.temperature,
        "output_tokens": min(OUTPUT_TOKENS, variant.output_tokens), "processes": placement.processes})
    argv = locust_argv(base_url, out, config.server.served_model, load, setting_name="preflight")
    deadline_s = locust_deadline_s(load, config.load.preflight_s)
    result = run_locust(argv, out / "locust.log", deadline_s, env=env, abort=alive, cpus=placement.load_cpus)
    if result.aborted:
        raise ServerError(result.aborted)
    requests = results.read_csv(out / "requests.csv")
    return loaded_figures(requests, results.read_csv(out / "stages.csv"), stage.users or in_flight(requests))


def preflight_stage(config: SweepConfig) -> StageConfig:
    """The pre-flight's one stage: the highest user stage's users; with rate stages only, the highest rate."""
    load = config.load
    if load.user_stages:
        return StageConfig(users=load.peak_users, duration_s=load.preflight_s)
    return StageConfig(rate=max(stage.rate or 0.0 for stage in load.stages), duration_s=load.preflight_s)


def in_flight(requests: pd.DataFrame) -> int:
    """A rate stage's mean requests in flight (its "users"): the requests' time in flight over the span they cover."""
    ok = requests[requests["ok"] == 1] if len(requests) and "ok" in requests else requests.iloc[0:0]
    if ok.empty:
        return 1
    span = float(ok["t_done_s"].max()) - float(ok["t_send_s"].min())
    busy = float(pd.to_numeric(ok["e2e_ms"], errors="coerce").sum()) / 1000.0
    return max(1, round(busy / span)) if span > 0 else 1
