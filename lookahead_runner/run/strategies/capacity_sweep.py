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

from pathlib import Path

from ...config import ResolvedServer, SweepConfig
from ...decision.adaptive import Budget
from ...decision.capacity.search import Probe
from ...runfolder.plan import read_plan, record_adaptive_stop
from ...runfolder.read import read_run
from ...vllm.probe import Capabilities
from .adaptive_sweep import next_life, spent_so_far
from ..verdict.finalize import write_tables
from ..life.launch import Life, append_to_plan
from .life_pool import LifePool, drain
from .probes import probe_config, probe_next

LIVES_PER_K = 8


def default_max_lives(config: SweepConfig) -> int:
    return config.sweep.max_lives or LIVES_PER_K * len(config.speculation.k)


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
        choice = probe_next(data, config, ks, spent_so_far(lives, data.statuses, {}), budget,
                            config.sweep.capacity_precision)
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
