"""What differs between vLLM generations, as the simulator emulates them (docs/vllm-facts.md).

- 0.6.6 (V0 engine): speculation by --speculative-model + --num-speculative-tokens; the literal
  --num-lookahead-slots reserves N extra KV slots per running sequence without speculation and is
  replaced by K with it; `serve --help` prints every flag and `--help=all` is an argparse error;
  metrics gpu_cache_usage_perc, spec decoding gauges (acceptance rate, efficiency) + counters.
- 0.10.2 (V1): --speculative-config JSON only (draft_model not yet on V1); --num-lookahead-slots is
  parsed and read nowhere; `serve --help` prints every flag, `--help=TOPIC` filters;
  kv_cache_usage_perc, spec decoding counters, time_per_output_token_seconds.
- 0.32.0 (>= 0.12): --speculative-config JSON, dotted keys, --spec-* shorthands;
  --num-lookahead-slots is an argparse error (exit 2); `serve --help` prints the group summary and
  `--help=all` every flag; the families of a real 0.32 /metrics; the per-batch-size schedule
  `num_speculative_tokens_per_batch_size` as [[lo, hi, K], ...] (0.10.2 has no such key: its
  pydantic SpeculativeConfig ignores unknown keys, so a schedule there runs the static K).

The engine model (model.py) never sees a version: the CLI turns the flags into K and the KV
lookahead L per sequence with `Profile.lookahead_for` and `Profile.lookahead_slots`, and the HTTP
layer asks the profile for metric names, error bodies and log formats (logs.py).
The 0.32 texts follow tests/fixtures/vllm-0.32.0-cpu/; LOOKAHEAD_SIM_VLLM_VERSION selects a profile.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from lookahead_runner.sim import flags
from lookahead_runner.sim.flags import FlagSpec


@dataclass(frozen=True)
class Profile:
    version: str
    engine: str                              # "v0" or "v1": metric names, labels, log and error formats
    usage: str
    description: str
    help_style: str                          # "v0-flat", "flat" (+ --help=TOPIC) or "summary" (0.11+)
    help_summary: str                        # plain `serve --help` for the "summary" style
    help_epilog: str
    groups: dict[str, str]                   # group name -> description, in help order
    flags: tuple[FlagSpec, ...]
    spec_flags: str                          # "legacy" (--speculative-model ...) or "config" (JSON)
    lookahead_slots: str                     # --num-lookahead-slots: "effective", "ignored" or "absent"
    lookahead_for: Callable[[str, int], int]  # (method, K) -> KV slots reserved per sequence
    spec_methods: tuple[str, ...]
    unsupported_methods: dict[str, str] = field(default_factory=dict)   # method -> startup error
    json_flags: frozenset[str] = frozenset()  # flags that also take `--flag.key value`
    show_defaults: bool = True               # "(default: X)" after each help text
    kv_usage_metric: str = "vllm:kv_cache_usage_perc"
    itl_metric: str = "vllm:inter_token_latency_seconds"
    nested_errors: bool = True               # {"error": {...}} (0.12+) or a flat {"object": "error", ...}
    usage_extras: bool = True                # final usage chunk carries system_fingerprint and spec metrics
    schedule_form: str | None = None         # num_speculative_tokens_per_batch_size: "list", "dict" or absent

    @property
    def generation(self) -> str:
        """The same labels as lookahead_runner.vllm.probe.Capabilities.generation."""
        if self.engine == "v0":
            return "v0"
        return "v1" if self.lookahead_slots == "ignored" else "v1-no-slots"

    def error_body(self, message: str, err_type: str, code: int) -> dict:
        if self.nested_errors:
            return {"error": {"message": message, "type": err_type, "param": None, "code": code}}
        return {"object": "error", "message": message, "type": err_type, "param": None, "code": code}


def _v0_lookahead(method: str, k: int) -> int:
    """V0: SpeculativeConfig.num_lookahead_slots is K whatever drafts the tokens."""
    return max(k, 0)


def _v1_0_10_lookahead(method: str, k: int) -> int:
    """V1 scheduler (0.8.3 - 0.11): K for model-based drafters, 0 for ngram."""
    return 0 if k <= 0 or method == "ngram" else k


def _v1_lookahead(method: str, k: int) -> int:
    """VllmConfig.num_lookahead_tokens (0.12+): K for model-based drafters, K+1 for dflash, 0 for lookups."""
    if k <= 0 or method in ("ngram", "ngram_gpu", "suffix"):
        return 0
    return k + 1 if method == "dflash" else k


_DESCRIPTION_0_32 = (
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
  LoadConfig              Configuration for loading the model weights.
  AttentionConfig         Configuration for attention mechanisms in vLLM.
  MambaConfig             Configuration for Mamba SSM backends.
  StructuredOutputsConfig Dataclass which contains structured outputs config
                          for the engine.
  ParallelConfig          Configuration for the distributed execution.
  CacheConfig             Configuration for the KV cache.
  OffloadConfig           Configuration for model weight offloading to reduce
                          GPU memory usage.
  MultiModalConfig        Controls the behavior of multimodal models.
  LoRAConfig              Configuration for LoRA.
  LoggingConfig           vLLM logging. Default ``dictConfig`` adds a
                          formatted stream handler.
  ObservabilityConfig     Configuration for observability - metrics and
                          tracing.
  SchedulerConfig         Scheduler configuration.
  CompilationConfig       Configuration for compilation.
  KernelConfig            Configuration for kernel selection and warmup
                          behavior.
  VllmConfig              Dataclass which contains all vllm-related
                          configuration. This simplifies passing around the
                          distinct configurations in the codebase.

For full list:            vllm serve --help=all
For a section:            vllm serve --help=ModelConfig    (case-insensitive)
For a flag:               vllm serve --help=max-model-len  (_ or - accepted)
Documentation:            https://docs.vllm.ai
""".format(description=_DESCRIPTION_0_32)

