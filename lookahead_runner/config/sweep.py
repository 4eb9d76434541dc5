"""The whole sweep: its sections, the second axis (grid), the strategy, and the checks across sections."""
from __future__ import annotations

import math
from typing import Literal

from pydantic import Field, PrivateAttr, model_validator

from ..contracts.cpus import format_cpus, parse_cpus
from .workload_variants import as_list, model_length_error
from ..vllm.knob import MAX_MODEL_LEN_FLAG, NGRAM_LOOKUP_MAX, loads_draft_model, runner_flag
from .cluster import ClusterConfig, cluster_problem
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
    """How the sweep chooses its server lives: the whole grid, or each next life on what is measured."""

    strategy: Literal["grid", "adaptive", "capacity"] = Field(
        "grid", description="grid: every K x load.repeats; adaptive: the baseline and one K, then each next life "
                            "where the verdict is least sure, until it is decided (an early stop at 99 % of the "
                            "resamples, the last life at decision.confidence) or a budget runs out; capacity: "
                            "every K once over the stages, then probes (one rate stage each) bracketing and "
                            "bisecting each K's capacity within the SLO (docs/rate-stages.md). Not given: adaptive "
                            "on a server whose restart spread is unknown (real vLLM) when load.repeats is not given "
                            "either, else grid")
    capacity_precision: float = Field(0.10, gt=0, le=1, description="capacity: a K's search ends once its "
                                                                    "bracket (the highest rate that holds, the "
                                                                    "lowest that does not) is this narrow, "
                                                                    "relative")
    max_lives: int | None = Field(None, ge=2, le=1000, description="adaptive, capacity: at most this many server "
                                                                   "lives (default: adaptive the grid's with 2 "
                                                                   "repeats per K; capacity 8 per K)")
    max_server_minutes: float | None = Field(None, gt=0, description="adaptive, capacity: no life started that "
                                                                     "would take the server-minutes spent past this")


