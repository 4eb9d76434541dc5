"""The sweep loop: probe, plan, server lives, finalize.

A server life hosts one repeat of one setting (load.repeat_mode = "restart"), or every repeat
of it ("same-server").

Every life runs on the sweep's CPU placement; the first server life runs the pre-flight. Lives run
in K order; after each K summary.csv and lives.csv are re-made from the files, and once the method's
stop rule fires at the target concurrency (in most resamples) the larger K are skipped (early stop,
switchable). With load.repeats = "auto", one more repeat of each K the verdict hangs on is added
(to plan.json) until it is decided past the bar of its look (each round of repeats a look: decision/gates/looks.py) or on a
tie, or load.max_repeats is reached; then the confirmation life runs
what the decision recommends (strategies/confirm_life.py). A life whose status is `done` is kept by --resume;
any other life is rerun. The decision itself is made once, at the end, from the files.
"""
from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from .strategies import adaptive_sweep, capacity_sweep
from .life import reaper
from ..runfolder import spread_ledger
from ..runfolder.plan import PLAN_VERSION, Plan, has_plan, read_plan, write_plan
from ..config import ResolvedServer, SweepConfig
from ..decision.engine import auto_repeats_wanted
from ..runfolder.price import looks_of
from .cluster.nodes import probe_cluster
from .strategies.confirm_life import run_confirmations, switch_off
from .strategies.early_stop import skip_beyond, stop_k
from .verdict.finalize import decide_all, finalize, write_tables
from .verdict.steps import Steps
from .verdict.rate_verdict import with_rate_verdict
from ..runfolder.read import read_run
from .life.launch import Life, append_to_plan, plan_entry
from .strategies.life_pool import OneAtATime
from .life.load import live_view_port, web_url
from .life.life import LifeEvents, ended, left_to_run, not_measured, run_server_life
from ..config.masking import MissingSecret
from .life.placement import Placement, sweep_placement
from .life.preflight import PreflightError
from .life.preflight_turn import PreflightTurn
from .progress import SweepProgress
from .strategies.start_failure import may_stop_at_first_start, stop_if_shared
from ..vllm.knob import KnobError, Setting, check_flags, check_method, check_raw_mode, knob_flag, resolve_style
from ..vllm.probe import Capabilities, ProbeError, probe_running_server, run_probe
from ..vllm.spec_keys import SpecAxis, check_spec_axis, typed_constants


def plan_lives(config: SweepConfig) -> list[Life]:
    """Settings in K order (the early stop relies on it), the grid's values inside, repeats innermost."""
    raw, grid = config.speculation.raw_lookahead_slots, config.grid
    axis = [(grid.flag, value) for value in grid.values] or [("", "")]
    return [Life(Setting(k, raw, flag, value, spec_key=grid.spec_key), r)
            for k in config.speculation.k for flag, value in axis for r in range(config.load.planned_repeats)]


def server_lives(lives: list[Life], same_server: bool) -> list[list[Life]]:
    """The lives each server start hosts: one each ("restart"), or all repeats of a setting."""
    groups: list[list[Life]] = []
    for life in lives:
        if same_server and groups and groups[-1][0].setting == life.setting:
            groups[-1].append(life)
        else:
            groups.append([life])
    return groups


def check_capabilities(config: SweepConfig, caps: Capabilities) -> None:
    """Refuse what this vLLM cannot do, before any server starts."""
    if config.speculation.raw_lookahead_slots:
        check_raw_mode(caps)
    else:
        resolve_style(caps, config.speculation.flag_style)
        if any(config.speculation.k):  # only a life with K > 0 names the method
            check_method(caps, config.speculation.method)
    check_flags(caps, config.server.extra_args + ([config.grid.flag] if config.grid.flag else []))
    spec = config.speculation
    axis = SpecAxis(spec.method, tuple(spec.k), tuple(config.server.extra_args))
    if config.grid.spec_key:
        check_spec_axis(caps.version, caps.version_tuple, config.grid.spec_key, config.grid.values, axis)
    if spec.config:
        if resolve_style(caps, spec.flag_style) == "legacy-flags":
            raise KnobError(f"speculation.config: vLLM {caps.version} has no speculative config to carry "
                            f"{', '.join(spec.config)} (K is written as --num-speculative-tokens); remove it")
        typed_constants(caps.version, caps.version_tuple, spec.config, axis)


