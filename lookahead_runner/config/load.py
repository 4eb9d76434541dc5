"""The load section: stages, the workload (and its variants), repeats, Locust's processes and CPUs."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from .workload_variants import NATURAL_OUTPUT, Variant, axis_values, variants_of
from ..workload.arrivals import BURSTINESS_FLOOR, burstiness_problem
from ..workload.request_set import DEFAULT_MAX_TOKENS
from ..workload.stages import load_label, too_many_arrivals
from .strict import CpuList, Strict

AUTO_FIRST_REPEATS = 2
# Locust flags that would bind its web UI or its master elsewhere than the runner's 127.0.0.1 (-P: --web-port's short
# form, written -P 80 or -P80)
REBINDING_FLAGS = frozenset({"--web-host", "--web-port", "-P", "--master-bind-host"})
# Locust flags that start a master of its own, on every interface (Locust's default): load.processes starts one here
MASTER_FLAGS = frozenset({"--master", "--processes"})


class StageConfig(Strict):
    """A stage: `users` concurrent users (closed loop), or `rate` requests per second (open loop); the stages run
    in order."""

    users: int | None = Field(None, ge=1, le=100_000, description="users, each sending its next request when its "
                                                                  "last one ended (closed loop)")
    rate: float | None = Field(None, description="requests per second arriving whatever is outstanding (open "
                                                 "loop; load.arrival paces them)")
    duration_s: float = Field(gt=0, description="seconds the stage runs, its warm-up (load.warmup_s) included")

    @field_validator("rate")
    @classmethod
    def _rate_positive(cls, value: float | None) -> float | None:
        if value is not None and not value > 0:
            raise ValueError(f"rate = {value:g}: give requests per second above 0, e.g. rate = 4.0")
        return value

    @model_validator(mode="after")
    def _one_kind(self) -> "StageConfig":
        if self.users is not None and self.rate is not None:
            raise ValueError("a stage has users (closed loop) or rate (requests per second, open loop), not both: "
                             "write {users = 8, duration_s = 20} or {rate = 4.0, duration_s = 20}")
        if self.users is None and self.rate is None:
            raise ValueError("give the stage users (closed loop), e.g. {users = 8, duration_s = 20}, or rate "
                             "(requests per second, open loop), e.g. {rate = 4.0, duration_s = 20}")
        if self.rate is not None and (why := too_many_arrivals(self.rate, self.duration_s)):
            raise ValueError(why)
        return self

    @property
    def is_rate(self) -> bool:
        return self.rate is not None

    @property
    def label(self) -> str:
        return load_label(self.users, self.rate)


class LoadConfig(Strict):
    """The load every server life runs: Locust's stages of rising concurrency and the requests' shape."""

    stages: list[StageConfig] = Field(
        default_factory=lambda: [StageConfig(users=u, duration_s=20) for u in (8, 32, 96)],
        description="the stages, in order, e.g. [{users = 8, duration_s = 20}, {users = 32, duration_s = 20}]")
    prompt_tokens: int | list[int] = Field(
        128, json_schema_extra={"allowed": ">= 1; a list: unique values"}, description="prompt length in tokens; a list is a workload axis measured in each server life, e.g. "
                         "[512, 4096]")
    output_tokens: int | list[int] | Literal["natural"] = Field(
        64, json_schema_extra={"allowed": ">= 2; a list: unique values"}, description="output length in tokens (>= 2); a list is an axis too; \"natural\": each request of "
                        "load.requests ends at its end of sequence, capped by its own max_tokens")
    temperature: float | list[float] = Field(0.0, json_schema_extra={"allowed": ">= 0; a list: unique values"},
                                             description="sampling temperature (>= 0); a list is an axis too")
    repeats: int | Literal["auto"] = Field(
        1, json_schema_extra={"allowed": "1 to 100, or \"auto\""}, description="repeats of every setting; \"auto\" = 2, then one more of each K the verdict hangs on "
                       "until it is decided (each round a look with a bar of its own that spends the verdict's "
                       "error, so decision.confidence holds over all rounds; a tie as soon as every K is inside the "
                       "tie band) or max_repeats is reached")
    max_repeats: int = Field(5, ge=2, le=100, description="the cap of repeats = \"auto\"")
    repeat_mode: Literal["restart", "same-server"] = Field(
        "restart", description="restart: a fresh server per repeat (its startup varies too); same-server: "
                               "all repeats of a setting on one server life (faster; caches stay warm)")
    warmup_s: float = Field(
        -1.0, description="seconds excluded at each stage start; -1 = max(2 s, 25% of the stage), in a users stage "
                          "at least until every user's first request of it has ended"
    )
    request_timeout_s: float = Field(120.0, gt=0, description="seconds one request may take end to end "
                                                              "(also the socket timeout, and how long the last "
                                                              "requests of a block may finish)")
    processes: int | Literal["auto"] = Field(
        "auto", json_schema_extra={"allowed": "1 to 64, or \"auto\""}, description="Locust processes on this host (--processes); auto = enough to keep each under "
                            "60% of a core at the highest stage, from the measured per-process capacity")
    cpus: CpuList = Field("", description="CPUs for Locust's processes (a CPU list: \"6-7\"); empty = load.placement decides")
    placement: Literal["auto", "off"] = Field(
        "auto", description="auto: a server started on this host gets CPUs apart from Locust's; off: the OS schedules both")
    preflight_s: float = Field(
        3.0, ge=0, description="seconds of load at the highest stage before the first life, measuring Locust's lag "
                               "and capacity; a run that cannot be valid stops there (0 = no pre-flight)")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling top_p sent with every request")
    seed: int | None = Field(None, description="sampling seed sent with every request")
    prompt_file: str = Field("", description="JSONL prompt corpus ({\"text\": ...} per line); empty = built-in")
    locust_extra_args: list[str] = Field(default_factory=list, description="more `locust` arguments for every "
                                                                           "life's load, appended as given (not "
                                                                           "--web-host, --web-port, "
                                                                           "--master-bind-host, --master or "
                                                                           "--processes: the web UI and the "
                                                                           "master stay on 127.0.0.1)")
    # --- the endpoint (issue 28): raw completions, or chat with the server's chat template applied
    endpoint: Literal["completions", "chat"] = Field(
        "completions", description="completions: POST /v1/completions with a raw prompt; chat: POST "
                                   "/v1/chat/completions, the prompt as one user message (docs/chat.md)")
    chat_template_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="passed to the chat template in every chat request and in /tokenize, "
                                          "e.g. {enable_thinking = false}; only with endpoint = \"chat\"")

    @field_validator("locust_extra_args")
    @classmethod
    def _keeps_the_web_ui_here(cls, value: list[str]) -> list[str]:
        """They go last on Locust's argv, where the last of a flag wins: none may bind what the runner keeps local."""
        for arg in value:
            name = arg.split("=", 1)[0].replace("_", "-")
            # Locust's parser takes a unique prefix of a long flag as the flag (argparse's allow_abbrev): --web-po
            flags = [flag for flag in REBINDING_FLAGS | MASTER_FLAGS
                     if flag == name or (len(name) > 2 and name.startswith("--") and flag.startswith(name))]
            if flags or (arg.startswith("-P") and not arg.startswith("--")):
                hint = " (load.processes sets Locust's processes)" if set(flags) & MASTER_FLAGS else ""
                raise ValueError(f"{arg}: the runner keeps Locust's web UI and master on 127.0.0.1 (the live view "
                                 f"behind the sweep's token); remove it{hint}")
        return value

    @field_validator("chat_template_kwargs")
    @classmethod
    def _template_kwargs(cls, value: dict[str, Any], info) -> dict[str, Any]:
        if value and info.data.get("endpoint") != "chat":
            raise ValueError("only a chat request has a chat template; set load.endpoint = \"chat\" or remove it")
        try:
            json.dumps(value)
        except (TypeError, ValueError):
            raise ValueError("values must be strings, numbers, booleans, lists or tables (no dates)") from None
        return value
    # --- rate stages (issue 37; workload/arrivals.py paces them, docs/rate-stages.md)
    arrival: Literal["poisson", "constant"] = Field(
        "poisson", description="how a rate stage's requests arrive: poisson (gamma gaps of shape burstiness, as "
                               "vllm bench serve) or constant gaps of 1 / rate")
    burstiness: float = Field(1.0, description="arrival = \"poisson\": the gamma shape of the gaps (1 = Poisson; "
                                               "< 1 burstier, > 1 more even), as vllm bench serve --burstiness; "
                                               f"{BURSTINESS_FLOOR:.2g} or more")
    arrival_seed: int = Field(0, ge=0, description="seed of the arrival times and the synthetic prompts: every K gets the "
                                             "same schedule and the same requests")
    max_in_flight: int = Field(0, ge=0, description="rate stages: at most this many requests in flight (0 = no "
                                                    "cap), as vllm bench serve --max-concurrency, in all Locust "
                                                    "processes together; an arrival that finds them busy waits and "
                                                    "is counted as held")

    @field_validator("burstiness")
    @classmethod
    def _burstiness_above_its_floor(cls, value: float) -> float:
        if problem := burstiness_problem(value):
            raise ValueError(f"burstiness = {value:g}: {problem}")
        return value

    @model_validator(mode="after")
    def _arrival_settings(self) -> "LoadConfig":
        if self.arrival == "constant" and self.burstiness != 1.0:
            raise ValueError("burstiness shapes poisson arrivals' gaps; with arrival = \"constant\" every gap is "
                             "1 / rate: remove burstiness or set arrival = \"poisson\"")
        return self

    @property
    def user_stages(self) -> list[StageConfig]:
        return [stage for stage in self.stages if not stage.is_rate]

    @property
    def rate_stages(self) -> list[StageConfig]:
        return [stage for stage in self.stages if stage.is_rate]

    @property
    def peak_users(self) -> int:
        """The most users of a user stage; with rate stages only, the requests in flight the load plans for: the
        cap, else the highest rate's requests for one second (a prior: the pre-flight measures them)."""
        if self.user_stages:
            return max(stage.users or 0 for stage in self.user_stages)
        return self.max_in_flight or max(1, round(max(stage.rate or 0.0 for stage in self.stages)))

    # --- the user's request set (issue 28; workload/request_set.py reads it, config/loading.check_files at load)
    requests: str = Field("", description="a request set: JSONL of {\"prompt\": ...} or {\"messages\": [...]} per line "
                                          "(optional max_tokens, category), or ShareGPT JSON; every K sends the same "
                                          "requests in the same order per user; empty = synthetic prompts")

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
        if info.field_name == "output_tokens" and value == NATURAL_OUTPUT:
            return value
        return axis_values(info.field_name, value)

    @model_validator(mode="after")
    def _request_set(self) -> "LoadConfig":
        if self.output_tokens == NATURAL_OUTPUT and not self.requests:
            raise ValueError("output_tokens = \"natural\" needs a request set whose requests carry their max_tokens; "
                             "set load.requests = \"FILE\" or give a number of output tokens")
        if self.requests and self.prompt_file:
            raise ValueError("requests: a request set brings its own prompts; remove load.prompt_file")
        if self.requests and isinstance(self.prompt_tokens, list):
            raise ValueError("requests: a request set brings its own prompts; give no list of load.prompt_tokens")
        return self

    @property
    def variants(self) -> list[Variant]:
        """The workload variants every server life runs, in order (variants.py)."""
        natural = self.output_tokens == NATURAL_OUTPUT
        out = variants_of(self.prompt_tokens, DEFAULT_MAX_TOKENS if natural else self.output_tokens, self.temperature)
        if natural or self.requests:
            out = [replace(v, set_prompts=bool(self.requests), natural_output=natural) for v in out]
        return out

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

    @field_validator("stages")
    @classmethod
    def _stages_not_empty(cls, value: list[StageConfig]) -> list[StageConfig]:
        if not value:
            raise ValueError("list at least one stage, e.g. stages = [{users = 8, duration_s = 20}]")
        return value
