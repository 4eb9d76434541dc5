"""Capacity probes on a run folder: the life a probe runs (one rate stage), the rates it may reach, and the next
probe from the rate windows measured so far (decision/capacity/search.py and separate.py choose; this reads the
run for them).

Two loops use them: the capacity search (capacity_sweep.py, every K's capacity bracketed to
sweep.capacity_precision) and the adaptive sweep at a rate (adaptive_sweep.py), whose verdict at the target rate
can hang on capacities within the SLO that the rates measured leave open (decision/rate_standing.py's
`capacity_at_stake`): there the probes set the leader and the K at stake apart, on the sweep's own lives and
budget (`verdict_probe`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ...config import StageConfig, SweepConfig
from ...decision.adaptive import Budget, Spent
from ...decision.capacity.estimate import Point, binding, measured_bracket, of_k, slo_rate_points
from ...decision.capacity.search import RATE_REACH, Probe, next_probe, within
from ...decision.capacity.separate import separations
from ...runfolder.plan import CAPACITY_PURPOSE
from ...workload.stages import MAX_STAGE_ARRIVALS
from ..verdict.rate_verdict import ended_over


def probe_stage(config: SweepConfig, rate: float) -> StageConfig:
    """A probe's one rate stage: as long as the config's longest rate stage."""
    return StageConfig(rate=rate, duration_s=max(stage.duration_s for stage in config.load.rate_stages))


def probe_config(config: SweepConfig, rates: list[float] | None) -> SweepConfig:
    """The config a life runs: the config's stages, or a probe's rate stage(s)."""
    if not rates:
        return config
    stages = [probe_stage(config, rate) for rate in rates]
    return config.model_copy(update={"load": config.load.model_copy(update={"stages": stages})})


def reach(config: SweepConfig) -> tuple[float, float]:
    """The lowest and highest rate a probe may run: the config's rates divided or multiplied by RATE_REACH, and no
    higher than a probe's stage may draw (workload/stages.py)."""
    rates = [stage.rate for stage in config.load.rate_stages]
    duration = max(stage.duration_s for stage in config.load.rate_stages)
    return min(rates) / RATE_REACH, min(max(rates) * RATE_REACH, MAX_STAGE_ARRIVALS / duration)


@dataclass(frozen=True)
class SearchState:
    """Per K: its rate points of the SLO that fails first (estimate.binding: their bracket is every SLO's) and that
    SLO's percentile, the rates of every probe run, and how many probes it had."""

    points: dict[int, list[Point]] = field(default_factory=dict)
    targets: dict[int, float] = field(default_factory=dict)
    tried: dict[int, list[float]] = field(default_factory=dict)
    probes: Counter = field(default_factory=Counter)


def search_state(data, config: SweepConfig) -> SearchState:
    """The search's view of the run (`data`: runfolder.read.read_run)."""
    lives = data.plan.sweep_lives()
    per_slo = slo_rate_points((w for _, w in data.rate_windows), config.decision,
                              ended_over(lives, data.statuses))
    state = SearchState()
    for k in {k for _, by_k in per_slo for k in by_k}:
        state.points[k], state.targets[k] = binding(of_k(per_slo, k))
    for entry in lives:
        state.tried.setdefault(entry.k, []).extend(entry.rates or [])
    # the capacity search's lives with rates are its probes; the adaptive sweep's are repeats at the target rate
    # but for those it chose as probes
    state.probes.update(entry.k for entry in lives if entry.rates
                        and (config.sweep.strategy == "capacity" or entry.purpose == CAPACITY_PURPOSE))
    return state


def probe_next(data, config: SweepConfig, ks: Sequence[int], spent: Spent, budget: Budget,
               precision: float) -> Probe:
    """The capacity search's next probe for `ks` (search.next_probe)."""
    state = search_state(data, config)
    return next_probe(sorted(ks), state.points, state.probes, spent, budget, state.targets, precision,
                      reach(config), state.tried)


def verdict_probe(data, config: SweepConfig, leader: int, at_stake: Sequence[int], spent: Spent, budget: Budget,
                  lives_named: str) -> Probe:
    """The adaptive sweep's next probe where its verdict at the rate hangs on the capacities of `leader` and the K
    `at_stake`: for the rival that fails highest, a rate that firms up the end setting them apart where the brackets
    as measured do (separate.py); else the capacity search's bisection of the K at stake and the leader, to half
    the tie band (sweep.capacity_precision where finer), a bracket with two ends before a doubling."""
    state, tie = search_state(data, config), config.decision.tie_tolerance_frac
    default = config.decision.slos[0].share if config.decision.slos else 0.9   # a K with no point: no bracket

    def fails(k: int) -> float:
        return measured_bracket(state.points.get(k, []), state.targets.get(k, default))[1]

    for rival in sorted(at_stake, key=lambda k: (-fails(k), k)):
        found = separations(leader, state.points.get(leader, []), state.targets.get(leader, default), rival,
                            state.points.get(rival, []), state.targets.get(rival, default), tie, state.tried)
        if found:
            return within(Probe(found[0].k, found[0].rate, found[0].why), spent, budget, lives_named)
    precision = min(config.sweep.capacity_precision, tie / 2)
    return next_probe(sorted(set(at_stake) | {leader}), state.points, state.probes, spent, budget, state.targets,
                      precision, reach(config), state.tried, bracketed_first=True, lives_named=lives_named)