def probe_and_check(config: SweepConfig, server: ResolvedServer, run_dir: Path | None = None,
                    slots=None) -> Capabilities:
    """The probe cached in a resumed run's plan.json, or a fresh one (`--version`, `serve --help=all`); on a Ray
    cluster (`slots`) it runs on a worker node and every node is compared (cluster/nodes.py)."""
    if run_dir and has_plan(run_dir):
        caps = Capabilities.from_dict(read_plan(run_dir).probe)
        if slots is not None:  # the cluster may have changed since: its nodes must still run the planned vLLM
            probe_cluster(slots, config, server, caps.version)
    elif config.server.url:
        caps = probe_running_server(config.server.url)
    elif slots is not None:
        caps = dataclasses.replace(probe_cluster(slots, config, server), command=tuple(server.masked.command))
    else:
        caps = _probe_command(server, lambda flags_known: check_capabilities(config, flags_known))
    check_capabilities(config, caps)
    return caps


def _probe_command(server: ResolvedServer, check=None) -> Capabilities:
    """The probe of server.command, secrets filled in for it and masked in what it says and records; `check` runs
    once the flags are known (run_probe)."""
    masked, secrets = server.masked, server.secrets
    try:
        caps = run_probe(secrets.resolve_argv(masked.command), env=secrets.resolve_env(masked.env), check=check)
    except (ProbeError, MissingSecret) as err:
        raise ProbeError(secrets.mask_text(str(err))) from None
    return dataclasses.replace(caps, command=tuple(masked.command))


def lives_of(plan: Plan, config: SweepConfig) -> list[Life]:
    """The plan's lives (it grows when repeats are "auto"), in its order."""
    raw = config.speculation.raw_lookahead_slots
    return [Life(Setting(l.k, raw, l.axis_flag, l.axis_value, spec_key=l.spec_key), l.repeat)
            for l in plan.sweep_lives()]


def build_plan(config: SweepConfig, caps: Capabilities, run_id: str, mode: str, placement: Placement,
               server: ResolvedServer, ledger_use=None) -> Plan:
    """The run's plan.json: each secret of the config and of the argv as ${NAME} (config/masking.py); `ledger_use`:
    what the run takes from the restart spread ledger (runfolder/spread_ledger.py)."""
    masked, secrets = server.masked, server.secrets
    lives = [plan_entry(config, caps, life, server).model_dump(mode="json") for life in plan_lives(config)]
    style = resolve_style(caps, config.speculation.flag_style)
    knob = knob_flag(config.speculation.raw_lookahead_slots, style)
    return Plan.written(secrets.mask_value({
        "version": PLAN_VERSION, "mode": mode, "run_id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "probe": caps.to_dict() | {"knob": knob}, "config": config.model_copy(update={"server": masked}).model_dump(
            mode="json"),
        "target_users": config.target_users, "is_simulator": config.server.is_simulator, "lives": lives,
        "placement": placement.to_record().model_dump(mode="json"),
        "restart_spread": ledger_use.model_dump(mode="json") if ledger_use else None,
    }))


@contextmanager
def sigterm_as_interrupt():
    """SIGTERM and SIGHUP (the terminal closed) unwind like Ctrl-C, so every server group and
    Locust is stopped on the way out."""
    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    hangup = [signal.SIGHUP] if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN else []  # under nohup: ignored
    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, *hangup)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old if old is not None else signal.SIG_DFL)


