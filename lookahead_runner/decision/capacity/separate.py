"""Where the verdict at a rate hangs on two K's capacities within the SLO: the probe that would set them apart (the
adaptive sweep's capacity probes, run/strategies/adaptive_sweep.capacity_probe). Pure.

The pick (the leader L) stands where no rival R's capacity could be beyond it by more than the tie band: R fails at
a rate no higher than (1 + tie) x one L holds (gates/rate_pick.py's `could_exceed`). Two cases:
- the brackets as measured leave room for it (R's lowest fail above L's highest hold x (1 + tie)): only narrower
  brackets settle it, the capacity search's bisection (search.next_probe);
- they do not, the leader holding a rate more than the tie band above the rival's fail, but the verdict's
  resamples, drawing each rate's attainment from its arrivals, often do: the ends that decide it are shaky (L's
  highest hold or R's lowest fail near the SLO's percentile). A rate where each is firmer settles it: L at the geometric middle of R's fail / (1 + tie) and L's hold (lower than its hold, still
  enough), or R at the middle of its fail and L's hold x (1 + tie) (higher than its fail, still low enough). The
  shakier end first: the one whose drawn bracket (estimate.drawn_brackets, the draws the verdict makes) crosses
  the other's measured end in more draws.
The ends and their middles are of the rates the windows offered, and the middle is run as the configured rate: its
window offers a few percent off it (its arrivals' draw), and the ends, not the probe's own point, fix the rate, so a
probe that leaves both ends as they are asks the same rate, which is then not asked again. (The ends' configured
rates, as the bisection takes them, put a leader's probe on the simulator 4-7 % higher, where a slower server life
read "behind" in 3 of 4 runs; the offered middle held in 3 of 5.) The draws order the two ends only (the binding
SLO's attainments, as the capacity search reads them, without the restart spread's life factor the verdict also
draws): DRAWS of them tell two shares of a few percent apart, seeded so the same run asks the same probe. A rate
already probed for that K is not asked again (its answer is in the points).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .estimate import Point, drawn_brackets, measured_bracket

DRAWS = 400   # each end's shakiness to about +-2.5 points (a share's standard error at 50 %)
SEED = 53     # any fixed seed: the same evidence asks the same probe (--resume)


@dataclass(frozen=True)
class Separation:
    """A probe that would set the leader and a rival apart: `k` at `rate` (the configured req/s to run), and why."""

    k: int
    rate: float
    why: str


def separations(leader_k: int, leader: Sequence[Point], leader_share: float, rival_k: int, rival: Sequence[Point],
                rival_share: float, tie: float, tried: dict[int, Sequence[float]]) -> list[Separation]:
    """The probes that would firm up the ends setting `leader_k` apart from `rival_k`, the shakier end's first;
    none where the brackets as measured leave room for the rival (bisect instead), where the
    leader's hold is within the tie band of the rival's fail (a rate between is no firmer: bisect the brackets
    apart), or where an end is unbounded."""
    holds, _ = measured_bracket(leader, leader_share)
    _, fails = measured_bracket(rival, rival_share)
    if not (math.isfinite(holds) and math.isfinite(fails)) or fails * (1 + tie) > holds:
        return []   # room for the rival (bisect), or the ends within the tie band: a rate between them is no firmer
    rng = np.random.default_rng(SEED)
    drawn_holds, _ = drawn_brackets(leader, leader_share, rng, DRAWS)
    _, drawn_fails = drawn_brackets(rival, rival_share, rng, DRAWS)
    leader_shaky = float(np.mean(fails > drawn_holds * (1 + tie)))
    rival_shaky = float(np.mean(drawn_fails > holds * (1 + tie)))
    # the middles of the ends' offered rates, run as configured: a probe that leaves both ends as they are asks the
    # same rate again, which `tried` then rules out
    options = [
        (leader_shaky, Separation(leader_k, _readable(math.sqrt(fails / (1 + tie) * holds)),
                                  f"K={leader_k}'s hold at {holds:.4g} req/s, against K={rival_k} failing at "
                                  f"{fails:.4g}, is not firm in {leader_shaky:.0%} of the draws: a lower rate it "
                                  "holds more surely, still high enough")),
        (rival_shaky, Separation(rival_k, _readable(math.sqrt(fails * holds * (1 + tie))),
                                 f"K={rival_k}'s fail at {fails:.4g} req/s, against K={leader_k} holding {holds:.4g}, "
                                 f"is not firm in {rival_shaky:.0%} of the draws: a higher rate it fails more surely, "
                                 "still low enough")),
    ]
    options.sort(key=lambda item: -item[0])
    return [option for shaky, option in options if shaky > 0 and not _tried(option, tried)]


def _readable(rate: float) -> float:
    """The rate rounded to 4 significant figures: the rate run, and compared with those tried."""
    return float(f"{rate:.4g}")


def _tried(option: Separation, tried: dict[int, Sequence[float]]) -> bool:
    return any(math.isclose(rate, option.rate, rel_tol=1e-9) for rate in tried.get(option.k, ()))
