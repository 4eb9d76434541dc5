"""The server section: how a vLLM server life is started, and what it speculates with."""
from __future__ import annotations

import argparse
import datetime
import sys
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator, model_validator

from .masking import ENV_NAME_RE
from ..vllm.knob import ADDRESS_FLAGS, SPEC_FLAG_CARRIES, flag_name, flag_value, runner_flag
from ..vllm.probe import SPEC_METRICS_FLAG
from ..vllm.spec_keys import runner_key_text
from .strict import CpuList, Strict

SpecValue = bool | int | float | str | list[bool | int | float | str]  # a speculative config key's TOML value
SIM_COMMAND = [sys.executable, "-m", "lookahead_runner.sim"]
SIM_MARKERS = ("lookahead_runner.sim", "lookahead-sim-vllm")  # in a command that starts the simulator
# a field whose default names one of the simulator's models: a real server needs it given (SweepConfig checks)
SIMULATOR_NAME = {"simulator_default": True}
SERVED_MODEL_NAME_FLAG = "--served-model-name"


def is_simulator_command(command: list[str]) -> bool:
    return any(marker in part for part in command for marker in SIM_MARKERS)


class _SimFlags(argparse.ArgumentParser):
    """The simulator's own flags, read as its parser reads them (sim/cli.py): --flag=V or --flag V, an unambiguous
    prefix, the last one given."""

    def __init__(self) -> None:
        super().__init__(add_help=False)
        self.add_argument("--sim-scenario", default=None)
        self.add_argument("--sim-fault", action="append", default=[])
        self.add_argument("--sim-set", action="append", default=[])
        self.add_argument("--sim-restart-spread", type=float, default=None)

    def error(self, message: str):
        raise ValueError(message)


def draws_restart_spread(args: list[str]) -> bool:
    """Whether the simulator's flags give each server life a restart spread: a speed (--sim-restart-spread F > 0,
    or --sim-set restart_spread_frac=F) or an acceptance offset (restart_alpha_sd) drawn per life; no named
    scenario draws one of its own (sim/scenarios.py). Such a server is judged as real vLLM is, its spread unknown
    until measured."""
    try:
        ns, _ = _SimFlags().parse_known_args([str(arg) for arg in args])
        fields = dict(item.split("=", 1) for item in ns.sim_set)
        speed = float(fields.get("restart_spread_frac", 0)) if ns.sim_restart_spread is None else ns.sim_restart_spread
        return speed > 0 or float(fields.get("restart_alpha_sd", 0)) > 0
    except ValueError:
        return False  # the simulator refuses them at its start


def runner_field_text(flag: str) -> str:
    """The config fields that set a flag the runner writes itself (vllm.knob.runner_flag)."""
    if flag == SPEC_METRICS_FLAG:
        return "nothing: every life with K > 0 gets summary where this vLLM has the flag"
    if flag in ADDRESS_FLAGS:
        return f"server.{flag.lstrip('-')}"
    fields = [f"speculation.{name}" for name in SPEC_FLAG_CARRIES[flag]]
    return ", ".join(fields[:-1]) + " and " + fields[-1] if len(fields) > 1 else fields[0]


