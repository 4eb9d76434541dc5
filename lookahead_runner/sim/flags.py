"""The `vllm serve` flags of each emulated generation, as argparse arguments.

Three sources:
- 0.32.0: every row of flags_0_32.TABLE (read from a real 0.32.0 `--help=all`), with the flags the
  engine model uses replaced by typed versions (SEMANTIC_0_32) so values parse like vLLM's;
- 0.10.2 and 0.6.6: hand-written subsets of those releases' flags. What docs/vllm-facts.md fixes is exact
  (how speculation is written, `--num-lookahead-slots`, the help layout); the rest is the common core a
  serving command uses. A flag outside the subset is an argparse error here where the real release
  would accept it: say so when a sweep on these profiles fails at the first server start.
"""
from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any

from lookahead_runner.sim import flags_0_32
from lookahead_runner.vllm.knob import human_int

BOOL = argparse.BooleanOptionalAction


@dataclass(frozen=True)
class FlagSpec:
    group: str
    names: tuple[str, ...]
    kwargs: dict[str, Any]


def _f(group: str, *names: str, **kwargs: Any) -> FlagSpec:
    return FlagSpec(group, names, kwargs)


# --- 0.32.0: the full table, typed where the simulator gives a flag meaning -------------------------

def _row_spec(group: str, head: str, default_text: str, help_text: str) -> FlagSpec:
    """One printed invocation (`--x X [X ...], -y X`, `--a, --no-a`, `--c {p,q}`) -> an argument."""
    parts = re.split(r", (?=-)", head)
    names = [part.split(" ", 1)[0] for part in parts]
    metavar = parts[0].split(" ", 1)[1] if " " in parts[0] else ""
    default: Any = None if default_text == "None" else default_text
    kwargs: dict[str, Any] = {"help": help_text.replace("%", "%%"), "default": default}
    if not names[0].startswith("-"):
        return FlagSpec(group, tuple(names), {**kwargs, "nargs": "?"})
    if not metavar:
        if any(name.startswith("--no-") for name in names):
            names = [name for name in names if not name.startswith("--no-")]
            kwargs["action"] = BOOL
        else:
            kwargs["action"] = "store_true"
        return FlagSpec(group, tuple(names), kwargs)
    if metavar.startswith("[") and metavar.endswith(" ...]"):
        element, kwargs["nargs"] = metavar[1:-5], "*"
    elif metavar.startswith("[") and metavar.endswith("]") and not metavar.startswith("['"):
        element, kwargs["nargs"] = metavar[1:-1], "?"
    elif metavar.endswith(" ...]"):
        element, kwargs["nargs"] = metavar.split(" [", 1)[0], "+"
    else:
        element = metavar
    if element.startswith("{") and element.endswith("}"):
        kwargs["choices"] = element[1:-1].split(",")
    else:
        kwargs["metavar"] = element
    return FlagSpec(group, tuple(names), kwargs)


def table_specs(table: str) -> list[FlagSpec]:
    return [_row_spec(*line.split("|", 3)) for line in table.splitlines() if line]


_SPEC_HELP = ("Speculative decoding configuration.\nAPI docs: https://docs.vllm.ai/en/v0.32.0/api/vllm/config/"
              "#vllm.config.SpeculativeConfig\nShould either be a valid JSON string or JSON keys passed "
              "individually.")

