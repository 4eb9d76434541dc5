"""What differs between vLLM generations, as the simulator emulates them.

Everything version-specific lives here: the version string, the flags `vllm serve` accepts
and how its help looks, what the lookahead means per speculative method, the error body, the
startup log line. The engine model (model.py) and HTTP routes (app.py) ask the profile.
Only vLLM 0.32 (the >= 0.12 generation: no --num-lookahead-slots, --speculative-config JSON,
V1 metric names) is written so far; V0 (<= 0.8.1) and 0.8.2 - 0.11 profiles slot in beside it.
Texts follow ../shared/fixtures/vllm-0.32.0-cpu/ (serve-help*.txt, server-log-specdecode.txt).
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class FlagSpec:
    group: str
    names: tuple[str, ...]
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Profile:
    version: str
    generation: str                          # "v0", "v1", "v1-no-slots"
    usage: str
    description: str
    help_summary: str                        # plain `serve --help`; empty = print the full help
    help_all_epilog: str
    groups: dict[str, str]                   # group name -> description, in help order
    flags: tuple[FlagSpec, ...]
    lookahead_for: Callable[[str, int], int]  # (method, K) -> KV slots reserved per sequence
    spec_methods: tuple[str, ...]
    kv_usage_metric: str = "vllm:kv_cache_usage_perc"
    itl_metric: str = "vllm:inter_token_latency_seconds"
    error_body: Callable[[str, str, int], dict] = field(default=lambda m, t, c: {"error": {
        "message": m, "type": t, "param": None, "code": c}})

    def kv_cache_log_line(self, tokens: int, max_model_len: int) -> str:
        return (f"GPU KV cache size: {tokens:,} tokens, Maximum concurrency for {max_model_len:,} tokens "
                f"per request: {tokens / max_model_len:.2f}x")


def _v1_lookahead(method: str, k: int) -> int:
    """VllmConfig.num_lookahead_tokens (0.12+): K for model-based drafters, K+1 for dflash, 0 for lookups."""
    if k <= 0 or method in ("ngram", "ngram_gpu", "suffix"):
        return 0
    return k + 1 if method == "dflash" else k


def _int_k(text: str) -> int:
    """vLLM's human-readable integers: 1k = 1000, 1K = 1024, 25.6k = 25600."""
    text = text.strip()
    units = {"k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def _f(group: str, *names: str, **kwargs: Any) -> FlagSpec:
    return FlagSpec(group, names, kwargs)


_BOOL = argparse.BooleanOptionalAction

_FLAGS_0_32 = (
    _f("positional arguments", "model_tag", nargs="?", default=None,
       help="The model tag to serve (optional if specified in config)"),
    _f("options", "--disable-log-stats", action="store_true", default=False, help="Disable logging statistics."),
    _f("options", "--enable-log-requests", action=_BOOL, default=False,
       help="Enable logging request information, dependent on log level."),
    _f("options", "--headless", action="store_true", default=False,
       help="Run in headless mode. See multi-node data parallel documentation for more details."),
    _f("options", "--shutdown-timeout", type=int, default=0,
       help="Shutdown timeout in seconds. 0 = abort, >0 = wait."),
    _f("Frontend", "--host", default=None, help="Host name."),
    _f("Frontend", "--port", type=int, default=8000, help="Port number."),
    _f("Frontend", "--api-key", nargs="+", default=None,
       help="If provided, the server will require one of these keys to be presented in the header."),
    _f("Frontend", "--uvicorn-log-level", choices=["critical", "debug", "error", "info", "trace", "warning"],
       default="info", help="Log level for uvicorn."),
    _f("Frontend", "--disable-uvicorn-access-log", action=_BOOL, default=False, help="Disable uvicorn access log."),
    _f("Frontend", "--disable-fastapi-docs", action=_BOOL, default=False,
       help="Disable FastAPI's OpenAPI schema, Swagger UI, and ReDoc endpoint."),
    _f("ModelConfig", "--model", default="Qwen/Qwen3-0.6B",
       help="Name or path of the Hugging Face model to use."),
    _f("ModelConfig", "--served-model-name", nargs="+", default=None,
       help="The model name(s) used in the API. The model name in the model field of a response will be "
            "the first name in this list."),
    _f("ModelConfig", "--tokenizer", default=None, help="Name or path of the Hugging Face tokenizer to use."),
    _f("ModelConfig", "--trust-remote-code", action=_BOOL, default=False,
       help="Trust remote code (e.g., from HuggingFace) when downloading the model and tokenizer."),
    _f("ModelConfig", "--dtype", choices=["auto", "bfloat16", "float", "float16", "float32", "half"],
       default="auto", help="Data type for model weights and activations."),
    _f("ModelConfig", "--seed", type=int, default=0, help="Random seed for reproducibility."),
    _f("ModelConfig", "--max-model-len", type=_int_k, default=None,
       help="Model context length (prompt and output). If unspecified, will be automatically derived "
            "from the model config."),
    _f("ModelConfig", "--enforce-eager", action=_BOOL, default=False,
       help="Whether to always use eager-mode PyTorch. If True, we will disable CUDA graph."),
    _f("ModelConfig", "--generation-config", default="auto", help="The folder path to the generation config."),
    _f("ModelConfig", "--revision", default=None, help="The specific model version to use."),
    _f("ParallelConfig", "--tensor-parallel-size", "-tp", type=int, default=1,
       help="Number of tensor parallel groups."),
    _f("ParallelConfig", "--pipeline-parallel-size", "-pp", type=int, default=1,
       help="Number of pipeline parallel groups."),
    _f("ParallelConfig", "--data-parallel-size", "-dp", type=int, default=1,
       help="Number of data parallel groups."),
    _f("CacheConfig", "--block-size", type=int, default=None,
       help="Size of a contiguous cache block in number of tokens."),
    _f("CacheConfig", "--gpu-memory-utilization", "--device-memory-utilization", type=float, default=0.92,
       help="The fraction of GPU memory to be used for the model executor, which can range from 0 to 1."),
    _f("CacheConfig", "--kv-cache-memory-bytes", type=_int_k, default=None,
       help="Size of KV Cache per GPU in bytes. When set, gpu_memory_utilization is ignored."),
    _f("CacheConfig", "--kv-cache-dtype", choices=["auto", "bfloat16", "float16", "fp8", "fp8_e4m3", "fp8_e5m2"],
       default="auto", help="Data type for kv cache storage."),
    _f("CacheConfig", "--num-gpu-blocks-override", type=int, default=None,
       help="Number of GPU blocks to use. This overrides the profiled `num_gpu_blocks` if specified. "
            "Used for testing preemption."),
    _f("CacheConfig", "--enable-prefix-caching", action=_BOOL, default=None,
       help="Whether to enable prefix caching."),
    _f("SchedulerConfig", "--max-num-batched-tokens", type=_int_k, default=None,
       help="Maximum number of tokens that can be processed in a single iteration."),
    _f("SchedulerConfig", "--max-num-seqs", type=int, default=None,
       help="Maximum number of sequences to be processed in a single iteration."),
    _f("SchedulerConfig", "--enable-chunked-prefill", action=_BOOL, default=None,
       help="If True, prefill requests can be chunked based on the remaining `max_num_batched_tokens`."),
    _f("SchedulerConfig", "--stream-interval", type=int, default=1,
       help="The interval (or buffer size) for streaming in terms of token length. A larger value reduces "
            "host overhead by batching multiple tokens before sending."),
    _f("SchedulerConfig", "--scheduling-policy", choices=["fcfs", "priority"], default="fcfs",
       help="The scheduling policy to use."),
    _f("VllmConfig", "--speculative-config", "-sc", default=None,
       help="Speculative decoding configuration.\nAPI docs: https://docs.vllm.ai/en/v0.32.0/api/vllm/config/"
            "#vllm.config.SpeculativeConfig\nShould either be a valid JSON string or JSON keys passed "
            "individually."),
)

_GROUPS_0_32 = {
    "positional arguments": "",
    "options": "",
    "Frontend": "Arguments for the OpenAI-compatible frontend server.",
    "ModelConfig": "Configuration for the model.",
    "ParallelConfig": "Configuration for the distributed execution.",
    "CacheConfig": "Configuration for the KV cache.",
    "SchedulerConfig": "Scheduler configuration.",
    "VllmConfig": "Dataclass which contains all vllm-related configuration. This\n"
                  "    simplifies passing around the distinct configurations in the codebase.",
}

_DESCRIPTION = (
    "Launch a local OpenAI-compatible API server to serve LLM\n"
    "completions via HTTP. Defaults to Qwen/Qwen3-0.6B if no model is specified.\n\n"
    "Search by using: `--help=<ConfigGroup>` to explore options by section (e.g.,\n"
    "--help=ModelConfig, --help=Frontend)\n"
    "  Use `--help=all` to show all available flags at once."
)

_SUMMARY_0_32 = """\
usage: vllm serve [model_tag] [options]

{description}

Config Groups:
  positional arguments
  options
  Frontend                Arguments for the OpenAI-compatible frontend server.
  ModelConfig             Configuration for the model.
  ParallelConfig          Configuration for the distributed execution.
  CacheConfig             Configuration for the KV cache.
  SchedulerConfig         Scheduler configuration.
  VllmConfig              Dataclass which contains all vllm-related
                          configuration. This simplifies passing around the
                          distinct configurations in the codebase.

For full list:            vllm serve --help=all
For a section:            vllm serve --help=ModelConfig    (case-insensitive)
For a flag:               vllm serve --help=max-model-len  (_ or - accepted)
Documentation:            https://docs.vllm.ai
""".format(description=_DESCRIPTION)

_JSON_EPILOG = """\
When passing JSON CLI arguments, the following sets of arguments are equivalent:
   --json-arg '{"key1": "value1", "key2": {"key3": "value2"}}'
   --json-arg.key1 value1 --json-arg.key2.key3 value2
"""

VLLM_0_32 = Profile(
    version="0.32.0",
    generation="v1-no-slots",
    usage="vllm serve [model_tag] [options]",
    description=_DESCRIPTION,
    help_summary=_SUMMARY_0_32,
    help_all_epilog=_JSON_EPILOG,
    groups=_GROUPS_0_32,
    flags=_FLAGS_0_32,
    lookahead_for=_v1_lookahead,
    spec_methods=("draft_model", "eagle", "eagle3", "mtp", "dflash", "ngram", "ngram_gpu", "suffix"),
)

PROFILES: dict[str, Profile] = {VLLM_0_32.version: VLLM_0_32}
DEFAULT_PROFILE = VLLM_0_32.version


def get_profile(version: str = DEFAULT_PROFILE) -> Profile:
    try:
        return PROFILES[version]
    except KeyError:
        raise ValueError(f"no simulator profile for vLLM {version!r}; known: {', '.join(PROFILES)}") from None


def speculative_method(spec: dict) -> str:
    """SpeculativeConfig's rule: no method + model "[ngram]" means ngram, any other model draft_model."""
    method = spec.get("method")
    if method:
        return str(method)
    return "ngram" if spec.get("model") == "[ngram]" else "draft_model"
