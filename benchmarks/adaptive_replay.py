"""The adaptive sweep replayed over a grid recording, for benchmarks/decision_accuracy.py.

A replay, not a new measurement: the recording holds every K x N same-server repeats at the target. Each
trial draws an order of every K's recorded repeats; the grid's verdict is the decision on the first two of
each (the demo's grid), the adaptive one is what the product's chooser (lookahead_runner/decision/adaptive.py, the
same code `sweep.strategy = "adaptive"` runs) reaches when each life it asks for is revealed from the
recording in that order: the next repeat of the K it names, or it stops (decided, budget, nothing left;
"recording exhausted" when it asks for more repeats of a K than were recorded). Both verdicts are made by
the decision engine on the windows revealed. A revealed life is priced at its recorded start (the K's
server life: start_s, else ready_s, as status.json has it) plus its recorded load (measure_s, else the
stage's planned seconds), and again at a GPU-like start (--start-s) plus the same load. The grid's budget
caps the adaptive sweep: never more lives than the grid it is compared with. The performance model is fitted
on the windows revealed so far, as the product fits it on the lives run (with every recorded life's
per-position acceptance of a K revealed, where the recording has it).

What the server's restart spread is taken to be (`SPREAD_MODES`): "as-recorded", the recording's own config (the
simulator's documented spread, each K's repeats on one server life); "unknown", every repeat a restarted life on a
server whose spread nothing states (as real vLLM's: the chooser buys it with repeats, the baseline never spared);
"ledger", the same server with the spread earlier runs on it measured: the ledger entry is made, through the product's
own ledger code (runfolder/spread_ledger.earlier_from: ledger_run, with_run, earlier_of), from a decision on the
lives this trial does NOT reveal (each K's recorded repeats after the first GRID_REPEATS of the drawn order, as an
earlier grid run on this server would have measured them), and this trial's grid and adaptive sweep both see it
(the product reads it for either where the fingerprint matches); the adaptive sweep then draws only from the first
GRID_REPEATS of each K, as the grid does ("recording exhausted" where it asks a third).
`floor` is the fewest lives the chooser can stop at in a mode: every K once (the model-free rule runs every K
the leader, the best K no gate fails at the whole recording's point, could be beaten by; a trusted model may rule
some out, which the replay counts apart) and the repeats its stop rule needs before any stop (`floor_repeats`),
priced as the replay prices lives.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from lookahead_runner.decision.adaptive import (Budget, Choice, ModelView, Spent, _baseline_spared, _nearest_rival,
                                                _rival_spared, choose, could_win, first_k)
from lookahead_runner.decision.standing import Standing, standing_of, valid_lives
from lookahead_runner.config import SweepConfig
from lookahead_runner.decision import Decision, Evidence, decide
from lookahead_runner.decision.engine import verdict_at_end
from lookahead_runner.decision.gates.looks import Looks
from lookahead_runner.runfolder.price import FIRST_LOOK_LIVES
from lookahead_runner.runfolder.plan import LifeStatus, PlannedLife
from lookahead_runner.runfolder.spread_ledger import earlier_from

GRID_REPEATS = 2
SPREAD_MODES = ("as-recorded", "unknown", "ledger")


@dataclass(frozen=True)
class Price:
    start_s: float      # measured (the K's recorded start)
    measure_s: float    # measured (one repeat's load)
    lower_stages_s: float = 0.0   # measured: the load of the stages below the target, where a life runs them


def prices(plan_lives: list[PlannedLife], statuses: dict[str, LifeStatus], config: SweepConfig) -> dict[int, Price]:
    """Per K: its recorded server start and one repeat's recorded load."""
    planned_load = sum(stage.duration_s for stage in config.load.stages)
    out = {}
    for life in plan_lives:
        status = statuses.get(life.dir)
        if life.k in out or status is None:
            continue
        start = status.start_s if status.start_s is not None else status.ready_s
        if start is not None:
            out[life.k] = Price(float(start), float(status.measure_s or planned_load))
    return out


def with_lower_stages(price: dict[int, Price], first_lives: dict[int, Price]) -> dict[int, Price]:
    """Each K's price with the load its first-lives recording measured below the target."""
    return {k: replace(p, lower_stages_s=first_lives[k].measure_s if k in first_lives else 0.0)
            for k, p in price.items()}


