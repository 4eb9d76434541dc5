"""The base of every JSON file the run folder keeps (plan.json, status.json, preflight.json)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict
from typing_extensions import Self


class Record(BaseModel):
    # fields a newer (or merged) writer adds are kept and written back, not dropped
    model_config = ConfigDict(extra="allow")

    @classmethod
    def written(cls, data: Mapping[str, Any]) -> Self:
        """A record this version writes: a field the model does not name is a mistake here (a misspelt key
        fails at once), where reading keeps such fields."""
        unknown = sorted(set(data) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}: add it to the model")
        return cls.model_validate(data)
