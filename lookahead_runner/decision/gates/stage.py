"""One stage's decision: the K picked by the rules, with intervals, gates and its confidence.

The rules run once on the figures as measured (with the gates refined by their intervals) and
once per resample (point rules); the share of resamples picking the same K is the confidence.
The leader is picked by the rule the resamples use (a K whose measured figure already breaks a gate
does not lead, even where the gate's interval leaves it unknown). The share has a Monte Carlo error
of its own: near the threshold more resamples are drawn until its interval clears it (up to
MAX_RESAMPLE_FACTOR times `resamples`); if it never does, the verdict is not decided.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ...config import DecisionConfig
from . import batch_rules, rules
from .checks import gate_checks
from ..cells.evidence import LATENCY_COLUMNS
from ..cells.measure import CellStats, PreparedCell, ThroughputNoise, throughput_noises
from ..cells.resample import CellDraws
from ..cells.restart_spread import earlier_at, off_earlier, with_restart_spread
from ..schema import Check
from ..cells.stats import Bounds, interval, single_life_gains, wilson

MAX_RESAMPLE_FACTOR = 8
LIFE_STREAM = 32  # the restart term's generators: apart from the stage's own


@dataclass
class StageEval:
    users: int
    prepared: Mapping[int, PreparedCell]
    stats: dict[int, CellStats]                     # as measured
    draws: dict[int, CellDraws]                     # resampled, index-aligned across K and stages
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
    noise_by_k: dict[int, ThroughputNoise] = field(default_factory=dict)
    resamples: int = 0                              # drawn in all (more than asked near the threshold)
    share_range: Bounds = Bounds(None, None)        # the leader's share with its Monte Carlo error
    stop_gaps: list[tuple[int, int]] = field(default_factory=list)  # K steps the stop rule could not weigh
    # K on one life whose objective is off the level earlier runs on this server measured for it beyond what the
    # restart spread explains (cells/restart_spread.off_earlier): K -> its deviation; the verdict waits for them
    off_earlier: dict[int, float] = field(default_factory=dict)

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
        return np.asarray(self.draws[k].objective(objective), dtype=float)

    def relative_draws(self, k: int, other: int, objective: str) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.objective_draws(k, objective) / self.objective_draws(other, objective) - 1

    def quantile_difference_draws(self, k: int, column: str, q: float, relative: bool = False) -> np.ndarray:
        mine, theirs = self.draws[k].quantile(column, q), self.draws[self.base_k].quantile(column, q)
        with np.errstate(all="ignore"):
            return mine / theirs - 1 if relative else mine - theirs

    def gain(self, k: int, objective: str) -> float:
        return rules.rel(self.stats[k].objective(objective), self.base.objective(objective))

    def blocked_by(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.FAIL]

    def unknown_gates(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.UNKNOWN]

    def waived_gates(self, k: int) -> list[Check]:
        return [c for c in self.checks[k] if c.status == rules.WAIVED]


def draw_stats(prepared: Mapping[int, PreparedCell], resamples: int, rng: np.random.Generator,
               noise: Mapping[int, ThroughputNoise], lives: Mapping[int, np.random.Generator] | None = None
               ) -> dict[int, CellDraws]:
    return {k: cell.draws(rng, resamples, noise[k], (lives or {}).get(k)) for k, cell in sorted(prepared.items())}


def life_rngs(ks, p: DecisionConfig) -> dict[int, np.random.Generator]:
    """Each K's restart-term draws, seeded by the run and K alone: alike at every stage of its server life."""
    return {k: np.random.default_rng([p.seed, k, LIFE_STREAM]) for k in ks}


def leader_statuses(stats: Mapping[int, CellStats], checks: Mapping[int, list[Check]], base_k: int,
                    p: DecisionConfig) -> dict[int, dict[str, str]]:
    """The gates as the leader is picked: as checked, but a gate the measured figure breaks by the point rule
    (the rule every resample applies) counts as failed even where its interval leaves it unknown."""
    out = {}
    for k, cs in checks.items():
        point = rules.gate_statuses(stats[k], stats[base_k], p)
        out[k] = {c.name: rules.FAIL if c.status == rules.UNKNOWN and point.get(c.name) == rules.FAIL else c.status
                  for c in cs}
    return out