def with_lower(seen: Evidence, lower: Evidence) -> Evidence:
    """The windows revealed, and the lower stages of every K among them (its first life ran them)."""
    extra = {(k, users): cell for (k, users), cell in lower.cells.items() if k in seen.ks}
    return Evidence({**extra, **seen.cells}, seen.target_users) if extra else seen


@dataclass(frozen=True)
class Replayed:
    revealed: dict[int, list[int]]   # per K, the repeats the chooser asked for, in order
    stop: str                        # decided | budget | exhausted | futile | recording exhausted
    why: str
    trusted_steps: int = 0           # choices made with the performance model trusted
    steps: int = 0

    @property
    def lives(self) -> int:
        return sum(len(r) for r in self.revealed.values())


def looks_for(config: SweepConfig, max_lives: int) -> Looks:
    """The adaptive sweep's looks (runfolder/price.looks_of) with the replay's cap of lives."""
    return Looks(FIRST_LOOK_LIVES, max_lives, 1 - config.decision.confidence, "lives")


def replay(evidence: Evidence, order: dict[int, list[int]], config: SweepConfig, price: dict[int, Price],
           max_lives: int, model_of: Callable[[Evidence], ModelView] = lambda seen: ModelView(),
           fixed_bar: bool = False) -> Replayed:
    """The chooser run over the recording: each life it asks for is the next recorded repeat of that K.
    `model_of(windows revealed)` is the performance model as the chooser sees it (the product fits it the same way).
    Each life a look judged by the error-spending rule (decision/gates/looks.py, as the product's sweep judges it);
    `fixed_bar`: by the fixed 99 % early-stop bar instead (the rule before issue 49), for a comparison."""
    ks, p, target = sorted(order), config.decision, config.target_users
    looks = None if fixed_bar else looks_for(config, max_lives)
    revealed: dict[int, list[int]] = {k: [] for k in ks}
    trusted = 0
    for step in range(max_lives + 1):
        seen = evidence.subset(revealed)
        seconds = [price[k].start_s + price[k].measure_s for k, rs in revealed.items() for _ in rs if k in price]
        spent = Spent({k: len(r) for k, r in revealed.items() if r}, valid_lives(seen, target), sum(seconds),
                      float(np.mean(seconds)) if seconds else 0.0)
        model = model_of(seen) if len(seen.ks) >= 2 else ModelView(why_not="fewer than two K measured")
        trusted += model.trusted
        choice: Choice = choose(ks, standing_of(seen, p, looks=looks), spent, model, Budget(max_lives),
                                config.load.max_repeats, 2, p.tie_tolerance_frac)
        if choice.k is None:
            return Replayed(revealed, choice.stop, choice.why, trusted, step + 1)
        left = [r for r in order[choice.k] if r not in revealed[choice.k]]
        if not left:
            return Replayed(revealed, "recording exhausted", f"asked for more repeats of K={choice.k} than recorded",
                            trusted, step + 1)
        revealed[choice.k].append(left[0])
    return Replayed(revealed, "budget", "the replay's bound", trusted, max_lives + 1)


def decide_replayed(evidence: Evidence, revealed: dict[int, list[int]], config: SweepConfig, max_lives: int,
                    fixed_bar: bool = False) -> Decision:
    """The verdict on the lives the adaptive sweep revealed, as the product's finalize judges it: at the bar of
    the look it stopped at (engine.verdict_at_end); `fixed_bar`: at decision.confidence (the rule before)."""
    seen = evidence.subset(revealed)
    looks = None if fixed_bar else looks_for(config, max_lives)
    p, stop, tie_bar = verdict_at_end(seen, config.decision, looks)
    decision = decide(seen, p, {}, tie_bar=tie_bar)
    decision.looks = stop
    return decision


def grid_subset(order: dict[int, list[int]]) -> dict[int, list[int]]:
    return {k: r[:GRID_REPEATS] for k, r in order.items()}


def restarted(config: SweepConfig) -> SweepConfig:
    """The config with every recorded repeat a restarted life on a server whose restart spread nothing states (as
    real vLLM's "auto"): modes "unknown" and "ledger"."""
    return config.model_copy(update={"decision": config.decision.model_copy().for_server("vllm")})


