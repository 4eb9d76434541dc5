"""`python -m lookahead_runner.sim serve MODEL ...`: one simulated vLLM server process.

Lives like vLLM: a startup phase (weights, memory profiling, KV allocation, graph capture)
during which the NVML-like memory reading climbs, then HTTP listens and logs
"Application startup complete.", then SIGTERM/SIGINT ends it within a second.
With LOOKAHEAD_SIM_GPU_FILE set, the memory reading is rewritten there every ~100 ms from
process start. LOOKAHEAD_SIM_VLLM_VERSION picks the emulated vLLM profile.
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time

from lookahead_runner.sim.cli import ConfigError, ServeArgs, help_text, parse_serve
from lookahead_runner.sim.profiles import DEFAULT_PROFILE, Profile, get_profile

GPU_FILE_ENV = "LOOKAHEAD_SIM_GPU_FILE"
PROFILE_ENV = "LOOKAHEAD_SIM_VLLM_VERSION"
MEMORY_WRITE_INTERVAL_S = 0.1
_TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def _line(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def log(level: str, source: str, message: str, role: str = "APIServer") -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    for part in message.splitlines() or [""]:
        _line(f"({role} pid={os.getpid()}) {level} {stamp} [{source}] {part}")


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


def _engine_failed(error: str) -> None:
    log("ERROR", "core.py:1088", "EngineCore failed to start.\nTraceback (most recent call last):\n"
        '  File "vllm/v1/engine/core.py", line 1079, in run_engine_core\n'
        '  File "vllm/v1/core/kv_cache_utils.py", line 1045, in check_enough_kv_cache_memory\n'
        f"{error}", role="EngineCore")
    _line("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")


async def _start_engine(args: ServeArgs, profile: Profile, memory: MemoryFile, stop: asyncio.Event):
    """The startup phase. Returns the engine model, None when stopped, or raises ValueError."""
    from lookahead_runner.sim.model import EngineModel, size_kv_pool

    sc, cfg = args.scenario, args.engine
    startup_s = args.faults.get("slow-start") or sc.startup_s
    k = cfg.num_speculative_tokens
    draft_mib = sc.draft_cost(cfg.method).weights_mib if k else 0.0
    weights_mib = sc.target_weights_mib + draft_mib
    context_mib = min(512.0, sc.activation_base_mib)
    log("INFO", "core.py:133", f"Initializing a V1 LLM engine (v{profile.version}) with config: "
        f"model={args.model!r}, speculative_config={args.speculative_config}, max_seq_len={cfg.max_model_len}, "
        f"seed={cfg.seed}", role="EngineCore")
    if await _ramp(memory, 0.0, context_mib, 0.15 * startup_s, stop):
        return None
    log("INFO", "gpu_model_runner.py:2970", f"Starting to load model {args.model}...", role="Worker")
    if await _ramp(memory, context_mib, context_mib + weights_mib, 0.4 * startup_s, stop):
        return None
    log("INFO", "gpu_model_runner.py:3062", f"Model loading took {weights_mib / 1024:.4f} GiB and "
        f"{0.55 * startup_s:.6f} seconds", role="Worker")
    if "fail-start" in args.faults:
        raise ValueError("RuntimeError: CUDA error: an illegal memory access was encountered "
                         "(simulated by --sim-fault fail-start)")
    try:
        oom_k = args.faults.get("oom-above-k")
        if oom_k is not None and k > oom_k:
            raise ValueError("No available memory for the cache blocks. Try increasing "
                             "`gpu_memory_utilization` when initializing the engine.")
        sizing = size_kv_pool(sc, cfg)
    except ValueError as e:
        peak = weights_mib + sc.activation_base_mib + sc.activation_mib_per_token * cfg.max_num_seqs * (k + 1)
        await _ramp(memory, memory.used_mib, min(peak, sc.gpu_total_mib), 0.15 * startup_s, stop)
        raise ValueError(f"ValueError: {e}") from None
    model = EngineModel(sc, cfg)
    profiled = weights_mib + sizing.activation_peak_mib
    if await _ramp(memory, memory.used_mib, profiled, 0.15 * startup_s, stop):
        return None
    log("INFO", "gpu_worker.py:391", f"Available KV cache memory: {sizing.num_blocks * sizing.block_mib / 1024:.2f} "
        "GiB", role="Worker")
    kv_line = profile.kv_cache_log_line(sizing.num_blocks * cfg.block_size, cfg.max_model_len)
    log("INFO", "kv_cache_utils.py:2327", kv_line, role="EngineCore")
    if await _ramp(memory, profiled, sizing.used_mib, 0.1 * startup_s, stop):
        return None
    if await _ramp(memory, sizing.used_mib, sizing.used_mib, 0.15 * startup_s, stop):
        return None
    log("INFO", "gpu_model_runner.py:4020", f"Graph capturing finished in {0.15 * startup_s:.0f} secs", role="Worker")
    log("INFO", "core.py:402", f"init engine (profile, create kv cache, warmup model) took {startup_s:.2f} s",
        role="EngineCore")
    return model


async def _serve(args: ServeArgs, profile: Profile) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    memory = MemoryFile(os.environ.get(GPU_FILE_ENV), args.scenario.gpu_total_mib)
    memory.write()
    memory_task = asyncio.create_task(memory.run())
    log("INFO", "api_utils.py:347", f"vLLM API server version {profile.version}")
    log("INFO", "api_utils.py:286", f"non-default args: {args.non_default}")
    try:
        model = await _start_engine(args, profile, memory, stop)
        exit_code = 0 if model is None else await _listen(args, profile, model, stop)
    except ValueError as e:
        _engine_failed(str(e))
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

    server = SimServer(model, profile, args.served_model_name, args.faults, log, list(args.api_keys),
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
    log("INFO", "entry.py:140", f"Starting vLLM server on http://{args.host}:{args.port}")
    _line(f"INFO:     Started server process [{os.getpid()}]")
    _line("INFO:     Waiting for application startup.")
    _line("INFO:     Application startup complete.")
    exit_code = await _run_faults_until_stopped(server, args, stop)
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


async def _run_faults_until_stopped(server, args: ServeArgs, stop: asyncio.Event) -> int:
    ready_s = time.monotonic()
    die_after, hang_after = args.faults.get("die-after"), args.faults.get("hang-after")
    while not stop.is_set():
        try:
            await asyncio.wait_for(stop.wait(), 0.1)
        except asyncio.TimeoutError:
            pass
        alive_s = time.monotonic() - ready_s
        if hang_after is not None and alive_s >= hang_after:
            server.hung = True
        if die_after is not None and alive_s >= die_after:
            log("ERROR", "core.py:1095", "EngineCore encountered a fatal error (simulated by --sim-fault die-after)",
                role="EngineCore")
            log("ERROR", "async_llm.py:906", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered "
                "an issue. See stack trace (above) for the root cause.")
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        profile = get_profile(os.environ.get(PROFILE_ENV, DEFAULT_PROFILE))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if not argv or argv[0] in ("-h", "--help"):
        print(_TOP_USAGE)
        return 0
    if argv[0] in ("-v", "--version"):
        print(profile.version)
        return 0
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
        log("ERROR", "api_server.py:1977", f"pydantic_core._pydantic_core.ValidationError: {e}")
        return 1
    return asyncio.run(_serve(args, profile))


if __name__ == "__main__":
    sys.exit(main())
