"""The verdicts: how often a decided verdict is right, by the confidence it states (a reliability table).

Claim checked: a verdict decided at a stated confidence c (decision.json's `confidence`, the share of resamples
picking the K) is right in at least c of the trials where it says so: per strategy (grid with one or two lives
per K, a ledger's spread borrowed, the adaptive sweep with its early stop, auto repeats) and per band of stated
confidence (90-95 %, 95-99 %, 99 % and over), against the mean confidence stated in the band. The truth: K=4
where its true gain over K=0 passes the tie band, else K=0 (sweeps.py's lives; regimes.ClosedLoopRegime). A
verdict not decided is no claim (its share of trials is shown as `decided`, not scored).
"""
from __future__ import annotations

from . import adapters
from .sweeps import SweepTrial
from .tally import COVERAGE, SHOWN, Tallies

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
