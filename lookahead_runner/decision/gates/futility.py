"""A futile look: where the lives the budget leaves cannot, on the trend measured so far, bring the verdict past the
bar of any look the sweep could end at, it ends "not decided" there instead of at the budget (pure).

The rule is stochastic curtailment by conditional power (Lan, Simon and Halperin 1982). A verdict's statistic is
the normal score of its share, Z = Phi^-1(share), as gates/looks.py reads a share: the leader's win share for a
verdict that sets it, the least one-sided share of the tie's equivalence tests (gates/stage.tie_share) for a tie.
Measured on information I now and I_end = f * I after m more lives (f: `info_ratio`), with the drift as measured,
Z there is normal with mean Z sqrt(f) and variance 1 - 1/f; its chance of reaching a z bar is the conditional power
    Phi((Z sqrt(f) - z_bar) / sqrt(1 - 1/f)).
A look is futile where, for every m the budget leaves, both (the K set, the tie) fall below FUTILITY_POWER at the
bar look + m has as the last (the error the earlier looks left, all spent there: the lowest it can have; a sweep
ends early where the budget in minutes, failed lives or the per-K cap end it).

Non-binding: the stop only ends a sweep undecided where even this look, as the last, decides nothing (the chooser
asks that first), so no verdict is stated at a bar the error spending did not set: the confident-wrong rate cannot
rise, and the price is the share of sweeps that would have decided later (benchmarks/spread_calibration.py counts
right / not decided / wrong with and without it). Each hope is taken at its most: the m lives given to the leader
and one rival, the pair whose comparison gains most, the spread as measured, the lowest bar.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from scipy import stats

from ..standing import Standing

# a look is futile where neither verdict reaches a last look's bar in 10 % of the trend's futures (a usual
# curtailment level); its price in decided sweeps is measured by benchmarks/spread_calibration.py
FUTILITY_POWER = 0.1


def conditional_power(share: float | None, info_ratio: float, bar: float, resamples: int) -> float:
    """The chance, on the trend measured, that a verdict now at `share` (of `resamples`) clears `bar` at a later
    look with `info_ratio` times the information now (1: no life left: it is where it is)."""
    if share is None:
        return 0.0
    floor = 0.5 / max(resamples, 1)   # a share of 0 or 1 is one resample's worth from it: a finite score
    z = stats.norm.ppf(min(max(share, floor), 1 - floor))
    z_bar = stats.norm.ppf(min(max(bar, floor), 1 - floor))
    if info_ratio <= 1:
        return 1.0 if z >= z_bar else 0.0
    return float(stats.norm.cdf((z * math.sqrt(info_ratio) - z_bar) / math.sqrt(1 - 1 / info_ratio)))


def info_ratio(lives: tuple[int, int], left: int, per_k: int) -> float:
    """How much a comparison of two K on `lives` lives each gains at most from `left` more lives, at most `per_k`
    per K: its variance now over its variance with the lives left, each next life to the K on fewer."""
    a, b = lives
    if a < 1 or b < 1:
        return math.inf
    now = 1 / a + 1 / b
    for _ in range(max(left, 0)):
        if min(a, b) >= per_k:
            break
        if (a <= b and a < per_k) or b >= per_k:
            a += 1
        else:
            b += 1
    return now / (1 / a + 1 / b)


def futile_why(standing: Standing, lives: Mapping[int, int], left: int, per_k: int) -> str:
    """Why the look `standing` stands at is futile, on `lives` measured per K with `left` more lives in the budget,
    at most `per_k` per K; "" where a life may still help: the spread not measured, an outlier life to check,
    anything but the share holding the verdict back, no planned looks, or this look decided as the last would be
    (the verdict stands there: never a futile stop, so the stop stays non-binding). Most hopeful: for each count of
    lives the sweep could still end after, the pair of K gaining most from them, judged at that look's last bar
    (lower the earlier the sweep ends: a budget in minutes, failed lives or the per-K cap can end it early)."""
    leader, looks, look = standing.leader, standing.looks, standing.look
    if (looks is None or look is None or not standing.share_alone or leader is None
            or standing.status == "decided" or standing.decided_at_last_look or not standing.spread_measured
            or standing.off_earlier):
        return ""
    rivals = [k for k in standing.objective if k != leader and k not in standing.blocked and lives.get(k, 0)]
    if left <= 0 or not lives.get(leader, 0) or not rivals:
        return ""
    share = standing.shares.get(leader, 0.0)
    power, end = 0.0, looks.at_most
    for more in range(1, left + 1):
        ratio = max(info_ratio((lives[leader], lives[k]), more, per_k) for k in rivals)
        at = min(look.number + more, looks.at_most)
        for s in (share, standing.tie_share):
            if (chance := conditional_power(s, ratio, looks.last_bar(at), standing.resamples)) > power:
                power, end = chance, at
    if power >= FUTILITY_POWER:
        return ""
    tie = (f" nor the tie's ({standing.tie_share:.1%}: every other K inside the tie band)"
           if standing.tie_share is not None else "")
    return (f"not decided, futile at look {look.number} of at most {look.at_most}: with {left} more "
            f"{'life' if left == 1 else 'lives'}, neither K={leader}'s share ({share:.1%}){tie} reaches the bar of "
            f"a last look in {FUTILITY_POWER:.0%} of the futures the trend measured so far gives (at best "
            f"{power:.0%}, ending at look {end}: {looks.last_bar(end) * 100:.1f} %)")
