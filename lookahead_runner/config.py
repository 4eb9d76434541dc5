"""The sweep's configuration: strict models, loaded from TOML with CLI overrides.

Every model forbids unknown keys, so a misspelled key is an error naming the field rather
than a silently ignored setting. `load_config` turns any problem into one `ConfigError`
line that names the field and says what to do.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SIM_COMMAND = [sys.executable, "-m", "lookahead_runner.sim"]


class ConfigError(ValueError):
    """Bad configuration: the message is one line naming the field and the fix."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


# flags the runner writes itself for every server life: set through the config fields named here
RUNNER_FLAGS = {
    "--speculative-config": "speculation.k, speculation.method and speculation.draft_model",
    "-sc": "speculation.k, speculation.method and speculation.draft_model",
    "--spec-method": "speculation.method",
    "--spec-model": "speculation.draft_model",
    "--spec-tokens": "speculation.k",
    "--num-speculative-tokens": "speculation.k",
    "--speculative-model": "speculation.draft_model",
    "--host": "server.host",
    "--port": "server.port",
}


def runner_flag(arg: str) -> str:
    """The runner-owned flag `arg` sets (`--speculative_config=...`, `--speculative-config.method`), or ""."""
    if not arg.startswith("-"):
        return ""
    name = arg.split("=", 1)[0]
    name = name[:2] + name[2:].replace("_", "-")
    if name.startswith("--speculative-config."):
        name = "--speculative-config"
    return name if name in RUNNER_FLAGS else ""


class ServerConfig(Strict):
    command: list[str] = Field(
        default_factory=lambda: list(SIM_COMMAND),
        description="argv prefix of the vLLM CLI; `serve MODEL --port P ...` is appended",
    )
    model: str = Field("sim/llama-3-8b", description="model served by `serve MODEL`")
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
    memory_source: Literal["auto", "nvml", "sim", "process", "dcgm", "none"] = "auto"
    dcgm_url: str = Field("", description="a DCGM exporter's /metrics URL, for GPU memory of a remote server")
    url: str = Field("", description="an already-running server to load (no restarts; one setting)")
    memory_stable_band_mib: float = Field(64.0, ge=0, description="memory counts as stable within this band")
    memory_stable_window_s: float = Field(2.0, ge=0, description="for this long")
    memory_stable_timeout_s: float = Field(120.0, gt=0)
    api_key_env: str = Field("", description="name of an environment variable holding the API key")
    cpus: str = Field("", description="CPUs for the server's process tree (a CPU list: \"0-5\"); "
                                      "empty = load.placement decides")

    @field_validator("cpus")
    @classmethod
    def _cpus_are_a_list(cls, value: str) -> str:
        return _cpu_list(value)

    @field_validator("argv_template")
    @classmethod
    def _template_has_args(cls, value: list[str]) -> list[str]:
        if value and "{args}" not in value:
            raise ValueError("add an element \"{args}\" where the vLLM flags go, and {port} where the port goes")
        if value and not any("{port}" in part for part in value):
            raise ValueError("use {port} where the server's port goes, e.g. \"-p\", \"{port}:8000\"")
        return value

    @field_validator("command")
    @classmethod
    def _command_not_empty(cls, value: list[str]) -> list[str]:
        if not value or not value[0].strip():
            raise ValueError("set the vLLM command, e.g. command = [\"vllm\"]")
        return value

    @field_validator("extra_args")
    @classmethod
    def _no_runner_flags(cls, value: list[str]) -> list[str]:
        for arg in value:
            flag = runner_flag(arg)
            if flag:
                raise ValueError(f"{arg.split('=', 1)[0]} is written by the runner for every server life; "
                                 f"remove it and set {RUNNER_FLAGS[flag]} instead")
        return value


class SpeculationConfig(Strict):
    k: list[int] = Field(default_factory=lambda: [0, 2, 4, 8], description="lookahead values K to sweep")
    method: str = Field("draft_model", description="speculative method, e.g. draft_model, eagle, ngram")
    draft_model: str = Field("sim/llama-68m", description="draft model for draft_model/eagle methods")
    raw_lookahead_slots: bool = Field(
        False, description="sweep the literal --num-lookahead-slots instead of K (only where it exists)"
    )
    flag_style: Literal["auto", "shorthand", "config-json", "legacy-flags"] = Field(
        "auto", description="how K is written: auto = the best this vLLM accepts (--spec-* shorthands, "
                            "else --speculative-config JSON, else --speculative-model/--num-speculative-tokens)")

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


