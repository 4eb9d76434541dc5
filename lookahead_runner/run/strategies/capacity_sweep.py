"""The capacity search's loop (sweep.strategy = "capacity"): every K once over the config's stages, then probes
chosen by decision/capacity/search.py, each a server life running one rate stage (as long as the config's
longest rate stage), until every K's capacity within the SLO is bracketed narrowly enough or a budget runs out
(sweep.max_lives, default 8 per K; sweep.max_server_minutes). A probe clearly over capacity ends early
(life/probe_watch.py). The stop and its reason go to plan.json's "adaptive", as the adaptive sweep's do.

plan.json starts with no lives; each is appended before it starts, a probe with its rate (`rates`), so --resume
reruns a probe cut half-way at the same rate, keeps every life done, and carries on from the windows measured:
the same evidence gives the same next probe. The capacities are estimated at the end from every rate window
(decision/capacity/estimate.py), the verdict at the target rate as for any sweep.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

from ...config import ResolvedServer, StageConfig, SweepConfig
from ...decision.adaptive import Budget
from ...decision.capacity.estimate import binding, of_k, slo_rate_points
from ...decision.capacity.search import RATE_REACH, Probe, next_probe
from ...runfolder.plan import read_plan, record_adaptive_stop
from ...runfolder.read import read_run
from ...vllm.probe import Capabilities
from ...workload.stages import MAX_STAGE_ARRIVALS
from .adaptive_sweep import next_life, spent_so_far
from ..verdict.finalize import write_tables
from ..life.launch import Life, append_to_plan
from .life_pool import LifePool, drain
from ..verdict.rate_verdict import ended_over

LIVES_PER_K = 8


def default_max_lives(config: SweepConfig) -> int:
    return config.sweep.max_lives or LIVES_PER_K * len(config.speculation.k)


def probe_config(config: SweepConfig, rates: list[float] | None) -> SweepConfig:
    """The config a life runs: the config's stages, or a probe's rate stage(s), each as long as the config's
    longest rate stage."""
    if not rates:
        return config
    duration = max(stage.duration_s for stage in config.load.rate_stages)
    stages = [StageConfig(rate=rate, duration_s=duration) for rate in rates]
    return config.model_copy(update={"load": config.load.model_copy(update={"stages": stages})})


def describe(config: SweepConfig) -> str:
    """What a capacity sweep will do (--dry-run and its first line)."""
    minutes = (f", at most {config.sweep.max_server_minutes:g} server-minutes" if config.sweep.max_server_minutes
               else "")
    duration = max(stage.duration_s for stage in config.load.rate_stages)
    return (f"capacity search: every K once over the stages, then probes of {duration:g} s (one rate stage each) "
            f"bracketing and bisecting each K's highest rate within the SLO (each at its own percentile: "
            f"{', '.join(slo.text() for slo in config.decision.slos)}) to {config.sweep.capacity_precision * 100:g}%; "
            f"at most "
            f"{default_max_lives(config)} lives{minutes}")


def reach(config: SweepConfig) -> tuple[float, float]:
    """The lowest and highest rate a probe may run: the config's rates divided or multiplied by RATE_REACH, and no
    higher than a probe's stage may draw (workload/stages.py)."""
    rates = [stage.rate for stage in config.load.rate_stages]
    duration = max(stage.duration_s for stage in config.load.rate_stages)
    return min(rates) / RATE_REACH, min(max(rates) * RATE_REACH, MAX_STAGE_ARRIVALS / duration)


def run_capacity(config: SweepConfig, caps: Capabilities, run_dir: Path, say, pool: LifePool,
                 server: ResolvedServer, announce=lambda life, stages: None) -> Probe:
    """Run every K's first life, then probes until the chooser stops; returns its last answer (the stop, why)."""
    budget = Budget(default_max_lives(config),
                    config.sweep.max_server_minutes * 60 if config.sweep.max_server_minutes else None)
    ks = sorted(config.speculation.k)

    def run(life: Life, rates: list[float] | None) -> None:
        life_config = probe_config(config, rates)
        announce(life, life_config.load.stages)
        while not pool.free():
            pool.wait()
        pool.submit(life_config, life)

    for entry in read_plan(run_dir).sweep_lives():  # a resumed run: the lives chosen before
        run(Life(next_life([], config, entry.k).setting, entry.repeat), entry.rates)
    for k in ks:
        if not any(entry.k == k for entry in read_plan(run_dir).sweep_lives()):
            life = next_life(read_plan(run_dir).sweep_lives(), config, k)
            append_to_plan(config, caps, run_dir, [life], server, chosen=f"K={k}: every stage once")
            say(f"capacity: {life.key}: every stage once")
            run(life, None)
    for _ in range(budget.max_lives + len(ks) + 1):  # bounded: each round runs a probe or stops
        drain(pool)
        data = read_run(run_dir)
        lives = data.plan.sweep_lives()
        probes = Counter(entry.k for entry in lives if entry.rates)
        spent = spent_so_far(lives, data.statuses, {})
        per_slo = slo_rate_points((w for _, w in data.rate_windows), config.decision,
                                  ended_over(lives, data.statuses))
        # per K the points and percentile of its SLO that fails first: their bracket is every SLO's
        points, targets = {}, {}
        for k in {k for _, by_k in per_slo for k in by_k}:
            points[k], targets[k] = binding(of_k(per_slo, k))
        tried: dict[int, list[float]] = {}
        for entry in lives:
            tried.setdefault(entry.k, []).extend(entry.rates or [])
        choice = next_probe(ks, points, probes, spent, budget, targets,
                            config.sweep.capacity_precision, reach(config), tried)
        if choice.k is None:
            break
        life = next_life(lives, config, choice.k)
        append_to_plan(config, caps, run_dir, [life], server, rates=[choice.rate], chosen=choice.why)
        say(f"capacity: next {life.key}: {choice.why}")
        run(life, [choice.rate])
    else:
        choice = Probe(None, why="the loop's own bound was reached", stop="budget")
    drain(pool)  # the bound may leave the last probe running
    record_adaptive_stop(run_dir, choice.why, choice.stop)
    write_tables(run_dir)
    say(f"capacity: stopped: {choice.why}")
    return choice
