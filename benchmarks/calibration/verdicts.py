"""The verdicts: how often a decided verdict is right, by the confidence it states (a reliability table).

Claim checked: a verdict decided at a stated confidence c (decision.json's `confidence`, the share of resamples
picking the K) is right in at least c of the trials where it says so: per strategy (grid with one or two lives
per K, a ledger's spread borrowed, the adaptive sweep with its early stop, auto repeats) and per band of stated
confidence (90-95 %, 95-99 %, 99 % and over), against the mean confidence stated in the band. The truth: K=4
where its true gain over K=0 passes the tie band, else K=0 (sweeps.py's lives; regimes.ClosedLoopRegime). A
verdict not decided is no claim (its share of trials is shown as `decided`, not scored).

Beside them, what an exact test would score on the same truths (`score_reference`, no product code): the gain
measured on 1 or 2 lives per K whose spread is known (normal on the log scale, no outlier), its confidence the
share of its sampling distribution past the tie band's edge (what the resamples' share is), decided at 90 %. The
reliability a stated confidence reaches depends on where the truths lie: half of these trials put the gain 0.5-3
points from the edge, where even the exact test's decided verdicts are right far less often than they state.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from . import adapters
from .lives import life_spread
from .regimes import TIE
from .sweeps import SweepTrial
from .tally import COVERAGE, REFERENCE, SHOWN, Tallies

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
        tallies.add(name, FAMILY, COVERAGE, 0.9, truth_text, right, factors, confidence)


def score_sweep(trial: SweepTrial, tallies: Tallies) -> None:
    for strategy, decision in trial.decisions.items():
        decided, k, confidence = adapters.verdict(decision)
        _score(tallies, strategy, decided, k, confidence, trial.regime.truth, trial.regime.named.factors,
               SWEEP_TRUTH)


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
