"""decision.json as typed objects (schema version 4): what the engine writes and the report reads.

Every figure that decides carries its interval (`Range`: None on a side = unbounded at that
sample size) and its sample count; every check is pass / fail / unknown (with its cause) / waived
(unknown, and let go by decision.waive); the verdict says how often its K won when the evidence was
resampled.

Version 3 adds: "waived", CellSummary.not_measured and Decision.confidence_range; the workload variant
(its label; "" in a sweep of one workload) on the decision, each cell, candidate and per-stage pick, and
`by_variant` (one whole decision per variant, decision/per_variant.py); what the verdict cost (`cost`); the
performance model's summary (`performance_model`). Version 2 files read as version 3 with one unnamed
variant and none of the additions. Fields added later with a default keep the version (Cost.gpu_s and wall_s,
issue 30; issue 37's rate_knee, target_rate, at_rate, capacity and capacity_target, and Cost.strategy "capacity";
Decision.restart_spread and Cost.spread_lives, issue 38): an older file reads with None, empty or their defaults.

Version 4 (issue 46) changes what two saved fields of the verdict at a rate mean: a candidate's `objective` there is
1000 / e2e at decision.latency_percentile (ms) at the rate, the capacity within the SLO deciding before it
(`decided_by` says which decided: "capacity", "latency", "gates" or "tie"), where it was the goodput at the rate; and
a capacity's `rate_range` holds the loads measured around it (its bracket, drawn), where it placed each draw inside
the bracket. A version 3 file reads unchanged, its `decided_by` empty.

Version 5 (issue 49) adds `looks`: where a sweep that looks at its verdict as lives end (the adaptive sweep,
load.repeats = "auto") stopped, by which rule, and the share bar of that look (decision/gates/looks.py). A version 4 file
reads unchanged, its `looks` None (a grid that looks once, or a run before the rule).
"""
from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field

from .perfmodel.summary import ModelSummary
from .schema_base import Model, Range
from .traffic.schema import RequestSetSummary

SCHEMA_VERSION = 5

CheckStatus = Literal["pass", "fail", "unknown", "waived"]
# decided: confident; not_decided: a leader exists but is not sure yet (or a gate lacks data);
# no_eligible: every K is blocked by a gate; no_measurement: no valid window at the stage.
DecisionStatus = Literal["decided", "not_decided", "no_eligible", "no_measurement"]


class Check(Model):
    name: str
    kind: Literal["gate", "advice"]
    status: CheckStatus
    evidence: str
    unknown_because: Literal["", "too little data", "not measured", "not applicable"] = ""
    n: int | None = None


class Percentile(Model):
    metric: str                  # ttft | tpot | itl | e2e
    q: float
    value_ms: float | None
    range: Range = Field(default_factory=Range)
    n: int = 0
    decisive: bool = False       # bounded on both sides at this n: may decide; else shown only


class CellSummary(Model):
    """One (K, users) of one workload variant: the evidence table row, requests pooled over repeats."""

    variant: str = ""
    k: int
    users: int
    repeats: int
    requests: int
    failures: int
    timeouts: int
    req_per_s: float
    req_per_s_range: Range = Field(default_factory=Range)
    req_per_s_by_repeat: list[float] = Field(default_factory=list)
    output_tok_per_s: float
    output_tok_per_s_range: Range = Field(default_factory=Range)
    goodput: float | None = None
    goodput_range: Range = Field(default_factory=Range)
    throughput_units: int = 0    # repeats x bins behind the interval
    percentiles: list[Percentile] = Field(default_factory=list)
    slo_attainment: dict[str, Range] = Field(default_factory=dict)
    failure_rate: float | None = None
    failure_rate_range: Range = Field(default_factory=Range)
    running_mean: float | None = None
    waiting_mean: float | None = None
    kv_usage_mean: float | None = None
    kv_usage_peak: float | None = None
    preemptions: float | None = None
    acceptance_rate: float | None = None
    drafted_per_step: float | None = None   # mean over its windows: the K really drafted (counters, else requests)
    kv_pool_tokens: float | None = None
    not_measured: dict[str, str] = Field(default_factory=dict)  # column -> why it is empty (metric, source)


