"""What meeting decision.slo means, one rule for user stages and rate stages: `METRIC_pNN_ms = L` holds where at
least NN % of the requests meet L on METRIC (of the requests finished at a user stage; of the arrivals at a rate
stage, where one that failed, timed out, was cut or was never sent meets none). Each SLO holds at its own
percentile, judged by its Wilson interval (stats.wilson) against NN %: at a rate on the arrivals over their design
effect (stats.design_effect: the requests behind one queue miss together).

- A request meets an SLO (`meets`) where its metric is within the limit, as vLLM's `vllm bench serve --goodput`
  counts a request good (vllm/benchmarks/serve.py, calculate_metrics: every `slo >= metric`). An answer of one
  output token has no time per output token after the first and no gap between tokens: it meets a TPOT or an ITL
  SLO (vLLM takes its TPOT as 0 for goodput). Any other value not measured meets nothing.
- At a rate the user's TTFT and e2e run from the arrival the schedule set, not from the send (`from_arrival`): a
  wait for a load.max_in_flight slot and the dispatcher's lateness are the user's wait. The send-based columns stay
  the server's figures (percentiles, trade-offs); TPOT and ITL are gaps after the first token, the same in both.
- Goodput counts the requests meeting every SLO at once (vLLM's definition, no percentile): the objective at a
  rate, not a gate.

Pure numpy. `attainments` is the whole rule on per-request latencies (benchmarks/calibration reads it too).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...config.slo import Slo
from .evidence import LATENCY_COLUMNS
from .stats import Bounds, design_effect, wilson

# the SLO metrics a request of one output token has no value for, and meets
NO_GAP_METRICS = ("tpot", "itl")
# the columns that run from the request's start (the rest are gaps after its first token)
FROM_START = ("ttft_ms", "e2e_ms")


def meets(latency_ms: np.ndarray, ok: np.ndarray, slos: Sequence[Slo],
          output_tokens: np.ndarray | None = None) -> np.ndarray:
    """Per request x SLO: it succeeded and its metric is within the SLO's limit. `latency_ms`: requests x
    evidence.LATENCY_COLUMNS; `output_tokens` (per request) where known: one token meets a TPOT or ITL SLO."""
    ok = np.asarray(ok, dtype=bool)
    out = np.zeros((len(ok), len(slos)), dtype=bool)
    single = np.zeros(len(ok), dtype=bool) if output_tokens is None else \
        np.nan_to_num(np.asarray(output_tokens, dtype=float), nan=2.0) <= 1
    for index, slo in enumerate(slos):
        values = latency_ms[:, LATENCY_COLUMNS.index(slo.column)] if len(ok) else np.empty(0)
        with np.errstate(invalid="ignore"):
            within = np.nan_to_num(values, nan=np.inf) <= slo.max_ms
        if slo.metric in NO_GAP_METRICS:
            within |= single & np.isnan(values)
        out[:, index] = ok & within
    return out


def from_arrival(latency_ms: np.ndarray, waited_ms: np.ndarray) -> np.ndarray:
    """The latencies as the user saw them at a rate: TTFT and e2e plus the time from the scheduled arrival to the
    send (`waited_ms`: the wait for a slot and the dispatcher's lateness; NaN where unknown counts as 0)."""
    out = np.array(latency_ms, dtype=float, copy=True)
    waited = np.nan_to_num(np.asarray(waited_ms, dtype=float), nan=0.0)
    for column in FROM_START:
        out[:, LATENCY_COLUMNS.index(column)] += waited
    return out


@dataclass(frozen=True)
class SloAttainment:
    """One SLO over a set of requests: `met` of `n` within its limit, the share's interval."""

    slo: Slo
    met: int
    n: int
    bounds: Bounds
    design_effect: float = 1.0

    @property
    def share(self) -> float:
        return self.met / self.n if self.n else math.nan

    @property
    def holds(self) -> bool:
        """The rule every resample applies: the share measured reaches the percentile."""
        return self.n > 0 and self.share >= self.slo.share

    @property
    def status(self) -> str:
        """pass: the interval lies at or above the percentile; fail: below it; unknown: across it (or no request)."""
        if not self.n or self.bounds.low is None or self.bounds.high is None:
            return "unknown"
        if self.bounds.low >= self.slo.share:
            return "pass"
        return "fail" if self.bounds.high < self.slo.share else "unknown"

    def text(self, noun: str = "requests") -> str:
        """"TTFT p90 <= 500 ms met by 950/1000 arrivals = 95.0% [93.5%, 96.2%] (needs 90%)"."""
        if not self.n:
            return f"{self.slo.text()}: no {noun}"
        return (f"{self.slo.text()} met by {self.met}/{self.n} {noun} = {self.share:.1%} [{self.bounds.low:.1%}, "
                f"{self.bounds.high:.1%}] (needs {self.slo.share * 100:g}%)")


def attainment(slo: Slo, met_flags: Sequence[np.ndarray], level: float, in_arrival_order: bool) -> SloAttainment:
    """One SLO's attainment from its per-request flags (one array per window); `in_arrival_order`: the requests
    are a rate window's arrivals in the order the schedule set, so the interval counts them over their design
    effect."""
    met = sum(int(np.sum(flags)) for flags in met_flags)
    n = sum(len(flags) for flags in met_flags)
    deff = design_effect(list(met_flags)) if in_arrival_order else 1.0
    return SloAttainment(slo, met, n, wilson(met, n, level, deff) if n else Bounds(None, None), deff)


def attainments(latency_ms: np.ndarray, ok: np.ndarray, slos: Sequence[Slo], level: float,
                output_tokens: np.ndarray | None = None, waited_ms: np.ndarray | None = None,
                in_arrival_order: bool = False) -> tuple[SloAttainment, ...]:
    """Each SLO's attainment over one set of requests: per-request latencies (requests x evidence.LATENCY_COLUMNS,
    from the send), whether each succeeded, its output tokens where known, and at a rate the wait from its
    scheduled arrival to its send (`waited_ms`, with `in_arrival_order` for the arrivals in schedule order)."""
    latency = np.asarray(latency_ms, dtype=float).reshape(len(ok), len(LATENCY_COLUMNS))
    if waited_ms is not None:
        latency = from_arrival(latency, waited_ms)
    flags = meets(latency, ok, slos, output_tokens)
    return tuple(attainment(slo, [flags[:, i]], level, in_arrival_order) for i, slo in enumerate(slos))


def every_slo_holds(found: Sequence[SloAttainment]) -> bool:
    """The point rule: every SLO's share reaches its percentile."""
    return all(a.holds for a in found)


def combined_status(found: Sequence[SloAttainment]) -> str:
    """fail where one SLO fails, unknown where none fails and one is unknown, else pass."""
    statuses = {a.status for a in found}
    return "fail" if "fail" in statuses else "unknown" if "unknown" in statuses else "pass"
