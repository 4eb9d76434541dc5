"""`python -m lookahead_runner.sim serve MODEL ...`: one simulated vLLM server process.

Lives like vLLM: a startup phase (weights, memory profiling, KV allocation, graph capture)
during which the NVML-like memory reading climbs, then HTTP listens and logs
"Application startup complete.", then SIGTERM/SIGINT ends it within a second.
With LOOKAHEAD_SIM_GPU_FILE set, the memory reading is rewritten there every ~100 ms from
process start. The emulated vLLM version (profiles.py) comes from `--sim-version V` placed before
the subcommand (`python -m lookahead_runner.sim --sim-version 0.6.6 serve ...`, so a runner's
command prefix selects it for `--version`, `serve --help` and `serve` alike), else from the
environment variable LOOKAHEAD_SIM_VLLM_VERSION, else 0.32.0. `python -c CODE` runs CODE against a
stand-in `vllm` package of that version (sim/introspect.py), as a launcher's interpreter would.
Like vLLM, /v1/* wants the key of `--api-key`, else of the environment variable VLLM_API_KEY when set.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

from lookahead_runner.vllm.secrets import SERVER_KEY_ENV
from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV
from lookahead_runner.sim import logs
from lookahead_runner.sim.cli import ConfigError, ServeArgs, help_text, parse_serve
from lookahead_runner.sim.profiles import DEFAULT_PROFILE, Profile, get_profile

PROFILE_ENV = "LOOKAHEAD_SIM_VLLM_VERSION"
MEMORY_WRITE_INTERVAL_S = 0.1
_TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."
_line = logs.write_line
log: logs.Logger = logs.Logger(get_profile())


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


def _engine_failed(profile: Profile, error: str) -> None:
    *lines, last = logs.startup_failure(profile, error)
    log("ERROR", "engine.py:366" if profile.engine == "v0" else "core.py:1088", "\n".join(lines), role="EngineCore")
    _line(last)


async def _start_engine(args: ServeArgs, profile: Profile, memory: MemoryFile, stop: asyncio.Event):
    """The startup phase. Returns the engine model, None when stopped, or raises ValueError."""
    from lookahead_runner.sim.kv_pool import KVPoolError, size_kv_pool
    from lookahead_runner.sim.model import EngineModel
    from lookahead_runner.vllm.schedule import ScheduleError

    sc, cfg = args.scenario, args.engine
    startup_s = args.faults.get("slow-start") or sc.startup_s
    k = cfg.num_speculative_tokens
    draft_mib = sc.draft_cost(cfg.method).weights_mib if k else 0.0
    weights_mib = sc.target_weights_mib + draft_mib
    context_mib = min(512.0, sc.activation_base_mib)
    source, message = logs.engine_init(profile, args.model, args.speculative_config, k, cfg.method,
                                       cfg.max_model_len, cfg.seed)
    log("INFO", source, message, role="EngineCore")
    if await _ramp(memory, 0.0, context_mib, 0.15 * startup_s, stop):
        return None
    log("INFO", *logs.startup(profile, "load", model=args.model), role="Worker")
    if await _ramp(memory, context_mib, context_mib + weights_mib, 0.4 * startup_s, stop):
        return None
    log("INFO", *logs.startup(profile, "loaded", gib=weights_mib / 1024, s=0.55 * startup_s), role="Worker")
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
        await _ramp(memory, memory.used_mib, min(peak, sc.gpu_total_mib), 0.15 * startup_s, stop)
        raise ValueError(f"ValueError: {logs.kv_error_text(profile, e)}") from None
    try:
        model = EngineModel(sc, cfg)     # the scheduler, and so the per-batch-size schedule's checks
    except ScheduleError as e:
        raise ValueError(f"ValueError: {e}") from None
    profiled = weights_mib + sizing.activation_peak_mib
    if await _ramp(memory, memory.used_mib, profiled, 0.15 * startup_s, stop):
        return None
    log("INFO", *logs.startup(profile, "kv_memory", kv_gib=sizing.num_blocks * sizing.block_mib / 1024,
                              s=0.15 * startup_s), role="Worker")
    for source, message in logs.kv_cache(profile, sizing.num_blocks, cfg.block_size, sizing.block_mib,
                                         cfg.max_model_len):
        log("INFO", source, message, role="EngineCore")
    if await _ramp(memory, profiled, sizing.used_mib, 0.1 * startup_s, stop):
        return None
    if await _ramp(memory, sizing.used_mib, sizing.used_mib, 0.15 * startup_s, stop):
        return None
    log("INFO", *logs.startup(profile, "graphs", s=0.15 * startup_s), role="Worker")
    log("INFO", *logs.startup(profile, "ready", s=startup_s), role="EngineCore")
    return model


async def _serve(args: ServeArgs, profile: Profile) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    memory = MemoryFile(os.environ.get(SIM_GPU_FILE_ENV), args.scenario.gpu_total_mib)
    memory.write()
    memory_task = asyncio.create_task(memory.run())
    for source, message in logs.server_start(profile, args.non_default):
        log("INFO", source, message)
    try:
        model = await _start_engine(args, profile, memory, stop)
        exit_code = 0 if model is None else await _listen(args, profile, model, stop)
    except ValueError as e:
        _engine_failed(profile, str(e))
        exit_code = 1
    memory_task.cancel()
    memory.used_mib = 0.0          # the process is gone: so is its device memory
    memory.write()
    return exit_code


async def _listen(args: ServeArgs, profile: Profile, model, stop: asyncio.Event) -> int:
    """Serve HTTP until SIGTERM/SIGINT (exit 0) or a simulated engine death (exit 1)."""
    from aiohttp import web
    from aiohttp.log import access_logger

    from lookahead_runner.sim.app import SimServer, access_logger_class

    # as vLLM: `args.api_key or [envs.VLLM_API_KEY]`
    api_keys = list(args.api_keys) or [key for key in [os.environ.get(SERVER_KEY_ENV, "")] if key]
    server = SimServer(model, profile, args.served_model_name, args.faults, log, api_keys,
                       args.log_stats, args.stream_interval)
    runner = web.AppRunner(server.build_app(), shutdown_timeout=0.2, access_log_class=access_logger_class(_line),
                           access_log=access_logger if args.access_log else None)
    await runner.setup()
    try:
        await web.TCPSite(runner, args.host, args.port).start()
    except OSError as e:
        log("ERROR", "launcher.py:120", f"[Errno {e.errno}] error while attempting to bind on address "
            f"({args.host!r}, {args.port}): {e.strerror}")
        await runner.cleanup()
        return 1
    tasks = [asyncio.create_task(server.engine_loop()), asyncio.create_task(server.stats_loop())]
    if profile.engine == "v0":
        log("INFO", "api_server.py:712", f"Starting vLLM API server on http://{args.host}:{args.port}")
    else:
        log("INFO", "entry.py:140", f"Starting vLLM server on http://{args.host}:{args.port}")
    _line(f"INFO:     Started server process [{os.getpid()}]")
    _line("INFO:     Waiting for application startup.")
    _line("INFO:     Application startup complete.")
    exit_code = await _run_faults_until_stopped(server, args, profile, stop)
    if profile.engine != "v0":
        log("INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered")
    _line("INFO:     Shutting down")
    for task in tasks:
        task.cancel()
    try:
        await asyncio.wait_for(runner.cleanup(), 0.8)
    except asyncio.TimeoutError:
        pass
    _line("INFO:     Application shutdown complete.")
    return exit_code


async def _run_faults_until_stopped(server, args: ServeArgs, profile: Profile, stop: asyncio.Event) -> int:
    ready_s = time.monotonic()
    faults = args.faults
    die_after, hang_after, mute_after = faults.get("die-after"), faults.get("hang-after"), faults.get(
        "unresponsive-after")
    while not stop.is_set():
        alive_s = time.monotonic() - ready_s
        if hang_after is not None and alive_s >= hang_after:
            server.hung = True
        if mute_after is not None and alive_s >= mute_after:
            server.hung = server.unresponsive = True
        if die_after is not None and alive_s >= die_after:
            for source, message in logs.engine_died(profile):
                log("ERROR", source, message, role="EngineCore")
            return 1
        try:
            await asyncio.wait_for(stop.wait(), 0.1)
        except asyncio.TimeoutError:
            pass
    return 0


def _pop_sim_version(argv: list[str]) -> tuple[list[str], str | None]:
    """`--sim-version V` / `--sim-version=V` before the subcommand."""
    if argv and argv[0].startswith("--sim-version="):
        return argv[1:], argv[0].split("=", 1)[1]
    if argv and argv[0] == "--sim-version":
        return argv[2:], argv[1] if len(argv) > 1 else ""
    return argv, None


def main(argv: list[str] | None = None) -> int:
    global log
    argv, version = _pop_sim_version(list(sys.argv[1:] if argv is None else argv))
    try:
        profile = get_profile(version if version is not None else os.environ.get(PROFILE_ENV, DEFAULT_PROFILE))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    log = logs.Logger(profile)
    if not argv or argv[0] in ("-h", "--help"):
        print(_TOP_USAGE)
        return 0
    if argv[0] in ("-v", "--version"):
        print(profile.version)
        return 0
    if argv[0] == "python":  # the emulated vLLM's interpreter, for the probe (introspect.py)
        from lookahead_runner.sim.introspect import run_python

        return run_python(argv[1:], profile)
    if argv[0] != "serve":
        print(_TOP_USAGE, file=sys.stderr)
        print(f"vllm: error: argument subparser: invalid choice: {argv[0]!r} (choose from 'chat', 'complete', "
              "'serve', 'bench', 'collect-env', 'run-batch')", file=sys.stderr)
        return 2
    text = help_text(argv[1:], profile)
    if text is not None:
        sys.stdout.write(text)
        return 0
    try:
        args = parse_serve(argv[1:], profile)
    except ConfigError as e:
        log("ERROR", "api_server.py:1977", str(e))
        return 1
    return asyncio.run(_serve(args, profile))


if __name__ == "__main__":
    sys.exit(main())