SEMANTIC_0_32 = (
    _f("options", "--disable-log-stats", action="store_true", default=False, help="Disable logging statistics."),
    _f("Frontend", "--host", default=None, help="Host name."),
    _f("Frontend", "--port", type=int, default=8000, help="Port number."),
    _f("Frontend", "--api-key", nargs="+", default=None,
       help="If provided, the server will require one of these keys to be presented in the header."),
    _f("Frontend", "--disable-uvicorn-access-log", action=BOOL, default=False, help="Disable uvicorn access log."),
    _f("ModelConfig", "--model", default="Qwen/Qwen3-0.6B",
       help="Name or path of the Hugging Face model to use."),
    _f("ModelConfig", "--served-model-name", nargs="+", default=None,
       help="The model name(s) used in the API. The model name in the model field of a response will be "
            "the first name in this list."),
    _f("ModelConfig", "--seed", type=int, default=0, help="Random seed for reproducibility."),
    _f("ModelConfig", "--max-model-len", type=human_int, default=None,
       help="Model context length (prompt and output). If unspecified, will be automatically derived "
            "from the model config."),
    _f("CacheConfig", "--block-size", type=int, default=None,
       help="Size of a contiguous cache block in number of tokens."),
    _f("CacheConfig", "--gpu-memory-utilization", "--device-memory-utilization", type=float, default=0.92,
       help="The fraction of GPU memory to be used for the model executor, which can range from 0 to 1."),
    _f("CacheConfig", "--kv-cache-memory-bytes", type=human_int, default=None,
       help="Size of KV Cache per GPU in bytes. When set, gpu_memory_utilization is ignored."),
    _f("CacheConfig", "--num-gpu-blocks-override", type=int, default=None,
       help="Number of GPU blocks to use. This overrides the profiled `num_gpu_blocks` if specified."),
    _f("SchedulerConfig", "--max-num-batched-tokens", type=human_int, default=None,
       help="Maximum number of tokens that can be processed in a single iteration."),
    _f("SchedulerConfig", "--max-num-seqs", type=int, default=None,
       help="Maximum number of sequences to be processed in a single iteration."),
    _f("SchedulerConfig", "--stream-interval", type=int, default=1,
       help="The interval (or buffer size) for streaming in terms of token length."),
    _f("VllmConfig", "--spec-model", default=None,
       help="The name of the draft model, eagle head, or additional weights, if provided."),
    _f("VllmConfig", "--spec-tokens", type=int, default=None, help="The number of speculative tokens, if provided."),
    _f("VllmConfig", "--speculative-config", "-sc", default=None, help=_SPEC_HELP),
)


def _merge(table: list[FlagSpec], typed: tuple[FlagSpec, ...]) -> tuple[FlagSpec, ...]:
    """The table's order and names; a typed spec replaces the row with the same first name."""
    by_name = {spec.names[0]: spec for spec in typed}
    merged = []
    for row in table:
        spec = by_name.pop(row.names[0], None)
        merged.append(FlagSpec(row.group, row.names, spec.kwargs) if spec else row)
    if by_name:
        raise ValueError(f"typed flags missing from the 0.32 table: {sorted(by_name)}")
    return tuple(merged)


FLAGS_0_32 = _merge(table_specs(flags_0_32.TABLE), SEMANTIC_0_32)
JSON_FLAGS_0_32 = frozenset(spec.names[0] for spec in FLAGS_0_32 if "valid JSON" in spec.kwargs.get("help", ""))
GROUPS_0_32 = flags_0_32.GROUPS

# --- 0.10.2 (V1 engine; --num-lookahead-slots still parsed, read nowhere) -----------------------------

_LOOKAHEAD_HELP_V1 = (
    "The number of slots to allocate per sequence per step, beyond the known token ids. This is used in "
    "speculative decoding to store KV activations of tokens which may or may not be accepted.\n\n"
    "NOTE: This will be replaced by speculative config in the future; it is present to enable correctness "
    "tests until then.")


