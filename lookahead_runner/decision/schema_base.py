"""The base types every part of decision.json is built of: decision/schema.py and the subpackages' schemas
(decision/traffic/schema.py) import them from here, so no schema imports another that imports it back."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Range(Model):
    low: float | None = None
    high: float | None = None
