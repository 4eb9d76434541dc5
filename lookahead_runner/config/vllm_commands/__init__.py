"""Your vLLM commands as they are: a `vllm serve` line and a `vllm bench serve` line (as `vllm bench sweep serve`
takes them in --serve-cmd and --bench-cmd) read as vLLM 0.32 reads them and mapped to the config's keys, the same
keys for `sweep --serve-cmd ... --bench-cmd ...` and for the TOML `init` writes. A part the runner cannot honour is
one line naming it (CommandError, exit 2). `serve_cmd.py`: [server] and [speculation]; `bench_cmd.py`: [load] and
[decision]; `to_toml.py`: the commented TOML; `entries.py`: what they share."""
from __future__ import annotations

from ...vllm.knob import flag_value
from ..server import SERVED_MODEL_NAME_FLAG
from .bench_cmd import BenchCommand, parse_bench_cmd
from .entries import CommandError, Mapped, k_entry, overrides, parse_k_list, split_command
from .serve_cmd import ServeCommand, parse_serve_cmd
from .to_toml import masked, masked_command, to_toml

__all__ = ["BenchCommand", "CommandError", "Mapped", "ServeCommand", "command_entries", "masked", "masked_command",
           "overrides", "parse_bench_cmd", "parse_k_list", "parse_serve_cmd", "split_command", "to_toml"]


def command_entries(serve: ServeCommand | None, bench: BenchCommand | None,
                    k_given: list[int] | None = None) -> list[Mapped]:
    """The config keys both commands set (and --k), in the order a config file holds them."""
    entries = serve.entries(k_given) if serve is not None else [k_entry(k_given, None)] if k_given else []
    if bench is not None:
        if serve is not None and bench.model is not None:
            served = flag_value(serve.extra_args, SERVED_MODEL_NAME_FLAG) or serve.model
            if bench.model not in (served, serve.model):
                raise CommandError(f"--bench-cmd: --model {bench.model}: the serve command serves {served}; remove "
                                   "it (the runner's requests name the served model)")
        entries += list(bench.entries)
    return entries
