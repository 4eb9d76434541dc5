"""`python -m lookahead_runner.sim python -c CODE`: the emulated vLLM's Python, for the probe's question.

The probe asks a launcher's interpreter whether `vllm.config.SpeculativeConfig` has
`num_speculative_tokens_per_batch_size` and how it is annotated (lookahead_runner/vllm/introspect.py).
Here CODE runs unchanged against a stand-in `vllm` package built from the profile: `__version__`,
and a SpeculativeConfig shaped as in the emulated release (a dataclass on V1, a plain class with
keyword arguments on V0), the schedule key with the profile's annotation where it has one.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
import types

from lookahead_runner.sim.profiles import Profile

_V1_FIELDS = ("method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "quantization",
              "max_model_len", "prompt_lookup_max", "prompt_lookup_min")
_V0_ARGS = ("target_model_config", "target_parallel_config", "target_dtype", "speculative_model",
            "speculative_model_quantization", "speculative_draft_tensor_parallel_size", "num_speculative_tokens",
            "speculative_disable_mqa_scorer", "speculative_max_model_len", "enable_chunked_prefill",
            "disable_log_stats", "speculative_disable_by_batch_size", "ngram_prompt_lookup_max",
            "ngram_prompt_lookup_min")
SCHEDULE_ANNOTATIONS = {"list": "list[tuple[int, int, int]] | None", "dict": "dict[str, int] | None"}


def speculative_config_class(profile: Profile) -> type:
    if profile.engine == "v0":
        def __init__(self, **kwargs) -> None:
            pass

        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        __init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("self", kind)] + [inspect.Parameter(name, kind, default=None) for name in _V0_ARGS])
        return type("SpeculativeConfig", (), {"__init__": __init__})
    fields = [(name, "object", dataclasses.field(default=None)) for name in _V1_FIELDS]
    if profile.schedule_form:
        fields.append(("num_speculative_tokens_per_batch_size", SCHEDULE_ANNOTATIONS[profile.schedule_form],
                       dataclasses.field(default=None)))
    return dataclasses.make_dataclass("SpeculativeConfig", fields)


def run_python(argv: list[str], profile: Profile) -> int:
    """`python -c CODE` with the stand-in vllm importable; other interpreter uses are refused (exit 2)."""
    if len(argv) < 2 or argv[0] != "-c":
        print("lookahead_runner.sim python: only `-c CODE` is emulated", file=sys.stderr)
        return 2
    vllm = types.ModuleType("vllm")
    vllm.__version__ = profile.version
    vllm.__path__ = []
    config = types.ModuleType("vllm.config")
    config.SpeculativeConfig = speculative_config_class(profile)
    vllm.config = config
    saved = {name: sys.modules.get(name) for name in ("vllm", "vllm.config")}
    sys.modules.update({"vllm": vllm, "vllm.config": config})
    sys.argv = ["-c", *argv[2:]]
    try:
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102 - the caller's code
    except SystemExit as stop:
        return stop.code if isinstance(stop.code, int) else 1
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
    return 0
