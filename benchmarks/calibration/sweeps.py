"""One closed-loop trial decided the ways a sweep can decide it, each by the product's own code.

Claim: none of its own; it turns one trial's lives (lives.closed_loop_lives: five lives of each K drawn) into
the decisions the strategies would reach, for verdicts.py and intervals.py to score:
- grid x1: one life per K, the restart spread unknown (the product assumes 15 % and says so);
- grid x2: two restarted lives per K (the spread measured);
- ledger: one life per K, borrowing what the ledger gives this run of one earlier run on this server (lives.
  ledger_entry, selected by the product's spread_ledger.earlier_of: the same users and workload only): its spread,
  the part its windows' noise made, each K's level (the outlier check's reference); a ledger it does not take
  leaves the spread unknown, as grid x1;
- adaptive: the chooser of decision/adaptive.py replayed over the lives (benchmarks/adaptive_replay.py), each life
  a look judged at the error-spending rule's bar (decision/gates/looks.py), under the product's default budget;
- auto: load.repeats = "auto": two lives per K, then one more of each K the engine asks for
  (engine.auto_repeats_wanted, each round a look), up to load.max_repeats.
The adaptive and auto verdicts are judged at the bar of the look they stopped at (run/verdict/finalize.decide_looked);
the others at decision.confidence (one look).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace

import numpy as np

from benchmarks import adaptive_replay
from benchmarks.decision_scenarios import SPREAD_SCENARIOS, config_toml
from lookahead_runner.config import SweepConfig
from lookahead_runner.decision.adaptive import ModelView
from lookahead_runner.decision.schema import Decision
from lookahead_runner.run.strategies.adaptive_sweep import default_max_lives

from . import adapters
from .lives import KS, THIS_WORKLOAD, closed_loop_lives, ledger_entry
from .regimes import TIE, ClosedLoopRegime

STRATEGIES = ("grid x1", "grid x2", "ledger", "adaptive", "auto")


@dataclass(frozen=True)
class SweepTrial:
    regime: ClosedLoopRegime
    decisions: dict[str, Decision]
    lives: dict[str, int]            # lives each strategy ran (every K together)
    confidence: float = 0.9          # decision.confidence the verdicts were asked for (over all their looks)


def at_the_edge(r: ClosedLoopRegime) -> ClosedLoopRegime:
    """The regime with K=4's true gain at the tie band's edge (the worst truth of decision/gates/looks.py's claim:
    K=0 the truth there, K=4 at any gain past it), everything else as drawn."""
    return replace(r, gain=TIE, named=replace(r.named, factors={**r.named.factors, "gain": "edge"}))


def sweep_config(r: ClosedLoopRegime) -> SweepConfig:
    """A sweep of K 0 and 4 at the regime's users and window, restarted lives (what the replay reads)."""
    scenario = replace(SPREAD_SCENARIOS[0], users=r.users, ks=KS)
    config = SweepConfig.model_validate(tomllib.loads(config_toml(scenario, 2, r.window_s, 1.0)))
    config.decision.for_server(adapters.SERVER_KIND)
    return config


def _auto(ev, p, max_repeats: int, looks) -> dict[int, list[int]]:
    revealed = {k: [0, 1] for k in KS}
    for _ in range(len(KS) * max_repeats):
        wanted = [k for k in adapters.auto_repeats(ev.subset(revealed), p, looks) if len(revealed[k]) < max_repeats]
        if not wanted:
            break
        for k in wanted:
            revealed[k].append(len(revealed[k]))
    return revealed


def run_trial(r: ClosedLoopRegime, rng: np.random.Generator, strategies: tuple[str, ...] = STRATEGIES) -> SweepTrial:
    config = sweep_config(r)
    p = config.decision
    ev = adapters.users_evidence(closed_loop_lives(r, rng), r.users)
    shown: dict[str, dict[int, list[int]]] = {}
    if "grid x1" in strategies:
        shown["grid x1"] = {k: [0] for k in KS}
    if "grid x2" in strategies:
        shown["grid x2"] = {k: [0, 1] for k in KS}
    if "adaptive" in strategies:
        price = {k: adaptive_replay.Price(start_s=120.0, measure_s=r.window_s) for k in KS}
        order = {k: list(range(5)) for k in KS}
        replayed = adaptive_replay.replay(ev, order, config, price, default_max_lives(config),
                                          lambda seen: ModelView(why_not="two K: nothing to predict"))
        shown["adaptive"] = replayed.revealed
    looks = {"adaptive": adaptive_replay.looks_for(config, default_max_lives(config)),
             "auto": adapters.auto_looks(config)}   # each judged at the bar of the look it stopped at
    if "auto" in strategies:
        shown["auto"] = _auto(ev, p, config.load.max_repeats, looks["auto"])
    decisions = {name: adapters.decide_looked(ev.subset(revealed), p, looks.get(name))
                 for name, revealed in shown.items()}
    if "ledger" in strategies:
        borrowing = adapters.with_ledger(p, ledger_entry(r, rng, p.bin_min_s), r.users, THIS_WORKLOAD)
        shown["ledger"] = {k: [0] for k in KS}
        decisions["ledger"] = adapters.decide_users(ev.subset(shown["ledger"]), borrowing)
    return SweepTrial(r, decisions, {name: sum(map(len, revealed.values())) for name, revealed in shown.items()},
                      float(p.confidence))