def _core(frontend: str, model: str, cache: str, parallel: str, scheduler: str) -> tuple[FlagSpec, ...]:
    """Flags every generation has, filed under the group names of the version."""
    return (
        _f(frontend, "--host", default=None, help="Host name."),
        _f(frontend, "--port", type=int, default=8000, help="Port number."),
        _f(frontend, "--uvicorn-log-level", choices=["debug", "info", "warning", "error", "critical", "trace"],
           default="info", help="Log level for uvicorn."),
        _f(frontend, "--disable-fastapi-docs", action="store_true", default=False,
           help="Disable FastAPI's OpenAPI schema, Swagger UI, and ReDoc endpoint."),
        _f(frontend, "--chat-template", default=None,
           help="The file path to the chat template, or the template in single-line form for the specified model."),
        _f(frontend, "--response-role", default="assistant",
           help="The role name to return if `request.add_generation_prompt=true`."),
        _f(model, "--model", default="facebook/opt-125m", help="Name or path of the huggingface model to use."),
        _f(model, "--tokenizer", default=None, help="Name or path of the huggingface tokenizer to use."),
        _f(model, "--revision", default=None, help="The specific model version to use."),
        _f(model, "--trust-remote-code", action="store_true", default=False,
           help="Trust remote code from huggingface."),
        _f(model, "--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"], default="auto",
           help="Data type for model weights and activations."),
        _f(model, "--max-model-len", type=human_int, default=None,
           help="Model context length. If unspecified, will be automatically derived from the model config."),
        _f(model, "--seed", type=int, default=0, help="Random seed for operations."),
        _f(model, "--enforce-eager", action="store_true", default=False,
           help="Always use eager-mode PyTorch. If False, will use eager mode and CUDA graph in hybrid for "
                "maximal performance and flexibility."),
        _f(model, "--served-model-name", nargs="+", default=None,
           help="The model name(s) used in the API. If multiple names are provided, the server will respond "
                "to any of the provided names."),
        _f(parallel, "--tensor-parallel-size", "-tp", type=int, default=1, help="Number of tensor parallel replicas."),
        _f(parallel, "--pipeline-parallel-size", "-pp", type=int, default=1, help="Number of pipeline stages."),
        _f(cache, "--block-size", type=int, choices=[8, 16, 32, 64, 128], default=None,
           help="Token block size for contiguous chunks of tokens."),
        _f(cache, "--gpu-memory-utilization", type=float, default=0.9,
           help="The fraction of GPU memory to be used for the model executor, which can range from 0 to 1."),
        _f(cache, "--num-gpu-blocks-override", type=int, default=None,
           help="If specified, ignore GPU profiling result and use this number of GPU blocks."),
        _f(cache, "--kv-cache-dtype", choices=["auto", "fp8", "fp8_e5m2", "fp8_e4m3"], default="auto",
           help="Data type for kv cache storage."),
        _f(cache, "--swap-space", type=float, default=4, help="CPU swap space size (GiB) per GPU."),
        _f(scheduler, "--max-num-batched-tokens", type=human_int, default=None,
           help="Maximum number of batched tokens per iteration."),
        _f(scheduler, "--max-num-seqs", type=int, default=None, help="Maximum number of sequences per iteration."),
        _f(scheduler, "--scheduling-policy", choices=["fcfs", "priority"], default="fcfs",
           help="The scheduling policy to use."),
    )


