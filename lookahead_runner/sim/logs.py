"""The simulator's log lines in each generation's format (docs/vllm-facts.md, "Log lines worth parsing").

V1 (0.10+): `(APIServer pid=N) INFO 11-29 17:15:33 [api_utils.py:347] message`, periodic
`Engine 000: Avg prompt throughput: ...` and `SpecDecoding metrics: ...` lines, startup
`GPU KV cache size: N tokens` + `Maximum concurrency for T tokens per request: X.XXx`.
V0 (0.6): `INFO 11-29 17:15:33 metrics.py:467] message`, `Avg prompt throughput: ... Running: N
reqs, Swapped: 0 reqs, Pending: M reqs, GPU KV cache usage: Z%, CPU KV cache usage: 0.0%.`,
`Speculative metrics: Draft acceptance rate: ...` and startup `# GPU blocks: N, # CPU blocks: M`.
Pure apart from `Logger`, which writes (and flushes) one line at a time.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Callable, NamedTuple

from lookahead_runner.sim.kv_pool import KVPoolError
from lookahead_runner.sim.profiles import Profile

Line = tuple[str, str]          # (source "file.py:line", message)
CPU_SWAP_SPACE_MIB = 4096.0     # V0's --swap-space default (4 GiB) -> its "# CPU blocks"


def write_line(text: str) -> None:
    """As vLLM's logging: a line that cannot be written (the reader of the pipe is gone) is dropped."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except OSError:
        pass


class Logger:
    def __init__(self, profile: Profile, write: Callable[[str], None] = write_line) -> None:
        self.v0 = profile.engine == "v0"
        self.write = write

    def __call__(self, level: str, source: str, message: str, role: str = "APIServer") -> None:
        stamp = time.strftime("%m-%d %H:%M:%S")
        prefix = f"{level} {stamp} {source}]" if self.v0 else f"({role} pid={os.getpid()}) {level} {stamp} [{source}]"
        for part in message.splitlines() or [""]:
            self.write(f"{prefix} {part}")


def server_start(profile: Profile, non_default: dict) -> list[Line]:
    if profile.engine == "v0":
        args = ", ".join(f"{key}={value!r}" for key, value in non_default.items())
        return [("api_server.py:651", f"vLLM API server version {profile.version}"),
                ("api_server.py:652", f"args: Namespace({args})")]
    return [("api_utils.py:347", f"vLLM API server version {profile.version}"),
            ("api_utils.py:286", f"non-default args: {non_default}")]


def engine_init(profile: Profile, model: str, spec: dict | None, k: int, method: str, max_len: int,
                seed: int) -> Line:
    if profile.engine == "v0":
        spec_text = (f"SpeculativeConfig(draft_model={spec['model']!r}, num_spec_tokens={k})" if spec else "None")
        return ("llm_engine.py:249", f"Initializing an LLM engine (v{profile.version}) with config: model={model!r}, "
                f"speculative_config={spec_text}, max_seq_len={max_len}, seed={seed}")
    spec_text = (f"SpeculativeConfig(method={method!r}, model={spec.get('model')!r}, num_spec_tokens={k})"
                 if spec else "None")
    return ("core.py:133", f"Initializing a V1 LLM engine (v{profile.version}) with config: model={model!r}, "
            f"speculative_config={spec_text}, max_seq_len={max_len}, seed={seed}")


_STARTUP = {
    "v1": {"load": ("gpu_model_runner.py:2970", "Starting to load model {model}..."),
           "loaded": ("gpu_model_runner.py:3062", "Model loading took {gib:.4f} GiB and {s:.6f} seconds"),
           "kv_memory": ("gpu_worker.py:391", "Available KV cache memory: {kv_gib:.2f} GiB"),
           "graphs": ("gpu_model_runner.py:4020", "Graph capturing finished in {s:.0f} secs"),
           "ready": ("core.py:402", "init engine (profile, create kv cache, warmup model) took {s:.2f} s")},
    "v0": {"load": ("model_runner.py:1092", "Starting to load model {model}..."),
           "loaded": ("model_runner.py:1097", "Loading model weights took {gib:.4f} GB"),
           "kv_memory": ("worker.py:241", "Memory profiling takes {s:.2f} seconds; KV Cache is {kv_gib:.2f}GiB."),
           "graphs": ("model_runner.py:1527", "Graph capturing finished in {s:.0f} secs"),
           "ready": ("llm_engine.py:446", "init engine (profile, create kv cache, warmup model) took {s:.2f} seconds")},
}


def startup(profile: Profile, step: str, **values: object) -> Line:
    """One line of the startup phase: load, loaded, kv_memory, graphs, ready."""
    source, template = _STARTUP[profile.engine][step]
    return source, template.format(**values)


