"""The whole sweep: its sections, the second axis (grid), the strategy, and the checks across sections."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from ..contracts.cpus import format_cpus, parse_cpus
from .workload_variants import as_list, model_length_error
from ..vllm.knob import MAX_MODEL_LEN_FLAG, runner_flag
from .cluster import ClusterConfig
from .decision import DecisionConfig
from .load import LoadConfig
from .server import ServerConfig, SpeculationConfig, draws_restart_spread, runner_field_text
from .strict import Strict

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
    """How the sweep chooses its server lives: the whole grid, or each next life on what is measured (decision/adaptive.py)."""

    strategy: Literal["grid", "adaptive"] = Field(
        "grid", description="grid: every K x load.repeats; adaptive: the baseline and one K, then each next life "
                            "where the verdict is least sure, until it is decided or a budget runs out. Not given: "
                            "adaptive on a server whose restart spread is unknown (real vLLM) when load.repeats is "
                            "not given either, else grid")
    max_lives: int | None = Field(None, ge=2, le=1000, description="adaptive: at most this many server lives "
                                                                   "(default: the grid's, with 2 repeats per K)")
    max_server_minutes: float | None = Field(None, gt=0, description="adaptive: no life started that would take "
                                                                     "the server-minutes spent past this")


class SweepConfig(Strict):
    _adaptive_by_default: bool = PrivateAttr(False)
    name: str = "sweep"
    out: str = "reports"
    server: ServerConfig = Field(default_factory=ServerConfig)
    speculation: SpeculationConfig = Field(default_factory=SpeculationConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    grid: GridConfig = Field(default_factory=GridConfig)
    sweep: StrategyConfig = Field(default_factory=StrategyConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)

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
        if self.load.requests:
            return self  # a request set's own prompts: the server answers one too long for its model
        grid = self.grid.values if self.grid.flag == MAX_MODEL_LEN_FLAG else []
        problem = model_length_error(self.load.variants, self.server.extra_args, grid)
        if problem:
            raise ValueError(f"load.prompt_tokens: {problem}")
        return self

    @model_validator(mode="after")
    def _restart_spread_of_the_server(self) -> "SweepConfig":
        kind = ("simulator drawing a restart spread" if draws_restart_spread(self.server.extra_args) else "simulator") \
            if self.server.is_simulator else "vllm"
        self.decision.for_server(kind, one_life_per_k=self.load.repeat_mode == "same-server")
        return self

    @model_validator(mode="after")
    def _measure_until_decided_where_the_spread_is_unknown(self) -> "SweepConfig":
        """No sweep.strategy and no load.repeats given, on a server whose restart spread is unknown (real vLLM, a
        simulator drawing one): the adaptive sweep, which buys the spread with one repeated life and measures until
        decided, where it can choose lives (a restart per life, one decision, two K or more, a server it starts);
        the grid otherwise, and always on the simulator's own (the demo)."""
        if "strategy" in self.sweep.model_fields_set or "repeats" in self.load.model_fields_set:
            return self
        if (self.decision.spread_unknown and self.load.repeat_mode == "restart" and not self.grid.axis
                and len(self.load.variants) == 1 and len(self.speculation.k) >= 2 and not self.server.url):
            self.sweep.strategy = "adaptive"
            self._adaptive_by_default = True
        return self

    @property
    def adaptive_by_default(self) -> bool:
        """The adaptive sweep was chosen because no strategy was given on a server of unknown restart spread."""
        return self._adaptive_by_default

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
    def _cluster_starts_its_servers(self) -> "SweepConfig":
        if self.cluster.engine == "ray" and self.server.url:
            raise ValueError("cluster.engine = \"ray\" starts each server life on a worker node; server.url is a "
                             "server started elsewhere: remove server.url or set cluster.engine = \"local\"")
        return self

    @model_validator(mode="after")
    def _server_cpus_reach_the_server(self) -> "SweepConfig":
        if self.server.cpus and (self.server.url or self.server.argv_template):
            where = "server.url is a server started elsewhere: place it where it starts" if self.server.url else \
                "server.argv_template starts the server through another program: put docker's " \
                "--cpuset-cpus (or taskset -c) in the template"
            raise ValueError(f"server.cpus cannot reach this server; {where}, and set load.cpus for Locust")
        if self.server.cpus and self.load.cpus:
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