class Tradeoff(Model):
    metric: str                  # e.g. "TTFT p99"
    difference: float            # ms, or a fraction when unit is "%"
    range: Range = Field(default_factory=Range)
    unit: Literal["ms", "%"] = "ms"
    decisive: bool = True
    text: str = ""


class Candidate(Model):
    variant: str = ""
    k: int
    objective: float
    objective_range: Range = Field(default_factory=Range)
    gain: float | None = None    # vs the baseline, a fraction
    gain_range: Range = Field(default_factory=Range)
    win_share: float = 0.0
    gates: list[Check] = Field(default_factory=list)
    blocked_by: list[str] = Field(default_factory=list)
    beyond_stop: bool = False
    tradeoffs: list[Tradeoff] = Field(default_factory=list)


class Recommended(Model):
    k: int
    setting: str
    argv: list[str] = Field(default_factory=list)


class StagePick(Model):
    """The decision made at one concurrency stage, by the same rules and gates as the target's."""

    variant: str = ""
    users: int
    status: DecisionStatus
    k: int | None = None         # set when decided
    leading_k: int | None = None
    confidence: float | None = None
    running_mean: float | None = None
    objective: float | None = None
    blocked: dict[str, list[str]] = Field(default_factory=dict)
    argv: list[str] = Field(default_factory=list)
    reason: str = ""


class KneeStep(Model):
    users_from: int
    users_to: int
    gain_per_doubling: float | None
    gain_range: Range = Field(default_factory=Range)
    cost: str = ""
    costly: bool = False


class Knee(Model):
    k: int
    users: int | None = None     # the last stage worth its users; None = not found in the stages run
    next_users: int | None = None
    steps: list[KneeStep] = Field(default_factory=list)
    reason: str = ""


class RateKneeStep(Model):
    """One rate of a rate ramp (its windows pooled over repeats): does the K still follow it?"""

    rate: float                          # requests per second offered (configured)
    offered_per_s: float | None = None   # arrivals scheduled in the window per second
    achieved_per_s: float | None = None  # requests completed successfully inside it per second
    arrivals: int = 0
    follows: bool = True                 # the achieved rate follows the offered one (within its noise)
    keeps_up: bool = True                # the outstanding requests do not grow through the window
    attainment: float | None = None      # the SLO furthest below its percentile: its share met; None without one
    attainment_range: Range = Field(default_factory=Range)
    meets_slo: bool = True               # every SLO's attainment measured reaches its own percentile
    queue: str = ""                      # "waiting 3 -> 41" (or outstanding, where the server's is not sampled)
    holds: bool = True                   # all three
    reason: str = ""                     # what broke, with its figures ("" where it holds)
    too_short: str = ""                  # "stage too short for answers of N s; lengthen to M s": cannot be judged


class RateKnee(Model):
    """The knee of a rate ramp at one K: the highest rate it holds before the first it does not."""

    k: int
    rate: float | None = None            # the last rate that held before the first that did not; None: not found
    next_rate: float | None = None       # the first rate that did not hold
    steps: list[RateKneeStep] = Field(default_factory=list)
    reason: str = ""


class AxisDecision(Model):
    flag: str
    value: str
    status: DecisionStatus
    k: int | None = None
    objective: float | None = None
    verdict: str = ""


class LifeNote(Model):
    life: str
    reason: str = ""


class Boundary(Model):
    """One boundary of a schedule (batch `batch` runs `k_below`, batch + 1 runs `k_above`) and the user
    counts picked so the real batch lands just below and just above it, from the per-K lives."""

    batch: int
    k_below: int
    k_above: int
    users_below: int | None = None
    users_above: int | None = None
    expected_batch_below: float | None = None
    expected_batch_above: float | None = None
    note: str = ""               # why a side has no user count (the K's real batch never gets there)