@dataclass
class LifeRunner:
    """Starts each server life of a sweep on the sweep's placement; the life whose turn it is runs the pre-flight
    (life/preflight_turn.py: it may re-size Locust; a server that dies first leaves it to the next life)."""

    config: SweepConfig
    caps: Capabilities
    run_dir: Path
    say: Callable[[str], None]
    events: LifeEvents
    web_port: int | None  # sweep --web: every life's Locust web UI on this port (life.load.live_view_port)
    preflight: PreflightTurn
    server: ResolvedServer
    cluster: object | None = None  # cluster.slots.RaySlots with cluster.engine = "ray": lives run there, in parallel
    # the server starts planned, while the first one decides for all (strategies/start_failure.py)
    first_start_of: int = 0

    def __call__(self, config: SweepConfig, setting: Setting, repeats: list[int]) -> None:
        try:
            outcomes = run_server_life(config, self.caps, setting, repeats, self.run_dir, self.say, self.server,
                                       self.events, web_port=self.web_port, placement=self.preflight.placement,
                                       preflight=self.preflight.step(self.config, self.run_dir, self.say,
                                                                     self.server.load_env))
        except PreflightError as err:  # no life was measured: each is run again by --resume
            not_measured(self.run_dir, setting, repeats, str(err))
            raise
        starts, self.first_start_of = self.first_start_of, 0
        if starts:
            stop_if_shared(outcomes, Life(setting, repeats[0]), starts, self.run_dir)


def run_sweep(config: SweepConfig, run_dir: Path, caps: Capabilities, *, server: ResolvedServer, say=None,
              early_stop: bool = True, mode: str = "sweep", web: bool = False,
              placement: Placement | None = None, slots=None, verbose: bool = False) -> Path:
    """`server`: the server config resolved once at the run's start (cli.py); `slots`: the Ray slots the probe
    ran on (cli.py), else the sweep starts its own where cluster.engine = "ray"; `verbose`: print the time of each
    step of the decision and report after the last life (run/verdict/steps.py)."""
    placement = placement or sweep_placement(config)  # on a Ray slot: life.placement.slot_placement
    with nullcontext(slots) if slots is not None else cluster_slots(config, len(plan_lives(config)), say) as slots:
        return _run_sweep(config, run_dir, caps, server, say, early_stop, mode, web, placement, slots, verbose)


def ledger_gear(config: SweepConfig, slots) -> str:
    """The hardware of the restart spread ledger's fingerprint: on a Ray cluster the GPUs of the nodes that run the
    lives (their probe), never this driver's."""
    return spread_ledger.hardware(config, slots.gpu_models() if slots is not None else None)


def cluster_slots(config: SweepConfig, lives_planned: int, say):
    """cluster.engine = "ray": Ray and the sweep's slots (cluster/start.py); local: none."""
    if config.cluster.engine != "ray":
        return nullcontext(None)
    from .cluster.start import ray_slots  # Ray loads only for a sweep that runs on it

    return ray_slots(config, lives_planned, say or print)


