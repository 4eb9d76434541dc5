"""What a verdict may cost in server lives before it is reached: at best, expected and at worst (pure).

The claim: "at worst" is the budget (every K x load.repeats for a grid, load.max_repeats per K with repeats =
"auto", sweep.max_lives for the adaptive sweep, at a rate with an SLO its capacity probes beside them:
`capacity_probes`); "at best" is the fewest lives its stop rule can decide on (a grid
whose early stop fires after two K; the first round of "auto" repeats; the adaptive sweep's first look, two lives,
and where the restart spread is not known yet two more: the chooser stops with neither end of the gain it states on
one life, the leader's second measuring the spread and the baseline's guarding against one outlier life of it);
"expected" is where the looks' error-spending rule (decision/gates/looks.py) stops on average, for the verdict's
hardest comparison at the K's levels and the restart spread earlier runs on this server measured (the ledger) or
this run measured: its margin from the tie band's edge over the standard error of a gain on the budget's lives per K
(two lives' means, each K's lives apart by the spread), never below "at best". Without a spread and two K's levels,
nothing says how far apart the K are before they are measured: no expected. The adaptive sweep's lives are priced in
seconds of load as they run: a K's first life every stage, a repeat the target stage alone (at a rate, the target
rate's), so at best the first look's two K's first lives and their repeats, at worst every K's first life and
repeats to the budget. At a rate the ledger prices nothing: the chooser there (decision/rate_standing.py) buys the
spread with a repeated life whatever the ledger holds, and the ledger's levels are of the users objective, not the
speed at a rate.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

from ..config import SweepConfig
from ..decision.gates.looks import Looks, expected_look
from .cost import LivesRange, adaptive_load_s, capacity_probes, grid_lives, probe_load_s


FIRST_LOOK_LIVES = 2   # the adaptive sweep's first look that can decide: two K measured
# where the restart spread is unknown, the lives it adds before any stop: both ends of the first look's gain on two
# lives (decision/adaptive.py: the leader's second measures the spread, the baseline is never spared there)
SPREAD_UNKNOWN_LIVES = 2


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
    # at a rate the ledger prices nothing (the module's docstring)
    at_rate = config.adaptive_rate is not None
    return lives_range(config, looks_of(config), None if earlier is None or at_rate else earlier.rel_sd,
                       {} if at_rate else levels,
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
    `spread_known`: the spread needs no life of this run to be measured (the ledger's, or a documented one); at a
    rate only a spread the config states (decision.restart_spread, the simulator's documented one) spares that life:
    the chooser there buys it whatever earlier runs measured."""
    if config.adaptive_rate is not None:
        spread_known = not config.decision.spread_unknown
    ks = len(config.speculation.k)
    grid, _ = grid_lives(config)
    if looks is None:
        early = ks > 2 and not config.grid.axis
        best = 2 * config.load.planned_repeats if early else grid
        return LivesRange(best, None, grid, "a grid runs every K unless its early stop fires")
    if looks.unit == "repeats":
        best, worst, per_k = ks * looks.first, ks * looks.at_most, looks.at_most
    else:
        best = looks.first + (0 if spread_known else SPREAD_UNKNOWN_LIVES)
        worst, per_k = looks.at_most, looks.at_most / ks
    best = min(best, worst)

    def seconds(lives: float | None) -> float | None:
        """An adaptive plan's lives' seconds of load: the fewest K's first lives at best (the first look's), the
        rest repeats; beyond it every K's first life before any repeat past those the unknown spread needs (the
        most seconds those lives can take)."""
        if lives is None:
            return None
        bought = 0 if spread_known else SPREAD_UNKNOWN_LIVES
        firsts = looks.first if lives <= best else min(ks, max(looks.first, lives - bought))
        return adaptive_load_s(config, lives, firsts)

    adaptive = looks.unit == "lives"
    # at worst, the capacity probes too: each one rate stage as long as the longest (probes.probe_stage)
    probes = capacity_probes(config) if adaptive else 0
    if probes:
        worst_s, worst = seconds(worst) + probes * probe_load_s(config), worst + probes
    else:
        worst_s = seconds(worst) if adaptive else None
    margin = hardest_margin(levels or {}, config.decision.tie_tolerance_frac)
    if spread is None or not math.isfinite(spread) or spread <= 0 or margin is None:
        return LivesRange(best, None, worst, "no restart spread and levels measured on this server yet",
                          (seconds(best), None, worst_s) if adaptive else None)
    drift = max(margin, 0.0) / (spread * math.sqrt(2 / per_k))
    look = expected_look(looks, drift)
    expected = round(min(max(ks * look if looks.unit == "repeats" else look, best), worst - probes), 1)
    return LivesRange(best, expected, worst,
                      f"at a restart spread of {spread:.1%} and a margin of {margin:+.1%} from the tie band",
                      (seconds(best), seconds(expected), worst_s) if adaptive else None)
