"""Server signals from counter deltas: the one definition of acceptance, mean acceptance length and rates.

Each caller differences vLLM's counters over its own interval and hands the growth here: analysis.py
over a stage's window (the smallest sampled interval covering it), progress.py between two refreshes,
the web UI's live tabs (lookahead_runner/live) over their last ten seconds. Definitions (docs/method.md):
- acceptance rate = delta(accepted tokens) / delta(draft tokens);
- mean acceptance length = 1 + delta(accepted tokens) / delta(drafts): tokens a sequence gains per step;
- drafted tokens per step = delta(draft tokens) / delta(drafts): the K the server really ran (drafting.py
  says what it should be and when a window was not in effect); none where no draft was made;
- rates = delta(counter) / seconds.
Counter names are the signal names of vllm/metrics.py.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from .drafting import drafted_per_step

ACCEPTANCE_COUNTERS = ("spec_accepted_total", "spec_draft_tokens_total", "spec_drafts_total")


@dataclass(frozen=True, slots=True)
class CounterSignals:
    """None where the interval cannot tell: a counter missing or reset, no drafts, no time passed."""

    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None
    drafted_per_step: float | None = None
    generation_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    preemptions: float | None = None


def counter_signals(deltas: Mapping[str, float | None], seconds: float | None = None) -> CounterSignals:
    """The signals of one interval from how much each counter grew over it (`seconds` long).

    A counter that is absent, NaN or went down (the server restarted: its counters began again) is
    unknown, and so is every signal it enters; zero drafts give no acceptance rather than 0 %.
    """

    def grown(name: str) -> float | None:
        value = deltas.get(name)
        if value is None or math.isnan(value) or value < 0:
            return None
        return float(value)

    def per_s(name: str) -> float | None:
        value = grown(name)
        return None if value is None or not seconds or seconds <= 0 else value / seconds

    accepted, drafted, drafts = (grown(name) for name in ACCEPTANCE_COUNTERS)
    return CounterSignals(
        acceptance_rate=None if accepted is None or not drafted else accepted / drafted,
        mean_acceptance_length=None if accepted is None or not drafts else 1.0 + accepted / drafts,
        drafted_per_step=drafted_per_step(drafted, drafts),
        generation_tokens_per_s=per_s("generation_tokens_total"),
        requests_per_s=per_s("requests_success_total"),
        preemptions=grown("preemptions_total"),
    )
