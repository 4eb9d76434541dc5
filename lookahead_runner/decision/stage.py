"""One stage's decision: the K picked by the rules, with intervals, gates and its confidence.

The rules run once on the figures as measured (with the gates refined by their intervals) and
once per resample (point rules); the share of resamples picking the same K is the confidence.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from ..config import DecisionConfig
from . import rules
from .checks import gate_checks
from .evidence import LATENCY_COLUMNS
from .measure import CellStats, PreparedCell, ThroughputNoise, throughput_noise
from .schema import Check
from .stats import Bounds, interval


@dataclass
class StageEval:
    users: int
    prepared: Mapping[int, PreparedCell]
    stats: dict[int, CellStats]                     # as measured
    draws: dict[int, list[CellStats]]               # resampled, index-aligned across K
    pooled: dict[int, dict[str, np.ndarray]]
    base_k: int
    checks: dict[int, list[Check]]
    stopped_at: int | None
    pick: int | None
    shares: dict[int | None, float]
    stop_share: float = 0.0                         # resamples in which the stop rule fires where it did
    noise: ThroughputNoise = ThroughputNoise(math.nan, 0, "none")
    status: str = "not_decided"
    why_not_decided: list[str] = field(default_factory=list)

    @property
    def ks(self) -> list[int]:
        return sorted(self.stats)

    @property
    def base(self) -> CellStats:
        return self.stats[self.base_k]

    @property
    def leading(self) -> int | None:
        return self.pick

    def objective_draws(self, k: int, objective: str) -> np.ndarray:
        return np.array([d.objective(objective) for d in self.draws[k]])

    def relative_draws(self, k: int, other: int, objective: str) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.objective_draws(k, objective) / self.objective_draws(other, objective) - 1

    def quantile_difference_draws(self, k: int, column: str, q: float, relative: bool = False) -> np.ndarray:
        mine = np.array([d.quantile(column, q) for d in self.draws[k]])
        theirs = np.array([d.quantile(column, q) for d in self.draws[self.base_k]])
        with np.errstate(all="ignore"):
            return mine / theirs - 1 if relative else mine - theirs

    def gain(self, k: int, objective: str) -> float:
        return rules.rel(self.stats[k].objective(objective), self.base.objective(objective))

    def blocked_by(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.FAIL]

    def unknown_gates(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.UNKNOWN]


def draw_stats(prepared: Mapping[int, PreparedCell], resamples: int, rng: np.random.Generator,
               noise: ThroughputNoise) -> dict[int, list[CellStats]]:
    return {k: cell.draws(rng, resamples, noise) for k, cell in sorted(prepared.items())}


def evaluate(users: int, prepared: Mapping[int, PreparedCell], p: DecisionConfig, rng: np.random.Generator) -> StageEval:
    stats = {k: cell.measure() for k, cell in sorted(prepared.items())}
    noise = throughput_noise(prepared.values())
    draws = draw_stats(prepared, p.resamples, rng, noise)
    pooled = {k: {c: cell.cell.pooled(c) for c in LATENCY_COLUMNS} for k, cell in prepared.items()}
    base_k = min(stats)
    ratio = {k: np.array([rules.latency_ratio(d, b, p) for d, b in zip(draws[k], draws[base_k])]) for k in stats}
    checks = {k: gate_checks(stats[k], stats[base_k], pooled[k], ratio[k], p) for k in stats}
    ks = sorted(stats)
    stopped = rules.stop_at(stats, p)
    statuses = {k: {c.name: c.status for c in checks[k]} for k in stats}
    chosen = rules.pick(stats, statuses, stopped, p)
    picks, stops = Counter(), Counter()
    for b in range(p.resamples):
        drawn = {k: draws[k][b] for k in ks}
        picks[rules.choose(drawn, p)] += 1
        stops[rules.stop_at(drawn, p)] += 1
    shares = {k: n / p.resamples for k, n in picks.items()}
    stage = StageEval(users, prepared, stats, draws, pooled, base_k, checks, stopped, chosen, shares,
                      stop_share=stops[stopped] / p.resamples, noise=noise)
    stage.status, stage.why_not_decided = _status(stage, p)
    return stage


def _status(stage: StageEval, p: DecisionConfig) -> tuple[str, list[str]]:
    if stage.pick is None:
        return "no_eligible", []
    if len(stage.stats) < 2:
        return "not_decided", [f"only K={stage.pick} has a valid window at {stage.users} users: nothing to compare "
                               "it with (measure another K there; an invalid window says why it does not count)"]
    mine = stage.stats[stage.pick].objective(p.objective)
    better = [k for k, s in stage.stats.items() if k == stage.pick or
              (s.objective(p.objective) > mine * (1 + p.tie_tolerance_frac) and not stage.blocked_by(k))]
    why = [f"K={k}'s {c.name} is unknown ({c.unknown_because}): {c.evidence}"
           for k in better for c in stage.unknown_gates(k) if c.unknown_because == "too little data"]
    if stage.noise.source == "none":
        why.append(f"at {stage.users} users the {stage.noise.text()}")
    share = stage.shares.get(stage.pick, 0.0)
    if share < p.confidence:
        why.append(f"K={stage.pick} wins in {share:.0%} of {p.resamples} resamples (needs {p.confidence:.0%})")
    return ("not_decided" if why else "decided"), why


def gain_bounds(stage: StageEval, k: int, other: int, p: DecisionConfig) -> Bounds:
    return interval(stage.relative_draws(k, other, p.objective), p.interval_level)