class ConfirmPlan(Model):
    """What the confirmation life runs (kept in plan.json, so --resume runs the same)."""

    kind: Literal["schedule", "k"]
    k: int                       # the single K, or the schedule's largest (its num_speculative_tokens)
    ranges: list[list[int]] = Field(default_factory=list)
    form: str = "list"
    axis_value: str = ""
    stages: list[dict] = Field(default_factory=list)        # [{"users", "duration_s"}], rising
    boundaries: list[Boundary] = Field(default_factory=list)
    repeats: int = 1
    scope: str = ""              # in words: which stages and repeats of the sweep it runs
    variant: str = ""            # the workload variant it runs (alone), with several; "" = the sweep's only one


# "not in effect": the server did not run what was confirmed (its drafts per step say so, telemetry/drafting.py),
# told apart from "not confirmed" (it ran, and cost throughput or collapsed at a boundary)
ConfirmStatus = Literal["confirmed", "confirmed with a cost", "not confirmed", "not in effect", "pending"]


class ConfirmStage(Model):
    """One stage of the confirmation life against what the per-K lives led the decision to expect."""

    users: int
    role: Literal["stage", "below", "above"] = "stage"   # a sweep stage, or a threshold stage of a boundary
    k: int | None = None         # the K the recommendation runs here (the schedule's, at this stage's batch)
    running_mean: float | None = None
    expected_running_mean: float | None = None
    objective: float | None = None
    objective_range: Range = Field(default_factory=Range)
    expected: float | None = None
    expected_range: Range = Field(default_factory=Range)
    expected_from: str = ""      # e.g. "K=4 at 64 users", "the line between K=4 at 8 and 32 users"
    difference: float | None = None      # relative, confirmation vs expected
    difference_range: Range = Field(default_factory=Range)
    vs_single: float | None = None       # relative, vs the single recommended K's cell at this stage
    vs_single_range: Range = Field(default_factory=Range)
    tpot_p50_ms: float | None = None
    expected_tpot_p50_ms: float | None = None
    failure_rate: float | None = None
    drafted_per_step: float | None = None  # what the server drafted per step there (counters, else requests)
    drafted_note: str = ""       # its counters and its requests' own metrics disagree (telemetry/drafting.py)
    outcome: Literal["as expected", "better", "cost", "worse than the single K", "collapse", "failures",
                     "not in effect", "no measurement", "no expectation"] = "no measurement"
    text: str = ""


class ConfirmLife(NamedTuple):
    """Where a confirmation life stands, as its folder says (the runner reads it; the judgment takes it)."""

    folder: str
    state: str                   # done | failed | skipped | running | missing
    reason: str = ""


class Confirmation(Model):
    """The recommendation run in a life of its own, stage by stage against the per-K lives."""

    status: ConfirmStatus
    kind: Literal["schedule", "k"]
    life: str                    # e.g. "confirm/r0" (more with confirm_repeats)
    argv: list[str] = Field(default_factory=list)
    k: int | None = None         # the single K confirmed, or the schedule's largest
    ranges: list[list[int]] = Field(default_factory=list)
    single_k: int | None = None  # what stands when a schedule is not confirmed
    scope: str = ""
    stages: list[ConfirmStage] = Field(default_factory=list)
    boundaries: list[Boundary] = Field(default_factory=list)
    crossings: list[str] = Field(default_factory=list)   # per boundary: what req/s did crossing it
    costs: list[str] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    verdict: str = ""


