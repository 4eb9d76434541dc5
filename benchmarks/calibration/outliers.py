"""The outlier guard against outlier lives of every size: what it catches, by the outlier's size against the spread.

Claim checked: the guard (restart_spread.off_earlier: a single life off the level the ledger's earlier run measured
for its K, beyond what the spread explains) flags a life the spread describes at most at its stated false-alarm
rate per K (1 - decision.interval_level over the K it checks: 2.5 % each of two K). Shown, no claim: the share of
outlier lives (10-25 % slow) it flags, overall and by the outlier's size against the relative SD of a life's
throughput (`outlier_size`): a t test cannot catch what the spread hides, so the share rises with the size. Beside
it, what a one-sided (slow-only) Student's t test at the same false-alarm rate would flag (not the product's: it
would pass a life far above its level). Each trial: the sweeps group's regime (regimes.draw_closed_loop) with a
ledger the product borrows (measured alike or on other windows), one life per K, one of them the outlier.
"""
from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from . import adapters, adapters_findings
from .lives import KS, THIS_WORKLOAD, closed_loop_lives, ledger_entry, life_spread
from .regimes import ClosedLoopRegime, draw_closed_loop
from .sweeps import sweep_config
from .tally import ERROR, SHOWN, Tallies

FAMILY = "finding"
BORROWED = ("alike", "another window")   # the ledger kinds the product borrows (spread_ledger.earlier_of)
DRAWS = 100   # regimes drawn at most for one with a borrowed ledger (each is with 2/3: 100 fail in 1e-47)

# The guard flags a life past t x the spread x (1 + 1/runs)^0.5 (restart_spread.outlier_limit): with the ledger's one
# run of 2-8 degrees of freedom at 2.5 % a K (two-sided), 3.9-8.8 x the spread. An outlier under twice the life's
# spread is within the spread's own draws; from 4 x on, past the limit of the ledgers with the most degrees of freedom.
SIZE_EDGES = ((2.0, "under 2 x the life's spread"), (4.0, "2-4 x the life's spread"),
              (math.inf, "4 x the life's spread or more"))


def outlier_size(r: ClosedLoopRegime) -> str:
    """The outlier's slowdown over the relative SD of a life's throughput (lives.life_spread: the truth), banded."""
    ratio = r.outlier / life_spread(r)
    return next(label for edge, label in SIZE_EDGES if ratio < edge)


def draw_outlier(rng: np.random.Generator) -> ClosedLoopRegime:
    """A sweeps regime with a borrowed ledger, its outlier life 10-25 % slow (drawn where the regime had none)."""
    for _ in range(DRAWS):
        r = draw_closed_loop(rng)
        if r.ledger in BORROWED:
            break
    outlier = r.outlier or float(rng.uniform(0.10, 0.25))
    factors = {**r.named.factors, "outlier": "slow life"}
    return replace(r, outlier=outlier, named=replace(r.named, factors=factors))


def run_trial(rng: np.random.Generator, tallies: Tallies) -> None:
    r = draw_outlier(rng)
    p = sweep_config(r).decision
    firsts = [w for w in closed_loop_lives(r, rng) if w.repeat == 0]
    borrowing = adapters.with_ledger(p, ledger_entry(r, rng, p.bin_min_s), r.users, THIS_WORKLOAD)
    check = adapters_findings.outlier_check(adapters.users_evidence(firsts, r.users), borrowing)
    factors = {**r.named.factors, "size": outlier_size(r)}
    for k in KS:
        if k == r.outlier_k:
            for size in ("every size", outlier_size(r)):
                tallies.add(f"outlier guard: caught, {size}", FAMILY, SHOWN, 0.0, "shown, not scored",
                            k in check.flagged, factors)
                tallies.add(f"outlier guard: caught, {size}; one-sided t (not the product's)", FAMILY, SHOWN, 0.0,
                            "shown, not scored", k in check.slow_flagged, factors)
        else:
            tallies.add("outlier guard: false alarm, the other K", FAMILY, ERROR, check.false_alarm,
                        "a life the spread describes", k in check.flagged, factors)
            tallies.add("outlier guard: false alarm; one-sided t (not the product's)", FAMILY, SHOWN, 0.0,
                        "shown, not scored", k in check.slow_flagged, factors)
