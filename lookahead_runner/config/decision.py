"""The decision section: every threshold of the decision engine."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from .slo import parse_slo_key, parse_slos
from .strict import Strict

# The restart spread (relative SD of one server life's throughput around the next life's of the same K) taken
# where every K has one life and `restart_spread = "auto"`, per server kind (docs/restart-spread.md says how each
# was measured). A kind without one gets RESTART_SPREAD_UNKNOWN, and the verdict says it is unknown.
RESTART_SPREAD_DEFAULTS = {"simulator": 0.01}
RESTART_SPREAD_UNKNOWN = 0.15


@dataclass(frozen=True)
class EarlierSpread:
    """The restart spread earlier runs on this server measured (the ledger, runfolder/spread_ledger.py), as
    plan.json records the part a run used: the squared relative deviations of each K's restarted lives from that
    K's mean and their degrees of freedom, summed over the runs."""

    squares: float
    df: int
    runs: int
    lives: int
    last: str       # the newest run's date (YYYY-MM-DD)
    # each K's objective at the target in those runs (their mean; str(K) -> value), where they ran this workload:
    # a life now far from it is an outlier to measure again (decision/cells/restart_spread.py `off_earlier`)
    levels: dict[str, float] = field(default_factory=dict)
    # the part of `squares` their windows' own noise makes (decision/cells/restart_spread.py `window_part`): a window
    # unlike theirs adds its own noise to the rest; 0 where a ledger entry did not keep it
    window_squares: float = 0.0
    window_df: int = 0   # the degrees of freedom of their bins behind it (0: not kept)
    users: int = 0  # the target users it was measured at (the only stage that borrows it); 0: the run's target

    @property
    def rel_sd(self) -> float:
        return math.sqrt(self.squares / self.df) if self.df else math.nan


