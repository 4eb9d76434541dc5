"""The scenario's custom Locust options: defined once here, registered on Locust's parser, read back typed."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any

from lookahead_runner.workload.stages import STAGES_OPTION, Stage, parse_stages


@dataclass(frozen=True)
class ScenarioSettings:
    """Typed values of the custom options; the field defaults are the options' defaults."""

    stages: str = "4:20,16:20,32:20"
    prompt_tokens: int = 128
    output_tokens: int = 64
    model: str = ""
    temperature: float = 0.0
    requests_csv: str = ""
    stages_csv: str = ""
    request_timeout_s: float = 120.0

    @classmethod
    def from_options(cls, parsed_options: Any) -> ScenarioSettings:
        """Read from Locust's parsed options; missing attributes (e.g. a bare Environment) keep defaults."""
        values = {f.name: getattr(parsed_options, f.name, f.default) for f in fields(cls)}
        settings = cls(**values)
        settings.validate()
        return settings

    def validate(self) -> None:
        parse_stages(self.stages)
        if self.prompt_tokens < 1:
            raise ValueError(f"--prompt-tokens: must be >= 1, got {self.prompt_tokens}")
        if self.output_tokens < 1:
            raise ValueError(f"--output-tokens: must be >= 1, got {self.output_tokens}")
        if self.request_timeout_s <= 0:
            raise ValueError(f"--request-timeout-s: must be > 0, got {self.request_timeout_s}")

    @property
    def parsed_stages(self) -> list[Stage]:
        return parse_stages(self.stages)


_HELP = {
    "stages": "Load stages as USERS:SECONDS,... (each stage holds USERS users for SECONDS, spawned at USERS/s).",
    "prompt_tokens": "Prompt length in tokens, exact (sent as a list of token ids).",
    "output_tokens": "Output length in tokens, exact (max_tokens = min_tokens, ignore_eos).",
    "model": "Model name for requests; empty: the first id from GET /v1/models.",
    "temperature": "Sampling temperature of every request.",
    "requests_csv": "Write one row per finished request to this CSV file (empty: no file).",
    "stages_csv": "Write one row per stage as it ran to this CSV file (empty: no file).",
    "request_timeout_s": "Timeout in seconds for one request, end to end (also the socket timeout).",
}


def _checked_stages(text: str) -> str:
    try:
        parse_stages(text)
    except ValueError as exc:
        # argparse already prefixes "argument --stages: "
        raise argparse.ArgumentTypeError(str(exc).removeprefix(STAGES_OPTION + ": ")) from exc
    return text


def _positive(kind: type) -> Any:
    def check(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {text!r}") from exc
        if value <= 0:
            raise argparse.ArgumentTypeError(f"must be > 0, got {text!r}")
        return value

    check.__name__ = kind.__name__
    return check


_TYPES = {
    "stages": _checked_stages,
    "prompt_tokens": _positive(int),
    "output_tokens": _positive(int),
    "model": str,
    "temperature": float,
    "requests_csv": str,
    "stages_csv": str,
    "request_timeout_s": _positive(float),
}


def add_scenario_options(parser: Any) -> None:
    """Register the options on Locust's parser (from an ``init_command_line_parser`` listener)."""
    # On the parser itself, not a group: only LocustArgumentParser.add_argument marks options for the web UI.
    for f in fields(ScenarioSettings):
        flag = "--" + f.name.replace("_", "-")
        parser.add_argument(
            flag,
            type=_TYPES[f.name],
            default=f.default,
            env_var="LOCUST_" + f.name.upper(),
            help=_HELP[f.name] + f" Default: {f.default!r}.",
        )