FLAGS_0_10 = (
    _f("positional arguments", "model_tag", nargs="?", default=None,
       help="The model tag to serve (optional if specified in config)"),
    _f("options", "--headless", action="store_true", default=False,
       help="Run in headless mode. See multi-node data parallel documentation for more details."),
    _f("options", "--disable-log-stats", action="store_true", default=False, help="Disable logging statistics."),
    _f("options", "--disable-log-requests", action="store_true", default=False, help="Disable logging requests."),
    _f("Frontend", "--api-key", nargs="+", default=None,
       help="If provided, the server will require one of these keys to be presented in the header."),
    _f("Frontend", "--disable-uvicorn-access-log", action=BOOL, default=False, help="Disable uvicorn access log."),
    *_core("Frontend", "ModelConfig", "CacheConfig", "ParallelConfig", "SchedulerConfig"),
    _f("ParallelConfig", "--data-parallel-size", "-dp", type=int, default=1,
       help="Number of data parallel groups."),
    _f("CacheConfig", "--enable-prefix-caching", action=BOOL, default=None, help="Whether to enable prefix caching."),
    _f("SchedulerConfig", "--enable-chunked-prefill", action=BOOL, default=None,
       help="If True, prefill requests can be chunked based on the remaining max_num_batched_tokens."),
    _f("SchedulerConfig", "--num-lookahead-slots", type=int, default=0, help=_LOOKAHEAD_HELP_V1),
    _f("VllmConfig", "--speculative-config", default=None,
       help="Speculative decoding configuration.\nShould either be a valid JSON string or JSON keys passed "
            "individually."),
)
JSON_FLAGS_0_10 = frozenset({"--speculative-config"})
GROUPS_0_10 = {
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

# --- 0.6.6 (V0 engine; one flat list, legacy speculative flags, the lookahead flag is live) ------------

FLAGS_0_6 = (
    _f("positional arguments", "model_tag", help="The model tag to serve"),
    _f("options", "--api-key", default=None,
       help="If provided, the server will require this key to be presented in the header."),
    _f("options", "--disable-uvicorn-access-log", action="store_true", default=False,
       help="Disable uvicorn access log."),
    *_core("options", "options", "options", "options", "options"),
    _f("options", "--enable-prefix-caching", action="store_true", default=False,
       help="Enables automatic prefix caching."),
    _f("options", "--use-v2-block-manager", action="store_true", default=True,
       help="[DEPRECATED] block manager v1 has been removed and SelfAttnBlockSpaceManager (i.e. block manager "
            "v2) is now the default. Setting this flag to True or False has no effect on vLLM behavior."),
    _f("options", "--num-lookahead-slots", type=int, default=0,
       help="Experimental scheduling config necessary for speculative decoding. This will be replaced by "
            "speculative config in the future; it is present to enable correctness tests until then."),
    _f("options", "--enable-chunked-prefill", nargs="?", const="True", default=None, metavar="ENABLE_CHUNKED_PREFILL",
       help="If set, the prefill requests can be chunked based on the max_num_batched_tokens."),
    _f("options", "--preemption-mode", default=None,
       help="If 'recompute', the engine performs preemption by recomputing; If 'swap', the engine performs "
            "preemption by block swapping."),
    _f("options", "--speculative-model", default=None,
       help="The name of the draft model to be used in speculative decoding."),
    _f("options", "--num-speculative-tokens", type=int, default=None,
       help="The number of speculative tokens to sample from the draft model in speculative decoding."),
    _f("options", "--speculative-draft-tensor-parallel-size", "-spec-draft-tp", type=int, default=None,
       help="Number of tensor parallel replicas for the draft model in speculative decoding."),
    _f("options", "--speculative-max-model-len", type=int, default=None,
       help="The maximum sequence length supported by the draft model. Sequences over this length will skip "
            "speculation."),
    _f("options", "--speculative-disable-by-batch-size", type=int, default=None,
       help="Disable speculative decoding for new incoming requests if the number of enqueue requests is "
            "larger than this value."),
    _f("options", "--ngram-prompt-lookup-max", type=int, default=None,
       help="Max size of window for ngram prompt lookup in speculative decoding."),
    _f("options", "--ngram-prompt-lookup-min", type=int, default=None,
       help="Min size of window for ngram prompt lookup in speculative decoding."),
    _f("options", "--spec-decoding-acceptance-method", choices=["rejection_sampler", "typical_acceptance_sampler"],
       default="rejection_sampler",
       help="Specify the acceptance method to use during draft token verification in speculative decoding."),
    _f("options", "--disable-log-stats", action="store_true", default=False, help="Disable logging statistics."),
    _f("options", "--disable-log-requests", action="store_true", default=False, help="Disable logging requests."),
    _f("options", "--max-log-len", type=int, default=None,
       help="Max number of prompt characters or prompt ID numbers being printed in log."),
)
GROUPS_0_6 = {"positional arguments": "", "options": ""}
