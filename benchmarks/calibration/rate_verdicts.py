"""The verdict at a rate with a restart spread: how often it is wrong where a wrong verdict is likeliest, and how
often a decided one is right.

On rate_trials.spread_trial's lives (K=0 and K=4 at one rate, each server life's service times x a drawn life factor,
the spread 1-20 %; a server whose spread is not known in advance, as on real vLLM), decided on one life per K (the
restart spread unknown: the verdict assumes one) and on two (the spread measured from them):
- claim (`score_edge`): a verdict at the rate decided at decision.confidence c is wrong at most 1 - c of the time at
  the worst truth, K=4's true gain at the rate (the e2e percentile's speed at the median life) at the tie band's
  edge (rate_trials.spread_at_the_edge): K=0 the truth there, so a verdict naming K=4 is wrong, and one naming K=0 as wrong
  at a gain past the edge by any margin (verdicts.score_edge's rule at the users stage);
- claim: the gain at the rate (a candidate's gain_range) holds the true gain at decision.interval_level;
- described, no claim (`score_spread`): how often a decided verdict is right by the confidence it states
  (verdicts.BANDS), the truth K=4 where its true gain passes the tie band, else K=0; and the share decided.
"""
from __future__ import annotations

from . import adapters
from .intervals import holds
from .rate_trials import SPREAD_LIVES, SpreadTrial
from .tally import COVERAGE, DESCRIPTIVE, ERROR, SHOWN, Tallies
from .verdicts import EDGE_TRUTH, band_of, edge_claim

FAMILY_VERDICT, FAMILY_INTERVAL = "verdict", "interval"
TRUTH = "K=4 iff its true gain at the rate (median lives) passes the 3 % tie band"


def _what(lives: int) -> str:
    return f"at a rate, spread 1-20%, x{lives}"


def _decided(trial: SpreadTrial, lives: int):
    windows = [w for ws in trial.windows.values() for w in ws[:lives]]
    return adapters.decide_rate(windows, trial.regime.rate, trial.p)


def score_spread(trial: SpreadTrial, tallies: Tallies) -> None:
    for lives in range(1, SPREAD_LIVES + 1):
        decision = _decided(trial, lives)
        factors, what = {**trial.gain_named.factors, "lives": str(lives)}, _what(lives)
        decided, k, confidence = adapters.verdict(decision)
        tallies.add(f"decided share: {what}", FAMILY_VERDICT, SHOWN, 0.0, "shown, not scored", decided, factors)
        if decided and confidence is not None:
            for name in (f"verdict {what}, stated {band_of(confidence)}", f"verdict {what}, every decided"):
                tallies.add(name, FAMILY_VERDICT, DESCRIPTIVE, 0.9, TRUTH, k == trial.truth, factors, confidence)
        low, high = adapters.gain_range(decision, 4)
        if low is not None or high is not None:
            level = float(decision.thresholds.get("interval_level", 0.95))
            tallies.add(f"gain (rate) {what}", FAMILY_INTERVAL, COVERAGE, level,
                        "ratio of the true e2e percentiles (median lives) - 1", holds(low, high, trial.gain), factors)


def score_edge(trial: SpreadTrial, tallies: Tallies) -> None:
    """A trial at the tie band's edge (the module's docstring): per lives count, a verdict naming K=4 and one naming
    K=0, each an error stated at 1 - decision.confidence over every trial, decided or not."""
    for lives in range(1, SPREAD_LIVES + 1):
        decision = _decided(trial, lives)
        decided, k, _ = adapters.verdict(decision)
        for named in (4, 0):
            tallies.add(edge_claim(_what(lives), named), FAMILY_VERDICT, ERROR, 1 - trial.p.confidence,
                        EDGE_TRUTH[named], decided and k == named, {**trial.regime.named.factors,
                                                                     "lives": str(lives)})