def _run_sweep(config: SweepConfig, run_dir: Path, caps: Capabilities, server: ResolvedServer, say, early_stop: bool,
               mode: str, web: bool, placement: Placement, slots, verbose: bool = False) -> Path:
    if not has_plan(run_dir):
        ledger_use, said = spread_ledger.use_for_run(config, caps.version, config.decision.ledger,
                                                     gear=ledger_gear(config, slots))
        if said:
            (say or print)(said)
        plan = build_plan(config, caps, run_dir.name, mode, placement, server, ledger_use)
        if config.sweep.strategy in ("adaptive", "capacity"):  # lives chosen as it goes
            plan = adaptive_sweep.start_plan(plan)
        write_plan(run_dir, plan)
    else:  # a resumed run: what a killed runner of this folder left running goes first
        for stale in reaper.reap_stale(run_dir, config.server.stop_grace_s):
            (say or print)(f"stopped a process the interrupted run left behind: {stale}")
    if slots is not None:
        slots.record(run_dir)
        if warning := slots.confound_warning(config):
            (say or print)(warning)
        if web:
            (say or print)("the live view is not served for lives on a Ray cluster (each runs on its node)")
            web = False
    planned = read_plan(run_dir)
    config.decision.with_earlier(planned.restart_spread.earlier_spread() if planned.restart_spread else None)
    lives = lives_of(planned, config)
    number = {life.key: n for n, life in enumerate(lives, 1)}
    variants = config.load.variants
    with reaper.watchdog(f"watchdog of {run_dir}"), sigterm_as_interrupt(), live_view_port(web) as web_port, \
            SweepProgress(config.load.stages, len(lives), blocks=len(variants)) as progress:
        say = say or progress.say
        say(placement.describe())
        if web_port is not None:
            say(f"live view, one address for every server life: {web_url(web_port)}")
        if len(variants) > 1:
            say(blocks_order(variants))

        def tag(life: Life) -> str:
            return f"[{number[life.key]}/{len(number)}] {life.key}"

        def started(life: Life, new_server: bool) -> None:
            say(f"{tag(life)}: {'starting the server' if new_server else 'on the same server'}")
            progress.life_started(life.key)

        def finished(life: Life, outcome) -> None:
            ended(life, outcome, tag, say, progress)

        events = LifeEvents(started, progress.load_started, finished, progress.variant_started)
        run_life = LifeRunner(config, caps, run_dir, say, events, web_port,
                              PreflightTurn(config.load.preflight_s > 0, placement), server, slots)
        starts = len(server_lives(plan_lives(config), config.load.repeat_mode == "same-server"))  # adaptive: its grid
        if may_stop_at_first_start(config, run_dir, lives, starts, slots is not None):
            run_life.first_start_of = starts
        early_stop = early_stop and not config.grid.axis  # each grid value has its own decision
        if config.sweep.strategy == "adaptive":
            run_adaptively(config, caps, run_dir, say, progress, run_life, number, tag, early_stop)
        elif config.sweep.strategy == "capacity":
            run_adaptively(config, caps, run_dir, say, progress, run_life, number, tag, early_stop, capacity=True)
        else:
            run_lives(config, run_dir, lives, tag, say, progress, run_life, early_stop)
        while config.load.repeats == "auto" and config.sweep.strategy == "grid":  # never with a grid axis (config/sweep.py)
            data = read_run(run_dir)
            asked, why = auto_repeats_wanted([data.evidence(variant=v.label) for v in variants], config.decision,
                                             looks_of(config))
            wanted = [k for k in asked if sum(life.setting.k == k for life in lives) < config.load.max_repeats]
            if not wanted:
                break
            more = add_repeats(config, caps, run_dir, lives, wanted, server)
            say(f"{why}: one more repeat of K {[life.setting.k for life in more]} (load.repeats = \"auto\", "
                f"at most {config.load.max_repeats})")
            number.update({life.key: n for n, life in enumerate(lives, 1)})
            progress.add_lives(len(more))
            run_lives(config, run_dir, more, tag, say, progress, run_life, False)
        if mode == "sweep":
            confirm_recommendation(config, caps, run_dir, say, progress, run_life, number, tag)
    if slots is not None:
        slots.lives_over()  # no life runs after this: Ray's stop (seconds) goes on while the report is written
    steps = Steps(verbose=verbose)
    report = finalize(run_dir, render=True, steps=steps, ledger=config.decision.ledger)
    if verbose:
        print(f"finalize (last life to report): {steps.total_s():.2f} s", flush=True)
    return report


def blocks_order(variants) -> str:
    """How a life runs the workload variants (variants.py says why)."""
    return (f"each server life runs {len(variants)} workload variants, one block after another, each with its own "
            f"prompt calibration and rising stages: {'; '.join(v.label for v in variants)} (a block ends when its "
            "last request has finished, so the next starts on an empty KV pool; each stage's warm-up is left out)")


