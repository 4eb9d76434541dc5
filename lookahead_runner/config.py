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

from .masking import ENV_NAME_RE, mask_server
from .slo import parse_slo_key, parse_slos
from .variants import Variant, as_list, axis_values, model_length_error, variants_of
from .vllm.knob import ADDRESS_FLAGS, SPEC_FLAG_CARRIES, runner_flag

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

SIM_COMMAND = [sys.executable, "-m", "lookahead_runner.sim"]


class ConfigError(ValueError):
    """Bad configuration: the message is one line naming the field and the fix."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def runner_field_text(flag: str) -> str:
    """The config fields that set a flag the runner writes itself (vllm.knob.runner_flag)."""
    if flag in ADDRESS_FLAGS:
        return f"server.{flag.lstrip('-')}"
    fields = [f"speculation.{name}" for name in SPEC_FLAG_CARRIES[flag]]
    return ", ".join(fields[:-1]) + " and " + fields[-1] if len(fields) > 1 else fields[0]


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
    api_key_env: str = Field("", description="name of an environment variable holding the API key the load "
                                             "sends; empty = the server's own (--api-key, else VLLM_API_KEY)")
    secret_flags: list[str] = Field(
        default_factory=list, description="flags whose value is a secret, besides --api-key and --hf-token: "
                                          "written as ${NAME} (NAME = the flag in capitals) in every file")
    secret_env: list[str] = Field(
        default_factory=list, description="variables whose NAME=VALUE inside an argv element (a launcher's "
                                          "-e HF_TOKEN=...) or server.env value is a secret: written as ${NAME}")

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
                                 f"remove it and set {runner_field_text(flag)} instead")
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


AUTO_FIRST_REPEATS = 2


class StageConfig(Strict):
    users: int = Field(ge=1, le=100_000)
    duration_s: float = Field(gt=0)


class LoadConfig(Strict):
    stages: list[StageConfig] = Field(
        default_factory=lambda: [StageConfig(users=u, duration_s=20) for u in (8, 32, 96)]
    )
    prompt_tokens: int | list[int] = Field(
        128, description="prompt length in tokens; a list is a workload axis measured in each server life, e.g. "
                         "[512, 4096] (variants.py)")
    output_tokens: int | list[int] = Field(64, description="output length in tokens (>= 2); a list is an axis too")
    temperature: float | list[float] = Field(0.0, description="sampling temperature (>= 0); a list is an axis too")
    repeats: int | Literal["auto"] = Field(
        1, description="repeats of every setting; \"auto\" = 2, then one more of each K the verdict hangs on "
                       "until it is decided or max_repeats is reached")
    max_repeats: int = Field(5, ge=2, le=100, description="the cap of repeats = \"auto\"")
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

    @field_validator("repeats", mode="before")
    @classmethod
    def _repeats_in_range(cls, value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("give a whole number of repeats (1 to 100) or \"auto\"")
        if not 1 <= value <= 100:
            raise ValueError("give 1 to 100 repeats, or \"auto\"")
        return value

    @field_validator("prompt_tokens", "output_tokens", "temperature", mode="before")
    @classmethod
    def _workload_axis(cls, value: object, info) -> object:
        return axis_values(info.field_name, value)

    @property
    def variants(self) -> list[Variant]:
        """The workload variants every server life runs, in order (variants.py)."""
        return variants_of(self.prompt_tokens, self.output_tokens, self.temperature)

    @property
    def planned_repeats(self) -> int:
        """Repeats planned up front: "auto" starts with two (the least that shows a spread)."""
        return AUTO_FIRST_REPEATS if self.repeats == "auto" else self.repeats

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
    """A second sweep axis: any `vllm serve` flag, or a key of the speculative config, crossed with every K."""

    flag: str = Field("", description="e.g. \"--max-num-seqs\"; empty = no second axis")
    spec_key: str = Field("", description="a speculative config key other than K, e.g. \"draft_sample_method\" "
                                          "(instead of flag; the probe checks this vLLM has it)")
    values: list[str] = Field(default_factory=list, description="values of that flag or key, e.g. [\"64\", \"128\"]")

    @property
    def axis(self) -> str:
        """What the grid sweeps, as the report names it: the flag, or speculative_config.KEY."""
        return f"speculative_config.{self.spec_key}" if self.spec_key else self.flag

    @model_validator(mode="after")
    def _spec_key(self) -> "GridConfig":
        if not self.spec_key:
            return self
        if self.flag:
            raise ValueError("grid.spec_key: the grid has one axis; set grid.flag or grid.spec_key, not both")
        if not self.spec_key.isidentifier():
            raise ValueError(f"grid.spec_key = {self.spec_key!r}: write the key as vLLM's speculative config names it, "
                             "e.g. \"draft_sample_method\"")
        if not self.values:
            raise ValueError("grid.values: list at least one value for grid.spec_key")
        if len(set(self.values)) != len(self.values):
            raise ValueError("grid.values: values must be unique")
        return self

    @model_validator(mode="after")
    def _flag_and_values(self) -> "GridConfig":
        if self.flag and not self.flag.startswith("--"):
            raise ValueError(f"grid.flag = {self.flag!r}: write the flag with its dashes, e.g. \"--max-num-seqs\"")
        if runner_flag(self.flag):
            raise ValueError(f"grid.flag = {self.flag!r} is written by the runner; sweep {runner_field_text(runner_flag(self.flag))} "
                             "instead")
        if self.flag and not self.values:
            raise ValueError("grid.values: list at least one value for grid.flag")
        if self.values and not self.flag and not self.spec_key:
            raise ValueError("grid.flag: name the server flag (or grid.spec_key the speculative config key) that "
                             "grid.values are for")
        return self


class StrategyConfig(Strict):
    """How the sweep chooses its server lives: the whole grid, or one life at a time (adaptive.py)."""

    strategy: Literal["grid", "adaptive"] = Field(
        "grid", description="grid: every K x load.repeats; adaptive: the baseline and one K, then each next life "
                            "where the verdict is least sure, until it is decided or a budget runs out")
    max_lives: int | None = Field(None, ge=2, le=1000, description="adaptive: at most this many server lives "
                                                                   "(default: the grid's, with 2 repeats per K)")
    max_server_minutes: float | None = Field(None, gt=0, description="adaptive: no life started that would take "
                                                                     "the server-minutes spent past this")


class DecisionConfig(Strict):
    """Every threshold of the decision, in one place; the report shows the run's values."""

    target_users: int | list[int] = Field(
        0, description="concurrency the decision is made at; 0 = the last stage; with workload variants, one for "
                       "all or a list with one per variant (in their order)")

    @field_validator("target_users", mode="before")
    @classmethod
    def _target_counts(cls, value: object) -> object:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(f"{item!r}: give a stage's users (0 = the last stage), or a list of them")
        if isinstance(value, list) and not value:
            raise ValueError("list one users count per workload variant, or give one for all")
        return value
    objective: Literal["req_per_s", "output_tok_per_s", "goodput"] = Field(
        "req_per_s", description="what the best K maximises; goodput = requests/s meeting every SLO")
    slo: dict[str, float] = Field(
        default_factory=dict, description="per-request SLOs, METRIC_pNN_ms = limit (METRIC: ttft, tpot, itl, "
                                          "e2e), e.g. ttft_p99_ms = 500; a K breaking one is blocked")
    memory_rise_frac: float = Field(0.05, ge=0, description="a memory rise this large counts as clear (stop rule)")
    throughput_gain_frac: float = Field(0.02, ge=0, description="the objective must rise this much to pay for it")
    tie_tolerance_frac: float = Field(0.03, ge=0, description="objectives within this are a tie: smaller K wins")
    latency_percentile: float = Field(90.0, gt=0, lt=100, description="e2e percentile the latency gate reads "
                                                                      "when no SLO is given")
    latency_tolerance_frac: float = Field(0.10, ge=0, description="e2e worse than the baseline by more than this "
                                                                  "(and beyond its interval) blocks a K")
    failure_rate_slack: float = Field(0.005, ge=0, description="failure or timeout rate above the baseline's by "
                                                               "more than this (and beyond its interval) blocks a K")
    batch_drop_frac: float = Field(0.10, ge=0, le=1, description="real batch below the baseline's by more than "
                                                                 "this blocks a K (lower --max-num-seqs first)")
    queue_share_frac: float = Field(0.10, ge=0, le=1, description="a request or more queued this share of "
                                                                  "their time at the server (waiting / (running "
                                                                  "+ waiting)) makes a falling batch the "
                                                                  "server's limit")
    repeat_spread_frac: float = Field(0.10, ge=0, description="advice: (max-min)/median of req/s across repeats")
    low_acceptance: float = Field(0.3, ge=0, le=1, description="acceptance below this is acceptance-bound")
    kv_headroom_frac: float = Field(0.05, ge=0, le=1, description="KV usage peak must stay under 1 - this")
    confidence: float = Field(0.90, ge=0.5, le=1, description="share of resamples the recommended K must win; "
                                                              "below it the verdict is \"not decided yet\"")
    interval_level: float = Field(0.95, gt=0.5, lt=1, description="confidence level of every interval shown")
    resamples: int = Field(1000, ge=50, le=100_000, description="bootstrap resamples behind intervals and confidence")
    seed: int = Field(0, description="seed of the resampling (the same run gives the same report)")
    bin_min_s: float = Field(1.0, gt=0, description="shortest throughput bin inside a window (batch means); bins "
                                                    "are at least one median request long")
    knee_gain_per_doubling: float = Field(0.10, ge=0, description="more users buying less throughput than this per "
                                                                  "doubling, at a latency or KV cost, is the knee")
    knee_latency_rise_frac: float = Field(0.25, ge=0, description="a TTFT or e2e p50 rise this large is a latency "
                                                                  "cost at the knee")
    production_users: int = Field(0, ge=0, description="the concurrency production runs at, which need not be "
                                                        "a stage: the performance model predicts the best K "
                                                        "there (a prediction, only from a trusted model); 0 = none")
    model_error_bound: float = Field(0.10, gt=0, lt=1, description="the performance model is trusted only when its "
                                                                   "held-out req/s error (median) is within this")
    min_requests: int = Field(10, ge=1, description="a stage window with fewer requests is invalid")
    max_client_lag_p99_ms: float = Field(
        50.0, gt=0, description="a window whose Locust loop lag p99 exceeds this is invalid (client saturated)")
    confirm: Literal["schedule", "always", "off"] = Field(
        "schedule", description="a confirmation life after the decision, running what the report recommends: "
                                "schedule = only a per-batch-size schedule (the default), always = a single K too "
                                "(--confirm), off = none (--no-confirm); true / false mean always / off")
    confirm_stages: Literal["all", "target"] = Field(
        "all", description="stages the confirmation life runs besides the threshold stages around each schedule "
                           "boundary: all = every sweep stage, target = the target stage only (shorter)")
    confirm_repeats: int = Field(1, ge=1, le=10, description="confirmation lives (repeats) of the recommendation")
    collapse_frac: float = Field(0.15, gt=0, lt=1, description="req/s at a schedule boundary this far below what "
                                                               "the stages beside it expect is a collapse: the "
                                                               "schedule is not confirmed")
    waive: list[Literal["memory", "batch", "latency", "slo", "failures"]] = Field(
        default_factory=list, description="gates the decision may go ahead without when they cannot be judged "
                                          "(not measured, or too little data): shown as waived, never as a pass; "
                                          "a gate that was measured is judged as usual. e.g. [\"memory\"]")

    @field_validator("confirm", mode="before")
    @classmethod
    def _confirm_bool(cls, value: object) -> object:
        return {True: "always", False: "off"}.get(value, value) if isinstance(value, bool) else value

    @field_validator("slo")
    @classmethod
    def _slo_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, limit in value.items():
            parse_slo_key(key)
            if not limit > 0:
                raise ValueError(f"SLO {key} = {limit}: give a limit in ms above 0")
        return value

    @model_validator(mode="after")
    def _goodput_needs_slo(self) -> "DecisionConfig":
        if self.objective == "goodput" and not self.slo:
            raise ValueError("objective = \"goodput\" counts requests meeting every SLO: set at least one in "
                             "decision.slo, e.g. ttft_p99_ms = 500")
        return self

    @property
    def slos(self):
        return parse_slos(tuple(sorted(self.slo.items())))  # cached there: the rules ask on every resample