def evaluate(users: int, prepared: Mapping[int, PreparedCell], p: DecisionConfig, rng: np.random.Generator) -> StageEval:
    stats = {k: cell.measure() for k, cell in sorted(prepared.items())}
    noise, noise_by_k = with_restart_spread(
        prepared, throughput_noises(prepared, p.restart_prior(), p.one_life_per_k), p)
    lives = life_rngs(prepared, p)
    draws = draw_stats(prepared, p.resamples, rng, noise_by_k, lives)
    pooled = {k: {c: cell.cell.pooled(c) for c in LATENCY_COLUMNS} for k, cell in prepared.items()}
    base_k = min(stats)
    ratio = {k: batch_rules.latency_ratios(draws[k], draws[base_k], p) for k in stats}
    checks = {k: gate_checks(stats[k], stats[base_k], pooled[k], ratio[k], p) for k in stats}
    stopped = rules.stop_at(stats, p)
    chosen = rules.pick(stats, leader_statuses(stats, checks, base_k, p), stopped, p)
    if chosen is None:  # every K breaks a gate as measured, none beyond its interval: not decided, not "no K"
        chosen = rules.pick(stats, {k: {c.name: c.status for c in cs} for k, cs in checks.items()}, stopped, p)
    picks, stops = Counter(), Counter()

    def judge(batch: dict[int, CellDraws]) -> None:
        for counter, found in zip((picks, stops), batch_rules.choose(batch, p)):
            values, counts = np.unique(found, return_counts=True)
            counter.update({None if v == batch_rules.NONE else int(v): int(n) for v, n in zip(values, counts)})

    judge(draws)
    total = p.resamples
    # the extra draws count for the share only: every stage keeps `resamples` draws, index-aligned (knee)
    while straddles(picks[chosen], total, p) and total < MAX_RESAMPLE_FACTOR * p.resamples:
        more = min(total, MAX_RESAMPLE_FACTOR * p.resamples - total)
        judge(draw_stats(prepared, more, rng, noise_by_k, lives))
        total += more
    shares = {k: n / total for k, n in picks.items()}
    lives_by_k = {k: len(cell.windows) for k, cell in prepared.items()}
    off = off_earlier({k: s.objective(p.objective) for k, s in stats.items()}, lives_by_k, noise_by_k,
                      earlier_at(p, users), p.interval_level)
    stage = StageEval(users, prepared, stats, draws, pooled, base_k, checks, stopped, chosen, shares,
                      stop_share=stops[stopped] / total, noise=noise, noise_by_k=noise_by_k, resamples=total,
                      share_range=wilson(picks[chosen], total, p.interval_level), stop_gaps=rules.stop_gaps(stats),
                      off_earlier=off)
    stage.status, stage.why_not_decided = _status(stage, p)
    return stage


def straddles(wins: int, total: int, p: DecisionConfig) -> bool:
    """Whether the Monte Carlo interval of a share reaches across the confidence threshold."""
    bounds = wilson(wins, total, p.interval_level)
    return bounds.low < p.confidence <= bounds.high


def _status(stage: StageEval, p: DecisionConfig) -> tuple[str, list[str]]:
    if stage.pick is None:
        return "no_eligible", []
    if len(stage.stats) < 2:
        return "not_decided", [f"only K={stage.pick} has a valid window at {stage.users} users: nothing to compare "
                               "it with (measure another K there; an invalid window says why it does not count)"]
    mine = stage.stats[stage.pick].objective(p.objective)
    better = [k for k, s in stage.stats.items() if k == stage.pick or
              (s.objective(p.objective) > mine * (1 + p.tie_tolerance_frac) and not stage.blocked_by(k))]
    # any unknown gate, too little data or not measured alike: what was not measured never passes
    why = [f"K={k}'s {c.name} is unknown ({c.unknown_because}): {c.evidence}"
           for k in better for c in stage.unknown_gates(k) if c.unknown_because != "not measured"]
    unmeasured: dict[tuple[str, str], list[int]] = {}
    for k in better:
        for c in stage.unknown_gates(k):
            if c.unknown_because == "not measured":  # the same missing metric: said once, for every K it hits
                unmeasured.setdefault((c.name, c.evidence.split(" (read: ")[0]), []).append(k)
    why[:0] = [f"{' and '.join(f'K={k}' for k in ks)}: {name} is unknown (not measured): {text}"
               for (name, text), ks in unmeasured.items()]
    if stage.noise.source == "none":
        why.append(f"at {stage.users} users the {stage.noise.text()}")
    # a life the spread does not describe: the share, drawn with that spread, cannot say how sure the verdict is
    why += [f"K={k}'s one life reads {deviation:+.0%} off the level earlier runs on this server measured for it, more "
            f"than the restart spread explains: an outlier life? one more life of K={k} would tell"
            for k, deviation in sorted(off_earlier_held(stage, p).items())]
    share, bounds = stage.shares.get(stage.pick, 0.0), stage.share_range
    if stage.noise.restart_unknown and share < p.confidence:
        why.append(restart_unknown_text(stage.noise, stage.base_k, p))
    shortfall = share_shortfall(stage.pick, share, stage.resamples, bounds, p)
    return ("not_decided" if why or shortfall else "decided"), why + ([shortfall] if shortfall else [])


