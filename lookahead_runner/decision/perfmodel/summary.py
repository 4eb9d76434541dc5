"""decision.json's `performance_model`: the fitted model of the run as the report reads it (typed; part of
decision.json's schema version). Everything in it is a prediction except `held_out[].measured`."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Model(BaseModel):
    model_config = ConfigDict(extra="ignore")


class HeldOutRow(_Model):
    scheme: str                      # "stage" or "K": what was left out of the fit
    k: int
    users: int
    predicted_requests_per_s: float
    measured_requests_per_s: float
    error: float                     # predicted / measured - 1


class CurvePoint(_Model):
    users: int
    requests_per_s: float
    requests_per_s_low: float | None = None
    requests_per_s_high: float | None = None
    real_batch: float | None = None
    preempting: bool = False


class Curve(_Model):
    k: int
    measured_k: bool                 # False: a K between or beyond the measured ones, predicted only
    points: list[CurvePoint] = Field(default_factory=list)


class ProductionPoint(_Model):
    users: int
    k: int | None = None             # None: not predicted (the model is not trusted)
    share: float | None = None       # share of the bootstrap refits in which k is best
    requests_per_s: float | None = None
    requests_per_s_low: float | None = None
    requests_per_s_high: float | None = None
    baseline_requests_per_s: float | None = None
    reach: str = ""                  # where `users` lies against the measured stages
    statement: str = ""


class ModelSummary(_Model):
    trusted: bool
    reason: str
    error_bound: float
    heldout_median_error: float | None = None
    heldout_worst_error: float | None = None
    acceptance_source: str = ""
    tokens_per_step: dict[str, float] = Field(default_factory=dict)     # by K
    kv_batch_limit: dict[str, float] = Field(default_factory=dict)      # by K: the largest real batch it allows
    preemptions_from_users: dict[str, int | None] = Field(default_factory=dict)  # by K, within the curves' reach
    parameters: dict[str, float] = Field(default_factory=dict)          # the point fit (units in the names)
    held_out: list[HeldOutRow] = Field(default_factory=list)
    curves: list[Curve] = Field(default_factory=list)
    production: ProductionPoint | None = None
    schedule_note: str = ""          # what the model did to the per-batch-size schedule
    diagnosis: str = ""              # "not the lever", backed by the model's numbers
