"""The load section: stages, the workload (and its variants), repeats, Locust's processes and CPUs."""
from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from .workload_variants import Variant, axis_values, variants_of
from .strict import CpuList, Strict

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
    cpus: CpuList = Field("", description="CPUs for Locust's processes (a CPU list: \"6-7\"); empty = load.placement decides")
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

    @field_validator("stages")
    @classmethod
    def _stages_not_empty(cls, value: list[StageConfig]) -> list[StageConfig]:
        if not value:
            raise ValueError("list at least one stage, e.g. stages = [{users = 8, duration_s = 20}]")
        return value
