"""The adaptive sweep's loop (sweep.strategy = "adaptive"): ask the chooser (decision/adaptive.py) for as many lives as
the pool (life_pool.py) has free slots, on the verdict at the users target (standing.standing_of) or, with rate
stages only, at the target rate (decision/rate_standing.py), write them to plan.json, start them as real server
lives (same readiness and memory rules as the grid), and ask again each time one ends, the lives in flight counted,
until the chooser stops with none in flight; the stop and its reason go to plan.json's "adaptive". Here the pool
runs one life at a time; on a Ray cluster one per slot, in parallel. At a rate with an SLO, where the chooser
would stop because the verdict hangs on a capacity within the SLO that the rates measured leave open (no life at
them could settle it), the loop runs capacity probes instead, one at a time (`capacity_probe`: probes.py and
decision/capacity/separate.py choose the rate; purpose "capacity" in plan.json): they are not the verdict's lives
(its looks and cap count those), and may add cost.capacity_probes lives beside them; once none is left to run,
the verdict is read again with lives at the rate wanted where they could still settle it.

plan.json starts with no lives; each life chosen is appended before it starts (with the stages it runs
when it runs a subset: a repeat runs the target stage alone, its users in `stages`, at a rate its rate in `rates`;
and why it was chosen), so --resume reruns a life cut half-way with the same stages
(the lives cut on a cluster in parallel again), keeps every life done, and the chooser carries on from the
windows measured: the same evidence gives the same next choice. The decision is made at the end by the
decision engine on the measured windows, as for the grid; the model (when there is a trusted one) only chooses
what to measure.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path

from ...decision.adaptive import CAPACITY_STOP, Budget, Choice, ModelView, Prediction, Spent, choose_batch, first_k
from ...decision.capacity.search import Probe
from ...decision.cells.rate_cell import same_rate
from ...decision.engine import early_look
from ...decision.cells.stats import single_life_gains
from ...decision.rate_standing import standing_at_rate, valid_lives_at_rate
from ...decision.standing import Standing, standing_of, valid_lives
from ...config import ResolvedServer, SweepConfig
from ...runfolder.cost import capacity_probes, grid_lives, life_costs
from ...runfolder.price import default_max_lives, looks_of
from ...runfolder.read import read_run
from ..verdict.finalize import write_tables
from ..life.launch import Life, append_to_plan
from .life_pool import LifePool, drain
from .probes import probe_stage, verdict_probe
from ..verdict.perfmodel_run import fit_run
from ..verdict.rate_verdict import ended_over, windows_of
from ...runfolder.plan import (CAPACITY_PURPOSE, AdaptiveState, LifeStatus, Plan, PlannedLife, read_plan,
                               record_adaptive_stop)
from ...vllm.knob import Setting
from ...vllm.probe import Capabilities

MIN_LEADER_LIVES = 2


def start_plan(plan: Plan) -> Plan:
    """An adaptive plan.json: no lives yet (they are chosen one at a time), the stop not reached."""
    return plan.model_copy(update={"lives": [], "adaptive": AdaptiveState()})


def describe(config: SweepConfig, model: ModelView, slots: int | None = 1) -> str:
    """What an adaptive sweep will do, for --dry-run and its first line (`slots`: lives it can run at once; None: a
    Ray cluster's, not counted yet)."""
    ks = sorted(config.speculation.k)
    k, why = first_k(ks, model)
    minutes = (f", at most {config.sweep.max_server_minutes:g} server-minutes" if config.sweep.max_server_minutes
               else "")
    pace = ("as many lives at once as the Ray cluster has slots" if slots is None else "one life at a time"
            if slots <= 1 else f"up to {slots} lives at once (one per Ray slot)")
    rate = config.adaptive_rate
    chosen = f" ({why_default(config)})" if config.adaptive_by_default else ""
    bound = ("sweep.max_lives" if config.sweep.max_lives else
             f"{len(ks)} K x {max(2, config.load.planned_repeats)}, sweep.max_lives to change it")
    target = f"{config.target_users} users" if rate is None else f"{rate:g} req/s"
    stages = ("" if rate is None or len(config.load.stages) < 2 else
              f"; a K's first life runs every rate stage (the other rates place its capacity within the SLO), a "
              f"repeat runs the {rate:g} req/s stage alone")
    if probes := capacity_probes(config):
        stages += (f"; where the verdict hangs on a capacity within the SLO the rates leave open, up to {probes} "
                   "capacity probes beside those lives (a life of one rate stage at a rate between or beyond them)")
    return (f"adaptive sweep{chosen}: the baseline K={ks[0]} and {why}, then {pace} where the verdict at "
            f"{target} is least sure, until it is decided{stages} (at most {default_max_lives(config)} "
            f"server lives: {bound}{minutes}; sweep.strategy = \"grid\" would run {grid_lives(config)[0]}: each K x "
            "load.repeats)")


def why_default(config: SweepConfig) -> str:
    """Why the adaptive sweep is the default here: what one life per K (the grid's one repeat) could decide with the
    restart spread unknown, and how the adaptive sweep buys the spread instead; where earlier runs on this server
    measured it (the ledger, config.decision.earlier_spread), that it borrows theirs."""
    earlier = config.decision.earlier_spread
    if earlier is not None and config.adaptive_rate is None:   # the ledger's spread is borrowed at users stages
        runs = f"{earlier.runs} earlier run{'s' if earlier.runs != 1 else ''}"
        return (f"no sweep.strategy given, on a server whose restart spread the config does not state: the ledger "
                f"holds it from {runs} on this server ({earlier.rel_sd:.1%}), so no life is bought to measure it; a "
                "second life goes to an end of the verdict those runs hold no level for, to a life far off the "
                "level they measured, or to a K the verdict still hangs on")
    spread, _ = config.decision.restart_prior()
    up, down = single_life_gains(spread, config.decision.confidence, config.decision.tie_tolerance_frac)
    base = min(config.speculation.k)
    where = "rate stages " if config.adaptive_rate is not None else ""
    return (f"no sweep.strategy given, {where}on a server whose restart spread is unknown: one life per K would "
            f"decide only a gain over K={base} of about {up:+.0%} (or a loss of about {down:+.0%}), the spread taken "
            f"as {spread:.0%} per life; one repeated life measures it, then every K measured once borrows it")


def model_view(data, config: SweepConfig) -> ModelView:
    """The performance model (decision/perfmodel/model.py) fitted on the run so far, as the chooser sees it; at a
    rate it drives nothing (it predicts users stages)."""
    if config.adaptive_rate is not None:
        return ModelView(why_not="the performance model predicts users stages, not an arrival rate")
    if data is None or len(data.evidence().ks) < 2:
        return ModelView(why_not="fewer than two K measured")
    return view_of(fit_run(data.run_dir, data), config)


def view_of(model, config: SweepConfig) -> ModelView:
    """A fitted `PerformanceModel` as the chooser sees it: its objective at the target for every planned K (and
    its best K at decision.production_users), or why it drives nothing."""
    objective = config.decision.objective
    if objective not in PREDICTED:
        return ModelView(why_not=f"the model does not predict decision.objective = {objective!r}")
    if not model.trusted:
        reason = model.trust_reason
        return ModelView(why_not=f"the performance model is {reason}" if reason.startswith("not trusted")
                         else f"the performance model is not trusted: {reason}")
    field = PREDICTED[objective]
    predicted = {k: model.predict(k, config.target_users) for k in config.speculation.k}
    production = config.decision.production_users
    held = model.heldout_error_at(config.target_users)  # what a K is ruled out against (decision/perfmodel/prior.py)
    # leaving out a K cannot be undone, as the stop that skips larger K: it takes the early-stop bar's error
    level = 1 - early_look(config.decision).confidence
    return ModelView(True, {k: Prediction(getattr(p, field), getattr(p, f"{field}_low"), getattr(p, f"{field}_high"),
                                          p.preempting) for k, p in predicted.items()}, "",
                     model.best_k_at(production, config.speculation.k)[0] if production else None,
                     held.value, held.scope, UNIT[objective], held.errors, level)


PREDICTED = {"req_per_s": "requests_per_s", "output_tok_per_s": "output_tokens_per_s"}
UNIT = {"req_per_s": "req/s", "output_tok_per_s": "output tok/s"}


def stages_of(config: SweepConfig, users: list[int] | None, rates: list[float] | None = None) -> SweepConfig:
    """The config a life runs: every stage, or the ones its plan entry lists (`users`: those user stages and every
    rate stage; `rates`: those rate stages alone, a rate no stage has as a capacity probe's, probes.probe_stage)."""
    if rates:
        stages = [next((stage for stage in config.load.rate_stages if same_rate(stage.rate, r)), None)
                  or probe_stage(config, r) for r in rates]
    elif users:
        stages = [stage for stage in config.load.stages if stage.is_rate or stage.users in users]
    else:
        return config
    return config.model_copy(update={"load": config.load.model_copy(update={"stages": stages})})


def spent_so_far(plan_lives: list[PlannedLife], statuses: dict[str, LifeStatus], valid: dict[int, int],
                 in_flight: list[Life] = (), probes_apart: bool = False) -> Spent:
    """The lives ended (from their status.json), and those in flight per K; `probes_apart`: the verdict's lives
    alone (a capacity probe's server-seconds counted, not the life: probes have their own allowance,
    cost.capacity_probes)."""
    probes = {entry.dir for entry in plan_lives if entry.purpose == CAPACITY_PURPOSE} if probes_apart else set()
    costs = [c for c in life_costs(plan_lives, statuses) if not c.confirm]
    lives: dict[int, int] = {}
    for c in costs:
        if c.life not in probes:
            lives[c.k] = lives.get(c.k, 0) + 1
    seconds = [c.start_s + c.measure_s for c in costs]
    return Spent(lives, valid, sum(seconds), sum(seconds) / len(seconds) if seconds else 0.0,
                 dict(Counter(life.setting.k for life in in_flight)))


def next_life(plan_lives: list[PlannedLife], config: SweepConfig, k: int) -> Life:
    """K's next repeat number in this run."""
    repeats = [l.repeat for l in plan_lives if l.k == k and not l.confirms]
    return Life(Setting(k, config.speculation.raw_lookahead_slots), max(repeats) + 1 if repeats else 0)


def standing_now(data, config: SweepConfig, early_stop: bool, looks, probing: bool = True
                 ) -> tuple[Standing, dict[int, int]]:
    """The verdict the chooser reads on the run so far, and per K its lives with a valid window where it is made:
    at the users target, or with rate stages only at the target rate (every rate's windows: the other rates place
    each K's capacity within the SLO; `probing`: a capacity probe may still run, rate_standing.standing_at_rate)."""
    rate = config.adaptive_rate
    if rate is None:
        evidence = data.evidence()
        return (standing_of(evidence, config.decision, early_stop, looks),
                valid_lives(evidence, config.target_users))
    windows = windows_of(data)
    over = ended_over(data.plan.sweep_lives(), data.statuses)
    return (standing_at_rate(windows, rate, config.decision, early_stop, looks, over=over, probing=probing),
            valid_lives_at_rate(windows, rate))


def capacity_probe(data, config: SweepConfig, standing: Standing, budget: Budget, valid: dict[int, int],
                   in_flight) -> Probe:
    """The next capacity probe where the verdict at the rate hangs on the capacity within the SLO of the K at stake
    (`standing.capacity_open`) against the leader's (probes.verdict_probe), or why none. By default the probes have
    an allowance of their own beside the verdict's lives (cost.capacity_probes); a given sweep.max_lives caps
    every life, probes too. sweep.max_server_minutes holds for all."""
    lives = data.plan.sweep_lives()
    every = spent_so_far(lives, data.statuses, valid, in_flight)
    allowance = capacity_probes(config)
    if allowance:   # the probes' own count, every life's server-minutes
        run = Counter(entry.k for entry in lives if entry.purpose == CAPACITY_PURPOSE)
        spent = replace(every, lives=dict(run), pending={})
        budget, named = replace(budget, max_lives=allowance), "the capacity probes' allowance"
    else:
        spent, named = every, "sweep.max_lives"
    probe = verdict_probe(data, config, standing.leader, standing.capacity_open, spent, budget, named)
    if probe.k is None:
        return replace(probe, why=f"the capacity probes: {probe.why}")
    return replace(probe, why=f"K={probe.k} at {probe.rate:g} req/s, a capacity probe (K="
                              f"{', '.join(map(str, standing.capacity_open))}'s capacity within the SLO could set it "
                              f"over K={standing.leader}): {probe.why}")


def start_probe(probe, config: SweepConfig, caps: Capabilities, run_dir: Path, server: ResolvedServer,
                pool: LifePool, say, announce, model_trust: str) -> None:
    """A capacity probe's life: written to plan.json (its one rate in `rates`, purpose "capacity") and run; wait
    for it, its windows decide what follows."""
    life = next_life(read_plan(run_dir).sweep_lives(), config, probe.k)
    append_to_plan(config, caps, run_dir, [life], server, rates=[probe.rate], chosen=probe.why,
                   model_trust=model_trust, purpose=CAPACITY_PURPOSE)
    say(f"adaptive: next {life.key}: {probe.why}")
    announce(life, stages_of(config, None, [probe.rate]).load.stages)
    pool.submit(stages_of(config, None, [probe.rate]), life)
    if pool.in_flight():
        pool.wait()


def run_adaptive(config: SweepConfig, caps: Capabilities, run_dir: Path, say, pool: LifePool, server: ResolvedServer,
                 early_stop: bool = True, announce=lambda life, stages: None) -> Choice:
    """Choose and run lives until the chooser stops with none in flight; returns its last choice (the stop and why).

    `pool` runs the lives (a life done earlier is kept); `announce(life, stages)` tells the progress display a
    life is coming."""
    budget = Budget(default_max_lives(config),
                    config.sweep.max_server_minutes * 60 if config.sweep.max_server_minutes else None)
    ks, target, looks = sorted(config.speculation.k), config.target_users, looks_of(config)
    rate = config.adaptive_rate
    for entry in read_plan(run_dir).sweep_lives():  # a resumed run: the lives chosen before, on every free slot
        life = Life(Setting(entry.k, config.speculation.raw_lookahead_slots), entry.repeat)
        announce(life, stages_of(config, entry.stages, entry.rates).load.stages)
        while not pool.free():
            pool.wait()
        pool.submit(stages_of(config, entry.stages, entry.rates), life)
    said_model = None
    # bounded: each round starts a life or waits for one to end, and the budget stops the lives first
    for _ in range(2 * (budget.max_lives + len(ks) * MIN_LEADER_LIVES) + capacity_probes(config) + 1):
        data = read_run(run_dir)
        model = model_view(data, config)
        if said_model != model.trusted:  # at the start, and whenever the model's trust changes
            say("adaptive: the performance model is trusted: it chooses which K not run yet could be the best" if
                model.trusted else f"adaptive: {model.why_not}: a K not run yet is run when it lies between the K "
                "measured around the leader (the objective taken to rise, then fall with K), in grid order")
            said_model = model.trusted
        standing, valid = standing_now(data, config, early_stop, looks)
        spent = spent_so_far(data.plan.sweep_lives(), data.statuses, valid, pool.in_flight(),
                             probes_apart=capacity_probes(config) > 0)
        batch = choose_batch(pool.free(), ks, standing, spent, model, budget, config.load.max_repeats,
                             MIN_LEADER_LIVES, config.decision.tie_tolerance_frac)
        probes_stopped = None
        if batch.ends_sweep and batch.reason.purpose == CAPACITY_STOP:
            # the verdict at the rate hangs on a capacity the rates measured leave open: a probe between them
            probe = capacity_probe(data, config, standing, budget, valid, pool.in_flight())
            if probe.k is not None:
                start_probe(probe, config, caps, run_dir, server, pool, say, announce, model.why_not)
                continue
            # none left to run: the verdict read again as if none could, lives at the rate may still settle it
            probes_stopped = probe
            standing, valid = standing_now(data, config, early_stop, looks, probing=False)
            batch = choose_batch(pool.free(), ks, standing, spent, model, budget, config.load.max_repeats,
                                 MIN_LEADER_LIVES, config.decision.tie_tolerance_frac)
        if len(batch.lives) > 1:
            say(f"adaptive: {len(batch.lives)} lives at once on {pool.slots} slots")
        for choice in batch.lives:
            life = next_life(read_plan(run_dir).sweep_lives(), config, choice.k)
            # a repeat runs the target stage alone: its users, or at a rate its rate
            users = None if choice.all_stages or rate is not None else [target]
            rates = None if choice.all_stages or rate is None else [rate]
            append_to_plan(config, caps, run_dir, [life], server, stages=users, rates=rates, chosen=choice.why,
                           model_trust="trusted" if model.trusted else model.why_not, purpose=choice.purpose)
            say(f"adaptive: next {life.key}: {choice.why}")
            announce(life, stages_of(config, users, rates).load.stages)
            pool.submit(stages_of(config, users, rates), life)
        if pool.in_flight():
            pool.wait()  # its windows may change the next choice, or a stop
        elif batch.ends_sweep:
            choice = batch.reason
            if probes_stopped is not None:
                choice = replace(choice, why=f"{choice.why}; {probes_stopped.why}",
                                 stop="budget" if probes_stopped.stop == "budget" else choice.stop)
            break
    else:
        choice = Choice(None, why="the loop's own bound was reached", stop="budget")
    drain(pool)  # the bound may leave a life running
    record_adaptive_stop(run_dir, choice.why, choice.stop, choice.skipped)
    write_tables(run_dir)
    say(f"adaptive: stopped: {choice.why}")
    return choice
