"""What a verdict may cost in server lives before it is reached: at best, expected and at worst (pure).

The claim: "at worst" is the budget (every K x load.repeats for a grid, load.max_repeats per K with repeats =
"auto", sweep.max_lives for the adaptive sweep); "at best" is the fewest lives its stop rule can decide on (a grid
whose early stop fires after two K; the first round of "auto" repeats; the adaptive sweep's first look, two lives,
and one more where the restart spread is not known yet, the second life that measures it); "expected" is where the
looks' error-spending rule (decision/gates/looks.py) stops on average, for the verdict's hardest comparison at the K's
levels and the restart spread earlier runs on this server measured (the ledger) or this run measured: its margin
from the tie band's edge over the standard error of a gain on the budget's lives per K (two lives' means, each K's
lives apart by the spread), never below "at best". Without a spread and two K's levels, nothing says how far apart
the K are before they are measured: no expected.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..config import SweepConfig
from ..decision.gates.looks import Looks, expected_look
from .cost import LivesRange, grid_lives


FIRST_LOOK_LIVES = 2   # the adaptive sweep's first look that can decide: two K measured


def default_max_lives(config: SweepConfig) -> int:
    """The adaptive sweep's cap: sweep.max_lives, else the grid's lives with 2 repeats per K (never more lives
    than that grid)."""
    return config.sweep.max_lives or len(config.speculation.k) * max(2, config.load.planned_repeats)


def looks_of(config: SweepConfig) -> Looks | None:
    """The looks a sweep takes at its verdict as lives end, each judged by the error-spending rule
    (decision/gates/looks.py): the adaptive sweep's, one per life measured from the second (a verdict needs two K)
    to its cap of lives; load.repeats = "auto"'s, one per round of repeats from the first round to
    load.max_repeats. None: a grid that looks once."""
    error = 1 - config.decision.confidence
    if config.sweep.strategy == "adaptive":
        return Looks(FIRST_LOOK_LIVES, default_max_lives(config), error, "lives")
    if config.sweep.strategy == "grid" and config.load.repeats == "auto" and not config.grid.axis:
        return Looks(config.load.planned_repeats, config.load.max_repeats, error, "repeats")
    return None


def dry_run_range(config: SweepConfig, ledger_use=None) -> LivesRange | None:
    """The dry run's lives at best, expected and at worst: the expected from the restart spread and the K's levels
    earlier runs on this server measured (`ledger_use`: spread_ledger.use_for_run's), where they did; None for a
    capacity search (its probes are no verdict's lives) and a grid axis (each value a sweep of its own)."""
    if config.sweep.strategy == "capacity" or config.grid.axis:
        return None
    earlier = ledger_use.earlier_spread() if ledger_use is not None else None
    # the K this sweep runs: the ledger keeps every K earlier runs measured, its keys as it read them
    levels = {k: earlier.levels[str(k)] for k in config.speculation.k if str(k) in earlier.levels} if earlier else {}
    return lives_range(config, looks_of(config), earlier.rel_sd if earlier is not None else None, levels,
                       spread_known=earlier is not None or not config.decision.spread_unknown)


def hardest_margin(levels: Mapping[int, float], tie: float) -> float | None:
    """The verdict's smallest distance from the tie band's edge at these levels (relative): the K the rule picks
    (the best objective, the smallest K within the tie band of it) against each other K: a smaller K it must beat
    by more than the band, a larger one that must not beat it by more."""
    levels = {k: v for k, v in levels.items() if v is not None and math.isfinite(v) and v > 0}
    if len(levels) < 2:
        return None
    best = max(levels.values())
    pick = min(k for k, v in levels.items() if v >= best / (1 + tie))
    mine = levels[pick]
    return min((mine / v - 1) - tie if k < pick else tie - (v / mine - 1) for k, v in levels.items() if k != pick)


def lives_range(config: SweepConfig, looks: Looks | None, spread: float | None = None,
                levels: Mapping[int, float] | None = None, spread_known: bool = False) -> LivesRange:
    """`looks`: the sweep's (`looks_of`; None: a grid that looks once); `spread`: the restart
    spread per life (relative SD) and `levels` each K's objective, where earlier runs or this one measured them;
    `spread_known`: the spread needs no life of this run to be measured (the ledger's, or a documented one)."""
    ks = len(config.speculation.k)
    grid, _ = grid_lives(config)
    if looks is None:
        early = ks > 2 and not config.grid.axis
        best = 2 * config.load.planned_repeats if early else grid
        return LivesRange(best, None, grid, "a grid runs every K unless its early stop fires")
    if looks.unit == "repeats":
        best, worst, per_k = ks * looks.first, ks * looks.at_most, looks.at_most
    else:
        best = looks.first + (0 if spread_known else 1)
        worst, per_k = looks.at_most, looks.at_most / ks
    best = min(best, worst)
    margin = hardest_margin(levels or {}, config.decision.tie_tolerance_frac)
    if spread is None or not math.isfinite(spread) or spread <= 0 or margin is None:
        return LivesRange(best, None, worst, "no restart spread and levels measured on this server yet")
    drift = max(margin, 0.0) / (spread * math.sqrt(2 / per_k))
    look = expected_look(looks, drift)
    expected = ks * look if looks.unit == "repeats" else look
    return LivesRange(best, round(min(max(expected, best), worst), 1), worst,
                      f"at a restart spread of {spread:.1%} and a margin of {margin:+.1%} from the tie band")
