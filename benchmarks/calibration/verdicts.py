"""The verdicts: how often one is wrong where a wrong verdict is likeliest, and how often a decided one is right.

Claim checked: a verdict decided at decision.confidence c, over every look its sweep takes, is wrong at most 1 - c of
the time at the worst truth, a true gain at the tie band's edge (decision/gates/looks.py: each look's bar an
error-spending share of 1 - c; a grid's one look at c): `score_edge`, per strategy (grid with one or two lives per
K, a ledger's spread borrowed, the adaptive sweep with its early stop, auto repeats), on a second trial of each
regime with K=4's true gain at the edge (sweeps.at_the_edge). There K=0 is the truth, so a verdict naming K=4 is
wrong; a gain past the edge by any margin however small has the same lives in the limit and K=4 for its truth, so
a verdict naming K=0 there is as wrong. Each is an error rate stated at 1 - c over every trial at the edge,
decided or not.

Described beside it, no claim: how often a decided verdict is right by the confidence it states (a reliability
table: 90-95 %, 95-99 %, 99 % and over, and every decided), against the mean confidence stated. The share of
resamples is a one-sided test's Phi(Z), not a probability of being right: how often a verdict at 95 % is right
depends on where the truths lie (half of these trials put the gain 0.5-3 points from the edge). The truth: K=4
where its true gain over K=0 passes the tie band, else K=0 (sweeps.py's lives; regimes.ClosedLoopRegime). A
verdict not decided is no claim (its share of trials is shown as `decided`).

Beside them, what an exact test would score on the same truths (`score_reference`, no product code): the gain
measured on 1 or 2 lives per K whose spread is known (normal on the log scale, no outlier), its confidence the
share of its sampling distribution past the tie band's edge (what the resamples' share is), decided at 90 %: where
the truths crowd the edge, even its decided verdicts are right far less often than they state.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from . import adapters
from .lives import life_spread
from .regimes import TIE
from .sweeps import SweepTrial
from .tally import DESCRIPTIVE, ERROR, REFERENCE, SHOWN, Tallies

FAMILY = "verdict"
BANDS = ((0.99, "99%+"), (0.95, "95-99%"), (0.90, "90-95%"), (0.0, "below 90%"))
SWEEP_TRUTH = "K=4 iff its true gain over K=0 passes the 3 % tie band"


def band_of(confidence: float) -> str:
    return next(label for low, label in BANDS if confidence >= low)


def _score(tallies: Tallies, strategy: str, decided: bool, k: int | None, confidence: float | None, truth: int | None,
           factors: dict[str, str], truth_text: str) -> None:
    tallies.add(f"decided share: {strategy}", FAMILY, SHOWN, 0.0, "shown, not scored", decided, factors)
    if not decided or confidence is None:
        return
    right = k == truth
    for name in (f"verdict {strategy}, stated {band_of(confidence)}", f"verdict {strategy}, every decided"):
        tallies.add(name, FAMILY, DESCRIPTIVE, 0.9, truth_text, right, factors, confidence)


def score_sweep(trial: SweepTrial, tallies: Tallies) -> None:
    for strategy, decision in trial.decisions.items():
        decided, k, confidence = adapters.verdict(decision)
        _score(tallies, strategy, decided, k, confidence, trial.regime.truth, trial.regime.named.factors,
               SWEEP_TRUTH)


EDGE_TRUTH = {4: "gain at the tie band's edge: K=0 the truth", 0: "gain just past the edge: K=4 the truth"}


def edge_claim(strategy: str, named: int) -> str:
    return f"wrong at the edge: {strategy}, K={named} named"


def score_edge(trial: SweepTrial, tallies: Tallies) -> None:
    """A trial at the tie band's edge (module docstring): per strategy, a verdict naming K=4 (wrong: K=0 is the
    truth at the edge) and one naming K=0 (wrong at a gain past it by any margin), each against 1 - c."""
    stated = 1 - trial.confidence
    for strategy, decision in trial.decisions.items():
        decided, k, _ = adapters.verdict(decision)
        for named in (4, 0):
            tallies.add(edge_claim(strategy, named), FAMILY, ERROR, stated, EDGE_TRUTH[named],
                        decided and k == named, trial.regime.named.factors)


REFERENCE_DRAWS = 20      # measurements per trial and lives count: the reference's rate over 20 x the trials
REFERENCE_CONFIDENCE = 0.9   # decision.confidence's default


def score_reference(trial: SweepTrial, tallies: Tallies) -> None:
    """The exact test's verdicts on this trial's truth (module docstring), tallied by the confidence they state."""
    r = trial.regime
    rng = np.random.default_rng([round(abs(r.gain) * 1e9), round(r.spread * 1e9), round(r.window_s * 1e6)])
    edge = math.log1p(TIE)
    for lives in (1, 2):
        sigma = life_spread(r) * math.sqrt(2 / lives)
        observed = math.log1p(r.gain) + sigma * rng.standard_normal(REFERENCE_DRAWS)
        ahead = stats.norm.cdf((observed - edge) / sigma)
        for share in ahead:
            k, confidence = (4, share) if share >= 0.5 else (0, 1 - share)
            if confidence < REFERENCE_CONFIDENCE:
                continue
            what = f"reference x{lives}: exact test, spread known"
            for name in (f"{what}, stated {band_of(confidence)}", f"{what}, every decided"):
                tallies.add(name, FAMILY, REFERENCE, 0.9, SWEEP_TRUTH, k == r.truth, r.named.factors,
                            float(confidence))