class StageConfig(Strict):
    users: int = Field(ge=1, le=100_000)
    duration_s: float = Field(gt=0)


class LoadConfig(Strict):
    stages: list[StageConfig] = Field(
        default_factory=lambda: [StageConfig(users=u, duration_s=20) for u in (8, 32, 96)]
    )
    prompt_tokens: int = Field(128, ge=1)
    output_tokens: int = Field(64, ge=2)
    temperature: float = Field(0.0, ge=0)
    repeats: int = Field(1, ge=1, le=100)
    repeat_mode: Literal["restart", "same-server"] = Field(
        "restart", description="restart: a fresh server per repeat (its startup varies too); same-server: "
                               "all repeats of a setting on one server life (faster; caches stay warm)")
    warmup_s: float = Field(
        -1.0, description="seconds excluded at each stage start; -1 = max(2 s, 25% of the stage)"
    )
    request_timeout_s: float = Field(120.0, gt=0)
    processes: int | Literal["auto"] = Field(
        "auto", description="Locust processes on this host (--processes); auto = enough to keep each under "
                            "60% of a core at the highest stage, from the measured per-process capacity")
    cpus: str = Field("", description="CPUs for Locust's processes (a CPU list: \"6-7\"); empty = load.placement decides")
    placement: Literal["auto", "off"] = Field(
        "auto", description="auto: a server started on this host gets CPUs apart from Locust's; off: the OS schedules both")
    preflight_s: float = Field(
        3.0, ge=0, description="seconds of load at the highest stage before the first life, measuring Locust's lag "
                               "and capacity; a run that cannot be valid stops there (0 = no pre-flight)")
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int | None = Field(None, description="sampling seed sent with every request")
    prompt_file: str = Field("", description="JSONL prompt corpus ({\"text\": ...} per line); empty = built-in")
    locust_extra_args: list[str] = Field(default_factory=list)

    @field_validator("processes", mode="before")
    @classmethod
    def _processes_in_range(cls, value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 64:
            raise ValueError(f"{value!r}: write a count from 1 to 64, or \"auto\"")
        return value

    @field_validator("cpus")
    @classmethod
    def _cpus_are_a_list(cls, value: str) -> str:
        return _cpu_list(value)

    @field_validator("stages")
    @classmethod
    def _stages_not_empty(cls, value: list[StageConfig]) -> list[StageConfig]:
        if not value:
            raise ValueError("list at least one stage, e.g. stages = [{users = 8, duration_s = 20}]")
        return value


class GridConfig(Strict):
    """A second sweep axis: any `vllm serve` flag, crossed with every K."""

    flag: str = Field("", description="e.g. \"--max-num-seqs\"; empty = no second axis")
    values: list[str] = Field(default_factory=list, description="values of that flag, e.g. [\"64\", \"128\"]")

    @model_validator(mode="after")
    def _flag_and_values(self) -> "GridConfig":
        if self.flag and not self.flag.startswith("--"):
            raise ValueError(f"grid.flag = {self.flag!r}: write the flag with its dashes, e.g. \"--max-num-seqs\"")
        if runner_flag(self.flag):
            raise ValueError(f"grid.flag = {self.flag!r} is written by the runner; sweep {RUNNER_FLAGS[runner_flag(self.flag)]} "
                             "instead")
        if self.flag and not self.values:
            raise ValueError("grid.values: list at least one value for grid.flag")
        if self.values and not self.flag:
            raise ValueError("grid.flag: name the server flag that grid.values are for")
        return self


class DecisionConfig(Strict):
    target_users: int = Field(0, ge=0, description="concurrency the decision is made at; 0 = the last stage")
    memory_rise_frac: float = Field(0.05, ge=0, description="a memory rise this large counts as clear")
    throughput_gain_frac: float = Field(0.02, ge=0, description="req/s must rise at least this much to pay for it")
    tie_tolerance_frac: float = Field(0.03, ge=0, description="throughputs within this are a tie: smaller K wins")
    repeat_spread_frac: float = Field(0.10, ge=0, description="max (max-min)/median of req/s across repeats")
    low_acceptance: float = Field(0.3, ge=0, le=1, description="acceptance below this is acceptance-bound")
    kv_headroom_frac: float = Field(0.05, ge=0, le=1, description="KV usage peak must stay under 1 - this")
    min_requests: int = Field(10, ge=1, description="a stage window with fewer requests is invalid")
    max_client_lag_p99_ms: float = Field(
        50.0, gt=0, description="a window whose Locust loop lag p99 exceeds this is invalid (client saturated)")


class SweepConfig(Strict):
    name: str = "sweep"
    out: str = "reports"
    server: ServerConfig = Field(default_factory=ServerConfig)
    speculation: SpeculationConfig = Field(default_factory=SpeculationConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    grid: GridConfig = Field(default_factory=GridConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)

    @model_validator(mode="after")
    def _target_is_a_stage(self) -> "SweepConfig":
        users = [s.users for s in self.load.stages]
        if self.decision.target_users and self.decision.target_users not in users:
            raise ValueError(f"decision.target_users = {self.decision.target_users} is not a stage's users {users}")
        return self

    @model_validator(mode="after")
    def _running_server_has_one_setting(self) -> "SweepConfig":
        if self.server.url and (len(self.speculation.k) != 1 or self.grid.flag):
            raise ValueError("server.url: an already-running server is one setting; "
                             "set speculation.k to the one K it runs (e.g. k = [4]) and no grid")
        return self

    @model_validator(mode="after")
    def _server_cpus_reach_the_server(self) -> "SweepConfig":
        if self.server.cpus and (self.server.url or self.server.argv_template):
            where = "server.url is a server started elsewhere: place it where it starts" if self.server.url else \
                "server.argv_template starts the server through another program: put docker's " \
                "--cpuset-cpus (or taskset -c) in the template"
            raise ValueError(f"server.cpus cannot reach this server; {where}, and set load.cpus for Locust")
        if self.server.cpus and self.load.cpus:
            from .placement import format_cpus, parse_cpus

            shared = set(parse_cpus(self.server.cpus)) & set(parse_cpus(self.load.cpus))
            if shared:
                raise ValueError(f"server.cpus and load.cpus share CPU {format_cpus(shared)}: the server's threads "
                                 "would take Locust's CPU time; give them CPUs of their own")
        return self

    @property
    def target_users(self) -> int:
        return self.decision.target_users or self.load.stages[-1].users


def _cpu_list(value: str) -> str:
    from .placement import parse_cpus

    if value.strip():
        parse_cpus(value)  # raises ValueError with the fix
    return value.strip()


def error_line(err: ValidationError, source: str) -> str:
    first = err.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or "config"
    msg = first["msg"]
    if first["type"] == "extra_forbidden":
        msg = "unknown key; remove it or check its spelling"
    elif msg.startswith("Value error, "):
        msg = msg[len("Value error, "):]
    return f"{source}: {field}: {msg}"


def config_from_dict(data: dict, source: str = "config") -> SweepConfig:
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(error_line(err, source)) from None
    check_files(config, source)
    return config


def check_files(config: SweepConfig, source: str = "config") -> None:
    """Files the config names must be readable now, not hours into the sweep."""
    path = config.load.prompt_file
    if not path:
        return
    if not os.path.isfile(path):
        why = "is not a file" if os.path.exists(path) else "does not exist"
        raise ConfigError(f"{source}: load.prompt_file: {path!r} {why}; give a JSONL file "
                          "({\"text\": ...} per line) or leave it empty for the built-in corpus")
    from .workload.prompt import read_corpus_file  # pure (no Locust): the same reader the load uses

    try:
        read_corpus_file(path)
    except OSError as err:
        raise ConfigError(f"{source}: load.prompt_file: cannot read {path!r} ({err.strerror}); "
                          "check its permissions") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: load.prompt_file: {path!r} is not UTF-8 text; "
                          "write one {\"text\": ...} per line") from None
    except ValueError as err:
        raise ConfigError(f"{source}: load.prompt_file: {err}") from None


def load_config(path: Path | None, overrides: dict | None = None) -> SweepConfig:
    """Read TOML (or defaults when path is None) and apply dotted CLI overrides."""
    data: dict = {}
    source = str(path) if path else "defaults"
    if path is not None:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: file not found; pass an existing TOML file to --config") from None
        except OSError as err:
            raise ConfigError(f"{path}: cannot read ({err.strerror}); check the path and its permissions") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise ConfigError(f"{path}: not valid TOML ({err}); fix the syntax") from None
    for dotted, value in (overrides or {}).items():
        node = data
        *parents, leaf = dotted.split(".")
        if not leaf or not all(parents):
            raise ConfigError(f"--set {dotted}: empty key part; write e.g. --set load.repeats=3")
        for depth, part in enumerate(parents):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {dotted}: {'.'.join(parents[:depth + 1])} is not a table; "
                                  "set a key inside a table, e.g. --set load.repeats=3")
        node[leaf] = value
    return config_from_dict(data, source)
