"""The simulated server's startup phase, as vLLM's: context, weights, memory profiling, KV cache, graph capture
(STARTUP_PHASES), the NVML-like memory reading climbing through them (MemoryFile, rewritten every ~100 ms from
process start where LOOKAHEAD_SIM_GPU_FILE points), the log lines vLLM writes, and the startup faults
(--sim-fault fail-start, oom-above-k, slow-start).
"""
from __future__ import annotations

import asyncio
import json
import os
import time

from lookahead_runner.sim import logs
from lookahead_runner.sim.cli import ServeArgs
from lookahead_runner.sim.profiles import Profile

MEMORY_WRITE_INTERVAL_S = 0.1

# vLLM's startup, phase by phase, with its share of the startup time (the scenario's startup_s, or slow-start's);
# the rest of the time (5 %) passes between the last phase and "ready"
STARTUP_PHASES = {
    "context": 0.15,     # the CUDA context: the reading climbs to the activation floor
    "weights": 0.40,     # the target's weights (and the draft's) load
    "profiling": 0.15,   # the memory profiling run: activations at their peak (where oom-above-k fails)
    "kv_cache": 0.10,    # the KV cache is allocated
    "graphs": 0.15,      # CUDA graphs are captured at the reading the KV cache left
}


class MemoryFile:
    """The NVML-like reading the telemetry's sim backend reads (atomic rewrite)."""

    def __init__(self, path: str | None, total_mib: float) -> None:
        self.path, self.total_mib, self.used_mib = path, total_mib, 0.0

    def write(self) -> None:
        if not self.path:
            return
        tmp = f"{self.path}.{os.getpid()}.tmp"
        body = {"t": time.time(), "used_mib": round(self.used_mib, 1), "total_mib": self.total_mib,
                "pid": os.getpid()}
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(body, f)
            os.replace(tmp, self.path)
        except OSError:
            pass

    async def run(self) -> None:
        while True:
            self.write()
            await asyncio.sleep(MEMORY_WRITE_INTERVAL_S)


async def _ramp(memory: MemoryFile, start: float, end: float, seconds: float, stop: asyncio.Event) -> bool:
    """Move the reading from start to end over seconds; True when asked to stop meanwhile."""
    t0 = time.monotonic()
    while True:
        frac = min(1.0, (time.monotonic() - t0) / seconds) if seconds > 0 else 1.0
        memory.used_mib = start + (end - start) * frac
        if frac >= 1.0:
            return stop.is_set()
        try:
            await asyncio.wait_for(stop.wait(), min(MEMORY_WRITE_INTERVAL_S, seconds))
            return True
        except asyncio.TimeoutError:
            pass


def engine_failed(profile: Profile, log: logs.Logger, error: str) -> None:
    *lines, last = logs.startup_failure(profile, error)
    log("ERROR", "engine.py:366" if profile.engine == "v0" else "core.py:1088", "\n".join(lines), role="EngineCore")
    log.write(last)


async def start_engine(args: ServeArgs, profile: Profile, log: logs.Logger, memory: MemoryFile, stop: asyncio.Event):
    """The startup phase, through STARTUP_PHASES. Returns the engine model, None when stopped, or raises ValueError."""
    from lookahead_runner.sim.kv_pool import KVPoolError, size_kv_pool
    from lookahead_runner.sim.model import EngineModel
    from lookahead_runner.vllm.schedule import ScheduleError

    sc, cfg = args.scenario, args.engine
    startup_s = args.faults.get("slow-start") or sc.startup_s
    share = {phase: fraction * startup_s for phase, fraction in STARTUP_PHASES.items()}  # seconds of each
    k = cfg.num_speculative_tokens
    draft_mib = sc.draft_cost(cfg.method).weights_mib if k else 0.0
    weights_mib = sc.target_weights_mib + draft_mib
    context_mib = min(512.0, sc.activation_base_mib)
    source, message = logs.engine_init(profile, args.model, args.speculative_config, k, cfg.method,
                                       cfg.max_model_len, cfg.seed)
    log("INFO", source, message, role="EngineCore")
    if await _ramp(memory, 0.0, context_mib, share["context"], stop):
        return None
    log("INFO", *logs.startup(profile, "load", model=args.model), role="Worker")
    if await _ramp(memory, context_mib, context_mib + weights_mib, share["weights"], stop):
        return None
    loaded_s = share["context"] + share["weights"]
    log("INFO", *logs.startup(profile, "loaded", gib=weights_mib / 1024, s=loaded_s), role="Worker")
    if "fail-start" in args.faults:
        raise ValueError("RuntimeError: CUDA error: an illegal memory access was encountered "
                         "(simulated by --sim-fault fail-start)")
    try:
        oom_k = args.faults.get("oom-above-k")
        if oom_k is not None and k > oom_k:
            raise KVPoolError("No available memory for the cache blocks. Try increasing "
                              "`gpu_memory_utilization` when initializing the engine.", "empty")
        sizing = size_kv_pool(sc, cfg)
    except KVPoolError as e:
        peak = weights_mib + sc.activation_base_mib + sc.activation_mib_per_token * cfg.max_num_seqs * (k + 1)
        await _ramp(memory, memory.used_mib, min(peak, sc.gpu_total_mib), share["profiling"], stop)
        raise ValueError(f"ValueError: {logs.kv_error_text(profile, e)}") from None
    try:
        model = EngineModel(sc, cfg, ignore_schedule="ignore-spec-schedule" in args.faults,
                            draft_fraction=args.faults.draft_fraction)  # the scheduler: the schedule's checks
    except ScheduleError as e:
        raise ValueError(f"ValueError: {e}") from None
    profiled = weights_mib + sizing.activation_peak_mib
    if await _ramp(memory, memory.used_mib, profiled, share["profiling"], stop):
        return None
    log("INFO", *logs.startup(profile, "kv_memory", kv_gib=sizing.num_blocks * sizing.block_mib / 1024,
                              s=share["profiling"]), role="Worker")
    for source, message in logs.kv_cache(profile, sizing.num_blocks, cfg.block_size, sizing.block_mib,
                                         cfg.max_model_len):
        log("INFO", source, message, role="EngineCore")
    if await _ramp(memory, profiled, sizing.used_mib, share["kv_cache"], stop):
        return None
    if await _ramp(memory, sizing.used_mib, sizing.used_mib, share["graphs"], stop):
        return None
    log("INFO", *logs.startup(profile, "graphs", s=share["graphs"]), role="Worker")
    log("INFO", *logs.startup(profile, "ready", s=startup_s), role="EngineCore")
    return model