def confirm_recommendation(config: SweepConfig, caps: Capabilities, run_dir: Path, say, progress, run_life,
                           number: dict[str, int], tag) -> None:
    """The confirmation life of what the decision recommends (strategies/confirm_life.py), once the per-K lives are
    done."""
    if config.decision.confirm == "off":
        switch_off(run_dir, say)
        return
    data = read_run(run_dir)
    decision = decide_all(data)  # over the per-K lives (read_run keeps the confirmation's windows apart)
    if not config.load.user_stages:  # rate stages only: what is confirmed is the verdict at the target rate
        decision = with_rate_verdict(decision, data)

    def announce(lives: list[Life], stages) -> None:
        number.update({life.key: len(number) + n for n, life in enumerate(lives, 1) if life.key not in number})
        progress.add_lives(len(lives), stages, [life.key for life in lives])

    def run_these(life_config: SweepConfig, lives: list[Life]) -> None:
        run_lives(life_config, run_dir, lives, tag, say, progress, run_life, early_stop=False)

    run_confirmations(config, caps, run_dir, data, decision, say, run_these, run_life.server, announce)


def run_adaptively(config: SweepConfig, caps: Capabilities, run_dir: Path, say, progress, run_life,
                   number: dict[str, int], tag, early_stop: bool, capacity: bool = False) -> None:
    """sweep.strategy = "adaptive": lives chosen on what is measured (strategies/adaptive_sweep.py), one at a time
    here, as many at once as there are free slots on a Ray cluster; "capacity" (`capacity`): the capacity search's probes
    (strategies/capacity_sweep.py)."""
    def announce(life: Life, stages) -> None:
        if life.key not in number:
            number[life.key] = len(number) + 1
            progress.add_lives(1, stages, [life.key])

    def run_one(life_config: SweepConfig, life: Life) -> None:
        run_lives(life_config, run_dir, [life], tag, say, progress, run_life, early_stop=False)

    cluster = getattr(run_life, "cluster", None)
    pool = cluster.pool(run_dir, run_life, tag, say, progress) if cluster is not None else OneAtATime(run_one)
    if capacity:
        say(capacity_sweep.describe(config))
        capacity_sweep.run_capacity(config, caps, run_dir, say, pool, run_life.server, announce)
        return
    say(adaptive_sweep.describe(config, adaptive_sweep.model_view(None, config), pool.slots))
    adaptive_sweep.run_adaptive(config, caps, run_dir, say, pool, run_life.server, early_stop, announce)


def add_repeats(config: SweepConfig, caps: Capabilities, run_dir: Path, lives: list[Life], ks: list[int],
                server: ResolvedServer) -> list[Life]:
    """One more repeat of each K, appended to plan.json (so --resume finds them) and to `lives`."""
    more = []
    for k in ks:
        mine = [life for life in lives if life.setting.k == k]
        more.append(Life(mine[-1].setting, max(life.repeat for life in mine) + 1))
    append_to_plan(config, caps, run_dir, more, server)
    lives += more
    return more


def run_lives(config: SweepConfig, run_dir: Path, lives: list[Life], tag, say, progress, run_life,
              early_stop: bool) -> None:
    """Every life not done yet, one server life per group; larger K skipped once the stop rule fires. On a Ray
    cluster the groups run in parallel (cluster/slots.py)."""
    cluster = getattr(run_life, "cluster", None)  # a bare callable (tests) runs here
    if cluster is not None:
        cluster.run_groups(config, run_dir, lives, server_lives(lives, config.load.repeat_mode == "same-server"),
                                    tag, say, progress, run_life, early_stop)
        return
    stopped_at = None
    for group in server_lives(lives, config.load.repeat_mode == "same-server"):
        todo = left_to_run(group, run_dir, tag, say, progress)  # kept even beyond a stop a resumed run fires
        skipped = skip_beyond(stopped_at, todo, run_dir, tag, say, progress)  # a resumed run may stop on finished K
        todo = [life for life in todo if life not in skipped]
        if todo:
            run_life(config, todo[0].setting, [life.repeat for life in todo])
        after = lives.index(group[-1]) + 1
        if stopped_at is not None or (after < len(lives) and lives[after].setting.k == group[-1].setting.k):
            continue  # decide once every life of this K is measured
        data = write_tables(run_dir)  # the raw files are on disk already; the decision is made at the end
        if early_stop:
            stopped_at = stop_k(config, data)