def with_earlier_run(config: SweepConfig, evidence: Evidence, earlier_lives: dict[int, list[int]]
                     ) -> SweepConfig | None:
    """`config` (restarted) with the spread an earlier run on this server measured, as the product's ledger hands it
    over: that run is `earlier_lives` (repeats per K) of `evidence`, decided by the engine, its spread and levels
    kept and read back by the ledger's own code (earlier_from). None where that run measured no spread."""
    earlier_run = decide(evidence.subset(earlier_lives), config.decision, {})
    earlier = earlier_from(earlier_run, config.target_users, config.target_users)
    if earlier is None:
        return None
    return config.model_copy(update={"decision": config.decision.model_copy().with_earlier(earlier)})


def with_ledger(config: SweepConfig, evidence: Evidence, order: dict[int, list[int]]) -> SweepConfig:
    """`with_earlier_run` on each K's lives after the first GRID_REPEATS of `order` (none of which this trial
    reveals)."""
    ledgered = with_earlier_run(config, evidence, {k: r[GRID_REPEATS:] for k, r in order.items()})
    if ledgered is None:   # the trial would run as "unknown" under the ledger's name
        raise ValueError(f"--adaptive-spread ledger: the lives after the first {GRID_REPEATS} of each K measured no "
                         f"restart spread; record at least --repeats {GRID_REPEATS + 2}")
    return ledgered


def rule_pick(levels: dict[int, float], tie: float, eligible: frozenset[int] | None = None) -> int | None:
    """The K the verdict names at these levels: the smallest within the tie band of the best (price.hardest_margin)
    among the `eligible` (None: every K; a K a gate fails or beyond the stop is measured but never named)."""
    named = {k: v for k, v in levels.items() if eligible is None or k in eligible}
    if not named:
        return None
    best = max(named.values())
    return min(k for k, v in named.items() if v >= best / (1 + tie))


def floor_ks(ks: list[int], levels: dict[int, float], tie: float, eligible: frozenset[int] | None = None) -> list[int]:
    """The K the chooser must run before a stop at these levels without a trusted model (noise-free: the leader is
    the rule's pick and the only K in the running): the baseline, the middle of the grid, then every K not run that
    the model-free bracket keeps (adaptive.could_win), one at a time."""
    ks = sorted(ks)
    run = [ks[0], first_k(ks, ModelView())[0]]
    while True:
        pick = rule_pick({k: levels[k] for k in run}, tie, eligible)
        standing = Standing("decided" if pick is not None else "no_eligible", pick,
                            {} if pick is None else {pick: 1.0}, {k: levels[k] for k in run}, contender_share=0.5)
        hopeful, _ = could_win(ks, standing, Spent({k: 1 for k in run}, {k: 1 for k in run}), ModelView(), tie)
        if not hopeful:
            return sorted(run)
        run.append(hopeful[0])


def floor_repeats(mode: str, levels: dict[int, float], tie: float, eligible: frozenset[int] | None = None) -> list[int]:
    """The K (of those in `levels`, the floor's) whose second life the chooser's stop rule needs before any stop
    (adaptive._next's `ends`): none with the ledger's spread and a level of every K in it; otherwise the leader and
    the baseline (where the baseline leads: it and its nearest rival), the baseline (rival) spared only where the
    spread is stated ("as-recorded": the simulator's) and the leader is so far ahead that a life at half its figure
    could not turn the verdict."""
    base, pick = min(levels), rule_pick(levels, tie, eligible)
    if mode == "ledger" or pick is None:   # no K eligible: the chooser stops "exhausted", no repeat asked
        return []
    standing = Standing("decided", pick, {pick: 1.0}, levels, spare_baseline=mode == "as-recorded",
                        contender_share=0.5)
    if pick == base:
        rival = _nearest_rival(standing, base)
        spared = rival is None or (standing.spare_baseline and _rival_spared(standing, rival, tie))
        return sorted({base} | (set() if spared else {rival}))
    spared = standing.spare_baseline and _baseline_spared(standing, base, tie)
    return sorted({pick} | (set() if spared else {base}))


def floor_lives(ks: list[int], levels: dict[int, float], tie: float, mode: str,
                eligible: frozenset[int] | None = None) -> dict[int, list[int]]:
    """The floor as lives per K (positions 0, 1: priced by `server_seconds` as a first life and a repeat)."""
    run = floor_ks(ks, levels, tie, eligible)
    again = floor_repeats(mode, {k: levels[k] for k in run}, tie, eligible)
    return {k: [0, 1] if k in again else [0] for k in run}


