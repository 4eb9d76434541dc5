"""What a parsed vLLM command says, as config keys: each a `Mapped` (the dotted key, its value and the part of the
command it came from). One list of them gives both the config of `sweep --serve-cmd ... --bench-cmd ...` (as
overrides) and the TOML `init` writes (to_toml.py), so the two cannot disagree. Pure."""
from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from ..strict import ConfigError
from ..server import SpeculationConfig

# a shell's line continuation (a command written over several lines, as vLLM's docs write them): removed, as the
# shell removes it; shlex.split alone would make an argument of the newline. Inside single quotes a shell keeps it:
# no value vLLM reads there (a JSON text, a name) holds one.
CONTINUATION_RE = re.compile(r"\\\r?\n")
# the default K list of a sweep (speculation.k's default), to which a serve command's own K is added
DEFAULT_K = tuple(SpeculationConfig.model_fields["k"].default_factory())


class CommandError(ConfigError):
    """A command line the runner cannot honour as it is: one line naming the flag and the fix (exit 2)."""


@dataclass(frozen=True)
class Mapped:
    """One config key set from a command: `key` dotted ("load.stages"), `value` as the TOML holds it, `origin` the
    part of the command it comes from (the comment `init` writes beside it)."""

    key: str
    value: object
    origin: str


def split_command(text: str, flag: str) -> list[str]:
    """A command line split as a shell splits it (`vllm bench sweep serve` splits its commands with shlex.split)."""
    try:
        return shlex.split(CONTINUATION_RE.sub("", text))
    except ValueError as err:
        raise CommandError(f"{flag}: {err} (quote it as a shell would)") from None


def overrides(entries: list[Mapped]) -> dict[str, object]:
    """The entries as `--set`-style overrides (dotted key -> value), in order; a later key wins."""
    return {entry.key: entry.value for entry in entries}


def parse_k_list(text: str) -> list[int]:
    """`--k 0,2,4` -> [0, 2, 4]; CommandError with the fix for anything else."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise CommandError(f"--k {text!r}: write the K values (num_speculative_tokens) separated by commas, "
                           "e.g. --k 0,2,4 (0 = no speculation)") from None
    if any(k < 0 for k in values) or len(set(values)) != len(values):
        raise CommandError(f"--k {text!r}: give each K once, each >= 0, e.g. --k 0,2,4 (0 = no speculation)")
    return values


def k_entry(k_given: list[int] | None, serve_k: int | None) -> Mapped:
    """speculation.k: --k where given; else the default K list with the serve command's own K added (the production
    setting is measured too)."""
    if k_given is not None:
        return Mapped("speculation.k", sorted(k_given), f"--k {','.join(map(str, k_given))}: one server life each "
                                                        "(num_speculative_tokens; 0 = no speculation)")
    values = sorted(set(DEFAULT_K) | ({serve_k} if serve_k else set()))
    whose = f" and the serve command's num_speculative_tokens {serve_k}" if serve_k else ""
    return Mapped("speculation.k", values, f"no --k: the default K list{whose} (0 = no speculation)")