_JSON_EPILOG = """\
When passing JSON CLI arguments, the following sets of arguments are equivalent:
   --json-arg '{"key1": "value1", "key2": {"key3": "value2"}}'
   --json-arg.key1 value1 --json-arg.key2.key3 value2
"""

_JSON_EPILOG_0_32 = _JSON_EPILOG + """
Additionally, list elements can be passed individually using +:
   --json-arg '{"key4": ["value3", "value4", "value5"]}'
   --json-arg.key4+ value3 --json-arg.key4+='value4,value5'
"""

_TIP_EPILOG_0_10 = """\
Tip: Use `vllm [serve|run-batch|bench <bench_type>] --help=<keyword>` to explore arguments from help.
   - To view a argument group:     --help=ModelConfig
   - To view a single argument:    --help=max-num-seqs
   - To search by keyword:         --help=max
   - To list all groups:           --help=listgroup
"""

VLLM_0_32 = Profile(
    version="0.32.0", engine="v1", usage="vllm serve [model_tag] [options]", description=_DESCRIPTION_0_32,
    help_style="summary", help_summary=_SUMMARY_0_32, help_epilog=_JSON_EPILOG_0_32,
    groups=flags.GROUPS_0_32, flags=flags.FLAGS_0_32, json_flags=flags.JSON_FLAGS_0_32,
    spec_flags="config", lookahead_slots="absent", lookahead_for=_v1_lookahead, schedule_form="list",
    spec_methods=tuple(next(spec.kwargs["choices"] for spec in flags.FLAGS_0_32
                            if spec.names[0] == "--spec-method")[:-1]),
)

VLLM_0_10 = Profile(
    version="0.10.2", engine="v1", usage="vllm serve [model_tag] [options]",
    description="Start the vLLM OpenAI Compatible API server.",
    help_style="flat", help_summary="", help_epilog=_JSON_EPILOG + "\n" + _TIP_EPILOG_0_10,
    groups=flags.GROUPS_0_10, flags=flags.FLAGS_0_10, json_flags=flags.JSON_FLAGS_0_10,
    spec_flags="config", lookahead_slots="ignored", lookahead_for=_v1_0_10_lookahead,
    spec_methods=("ngram", "eagle", "eagle3", "medusa", "mtp", "deepseek_mtp"),
    # docs/vllm-facts.md: draft-model speculation runs on V1 only from recent releases on.
    unsupported_methods={"draft_model": (
        "NotImplementedError: Speculative decoding with draft model is not supported yet. Please consider "
        "using other speculative decoding methods such as ngram, medusa, eagle, or mtp.")},
    itl_metric="vllm:time_per_output_token_seconds", nested_errors=False, usage_extras=False,
)

VLLM_0_6 = Profile(
    version="0.6.6", engine="v0", usage="vllm serve <model_tag> [options]", description="",
    help_style="v0-flat", help_summary="", help_epilog="",
    groups=flags.GROUPS_0_6, flags=flags.FLAGS_0_6, show_defaults=False,
    spec_flags="legacy", lookahead_slots="effective", lookahead_for=_v0_lookahead,
    spec_methods=("draft_model", "ngram"),
    kv_usage_metric="vllm:gpu_cache_usage_perc", itl_metric="vllm:time_per_output_token_seconds",
    nested_errors=False, usage_extras=False,
)

PROFILES: dict[str, Profile] = {p.version: p for p in (VLLM_0_6, VLLM_0_10, VLLM_0_32)}
DEFAULT_PROFILE = VLLM_0_32.version


def get_profile(version: str = DEFAULT_PROFILE) -> Profile:
    """A profile by its version, or by a unique prefix of one ("0.6", "0.10")."""
    version = version.strip() or DEFAULT_PROFILE
    if version in PROFILES:
        return PROFILES[version]
    matches = [p for v, p in PROFILES.items() if v.startswith(version + ".")]
    if len(matches) == 1:
        return matches[0]
    raise ValueError(f"no simulator profile for vLLM {version!r}; known: {', '.join(PROFILES)}")


def speculative_method(spec: dict) -> str:
    """SpeculativeConfig's rule: no method + model "[ngram]" means ngram, any other model draft_model."""
    method = spec.get("method")
    if method:
        return str(method)
    return "ngram" if spec.get("model") == "[ngram]" else "draft_model"
