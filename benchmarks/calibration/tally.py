"""Each claim's tally: its stated rate against the rate measured over independent trials, met or missed.

Claim: a claim is met when its measured rate lies inside the band its stated rate allows over that many trials:
the binomial's central BAND_LEVEL range of the stated rate (`band`), one-sided: a coverage (an interval stated at
95 %) misses when it falls below the band's low end (above is conservative, said as such), an error rate (false
alarms, misses, confident-wrong verdicts) when it rises above the band's high end. Each trial carries its
regime's labels, so a claim's rate is also tallied per factor (`worst`): a miss points at the regime behind it. A row no
claim of the product promises (SHOWN, REFERENCE, DESCRIPTIVE) is printed, never met or missed.
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from scipy import stats

# The band a stated rate allows: the binomial's central 99 % over the trials. A claim at the band's edge misses one
# run in 200 by chance; with ~20 claims a run of the suite shows a chance miss about one time in ten (the CI slice's
# seed is fixed, so its outcome is the same each run: a chance miss there would show at once, not intermittently).
BAND_LEVEL = 0.99
COVERAGE, ERROR, SHOWN = "coverage", "error rate", "shown"   # SHOWN: a share printed beside the claims, no claim
REFERENCE = "reference"   # a coverage of no product code, printed with its band to read the claims by: no claim
# a share the product's code reaches, printed with the band of the rate it states, that no claim of the product
# promises (a verdict's right share among the decided, by the confidence stated: it depends on where the truths lie)
DESCRIPTIVE = "described"
MEAN = "mean"    # a count per trial (passed as its trial_stated), printed as its mean over the trials: no claim
UNCLAIMED = (SHOWN, REFERENCE, DESCRIPTIVE, MEAN)


def band(stated: float, trials: int, level: float = BAND_LEVEL) -> tuple[float, float]:
    """The rates a claim stated at `stated` reads over `trials` trials, central `level` (binomial quantiles)."""
    if trials <= 0:
        return math.nan, math.nan
    tail = (1 - level) / 2
    return (float(stats.binom.ppf(tail, trials, stated)) / trials,
            float(stats.binom.isf(tail, trials, stated)) / trials)


@dataclass
class Claim:
    """One claim: `kind` COVERAGE (hits are intervals holding the truth) or ERROR (hits are errors); `stated` the
    rate it states (a coverage: the interval's level; an error rate: its largest)."""

    name: str
    family: str
    kind: str
    stated: float
    truth: str = ""                    # what the truth is, in words
    hits: int = 0
    trials: int = 0
    stated_sum: float = 0.0            # per-trial stated rates, where they differ (a verdict's own confidence)
    by_factor: dict[tuple[str, str], list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    # per factor label, the sum of its trials' stated rates: its band is of the rate they stated, not the claim's mean
    factor_stated: dict[tuple[str, str], float] = field(default_factory=lambda: defaultdict(float))

    def add(self, hit: bool, factors: dict[str, str], stated: float | None = None) -> None:
        self.hits += bool(hit)
        self.trials += 1
        said = self.stated if stated is None else stated
        self.stated_sum += said
        for item in factors.items():
            cell = self.by_factor[item]
            cell[0] += bool(hit)
            cell[1] += 1
            self.factor_stated[item] += said

    @property
    def stated_rate(self) -> float:
        return self.stated_sum / self.trials if self.trials else self.stated

    @property
    def measured(self) -> float:
        """The share of hits (a MEAN: the mean of the counts)."""
        if self.kind == MEAN:
            return self.stated_rate if self.trials else math.nan
        return self.hits / self.trials if self.trials else math.nan

    @property
    def band(self) -> tuple[float, float]:
        return band(self.stated_rate, self.trials)

    @property
    def outcome(self) -> str:
        """met | missed | conservative (a coverage above its band) | no trials | shown, reference, described (no
        claim)."""
        if not self.trials:
            return "no trials"
        if self.kind in UNCLAIMED:
            return self.kind
        low, high = self.band
        if self.kind == COVERAGE:
            return "missed" if self.measured < low else "conservative" if self.measured > high else "met"
        return "missed" if self.measured > high else "met"

    @property
    def met(self) -> bool:
        return self.outcome in ("met", "conservative", "no trials", *UNCLAIMED)

    def worst(self, min_trials: int = 10) -> str:
        """The factor label whose own rate misses the claim the most (over at least `min_trials`), "" if none."""
        worst, gap = "", 0.0
        if self.kind in UNCLAIMED:
            return ""
        for (factor, label), (hits, trials) in self.by_factor.items():
            if trials < min_trials:
                continue
            rate = hits / trials
            low, high = band(self.factor_stated[(factor, label)] / trials, trials)
            off = low - rate if self.kind == COVERAGE else rate - high
            if off > gap:
                worst, gap = f"{factor}={label}: {rate:.1%} of {trials}", off
        return worst

    def row(self) -> dict:
        low, high = self.band
        return {"claim": self.name, "family": self.family, "kind": self.kind, "truth": self.truth,
                "stated": round(self.stated_rate, 4), "measured": round(self.measured, 4) if self.trials else None,
                "hits": self.hits, "trials": self.trials,
                "band": [round(low, 4), round(high, 4)] if self.trials else None, "outcome": self.outcome,
                "worst": self.worst(),
                "by_factor": {f"{f}={label}": [h, n] for (f, label), (h, n) in sorted(self.by_factor.items())}}


def table(claims: list[Claim]) -> str:
    """The claims as a fixed-width table: stated, measured, trials, the band, met or missed, the worst regime."""
    head = f"{'claim':<52} {'kind':<10} {'stated':>7} {'measured':>8} {'trials':>6} {'band':>15}  outcome       worst"
    lines = [head, "-" * len(head)]
    for c in claims:
        low, high = c.band
        measured = "-" if not c.trials else f"{c.measured:.2f}" if c.kind == MEAN else f"{c.measured:.1%}"
        span = f"[{low:.1%}, {high:.1%}]" if c.trials and c.kind not in (SHOWN, MEAN) else "-"
        stated = "-" if c.kind in (SHOWN, MEAN) else f"{c.stated_rate:.1%}"
        lines.append(f"{c.name:<52} {c.kind:<10} {stated:>7} {measured:>8} {c.trials:>6} {span:>15}  "
                     f"{c.outcome:<13} {c.worst()}")
    return "\n".join(lines)


class Tallies:
    """Every claim of a run, created on its first trial, in the order first seen."""

    def __init__(self) -> None:
        self.claims: dict[str, Claim] = {}

    def add(self, name: str, family: str, kind: str, stated: float, truth: str, hit: bool, factors: dict[str, str],
            trial_stated: float | None = None) -> None:
        claim = self.claims.setdefault(name, Claim(name, family, kind, stated, truth))
        claim.add(hit, factors, trial_stated)

    def declare(self, name: str, family: str, kind: str, stated: float, truth: str) -> None:
        """A claim with no trial yet (it shows as "no trials" where none came)."""
        self.claims.setdefault(name, Claim(name, family, kind, stated, truth))

    def __iter__(self):
        return iter(self.claims.values())
