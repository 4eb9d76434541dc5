"""decision.json's `request_set` (issue 28): what the user's request set measured beside the verdict.

Acceptance per category with intervals, request-weighted beside token-weighted; each category's own per-request
speed per K against the baseline and beside the mix's, and a verdict per category (the verdict stays the mix's:
that is the traffic); how far natural outputs agreed across K; the set's length distributions; how often a user
ran through the whole set. Optional on the decision: a run without a request set has none, and a decision.json
written before reads with none.

Versions (`summary_version`; a summary without one is version 1): 2 (issue 36) resamples by request, writes
`speeds` and `verdicts`, and no longer writes `gains` / `best_by_category` (a category's share of the mix's
objective: in a closed loop every category gets the mix's gain, so it said nothing of the category). Fields are
only added: a version 1 summary still reads, and a reader of version 1 reads a version 2 one.
"""
from __future__ import annotations

from typing import Literal

from pydantic import Field, computed_field

from ..schema_base import Model, Range
from ...workload.request_set import WHOLE_SET

MIX = WHOLE_SET   # "the mix": the whole set, all categories together (no category of the set may take the name)
SUMMARY_VERSION = 2

AcceptanceSource = Literal["per-request", "counters", "none"]


class CategoryAcceptance(Model):
    """Acceptance length (1 + accepted drafts per draft step) of one category's requests at one K, from the
    responses' own metrics (--per-request-spec-decode-metrics)."""

    category: str                      # a category of the set, or MIX
    k: int
    requests: int                      # answers (rows)
    distinct_requests: int | None = None   # requests of the set among them: the unit resampled (version 2)
    # 1 + sum(accepted) / sum(draft steps): every draft step once, as the server's counters pool them
    acceptance_length: float
    acceptance_length_range: Range = Field(default_factory=Range)
    request_weighted: float            # the mean of each request's own mean_acceptance_length: every request once
    request_weighted_range: Range = Field(default_factory=Range)
    token_weighted: float              # each request's own acceptance length weighted by its output tokens
    token_weighted_range: Range = Field(default_factory=Range)


class CategoryGain(Model):
    """Version 1 only: one category's share of the mix's objective at one K against the baseline K's (not written
    since version 2: in a closed loop it is the mix's gain plus window-composition noise)."""

    category: str
    k: int
    requests: int                      # of that category, in the valid windows of that K at those users
    objective: float                   # the decision's objective over that category's requests alone
    gain_pct: float | None = None      # against the baseline K; None for the baseline itself


class BestByCategory(Model):
    """Version 1 only (see CategoryGain); version 2 writes `CategoryVerdict`."""

    category: str                      # a category, or MIX (its K is the verdict's)
    k: int | None
    gain_pct: float | None = None


class CategorySpeed(Model):
    """One category's requests at one K in the valid windows at the decision's users: how fast each request was
    served (its own output tokens per second over its e2e), against the baseline K and beside the whole mix.
    Intervals: requests resampled (by_request.py), times the decision's noise of a server life (as it draws a
    cell's latencies) where two K are compared; the same life's noise cancels against the mix."""

    category: str                      # a category of the set, or MIX
    k: int
    requests: int                      # answers (rows)
    distinct_requests: int             # requests of the set among them: the unit resampled
    speed: float | None = None         # output tokens / e2e seconds (1 / e2e per token): each request's mean over
    #                                    its answers, averaged over the requests; MIX: the categories' speeds at
    #                                    their shares of the requests answered (the same shares under every K)
    speed_range: Range = Field(default_factory=Range)
    tpot_p50_ms: float | None = None
    gain: float | None = None          # speed against the baseline K's, a fraction; None for the baseline
    gain_range: Range = Field(default_factory=Range)
    vs_mix: float | None = None        # (1 + gain) / (1 + the mix's gain) - 1; None for the mix and the baseline
    vs_mix_range: Range = Field(default_factory=Range)


# at the verdict's K, the category's gain against the mix's; "" where not judged (the verdict's K is the baseline or
# none, or too few of its requests)
CategoryRelation = Literal["more than the mix", "less than the mix", "within the tie band", "not told apart", ""]


class CategoryVerdict(Model):
    """What K does for one category's requests: at the verdict's K its per-request gain beside the mix's (beyond
    the tie band with its interval, within it, or not told apart), and its own best K where another clears the
    tie band and the noise."""

    category: str
    k: int | None = None               # the K judged: the verdict's (recommended, else leading)
    relation: CategoryRelation = ""
    best_k: int | None = None          # its own best K by per-request speed (the decision's tie rule) ...
    best_gain: float | None = None     # ... and what it gains over `k` (over the baseline where `k` is none)
    best_gain_range: Range = Field(default_factory=Range)
    acceptance_length: float | None = None   # its pooled acceptance length at `k` (or best_k), beside the mix's
    mix_acceptance_length: float | None = None
    text: str = ""


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
    summary_version: int = 1           # written as SUMMARY_VERSION; none in a version 1 file
    source: str                        # the file (load.requests)
    size: int
    fingerprint: str = ""
    categories: dict[str, int] = Field(default_factory=dict)   # requests per category in the file
    natural_output: bool = False
    acceptance_source: AcceptanceSource = "none"
    acceptance_source_text: str = ""
    spec_metrics_flag_added: bool = False   # the runner added --per-request-spec-decode-metrics summary
    acceptance: list[CategoryAcceptance] = Field(default_factory=list)   # per category and K, then MIX per K
    interval_level: float = 0.9        # of every interval here (version 2: decision.interval_level)
    gains: list[CategoryGain] = Field(default_factory=list)              # version 1 only
    best_by_category: list[BestByCategory] = Field(default_factory=list)  # version 1 only
    speeds: list[CategorySpeed] = Field(default_factory=list)   # per category and K, then MIX per K (version 2)
    verdicts: list[CategoryVerdict] = Field(default_factory=list)        # one per category (version 2)
    baseline_k: int | None = None      # what the gains are against
    tie_band: float | None = None      # decision.tie_tolerance_frac
    mix_verdict: str = ""              # the mix's K and its per-request gain (version 2)
    best_line: str = ""                # the verdicts' texts, then mix_verdict
    gain_users: int | None = None      # the stage the speeds are at (the decision's target users)
    lengths: list[LengthDistribution] = Field(default_factory=list)
    agreement: OutputAgreement | None = None
    restarts: int = 0                  # the most times one user ran through the whole set and started again
    sent: int = 0                      # requests answered in every life together