class DecisionConfig(Strict):
    """Every threshold of the decision, in one place; the report shows the run's values."""

    target_users: int | list[int] = Field(
        0, json_schema_extra={"allowed": "0 or a stage's users; a list: one per workload variant"}, description="concurrency the decision is made at; 0 = the last stage; with workload variants, one for "
                       "all or a list with one per variant (in their order)")

    @field_validator("target_users", mode="before")
    @classmethod
    def _target_counts(cls, value: object) -> object:
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, bool) or not isinstance(item, int) or item < 0:
                raise ValueError(f"{item!r}: give a stage's users (0 = the last stage), or a list of them")
        if isinstance(value, list) and not value:
            raise ValueError("list one users count per workload variant, or give one for all")
        return value
    target_rate: float = Field(
        0.0, ge=0, json_schema_extra={"allowed": "0 or a rate stage's rate (req/s)"},
        description="the arrival rate (req/s) a verdict is made at too, open loop (docs/rate-stages.md); it must be a "
                    "rate stage's rate; 0 = the last rate stage in a run of rate stages only, none beside user stages")
    objective: Literal["req_per_s", "output_tok_per_s", "goodput"] = Field(
        "req_per_s", description="what the best K maximises; goodput = requests/s meeting every SLO")
    slo: dict[str, float] = Field(
        default_factory=dict, json_schema_extra={"allowed": "keys METRIC_pNN_ms, 0 < NN < 100; limits > 0"},
        description="SLOs, METRIC_pNN_ms = limit in ms (METRIC: ttft, tpot, itl, e2e): NN % of the requests within "
                    "the limit, e.g. ttft_p90_ms = 500 holds where 90 % get their first token within 500 ms (of the "
                    "arrivals at a rate stage, from their scheduled arrival; an answer of one token meets a tpot or "
                    "itl SLO); each SLO at its own percentile, at user and rate stages alike; a K breaking one is "
                    "blocked. Goodput counts the requests meeting every limit")
    memory_rise_frac: float = Field(0.05, ge=0, description="a memory rise this large counts as clear (stop rule)")
    throughput_gain_frac: float = Field(0.02, ge=0, description="the objective must rise this much to pay for it")
    tie_tolerance_frac: float = Field(0.03, ge=0, description="objectives within this are a tie: smaller K wins")
    latency_percentile: float = Field(90.0, gt=0, lt=100, description="e2e percentile the latency gate reads "
                                                                      "when no SLO is given")
    latency_tolerance_frac: float = Field(0.10, ge=0, description="e2e worse than the baseline by more than this "
                                                                  "(and beyond its interval) blocks a K")
    failure_rate_slack: float = Field(0.005, ge=0, description="failure or timeout rate above the baseline's by "
                                                               "more than this (and beyond its interval) blocks a K")
    batch_drop_frac: float = Field(0.10, ge=0, le=1, description="real batch below the baseline's by more than "
                                                                 "this blocks a K (lower --max-num-seqs first)")
    queue_share_frac: float = Field(0.10, ge=0, le=1, description="a request or more queued this share of "
                                                                  "their time at the server (waiting / (running "
                                                                  "+ waiting)) makes a falling batch the "
                                                                  "server's limit; beside a KV pool measured "
                                                                  "at most half full, only a queue of 3 engine "
                                                                  "steps or more per request")
    repeat_spread_frac: float = Field(0.10, ge=0, description="advice: (max-min)/median of req/s across repeats")
    low_acceptance: float = Field(0.3, ge=0, le=1, description="acceptance below this is acceptance-bound")
    kv_headroom_frac: float = Field(0.05, ge=0, le=1, description="KV usage peak must stay under 1 - this")
    confidence: float = Field(0.90, ge=0.5, le=1, description="share of resamples the recommended K must win; "
                                                              "below it the verdict is \"not decided yet\"")
    interval_level: float = Field(0.95, gt=0.5, lt=1, description="confidence level of every interval shown")
    resamples: int = Field(1000, ge=50, le=100_000, description="resamples of the evidence behind intervals and confidence")
    seed: int = Field(0, description="seed of the resampling (the same run gives the same report)")
    bin_min_s: float = Field(1.0, gt=0, description="shortest throughput bin inside a window (its throughput noise "
                                                    "is read from the bins); bins are at least one median request long")
    knee_gain_per_doubling: float = Field(0.10, ge=0, description="more users buying less throughput than this per "
                                                                  "doubling, at a latency or KV cost, is the knee")
    knee_latency_rise_frac: float = Field(0.25, ge=0, description="a TTFT or e2e p50 rise this large is a latency "
                                                                  "cost at the knee")
    production_users: int = Field(0, ge=0, description="the concurrency production runs at, which need not be "
                                                        "a stage: the performance model predicts the best K "
                                                        "there (a prediction, only from a trusted model); 0 = none")
    model_error_bound: float = Field(0.10, gt=0, lt=1, description="the performance model is trusted only when its "
                                                                   "held-out req/s error (median) is within this")
    min_requests: int = Field(10, ge=1, description="a stage window with fewer requests is invalid")
    max_client_lag_p99_ms: float = Field(
        50.0, gt=0, description="a window whose Locust loop lag p99 exceeds this is invalid (client saturated)")
    confirm: Literal["schedule", "always", "off"] = Field(
        "schedule", description="a confirmation life after the decision, running what the report recommends: "
                                "schedule = only a per-batch-size schedule (the default), always = a single K too "
                                "(--confirm), off = none (--no-confirm); true / false mean always / off")
    confirm_stages: Literal["all", "target"] = Field(
        "all", description="stages the confirmation life runs besides the threshold stages around each schedule "
                           "boundary: all = every sweep stage, target = the target stage only (shorter)")
    confirm_repeats: int = Field(1, ge=1, le=10, description="confirmation lives (repeats) of the recommendation")
    collapse_frac: float = Field(0.15, gt=0, lt=1, description="req/s at a schedule boundary this far below what "
                                                               "the stages beside it expect is a collapse: the "
                                                               "schedule is not confirmed")
    restart_spread: float | Literal["auto"] = Field(
        "auto", json_schema_extra={"allowed": "0 to 1 (below 1), or \"auto\""}, description="how far one server life's throughput lands from the next life's of the same K "
                            "(relative SD per life), for one life per K (one repeat, or same-server repeats): its "
                            "windows cannot show it (restarted repeats measure it instead). \"auto\" = the "
                            "simulator's documented 0.01; on real vLLM unknown, taken as 0.15 and said so in the "
                            "verdict; e.g. 0.04 from your own repeats on this server")
    ledger: bool = Field(True, description="where the restart spread is unknown (real vLLM): start from the spread "
                                           "earlier runs measured on this server (a ledger in the user's cache "
                                           "folder, keyed by the server's fingerprint) and remember this run's "
                                           "(--no-ledger: false)")
    waive: list[Literal["memory", "batch", "latency", "slo", "failures"]] = Field(
        default_factory=list, description="gates the decision may go ahead without when they cannot be judged "
                                          "(not measured, or too little data): shown as waived, never as a pass; "
                                          "a gate that was measured is judged as usual. e.g. [\"memory\"]")

    # the kind of server the sweep restarts (SweepConfig sets it from server.command): the "auto" restart spread;
    # and whether a K's repeats share one server life (load.repeat_mode = "same-server"): theirs leave it out
    _server_kind: str = PrivateAttr("simulator")
    _one_life_per_k: bool = PrivateAttr(False)
    # what earlier runs on this server measured (plan.json's restart_spread, from the ledger): None = nothing
    _earlier: EarlierSpread | None = PrivateAttr(None)
    # the level the gain and restart spread intervals are formed at where a sweep stopped at one of its planned
    # looks (decision/gates/looks.Looks.interval_level): None = interval_level, one look's
    _look_interval_level: float | None = PrivateAttr(None)

    @field_validator("restart_spread", mode="before")
    @classmethod
    def _restart_spread_in_range(cls, value: object) -> object:
        if value == "auto":
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
            raise ValueError(f"{value!r}: give the relative spread of one server life's throughput, 0 to 1 "
                             "(e.g. 0.04 for 4 %), or \"auto\"")
        return float(value)

    def for_server(self, kind: str, one_life_per_k: bool = False) -> "DecisionConfig":
        """This config for a sweep restarting `kind` ("simulator" or "vllm"): what restart_spread = "auto" means;
        `one_life_per_k`: every repeat of a K runs on one server life (same-server repeats)."""
        self._server_kind, self._one_life_per_k = kind, one_life_per_k
        return self

    @property
    def one_life_per_k(self) -> bool:
        return self._one_life_per_k

    @property
    def spread_unknown(self) -> bool:
        """Whether nothing says how far one life lands from the next on this server before it is measured: the
        "auto" restart spread of a server without a documented one (real vLLM, a simulator drawing a spread)."""
        return self.restart_spread == "auto" and self._server_kind not in RESTART_SPREAD_DEFAULTS

    def with_earlier(self, earlier: EarlierSpread | None) -> "DecisionConfig":
        """This config with the restart spread earlier runs on this server measured (used only where the spread is
        otherwise unknown: an explicit decision.restart_spread wins)."""
        self._earlier = earlier if self.spread_unknown else None
        return self

    @property
    def earlier_spread(self) -> EarlierSpread | None:
        return self._earlier

    def at_look(self, level: float | None) -> "DecisionConfig":
        """This config where the sweep stopped at a planned look: its gain and restart spread intervals formed at
        `level`, so they hold at interval_level over the looks together (None: at interval_level)."""
        self._look_interval_level = level
        return self

    @property
    def reported_interval_level(self) -> float:
        """The level the gain and restart spread intervals are formed at: interval_level, or where the sweep stopped
        at a planned look, that look's (`at_look`)."""
        return self._look_interval_level if self._look_interval_level is not None else self.interval_level

    def restart_prior(self) -> tuple[float, str]:
        """(relative SD per server life, where it comes from: "decision.restart_spread", "the simulator's
        default" or "unknown") for a stage where every K has one life."""
        if self.restart_spread != "auto":
            return float(self.restart_spread), "decision.restart_spread"
        if self._server_kind in RESTART_SPREAD_DEFAULTS:
            return RESTART_SPREAD_DEFAULTS[self._server_kind], f"the {self._server_kind}'s default"
        return RESTART_SPREAD_UNKNOWN, "unknown"

    @field_validator("confirm", mode="before")
    @classmethod
    def _confirm_bool(cls, value: object) -> object:
        return {True: "always", False: "off"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="before")
    @classmethod
    def _no_slo_attainment(cls, data: object) -> object:
        """decision.slo_attainment, the share every SLO once shared at a rate, is gone: each SLO's own percentile
        says it (config/slo.py)."""
        if isinstance(data, dict) and "slo_attainment" in data:
            raise ValueError(_slo_attainment_gone(data["slo_attainment"], data.get("slo")))
        return data

    @field_validator("slo")
    @classmethod
    def _slo_keys(cls, value: dict[str, float]) -> dict[str, float]:
        for key, limit in value.items():
            parse_slo_key(key)
            if not limit > 0:
                raise ValueError(f"SLO {key} = {limit}: give a limit in ms above 0")
        return value

    @model_validator(mode="after")
    def _goodput_needs_slo(self) -> "DecisionConfig":
        if self.objective == "goodput" and not self.slo:
            raise ValueError("objective = \"goodput\" counts requests meeting every SLO: set at least one in "
                             "decision.slo, e.g. ttft_p99_ms = 500")
        return self

    @property
    def slos(self):
        return parse_slos(tuple(sorted(self.slo.items())))  # cached there: the rules ask on every resample


def _slo_attainment_gone(share: object, slo: object) -> str:
    """The one line for a config that still sets decision.slo_attainment, with its keys rewritten at that share."""
    try:
        percent = f"{float(share) * 100:g}"
    except (TypeError, ValueError):
        percent = "NN"
    limits = slo.items() if isinstance(slo, dict) and slo else [("ttft_p99_ms", 500)]
    keys = ", ".join(f"{str(key).split('_p')[0]}_p{percent}_ms = {limit}" for key, limit in limits)
    return (f"slo_attainment = {share} is gone: each SLO holds at its own percentile, at user and rate stages alike "
            f"(ttft_p90_ms = 500: 90 % of the requests within 500 ms); write the share in the keys of decision.slo "
            f"instead, e.g. {keys}")
