"""What every config model shares: strict parsing and the one-line error it raises."""
from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict

from ..contracts.cpus import parse_cpus


class ConfigError(ValueError):
    """Bad configuration: the message is one line naming the field and the fix."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def cpu_list(value: str) -> str:
    """A CPU list field ("0-5,8"), checked; empty = placement decides."""
    if value.strip():
        parse_cpus(value)  # raises ValueError with the fix
    return value.strip()


CpuList = Annotated[str, AfterValidator(cpu_list)]   # a CPU list field, checked and stripped