def kv_cache(profile: Profile, num_blocks: int, block_size: int, block_mib: float, max_model_len: int) -> list[Line]:
    tokens = num_blocks * block_size
    concurrency = f"Maximum concurrency for {max_model_len:,} tokens per request: {tokens / max_model_len:.2f}x"
    if profile.engine == "v0":
        cpu_blocks = int(CPU_SWAP_SPACE_MIB // block_mib)
        return [("gpu_executor.py:122", f"# GPU blocks: {num_blocks}, # CPU blocks: {cpu_blocks}"),
                ("gpu_executor.py:126", concurrency.replace(f"{max_model_len:,}", str(max_model_len)))]
    return [("kv_cache_utils.py:2327", f"GPU KV cache size: {tokens:,} tokens, {concurrency}")]


def kv_error_text(profile: Profile, error: KVPoolError) -> str:
    if profile.engine == "v0" and error.kind == "too-small":
        return (f"The model's max seq len ({error.max_model_len}) is larger than the maximum number of tokens that "
                f"can be stored in KV cache ({error.capacity_tokens}). Try increasing `gpu_memory_utilization` or "
                "decreasing `max_model_len` when initializing the engine.")
    return str(error)


def startup_failure(profile: Profile, error: str) -> list[str]:
    """The traceback tail a failed engine start leaves (message lines, then the last plain line)."""
    if profile.engine == "v0":
        return ["Traceback (most recent call last):",
                '  File "vllm/engine/multiprocessing/engine.py", line 357, in run_mp_engine',
                '  File "vllm/worker/worker.py", line 499, in raise_if_cache_size_invalid', error,
                "RuntimeError: Engine process failed to start. See stack trace for the root cause."]
    return ["EngineCore failed to start.", "Traceback (most recent call last):",
            '  File "vllm/v1/engine/core.py", line 1079, in run_engine_core',
            '  File "vllm/v1/core/kv_cache_utils.py", line 1045, in check_enough_kv_cache_memory', error,
            "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"]


def engine_died(profile: Profile) -> list[Line]:
    if profile.engine == "v0":
        return [("engine.py:135", "Error in model execution (simulated by --sim-fault die-after)"),
                ("client.py:282", "MQLLMEngineDeadError: Engine loop is not running. Inspect the stacktrace to "
                 "find the original error: RuntimeError('simulated by --sim-fault die-after').")]
    return [("core.py:1095", "EngineCore encountered a fatal error (simulated by --sim-fault die-after)"),
            ("async_llm.py:906", "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. "
             "See stack trace (above) for the root cause.")]


class StatsWindow(NamedTuple):
    """What the engine did since the last stats line (deltas) and where it stands now."""

    seconds: float
    prompt_tokens: int
    generation_tokens: int
    drafts: int
    draft_tokens: int
    accepted: int
    accepted_per_pos: list[int]
    running: int
    waiting: int
    kv_usage: float
    k: int
    total_drafts: int           # cumulative, for V0's line
    total_draft_tokens: int
    total_accepted: int


def stats(profile: Profile, w: StatsWindow) -> list[Line]:
    dt = max(w.seconds, 1e-9)
    prompt_tps, gen_tps = w.prompt_tokens / dt, w.generation_tokens / dt
    if profile.engine == "v0":
        lines = [("metrics.py:467", f"Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation throughput: "
                  f"{gen_tps:.1f} tokens/s, Running: {w.running} reqs, Swapped: 0 reqs, Pending: {w.waiting} reqs, "
                  f"GPU KV cache usage: {100 * w.kv_usage:.1f}%, CPU KV cache usage: 0.0%.")]
        if w.k and w.total_drafts:
            emitted = w.total_accepted + w.total_drafts
            lines.append(("metrics.py:489", (
                f"Speculative metrics: Draft acceptance rate: {w.total_accepted / w.total_draft_tokens:.3f}, "
                f"System efficiency: {emitted / (w.total_drafts * (w.k + 1)):.3f}, Number of speculative tokens: "
                f"{w.k}, Number of accepted tokens: {w.total_accepted}, Number of draft tokens: "
                f"{w.total_draft_tokens}, Number of emitted tokens: {emitted}.")))
        return lines
    lines = [("loggers.py:259", f"Engine 000: Avg prompt throughput: {prompt_tps:.1f} tokens/s, Avg generation "
              f"throughput: {gen_tps:.1f} tokens/s, Running: {w.running} reqs, Waiting: {w.waiting} reqs, GPU KV "
              f"cache usage: {100 * w.kv_usage:.1f}%, Prefix cache hit rate: 0.0%")]
    if w.k and w.drafts:
        per_pos = ", ".join(f"{a / w.drafts:.3f}" for a in w.accepted_per_pos)
        lines.append(("metrics.py:100", (
            f"SpecDecoding metrics: Mean acceptance length: {1 + w.accepted / w.drafts:.2f}, Accepted throughput: "
            f"{w.accepted / dt:.2f} tokens/s, Drafted throughput: {w.draft_tokens / dt:.2f} tokens/s, Accepted: "
            f"{w.accepted} tokens, Drafted: {w.draft_tokens} tokens, Per-position acceptance rate: {per_pos}, "
            f"Avg Draft acceptance rate: {100 * w.accepted / w.draft_tokens:.1f}%")))
    return lines