def floor_of(decision: Decision, ks: list[int], tie: float, mode: str) -> dict[int, list[int]] | None:
    """The floor at a whole recording's decision: its levels, and the K its verdict may name, those no gate fails at
    its point and below its stop (a K a gate fails still bounds the bracket, as the chooser's measured K do); None
    where a K has no level."""
    levels = {c.k: c.objective for c in decision.candidates if math.isfinite(c.objective)}
    if set(levels) != set(ks):
        return None
    eligible = frozenset(c.k for c in decision.candidates if not c.blocked_by and not c.beyond_stop)
    return floor_lives(ks, levels, tie, mode, eligible)


def orders(recorded: dict[int, list[int]], count: int, rng: np.random.Generator) -> list[dict[int, list[int]]]:
    """`count` draws of an order of every K's recorded repeats."""
    return [{k: [int(x) for x in rng.permutation(r)] for k, r in sorted(recorded.items())} for _ in range(count)]


def server_seconds(revealed: dict[int, list[int]], price: dict[int, Price], start_s: float | None = None,
                   every_life_all_stages: bool = False) -> float:
    """Measured (start_s None) or priced at a start of `start_s` seconds. The lower stages are run by every life
    of a grid, by the first of each K in an adaptive sweep (its repeats run the target stage alone)."""
    return sum((price[k].start_s if start_s is None else start_s) + price[k].measure_s
               + (price[k].lower_stages_s if every_life_all_stages or i == 0 else 0.0)
               for k, rs in revealed.items() for i in range(len(rs)) if k in price)


def saving(grid: float, adaptive: float) -> float | None:
    return round(float(1 - adaptive / grid), 3) if grid else None


def _share(hits: int, n: int) -> dict:
    return {"n": hits, "of": n, "share": round(hits / n, 3) if n else None}


def summary(pairs: list[tuple], price_rows: list[tuple[float, float, float, float, int, int]],
            model_steps: tuple[int, int] = (0, 0)) -> dict:
    """pairs: (grid Verdict, adaptive Verdict, stop); price_rows: (grid s, adaptive s, grid priced, adaptive
    priced, grid lives, adaptive lives[, floor s, floor priced, floor lives, K the adaptive sweep ran]) per trial;
    model_steps: (choices with the model trusted, all choices)."""
    n = len(pairs)
    if len({len(row) for row in price_rows}) > 1:   # a scenario without a floor among them: no floor in the total
        price_rows = [row[:6] for row in price_rows]
    agree = sum(g.label == a.label for g, a, _ in pairs)
    both = [(g, a) for g, a, _ in pairs if g.status == "decided" and a.status == "decided"]
    rows = np.array(price_rows, dtype=float) if price_rows else np.zeros((0, 6))
    total = rows.sum(axis=0) if len(rows) else np.zeros(6)
    floor = {} if rows.shape[1] < 10 else {"floor": {
        "lives": int(total[8]), "lives_saving": saving(total[4], total[8]),
        "server_s_measured_saving": saving(total[0], total[6]), "server_s_priced_saving": saving(total[2], total[7]),
        "adaptive_lives_beyond_floor": {str(int(d)): c for d, c in sorted(Counter(rows[:, 5] - rows[:, 8]).items())},
        "adaptive_ks_run": {str(int(d)): c for d, c in sorted(Counter(rows[:, 9]).items())}}}
    return floor | {
        "trials": n, "verdict_equals_grid": _share(agree, n),
        "both_decided_same_k": {"n": sum(g.k == a.k for g, a in both), "of": len(both)},
        "where_grid_decided_same_k": _share(sum(g.k == a.k for g, a in both), sum(g.status == "decided" for g, _, _ in pairs)),
        "adaptive_decided_grid_not": sum(g.status != "decided" and a.status == "decided" for g, a, _ in pairs),
        "grid_decided_adaptive_not": sum(g.status == "decided" and a.status != "decided" for g, a, _ in pairs),
        "adaptive_confident_wrong": sum(a.status == "decided" and a.outcome == "wrong" for _, a, _ in pairs),
        "stops": dict(Counter(stop for _, _, stop in pairs).most_common()),
        "choices_with_the_model_trusted": _share(*model_steps),
        "lives": {"grid": int(total[4]), "adaptive": int(total[5]), "saving": saving(total[4], total[5])},
        "server_s_measured": {"grid": round(total[0], 1), "adaptive": round(total[1], 1),
                              "saving": saving(total[0], total[1])},
        "server_s_priced": {"grid": round(total[2], 1), "adaptive": round(total[3], 1),
                            "saving": saving(total[2], total[3])},
    }