class ServerConfig(Strict):
    """How each server life is started (or which running server is loaded), and what is read from it."""

    command: list[str] = Field(
        default_factory=lambda: list(SIM_COMMAND),
        description="argv prefix of the vLLM CLI, e.g. [\"vllm\"]; `serve MODEL --host H --port P ...` is appended; "
                    "the default starts the simulator (this Python, -m lookahead_runner.sim)",
    )
    model: str = Field("sim/llama-3-8b", description="model served by `serve MODEL`; the requests carry it (or the "
                                                     "first --served-model-name of extra_args); with server.url, "
                                                     "left out or \"\" = the first model the server lists "
                                                     "(GET /v1/models)",
                       json_schema_extra=SIMULATOR_NAME)
    argv_template: list[str] = Field(
        default_factory=list,
        description="the whole server argv with {model}, {host}, {port} and an {args} element "
                    "(e.g. a `docker run` or `ssh` line); empty = COMMAND serve MODEL --host H --port P ARGS")
    host: str = Field("127.0.0.1", description="address the server listens on and load goes to")
    port: int = Field(0, ge=0, le=65535, description="0 picks a free port per server life")
    extra_args: list[str] = Field(default_factory=list, description="other `vllm serve` flags, kept as in production")
    env: dict[str, str] = Field(default_factory=dict, description="environment overlay for the server process")
    ready_timeout_s: float = Field(600.0, gt=0, description="seconds to wait for /health after start")
    stop_grace_s: float = Field(15.0, gt=0, description="seconds between SIGTERM and SIGKILL of the server group")
    memory_source: Literal["auto", "nvml", "sim", "process", "dcgm", "none"] = Field(
        "auto", description="where GPU memory is read: auto = the simulator's file for the simulator, DCGM when "
                            "dcgm_url is set, NVML when a GPU is visible, else the server's process memory (RSS); "
                            "none = not read (the memory gate cannot be judged)")
    dcgm_url: str = Field("", description="a DCGM exporter's /metrics URL, for GPU memory of a remote server")
    url: str = Field("", description="an already-running server to load (no restarts; one setting)")
    memory_stable_band_mib: float = Field(64.0, ge=0, description="memory counts as stable once its readings stay "
                                                                  "within this many MiB ...")
    memory_stable_window_s: float = Field(2.0, ge=0, description="... for this many seconds after the server "
                                                                 "is ready")
    memory_stable_timeout_s: float = Field(120.0, gt=0, description="seconds to wait for stable memory after "
                                                                    "ready; past it the life goes on, marked "
                                                                    "not stable")
    api_key_env: str = Field("", description="name of an environment variable holding the API key the load "
                                             "sends; empty = the server's own (--api-key, else VLLM_API_KEY)")
    secret_flags: list[str] = Field(
        default_factory=list, description="flags whose value is a secret, besides --api-key and --hf-token: "
                                          "written as ${NAME} (NAME = the flag in capitals) in every file")
    secret_env: list[str] = Field(
        default_factory=list, description="variables whose NAME=VALUE inside an argv element (a launcher's "
                                          "-e HF_TOKEN=...) or server.env value is a secret: written as ${NAME}")

    @model_validator(mode="before")
    @classmethod
    def _running_servers_model(cls, data: object) -> object:
        """A running server (url) without a model named: the one it serves, asked once it is reached
        (run/life/server_check.with_served_model), never the default name of a server the runner starts."""
        if isinstance(data, dict) and data.get("url") and "model" not in data:
            return {**data, "model": ""}
        return data

    @model_validator(mode="after")
    def _a_started_server_needs_its_model(self) -> "ServerConfig":
        if not self.model.strip() and not self.url:
            raise ValueError("model: give the model `serve` starts, e.g. model = \"Qwen/Qwen3-8B\" (only with "
                             "server.url may it be left out: the served model is then asked from GET /v1/models)")
        return self

    @property
    def is_simulator(self) -> bool:
        """The simulated server (the command, or the argv_template that replaces it, naming it); real vLLM
        otherwise."""
        return is_simulator_command(self.argv_template or self.command)

    @property
    def served_model(self) -> str:
        """The model name the requests carry: the first --served-model-name of extra_args (vLLM answers 404 to
        any other name), else server.model."""
        return flag_value(self.extra_args, SERVED_MODEL_NAME_FLAG) or self.model

    @field_validator("secret_flags")
    @classmethod
    def _flags_have_dashes(cls, value: list[str]) -> list[str]:
        for flag in value:
            if not flag.startswith("-") or flag.strip("-") == "" or "=" in flag:
                raise ValueError(f"{flag!r}: write the flag with its dashes, e.g. \"--hf-token\"")
        return value

    @field_validator("secret_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not ENV_NAME_RE.fullmatch(name):
                raise ValueError(f"{name!r} is not a variable name; write e.g. \"HF_TOKEN\"")
        return value
    cpus: CpuList = Field("", description="CPUs for the server's process tree (a CPU list: \"0-5\"); "
                                      "empty = load.placement decides")

    @field_validator("argv_template")
    @classmethod
    def _template_has_args(cls, value: list[str]) -> list[str]:
        if value and "{args}" not in value:
            raise ValueError("add an element \"{args}\" where the vLLM flags go, and {port} where the port goes")
        if value and not any("{port}" in part for part in value):
            raise ValueError("use {port} where the server's port goes, e.g. \"-p\", \"{port}:8000\"")
        return value

    @field_validator("url", "dcgm_url")
    @classmethod
    def _no_password_in_the_address(cls, value: str) -> str:
        """No client of the runner sends a URL's user:password (urllib takes "me:pw@host" for the host name), and the
        address is written into plan.json as given."""
        if "@" in urlsplit(value).netloc:
            raise ValueError("a user or password in the address is never sent and would be written into the run "
                             "folder; remove it (the API key goes in the variable server.api_key_env names)")
        return value

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise ValueError("set the vLLM command, e.g. command = [\"vllm\"]")
        return value

    @field_validator("extra_args")
    @classmethod
    def _served_name_given(cls, value: list[str]) -> list[str]:
        name = flag_value(value, SERVED_MODEL_NAME_FLAG)
        if any(flag_name(arg) == SERVED_MODEL_NAME_FLAG for arg in value) and (name is None or name.startswith("-")):
            raise ValueError(f"{SERVED_MODEL_NAME_FLAG} needs the name after it (the requests carry it), e.g. "
                             f"\"{SERVED_MODEL_NAME_FLAG}\", \"my-model\"")
        return value

    @field_validator("extra_args")
    @classmethod
    def _no_runner_flags(cls, value: list[str]) -> list[str]:
        for arg in value:
            flag = runner_flag(arg)
            if flag:
                if flag == SPEC_METRICS_FLAG:
                    raise ValueError(f"{flag} is written by the runner: every life with K > 0 gets summary where "
                                     "this vLLM has the flag (each response's own acceptance); remove it")
                other = ("; its other keys go in speculation.config = {...}"
                         if SPEC_FLAG_CARRIES.get(flag) == SPEC_FLAG_CARRIES["--speculative-config"] else "")
                raise ValueError(f"{arg.split('=', 1)[0]} is written by the runner for every server life; "
                                 f"remove it and set {runner_field_text(flag)} instead{other}")
        return value


def _not_a_spec_value(value: object) -> str:
    """What a TOML value is when SpecValue cannot hold it (a table, a date, a list in a list), else "": pydantic's
    own error would name the first type of the union ("Input should be a valid boolean")."""
    scalar = (bool, int, float, str)
    if isinstance(value, list):
        inner = next((item for item in value if not isinstance(item, scalar)), None)
        return "" if inner is None else f"a list holding {_toml_kind(inner)}"
    return "" if isinstance(value, scalar) else _toml_kind(value)


def _toml_kind(value: object) -> str:
    return ("a table" if isinstance(value, dict) else "a list" if isinstance(value, list)
            else "a date" if isinstance(value, (datetime.date, datetime.time)) else f"a {type(value).__name__}")


class SpeculationConfig(Strict):
    """What the server speculates with; K is the one setting the sweep changes."""

    k: list[int] = Field(default_factory=lambda: [0, 2, 4, 8], description="lookahead values K to sweep "
                                                                           "(num_speculative_tokens); 0 = the "
                                                                           "no-speculation baseline",
                         json_schema_extra={"allowed": "whole numbers >= 0, unique (sorted)"})
    method: str = Field("draft_model", description="speculative method, e.g. draft_model, eagle, ngram")
    draft_model: str = Field("sim/llama-68m", description="the draft model (a path or Hugging Face name) every "
                                                          "method but ngram loads",
                             json_schema_extra=SIMULATOR_NAME)
    raw_lookahead_slots: bool = Field(
        False, description="sweep the literal --num-lookahead-slots instead of K (only where it exists)"
    )
    flag_style: Literal["auto", "shorthand", "config-json", "legacy-flags"] = Field(
        "auto", description="how K is written: auto = the best this vLLM accepts (--spec-* shorthands, "
                            "else --speculative-config JSON, else --speculative-model/--num-speculative-tokens)")
    config: dict[str, SpecValue] = Field(
        default_factory=dict,
        description="more keys of vLLM's speculative config, the same in every life with K > 0, merged into what "
                    "the runner writes with K, e.g. {draft_tensor_parallel_size = 1} or {prompt_lookup_min = 2}; "
                    "not num_speculative_tokens, method or model (speculation.k, method, draft_model)")

    @field_validator("config", mode="before")
    @classmethod
    def _not_the_runners_keys(cls, value: object) -> object:
        for key in value if isinstance(value, dict) else ():
            fix = runner_key_text(key)
            if fix:
                raise ValueError(f"{key} is written by the runner in every life; {fix}")
            if not key.isidentifier():
                raise ValueError(f"{key!r}: write the key as vLLM's speculative config names it, "
                                 "e.g. draft_tensor_parallel_size")
            if kind := _not_a_spec_value(value[key]):
                raise ValueError(f"{key}: {kind} is no speculative config value; give a number, a string, true or "
                                 f"false, or a list of them, e.g. {key} = 1")
        return value

    @field_validator("k")
    @classmethod
    def _k_valid(cls, value: list[int]) -> list[int]:
        if not value:
            raise ValueError("list at least one value, e.g. k = [0, 2, 4, 8]")
        if any(k < 0 for k in value):
            raise ValueError("values must be >= 0 (0 is the no-speculation baseline)")
        if len(set(value)) != len(value):
            raise ValueError("values must be unique")
        return sorted(value)
