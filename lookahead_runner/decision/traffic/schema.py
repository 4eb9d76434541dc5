"""decision.json's `request_set` (issue 28): what the user's request set measured beside the verdict.

Acceptance per category with intervals, request-weighted beside token-weighted; the best K per category beside
the mix's (the verdict stays the mix's: that is the traffic); how far natural outputs agreed across K; the set's
length distributions; how often a user ran through the whole set. Optional on the decision: a run without a
request set has none, and a decision.json written before reads with none.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, computed_field

from ..schema_base import Model, Range

MIX = "the mix"   # the whole set, all categories together

AcceptanceSource = Literal["per-request", "counters", "none"]


class CategoryAcceptance(Model):
    """Acceptance length (1 + accepted drafts per draft step) of one category's requests at one K, from the
    responses' own metrics (--per-request-spec-decode-metrics)."""

    category: str                      # a category of the set, or MIX
    k: int
    requests: int
    # 1 + sum(accepted) / sum(draft steps): every draft step once, as the server's counters pool them
    acceptance_length: float
    acceptance_length_range: Range = Field(default_factory=Range)
    request_weighted: float            # the mean of each request's own mean_acceptance_length: every request once
    request_weighted_range: Range = Field(default_factory=Range)
    token_weighted: float              # each request's own acceptance length weighted by its output tokens
    token_weighted_range: Range = Field(default_factory=Range)


class CategoryGain(Model):
    """One category's throughput at one K at the decision's users, against the baseline K's."""

    category: str
    k: int
    requests: int                      # of that category, in the valid windows of that K at those users
    objective: float                   # the decision's objective over that category's requests alone
    gain_pct: float | None = None      # against the baseline K; None for the baseline itself


class BestByCategory(Model):
    category: str                      # a category, or MIX (its K is the verdict's)
    k: int | None
    gain_pct: float | None = None


class LengthDistribution(Model):
    """Token counts the server reported (usage), over the successful requests of every life."""

    category: str
    requests: int
    prompt_p10: float | None = None
    prompt_p50: float | None = None
    prompt_p90: float | None = None
    prompt_max: float | None = None
    output_p10: float | None = None
    output_p50: float | None = None
    output_p90: float | None = None
    output_max: float | None = None


class OutputAgreement(Model):
    """Natural outputs across K, matched by request index: at temperature 0 speculation keeps the target's greedy
    output, so every K should do the same work; batch-dependent numerics can change a few (shown, never failed)."""

    matched: int                       # request indices answered under at least two K
    same_length: int
    same_text: int

    @computed_field
    @property
    def same_length_share(self) -> float | None:
        return self.same_length / self.matched if self.matched else None

    @computed_field
    @property
    def same_text_share(self) -> float | None:
        return self.same_text / self.matched if self.matched else None


class RequestSetSummary(Model):
    source: str                        # the file (load.requests)
    size: int
    fingerprint: str = ""
    categories: dict[str, int] = Field(default_factory=dict)   # requests per category in the file
    natural_output: bool = False
    acceptance_source: AcceptanceSource = "none"
    acceptance_source_text: str = ""
    spec_metrics_flag_added: bool = False   # the runner added --per-request-spec-decode-metrics summary
    acceptance: list[CategoryAcceptance] = Field(default_factory=list)   # per category and K, then MIX per K
    gains: list[CategoryGain] = Field(default_factory=list)
    best_by_category: list[BestByCategory] = Field(default_factory=list)
    best_line: str = ""                # "code: K=4 +38 %; chat: K=2 +6 %; the mix: K=4"
    gain_users: int | None = None      # the stage the gains are at (the decision's target users)
    lengths: list[LengthDistribution] = Field(default_factory=list)
    agreement: OutputAgreement | None = None
    restarts: int = 0                  # the most times one user ran through the whole set and started again
    sent: int = 0                      # requests answered in every life together
