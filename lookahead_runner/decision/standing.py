"""The chooser's view of the verdict at the target concurrency between lives (`Standing`, read by decision/adaptive.py):
the engine's target stage as the verdict judges it (engine.early_judged), at the bar of this look (gates/looks.py)
or the fixed early-stop bar, with the K the verdict hangs on until it is decided. decision/rate_standing.py gives the
same view of the verdict at an arrival rate. Pure: evidence in, a Standing out."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .cells.restart_spread import measured, unchecked
from .gates.looks import Look, Looks


@dataclass(frozen=True)
class Standing:
    """The decision engine at the target concurrency, on the windows measured so far."""

    status: str                                   # decided | not_decided | no_eligible | no_measurement
    leader: int | None = None
    shares: Mapping[int, float] = field(default_factory=dict)      # win share per K in the resamples
    objective: Mapping[int, float] = field(default_factory=dict)   # per measured K, as measured
    blocked: frozenset[int] = frozenset()         # K a gate fails at the target
    stopped_at: int | None = None                 # where the stop is agreed (engine.agreed_stop: the early bar)
    wanted: tuple[int, ...] = ()                  # K whose next repeat could decide it (repeats_wanted)
    spread_measured: bool = False                 # the restart spread is measured (cells/restart_spread.py)
    spread_from_earlier: bool = False             # ... with earlier runs on this server (the ledger) in it
    off_earlier: Mapping[int, float] = field(default_factory=dict)  # K on one life far from earlier runs' level
    spare_baseline: bool = True                   # the baseline may be spared (not where the spread is unknown)
    decided_at_last_look: bool = False            # decided at decision.confidence (the verdict if no life follows)
    unchecked: frozenset[int] = frozenset()       # K on one life earlier runs hold no level for (no outlier check)
    # the win share that keeps a K in the running at the bar this look judged (engine.contender_share)
    contender_share: float = field(kw_only=True)
    look: Look | None = field(default=None, kw_only=True)       # this look and its bar (None: the fixed early bar)
    last_look: Look | None = field(default=None, kw_only=True)  # ... as the last look (all the error left spent)
    tie: bool = field(default=False, kw_only=True)              # decided as a tie by equivalence at the look's bar
    # at a rate: the K whose capacity within the SLO could set them over the leader (gates/rate_pick.py's `open`):
    # rates between those measured settle it, not lives, so none is wanted (decision/rate_standing.py)
    capacity_open: tuple[int, ...] = field(default=(), kw_only=True)
    # what a futile look is judged on (decision/gates/futility.py), users stages only: only the share holds the
    # verdict back, the tie's least one-sided share, the looks planned (each as the last has its bar), the resamples
    share_alone: bool = field(default=False, kw_only=True)
    tie_share: float | None = field(default=None, kw_only=True)
    looks: Looks | None = field(default=None, kw_only=True)
    resamples: int = field(default=0, kw_only=True)

    @property
    def measured(self) -> list[int]:
        return sorted(self.objective)


def standing_of(evidence, p, early_stop: bool = True, looks=None) -> Standing:
    """The engine's target stage (decision/engine.py `target_stage`, as the verdict judges it) as a `Standing`:
    `decided` only past the bar of this look (`looks`: the error-spending rule's, decision/gates/looks.py; None: the fixed
    early-stop bar, engine.early_look) or on a tie by equivalence, with the K the verdict hangs on until then."""
    from .engine import agreed_stop, contender_share, early_judged, wanted_of
    from .gates.stage import held_back_by_the_share_alone, off_earlier_held, tie_share

    seen = early_judged(evidence, p, looks)
    stage, judged, look = seen.stage, seen.judged, seen.config
    if stage is None:
        return Standing("no_measurement", contender_share=contender_share(p, p.resamples))
    wanted = wanted_of(judged, look)
    stopped = agreed_stop(stage, p, seen.look) if early_stop else None
    objective = {k: s.objective(p.objective) for k, s in stage.stats.items()}
    lives = {k: len(cell.windows) for k, cell in stage.prepared.items()}
    return Standing(judged.status, stage.pick, {k: s for k, s in stage.shares.items() if k is not None}, objective,
                    frozenset(k for k in stage.ks if stage.blocked_by(k)), stopped,
                    tuple(wanted), measured(stage.noise),
                    measured(stage.noise) and stage.noise.origin.earlier is not None,
                    off_earlier_held(judged, look),   # those the verdict hangs on: the others want no life
                    not p.spread_unknown,
                    decided_at_last_look=seen.decided_at_last_look, unchecked=unchecked(lives, p.earlier_spread),
                    contender_share=contender_share(look, stage.resamples), look=seen.look, last_look=seen.last,
                    tie=seen.tie, looks=looks, resamples=stage.resamples,
                    # read by a futile look alone, which needs planned looks
                    share_alone=looks is not None and held_back_by_the_share_alone(stage, seen.stage_config),
                    tie_share=tie_share(stage, seen.stage_config) if looks is not None else None)


def valid_lives(evidence, users: int) -> dict[int, int]:
    """Per K, the lives (repeats) with a valid window at `users`."""
    return {k: len({w.repeat for w in cell.windows}) for k, cell in evidence.at(users).items()}
