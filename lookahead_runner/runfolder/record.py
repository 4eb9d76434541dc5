"""The base of every JSON file the run folder keeps (plan.json, status.json, preflight.json)."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Record(BaseModel):
    # fields a newer (or merged) writer adds are kept and written back, not dropped
    model_config = ConfigDict(extra="allow")