def _verdict_hangs_on(stage: StageEval, k: int, p: DecisionConfig) -> bool:
    """Whether a K whose one life reads off its earlier level could change the verdict: the pick, the baseline (every
    gate's reference), or a K within the tie band of the pick at its better reading (this life's or the level's: the
    one its second life would confirm); a K behind beyond the band at both is behind whichever its life is."""
    if stage.pick is None or k in (stage.pick, stage.base_k):   # no pick: what it hangs on is not known
        return True
    earlier = earlier_at(p, stage.users)
    if earlier is None or str(k) not in earlier.levels or k not in stage.stats:
        return True
    best = max(stage.stats[k].objective(p.objective), earlier.levels[str(k)])
    return best * (1 + p.tie_tolerance_frac) >= stage.stats[stage.pick].objective(p.objective)


def off_earlier_held(stage: StageEval, p: DecisionConfig) -> dict[int, float]:
    """The K of `stage.off_earlier` the verdict hangs on (`_verdict_hangs_on`): it waits for their second lives, and
    the sweep (repeats_wanted, the adaptive chooser) asks for them; the others it asks for nothing."""
    return {k: deviation for k, deviation in stage.off_earlier.items() if _verdict_hangs_on(stage, k, p)}


def share_shortfall(pick: int, share: float, resamples: int, bounds: Bounds, p: DecisionConfig) -> str:
    """Why the leader's share of resamples does not decide at `p.confidence`: its Monte Carlo interval (`bounds`)
    straddles the threshold, or the share is below it; "" where the interval clears it. The words every verdict
    uses (the users stage's, the arrival rate's)."""
    if bounds.low is not None and bounds.low < p.confidence <= bounds.high:
        return (f"K={pick} wins in {share:.1%} of {resamples} resamples, within their Monte Carlo error of the "
                f"{p.confidence:.0%} threshold ([{bounds.low:.1%}, {bounds.high:.1%}])")
    if share < p.confidence:
        return f"K={pick} wins in {share:.1%} of {resamples} resamples (needs {p.confidence:.0%})"
    return ""


def held_back_by_the_share_alone(stage: StageEval, p: DecisionConfig) -> bool:
    """Whether the stage would be decided if its leader won every resample: only the share holds it back (no
    unknown gate, its noise measured or assumed, the Monte Carlo error aside)."""
    if stage.pick is None or stage.status == "decided":
        return False
    won = replace(stage, shares={**stage.shares, stage.pick: 1.0}, share_range=Bounds(1.0, 1.0))
    return _status(won, p)[0] == "decided"


def tie_confidence(stage: StageEval, p: DecisionConfig, bar: float) -> float | None:
    """A tie told by equivalence at `bar`, and how sure: where the leader is the smallest K in the running and
    every other K (no gate failing, below the stop) has its resampled gain over the leader inside the tie band on
    both sides in at least `bar` of the resamples (two one-sided tests per K: its 1 - bar and bar quantiles within
    +-decision.tie_tolerance_frac), the least of those one-sided shares; else None. Each K tested at `bar` alone is
    enough (intersection-union): "keep the smallest K" is wrong only where some K truly gains more than the band,
    and that K's own test lets it through at most 1 - bar of the time."""
    least = tie_share(stage, p)
    return least if least is not None and least >= bar else None


def tie_share(stage: StageEval, p: DecisionConfig) -> float | None:
    """The least one-sided share of `tie_confidence`'s tests, whatever the bar; None where no tie can be told (the
    leader is not the smallest K in the running, no rival, a rival without two finite gains)."""
    leader = stage.pick
    rivals = [k for k in stage.ks if k != leader and not stage.blocked_by(k)
              and (stage.stopped_at is None or k < stage.stopped_at)]
    if leader is None or not rivals or leader > min(rivals):
        return None
    least = 1.0
    for k in rivals:
        gains = stage.relative_draws(k, leader, p.objective)
        finite = np.isfinite(gains)   # a draw with no finite gain is outside the band, never left out of the share
        if finite.sum() < 2:
            return None
        least = min(least, float(np.mean(finite & (gains < p.tie_tolerance_frac))),
                    float(np.mean(finite & (gains > -p.tie_tolerance_frac))))
    return least


def restart_unknown_text(noise: ThroughputNoise, base_k: int, p: DecisionConfig) -> str:
    """Why one life per K decides only a large gain: the restart spread it assumes, and the gain that clears it."""
    up, down = single_life_gains(noise.restart_sd, p.confidence, p.tie_tolerance_frac)
    return (f"one life per K: restart spread unknown (taken as {noise.restart_sd:.0%} per server life: at "
            f"{p.confidence:.0%} a single-life gain over K={base_k} must be about {up:+.0%} to set a K, or about "
            f"{down:+.0%} to keep K={base_k})")


def gain_bounds(stage: StageEval, k: int, other: int, p: DecisionConfig) -> Bounds:
    """K's gain over `other`, at the level of the look the sweep stopped at where it looked (engine.verdict_at_end)."""
    return interval(stage.relative_draws(k, other, p.objective), p.reported_interval_level)
