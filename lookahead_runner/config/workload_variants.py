"""Workload variants: the requests' shape as axes measured in one server life.

`load.prompt_tokens`, `load.output_tokens` and `load.temperature` each take one value or a list; the
variants are their product, in the order listed (prompt outermost). The server does not change between
variants, the requests do, so every variant runs in each server life, as a block: all its stages (rising
users) with its own prompt calibration, then the next variant's. Blocks rather than interleaving at each
users level, because a stage's window must see a KV pool filled with its own variant's sequences only:
each block's Locust run ends with every request finished (--stop-timeout), so the next block starts on an
empty pool, and its first stage's warm-up window (load.warmup_s) is left out like every stage's. One
change of variant per life is one drain, not one per stage, and the ramp inside a block is the rising ramp
a single-workload sweep runs.

A sweep with one variant has the key "" and no label: its files, tables and report are as before.
Pure: no I/O.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ..vllm.knob import MAX_MODEL_LEN_FLAG, flag_value, human_int

NATURAL_OUTPUT = "natural"   # load.output_tokens: each request ends at its end of sequence (request_set.py)
# the least value of each axis and its type
AXES = {"prompt_tokens": (1, int), "output_tokens": (2, int), "temperature": (0, float)}


@dataclass(frozen=True)
class Variant:
    prompt_tokens: int
    output_tokens: int
    temperature: float
    key: str = ""      # folder and table key ("p400", "p4000-t0.7"); "" = the sweep's only variant
    label: str = ""    # what sets it apart, in words ("4,000-token prompts"); "" = the only variant
    # a request set (load.requests) brings its own prompts; natural outputs end at their end of sequence
    set_prompts: bool = False
    natural_output: bool = False

    @property
    def output_setting(self) -> int | str:
        """load.output_tokens as this variant's Locust run takes it: the count, or "natural"."""
        return NATURAL_OUTPUT if self.natural_output else self.output_tokens

    @property
    def expected_output_tokens(self) -> int:
        """Every response's completion tokens, or 0 where they are not fixed (natural outputs)."""
        return 0 if self.natural_output else self.output_tokens

    @property
    def expected_prompt_tokens(self) -> int:
        """Every request's prompt tokens, or 0 where they are the request set's own."""
        return 0 if self.set_prompts else self.prompt_tokens

    @property
    def context_tokens(self) -> int:
        """The longest sequence a request of this variant holds: its prompt and every output token."""
        return self.prompt_tokens + self.output_tokens

    def named(self, fallback: str = "every request") -> str:
        return self.label or fallback


def axis_values(name: str, value: object) -> object:
    """A config axis checked: one number or a non-empty list of unique ones, each at least the axis' least;
    ValueError with the fix otherwise."""
    least, kind = AXES[name]
    values = value if isinstance(value, list) else [value]
    if not values:
        raise ValueError("list at least one value, or give one value")
    for item in values:
        if isinstance(item, bool) or not isinstance(item, (int, float)) or not math.isfinite(item) \
                or (kind is int and item != int(item)):
            raise ValueError(f"{item!r}: give {'a whole number' if kind is int else 'a number'}, or a list of them")
        if not item >= least:
            raise ValueError(f"{item!r}: every value must be >= {least}")
    if len(set(values)) != len(values):
        raise ValueError("the values of a workload axis must be unique")
    cast = [kind(item) for item in values]
    return cast if isinstance(value, list) else cast[0]


def as_list(value) -> list:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _temperature(value: float) -> str:
    return f"{float(value):g}"


def variants_of(prompt_tokens, output_tokens, temperature) -> list[Variant]:
    """Every (prompt, output, temperature) of the lists, keyed and labelled by the axes that vary."""
    axes = [as_list(prompt_tokens), as_list(output_tokens), as_list(temperature)]
    combos = list(itertools.product(*axes))
    if len(combos) == 1:
        p, o, t = combos[0]
        return [Variant(int(p), int(o), float(t))]
    varying = [len(axis) > 1 for axis in axes]
    out = []
    for p, o, t in combos:
        keys = [f"p{p}", f"o{o}", f"t{_temperature(t)}"]
        words = [f"{p:,}-token prompts", f"{o:,} output tokens", f"temperature {_temperature(t)}"]
        out.append(Variant(int(p), int(o), float(t),
                           key="-".join(k for k, v in zip(keys, varying) if v),
                           label=", ".join(w for w, v in zip(words, varying) if v)))
    return out


def longest(variants: list[Variant]) -> Variant:
    return max(variants, key=lambda v: v.context_tokens)


def too_long(variants: list[Variant], max_model_len: int) -> Variant | None:
    """The longest variant when its prompt and output do not fit `max_model_len`, else None."""
    worst = longest(variants)
    return worst if worst.context_tokens > max_model_len else None


def model_length_error(variants: list[Variant], extra_args: list[str], grid_values: list[str]) -> str:
    """Why the longest variant cannot run under a --max-model-len the config sets (server.extra_args, or
    grid.values when it is the grid's flag), or ""."""
    limits = [(value, "grid.values") for value in grid_values]
    given = flag_value(extra_args, MAX_MODEL_LEN_FLAG)
    if given is not None:
        limits.insert(0, (given, "server.extra_args"))
    for text, where in limits:
        try:
            limit = human_int(text)
        except ValueError:
            continue  # vLLM itself names a malformed value
        worst = too_long(variants, limit)
        if worst is not None:
            return fit_error(worst, limit, where)
    return ""


def fit_error(variant: Variant, max_model_len: int, where: str) -> str:
    name = variant.named(f"{variant.prompt_tokens:,}-token prompts")
    return (f"the workload variant of {name} needs {variant.context_tokens:,} tokens per request "
            f"({variant.prompt_tokens:,} prompt + {variant.output_tokens:,} output), more than --max-model-len "
            f"{max_model_len:,} in {where}; shorten that variant or raise --max-model-len")