class SweepConfig(Strict):
    name: str = "sweep"
    out: str = "reports"
    server: ServerConfig = Field(default_factory=ServerConfig)
    speculation: SpeculationConfig = Field(default_factory=SpeculationConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    grid: GridConfig = Field(default_factory=GridConfig)
    sweep: StrategyConfig = Field(default_factory=StrategyConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)

    @model_validator(mode="after")
    def _target_is_a_stage(self) -> "SweepConfig":
        users = [s.users for s in self.load.stages]
        variants = self.load.variants
        targets = self.decision.target_users
        if isinstance(targets, list) and len(targets) != len(variants):
            names = ", ".join(v.named() for v in variants)
            raise ValueError(f"decision.target_users: give one users count per workload variant ({len(variants)}: "
                             f"{names}), or one for all")
        for target in as_list(targets):
            if target and target not in users:
                raise ValueError(f"decision.target_users = {target} is not a stage's users {users}")
        return self

    @model_validator(mode="after")
    def _variants_fit_the_model_length(self) -> "SweepConfig":
        """The longest workload variant against --max-model-len, where the config sets it (in server.extra_args,
        or as the grid's flag), before any server starts."""
        grid = self.grid.values if self.grid.flag == "--max-model-len" else []
        problem = model_length_error(self.load.variants, self.server.extra_args, grid)
        if problem:
            raise ValueError(f"load.prompt_tokens: {problem}")
        return self

    @model_validator(mode="after")
    def _auto_repeats_without_grid(self) -> "SweepConfig":
        if self.load.repeats == "auto" and self.grid.axis:
            field = "grid.spec_key" if self.grid.spec_key else "grid.flag"
            raise ValueError(f"load.repeats = \"auto\" adds repeats for one decision; with {field} each value has "
                             "its own: give a number, e.g. repeats = 3")
        return self

    @model_validator(mode="after")
    def _adaptive_restarts(self) -> "SweepConfig":
        if self.sweep.strategy != "adaptive":
            return self
        if self.grid.axis:
            raise ValueError(f"sweep.strategy = \"adaptive\" chooses lives for one decision; with a grid "
                             f"({self.grid.axis}) each value has its own: use strategy = \"grid\"")
        if len(self.load.variants) > 1:
            raise ValueError("sweep.strategy = \"adaptive\" chooses lives for one decision; with several workload "
                             "variants each has its own: use strategy = \"grid\" or one variant")
        if self.load.repeat_mode != "restart":
            raise ValueError("sweep.strategy = \"adaptive\" starts a server per life it chooses: set "
                             "load.repeat_mode = \"restart\"")
        if len(self.speculation.k) < 2:
            raise ValueError("sweep.strategy = \"adaptive\" chooses among K: list at least two in speculation.k")
        return self

    @model_validator(mode="after")
    def _running_server_has_one_setting(self) -> "SweepConfig":
        if self.server.url and (len(self.speculation.k) != 1 or self.grid.axis):
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
            from .cpus import format_cpus, parse_cpus

            shared = set(parse_cpus(self.server.cpus)) & set(parse_cpus(self.load.cpus))
            if shared:
                raise ValueError(f"server.cpus and load.cpus share CPU {format_cpus(shared)}: the server's threads "
                                 "would take Locust's CPU time; give them CPUs of their own")
        return self

    @property
    def target_users(self) -> int:
        """The first (with one workload variant the only) variant's target; see target_for."""
        return self.target_for(0)

    def target_for(self, variant: int) -> int:
        """The target users of the variant at this index in load.variants."""
        targets = self.decision.target_users
        target = targets[variant] if isinstance(targets, list) else targets
        return target or self.load.stages[-1].users


def _cpu_list(value: str) -> str:
    from .cpus import parse_cpus

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
    check_environment(config, source)
    return config


def check_environment(config: SweepConfig, source: str = "config", environ=os.environ) -> None:
    """Secrets the config reads from the environment (a `${NAME}`, as a resumed run's plan.json holds
    them, and server.api_key_env) must be set now, not hours into the sweep."""
    _, secrets = mask_server(config.server, environ)
    for field, name in secrets.missing:
        raise ConfigError(f"{source}: {field}: ${{{name}}} is read from the environment, but {name} is not set "
                          f"(secrets are kept only by name); export {name}=... and run again")
    key_env = config.server.api_key_env
    if key_env and not environ.get(key_env):
        raise ConfigError(f"{source}: server.api_key_env: the environment variable {key_env} is not set; "
                          f"export {key_env}=<the API key>, or remove api_key_env")


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