class SweepConfig(Strict):
    """A whole sweep: the top-level keys, then one table per section."""

    _adaptive_by_default: bool = PrivateAttr(False)
    name: str = Field("sweep", description="the run's name: its folder is OUT/DATE-TIME-NAME")
    out: str = Field("reports", description="the folder run folders are written under (--out overrides it)")
    server: ServerConfig = Field(default_factory=ServerConfig)
    speculation: SpeculationConfig = Field(default_factory=SpeculationConfig)
    load: LoadConfig = Field(default_factory=LoadConfig)
    grid: GridConfig = Field(default_factory=GridConfig)
    sweep: StrategyConfig = Field(default_factory=StrategyConfig)
    decision: DecisionConfig = Field(default_factory=DecisionConfig)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)

    @model_validator(mode="after")
    def _target_is_a_stage(self) -> "SweepConfig":
        users = [s.users for s in self.load.user_stages]
        variants = self.load.variants
        targets = self.decision.target_users
        if isinstance(targets, list) and len(targets) != len(variants):
            names = ", ".join(v.named() for v in variants)
            raise ValueError(f"decision.target_users: give one users count per workload variant ({len(variants)}: "
                             f"{names}), or one for all")
        for target in as_list(targets):
            if target and target not in users:
                raise ValueError(f"decision.target_users = {target} is not a stage's users {users}")
        rate = self.decision.target_rate
        rates = [s.rate for s in self.load.rate_stages]
        if rate and not rates:
            raise ValueError(f"decision.target_rate = {rate:g} needs a rate stage at that rate: add "
                             f"{{ rate = {rate:g}, duration_s = 60 }} to load.stages, or remove decision.target_rate")
        if rate and not any(math.isclose(rate, r, rel_tol=1e-9) for r in rates):
            raise ValueError(f"decision.target_rate = {rate:g} is not a rate stage's rate "
                             f"[{', '.join(f'{r:g}' for r in rates)}]: give one of them, or add a stage at it")
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
        drawing = draws_restart_spread([*self.server.argv_template, *self.server.extra_args])
        kind = ("simulator drawing a restart spread" if drawing else "simulator") \
            if self.server.is_simulator else "vllm"
        self.decision.for_server(kind, one_life_per_k=self.load.repeat_mode == "same-server")
        return self

    @model_validator(mode="after")
    def _constant_spec_keys(self) -> "SweepConfig":
        """speculation.config beside the rest: one owner per key, and a speculative config to carry them."""
        spec = self.speculation
        if not spec.config:
            return self
        if self.grid.spec_key in spec.config:
            raise ValueError(f"grid.spec_key = {self.grid.spec_key!r} is also in speculation.config: a key is "
                             "constant or swept, not both; remove it from one")
        if spec.raw_lookahead_slots:
            raise ValueError("speculation.config: raw_lookahead_slots sweeps --num-lookahead-slots alone, with no "
                             "speculative config to carry it; remove one of them")
        low = spec.config.get("prompt_lookup_min")
        high = spec.config.get("prompt_lookup_max", NGRAM_LOOKUP_MAX)
        if spec.method == "ngram" and isinstance(low, int) and isinstance(high, int) and low > high:
            whose = "" if "prompt_lookup_max" in spec.config else " (the runner's default)"
            raise ValueError(f"speculation.config.prompt_lookup_min = {low} is above prompt_lookup_max = "
                             f"{high}{whose}: vLLM refuses it; set prompt_lookup_max >= {low} too")
        return self

    @model_validator(mode="after")
    def _measure_until_decided_where_the_spread_is_unknown(self) -> "SweepConfig":
        """No sweep.strategy and no load.repeats given, on a server whose restart spread is unknown (real vLLM, a
        simulator drawing one): the adaptive sweep, which buys the spread with one repeated life and measures until
        decided, where it can choose lives (a restart per life, one decision: at the users target, or with rate
        stages only at the target rate; two K or more, a server it starts);
        the grid otherwise, and always on the simulator's own (the demo)."""
        if "strategy" in self.sweep.model_fields_set or "repeats" in self.load.model_fields_set:
            return self
        one_decision = bool(self.load.user_stages) or self.target_rate is not None
        if (self.decision.spread_unknown and self.load.repeat_mode == "restart" and not self.grid.axis
                and one_decision and len(self.load.variants) == 1 and len(self.speculation.k) >= 2
                and not self.server.url):
            self.sweep.strategy = "adaptive"
            self._adaptive_by_default = True
        return self

    @property
    def adaptive_by_default(self) -> bool:
        """The adaptive sweep was chosen because no strategy was given on a server of unknown restart spread."""
        return self._adaptive_by_default

    @property
    def adaptive_rate(self) -> float | None:
        """The rate (req/s) the adaptive sweep judges its verdict at and chooses its lives by: the target rate where
        the config has rate stages only; None for any other sweep, and where user stages decide (beside rate stages
        too: their verdict is the one the lives are chosen for)."""
        if self.sweep.strategy != "adaptive" or self.load.user_stages:
            return None
        return self.target_rate

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
    def _capacity_search(self) -> "SweepConfig":
        if self.sweep.strategy != "capacity":
            return self
        if not self.load.rate_stages:
            raise ValueError("sweep.strategy = \"capacity\" probes rate stages: add at least one to load.stages, "
                             "e.g. { rate = 4.0, duration_s = 30 } (each probe runs that long)")
        if not self.decision.slo:
            raise ValueError("sweep.strategy = \"capacity\" finds the highest rate within the SLO: set at least one "
                             "in decision.slo, e.g. ttft_p99_ms = 500")
        if self.grid.axis or len(self.load.variants) > 1:
            raise ValueError("sweep.strategy = \"capacity\" searches one workload on one axis: remove the grid and "
                             "give load.prompt_tokens, output_tokens and temperature one value each")
        if self.load.repeat_mode != "restart":
            raise ValueError("sweep.strategy = \"capacity\" starts a server per probe: set "
                             "load.repeat_mode = \"restart\"")
        return self

    @model_validator(mode="after")
    def _running_server_has_one_setting(self) -> "SweepConfig":
        if self.server.url and (len(self.speculation.k) != 1 or self.grid.axis):
            raise ValueError("server.url: an already-running server is one setting; "
                             "set speculation.k to the one K it runs (e.g. k = [4]) and no grid")
        return self

    @model_validator(mode="after")
    def _real_server_names_its_models(self) -> "SweepConfig":
        """A real vLLM must not get a simulator model name by default (config/server.py SIMULATOR_NAME)."""
        if self.server.is_simulator or self.server.url:
            return self
        spec = self.speculation
        sends_draft = loads_draft_model(spec.method) and any(spec.k) and not spec.raw_lookahead_slots
        missing = [f"{section}.{name}" for section, model in (("server", self.server), ("speculation", spec))
                   for name, field in type(model).model_fields.items()
                   if (field.json_schema_extra or {}).get("simulator_default") and name not in model.model_fields_set
                   and (name != "draft_model" or sends_draft)]
        if missing:
            started_by = "server.argv_template" if self.server.argv_template else "server.command"
            defaults = ", ".join(f"\"{_default_of(key)}\"" for key in missing)
            whose = "are the simulator's models" if len(missing) > 1 else "is the simulator's"
            raise ValueError(f"{' and '.join(missing)}: {started_by} starts a real vLLM, and {defaults} {whose}: "
                             f"set {'each' if len(missing) > 1 else 'it'} to what your vLLM loads (a path or "
                             "Hugging Face name)")
        return self

    @model_validator(mode="after")
    def _k_above_0_has_its_draft(self) -> "SweepConfig":
        """A method that loads a draft, a K > 0 and no draft named: every such life would die at its start."""
        spec = self.speculation
        if (not self.server.url and any(spec.k) and not spec.raw_lookahead_slots and loads_draft_model(spec.method)
                and not spec.draft_model.strip()):
            raise ValueError(f"speculation.draft_model: method \"{spec.method}\" loads a draft for every K > 0 and "
                             "none is given; set draft_model to its folder or Hugging Face name, or use a method that "
                             "loads none (ngram, suffix, mtp)")
        return self

    @model_validator(mode="after")
    def _cluster_starts_its_servers(self) -> "SweepConfig":
        if self.cluster.engine == "ray" and self.server.url:
            raise ValueError("cluster.engine = \"ray\" starts each server life on a worker node; server.url is a "
                             "server started elsewhere: remove server.url or set cluster.engine = \"local\"")
        if self.cluster.engine == "ray" and (problem := cluster_problem(self.server, self.load)):
            raise ValueError(problem)
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

    @property
    def target_rate(self) -> float | None:
        """The rate (req/s) a verdict is made at: decision.target_rate, else the last rate stage's in a run of rate
        stages only; None when there is none (no rate stage, or rate stages beside user stages and no target)."""
        if self.decision.target_rate:
            return self.decision.target_rate
        rates = self.load.rate_stages
        return rates[-1].rate if rates and not self.load.user_stages else None

    def target_for(self, variant: int) -> int:
        """The target users of the variant at this index in load.variants."""
        targets = self.decision.target_users
        target = targets[variant] if isinstance(targets, list) else targets
        user_stages = self.load.user_stages   # none: rate stages only (their decision comes with issue 37's item 3)
        return target or (user_stages[-1].users or 0 if user_stages else 0)


def _default_of(key: str) -> object:
    section, name = key.split(".")
    return SweepConfig.model_fields[section].annotation.model_fields[name].default
