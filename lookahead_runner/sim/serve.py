"""One simulated vLLM `serve` process: the startup phase (startup.py), then HTTP (app.py) until SIGTERM/SIGINT
ends it within a second (exit 0), or a simulated engine death (exit 1). Like vLLM, /v1/* wants the key of
`--api-key`, else of the environment variable VLLM_API_KEY when set.
"""
from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import time

from lookahead_runner.contracts.records import SIM_GPU_FILE_ENV, SIM_LIFE_ENV
from lookahead_runner.sim import logs, restart
from lookahead_runner.sim.cli import ServeArgs
from lookahead_runner.sim.profiles import Profile
from lookahead_runner.sim.startup import MemoryFile, engine_failed, start_engine
from lookahead_runner.vllm.secrets import SERVER_KEY_ENV


async def serve(args: ServeArgs, profile: Profile) -> int:
    """One `serve`: the startup phase, then HTTP until SIGTERM/SIGINT; the process's exit code."""
    log = logs.Logger(profile)
    spread = args.scenario.restart_spread_frac or args.scenario.restart_alpha_sd
    luck = restart.draw(args.scenario, args.engine.seed, restart.life_name(os.environ.get(SIM_LIFE_ENV)))
    args = dataclasses.replace(args, scenario=restart.for_life(args.scenario, luck))
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    memory = MemoryFile(os.environ.get(SIM_GPU_FILE_ENV), args.scenario.gpu_total_mib)
    memory.write()
    memory_task = asyncio.create_task(memory.run())
    for source, message in logs.server_start(profile, args.non_default):
        log("INFO", source, message)
    if spread:
        log("INFO", "sim/restart.py", luck.text(args.scenario))
    try:
        model = await start_engine(args, profile, log, memory, stop)
        exit_code = 0 if model is None else await _listen(args, profile, log, model, stop)
    except ValueError as e:
        engine_failed(profile, log, str(e))
        exit_code = 1
    memory_task.cancel()
    memory.used_mib = 0.0          # the process is gone: so is its device memory
    memory.write()
    return exit_code


async def _listen(args: ServeArgs, profile: Profile, log: logs.Logger, model, stop: asyncio.Event) -> int:
    """Serve HTTP until SIGTERM/SIGINT (exit 0) or a simulated engine death (exit 1)."""
    from aiohttp import web
    from aiohttp.log import access_logger

    from lookahead_runner.sim.app import SimServer, access_logger_class

    # as vLLM: `args.api_key or [envs.VLLM_API_KEY]`
    api_keys = list(args.api_keys) or [key for key in [os.environ.get(SERVER_KEY_ENV, "")] if key]
    server = SimServer(model, profile, args.served_model_name, args.faults, log, api_keys,
                       args.log_stats, args.stream_interval, args.spec_metrics_level)
    runner = web.AppRunner(server.build_app(), shutdown_timeout=0.2, access_log_class=access_logger_class(log.write),
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
    log.write(f"INFO:     Started server process [{os.getpid()}]")
    log.write("INFO:     Waiting for application startup.")
    log.write("INFO:     Application startup complete.")
    exit_code = await _run_faults_until_stopped(server, args, profile, log, stop)
    if profile.engine != "v0":
        log("INFO", "launcher.py:254", "[shutdown] API server: shutdown triggered")
    log.write("INFO:     Shutting down")
    for task in tasks:
        task.cancel()
    try:
        await asyncio.wait_for(runner.cleanup(), 0.8)
    except asyncio.TimeoutError:
        pass
    log.write("INFO:     Application shutdown complete.")
    return exit_code


async def _run_faults_until_stopped(server, args: ServeArgs, profile: Profile, log: logs.Logger,
                                    stop: asyncio.Event) -> int:
    """The faults of a running server (--sim-fault die-after, hang-after, unresponsive-after) until stopped."""
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