class Cost(Model):
    """What the verdict cost in server time (start to ready, and measuring; cost.py), beside the full grid."""

    strategy: Literal["grid", "adaptive", "capacity"] = "grid"
    lives: int = 0                       # server lives run (per-K and confirmation), failed ones included
    starts: int = 0                      # server starts (same-server repeats share one)
    start_s: float = 0.0                 # measured: process start to ready, memory stable and warmed up
    measure_s: float = 0.0               # measured: the load of every life
    grid_lives: int = 0                  # what the full grid (every K x load.repeats) would have run
    grid_server_s: float | None = None   # estimated: its starts at the mean start measured, its loads as measured
    stopped_because: str = ""            # adaptive: why it stopped choosing lives
    gpu_s: float | None = None           # each life's server-seconds x the GPUs it held (cost.py); None: older file
    wall_s: float | None = None          # the first life's start to the last life's end; None: a start unrecorded
    spread_lives: int = 0                # adaptive: lives chosen to measure the restart spread (issue 38)
    # issue 49: a verdict like this one at best, expected (None: nothing measured says) and at worst, in lives, each
    # priced at `life_s` (a life's mean measured server-seconds); None: not priced (an older file, a capacity search)
    best_lives: int | None = None
    expected_lives: float | None = None
    worst_lives: int | None = None
    life_s: float | None = None
    expected_basis: str = ""
    text: str = ""                       # e.g. "4 lives, 11 server-minutes (...), 11 GPU-minutes, 6.2 wall minutes; ..."


class LookStop(Model):
    """Where a sweep that looks at its verdict as lives end stopped (decision/gates/looks.py, engine.verdict_at_end)."""

    rule: str                            # "error spending (O'Brien-Fleming type)"
    look: int                            # lives (or repeats) measured when it stopped
    at_most: int                         # the most looks the budget allows (sweep.max_lives, load.max_repeats)
    unit: Literal["lives", "repeats"] = "lives"
    boundary: float                      # the share the verdict needed at that look
    stopped_by: Literal["boundary", "tie", "last look"]
    confidence: float = 0.9              # decision.confidence: what the verdict holds over all the looks together
    text: str = ""                       # "stopped at look 3 of at most 6: boundary 97.1 %"
    # the level its gain and restart spread intervals are formed at, so that over the looks together they hold at
    # decision.interval_level whichever look it stopped at (gates/looks.Looks.interval_level); None: one look's
    interval_level: float | None = None


class RestartSpread(Model):
    """The restart spread the target's verdict rests on, where it was measured (decision/cells/restart_spread.py):
    by this run's restarted lives, by earlier runs on this server (the ledger), or both. Relative SD per life."""

    rel_sd: float
    low: float | None = None             # its chi-square interval (interval_level; looks.interval_level where set)
    high: float | None = None
    df: int = 0
    lives: int = 0                       # this run's lives behind it (of K with two or more)
    ks: list[int] = Field(default_factory=list)
    squares: float = 0.0                 # this run's own part, every restarted life's (a K set apart included):
    this_df: int = 0                     # ... squared relative deviations and their degrees of freedom
    ledger_squares: float = 0.0          # what the ledger keeps: the pooled K's part (never a K set apart)
    ledger_df: int = 0
    ledger_lives: int = 0
    window_squares: float = 0.0          # ... the part of it this run's windows' own noise makes
    window_df: int = 0                   # ... on these degrees of freedom of their bins
    earlier_runs: int = 0                # earlier runs on this server pooled in
    earlier_last: str = ""               # the newest of them (YYYY-MM-DD)
    text: str = ""                       # "restart spread 3.1 % [2.0, 6.8] per server life, from ..."


class PerBatchSchedule(Model):
    """K by real batch size, when decided stages want different K and the server takes a schedule."""

    num_speculative_tokens_per_batch_size: list[list[int]] | dict[str, int] | None = None  # vLLM's value, its form
    ranges: list[list[int]] = Field(default_factory=list)   # [lo, hi, K] by real batch size
    argv: list[str] | None = None        # the largest K's argv with the schedule; None: it has no config to extend
    form: str = "list"
    anchored_on_users: list[int] = Field(default_factory=list)   # the decided stages it was built from
    left_out_users: list[int] = Field(default_factory=list)      # stages not decided
    boundaries: str = ""                 # "model crossovers": the performance model moved them (perfmodel_uses.py)
    stage_ranges: list[list[int]] | None = None   # the stages' ranges before that


class Capacity(Model):
    """One K's capacity within the SLO (decision/capacity.py): the highest arrival rate (open loop) and concurrency
    (closed loop) at which every SLO of decision.slo holds its own percentile, with intervals."""

    variant: str = ""
    k: int
    rate: float | None = None            # req/s; None: not bracketed (rate_bracket says which side)
    rate_range: Range = Field(default_factory=Range)
    rate_bracket: list[float | None] = Field(default_factory=list)   # [highest rate that holds, lowest that does not]
    rate_from: str = ""                  # e.g. "5 rates (3 probed)"
    users: float | None = None
    users_range: Range = Field(default_factory=Range)
    users_bracket: list[float | None] = Field(default_factory=list)
    users_from: str = ""                 # "user stages" | "Little's law": then `users` is the requests in flight at the
    #                                      rate capacity (arrival rate x time in the system), not a users capacity
    gain: float | None = None            # rate capacity vs the baseline K's, relative
    rate_text: str = ""                  # "14.2 req/s [13.6, 14.9]", "> 24 req/s"
    users_text: str = ""
    text: str = ""                       # "K=4 19.0 req/s [18.1, 19.8] / 64 users [58, 70] (+34 %)"


class Decision(Model):
    schema_version: int = SCHEMA_VERSION
    mode: Literal["sweep", "ramp"] = "sweep"
    variant: str = ""            # the workload variant this decision is for; "" = the sweep's only one (or all)
    status: DecisionStatus
    verdict: str
    objective: str = "req_per_s"
    target_users: int | None = None
    baseline_k: int | None = None
    recommended: Recommended | None = None
    leading_k: int | None = None
    confidence: float | None = None
    confidence_range: Range = Field(default_factory=Range)  # the share's Monte Carlo error
    resamples: int = 0
    confidence_threshold: float = 0.9
    checklist: list[Check] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    cells: list[CellSummary] = Field(default_factory=list)
    per_stage: list[StagePick] = Field(default_factory=list)
    per_batch_size: PerBatchSchedule | None = None
    knee: Knee | None = None
    rate_knee: RateKnee | None = None    # a ramp over rates (`ramp --rates`): the knee in rate terms
    stopped_at_k: int | None = None
    reasons: list[str] = Field(default_factory=list)
    diagnoses: list[str] = Field(default_factory=list)
    next_runs: list[str] = Field(default_factory=list)
    thresholds: dict = Field(default_factory=dict)
    by_axis: list[AxisDecision] = Field(default_factory=list)
    failed_lives: list[LifeNote] = Field(default_factory=list)
    skipped_lives: list[LifeNote] = Field(default_factory=list)
    confirmation: Confirmation | None = None
    cost: Cost | None = None
    performance_model: ModelSummary | None = None   # predictions (decision/perfmodel/model.py), never evidence
    by_variant: list["Decision"] = Field(default_factory=list)  # one per workload variant when there are several
    request_set: RequestSetSummary | None = None   # load.requests: per category, natural outputs (issue 28)
    # issue 37: the verdict at an arrival rate (decision/rate_decision.py); with user stages beside it, that verdict
    # is `at_rate` and the headline speaks for both (run/verdict/rate_verdict.py); capacity within the SLO per K
    target_rate: float | None = None
    decided_by: str = ""    # at a rate (issue 46): capacity | latency | gates | tie (gates/rate_pick.py); "" undecided
    at_rate: "Decision | None" = None
    capacity: list[Capacity] = Field(default_factory=list)
    capacity_target: float | None = None    # runs before issue 46: the decision.slo_attainment it held (now None)
    restart_spread: RestartSpread | None = None     # measured: where from (issue 38); None: assumed or not needed
    looks: LookStop | None = None    # version 5 (issue 49): where a sweep that looks as lives end stopped; None: one look
