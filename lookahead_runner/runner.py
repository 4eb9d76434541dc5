"""The sweep loop: probe, plan, server lives, finalize.

A server life hosts one repeat of one setting (load.repeat_mode = "restart"), or every repeat
of it ("same-server").

Lives run in K order; after each K the decision is re-made from the files, and once the
method's stop rule fires at the target concurrency the larger K are skipped (early stop,
switchable). A life whose status is `done` is kept by --resume; any other life is rerun.
"""
from __future__ import annotations

import signal
import time
from contextlib import contextmanager
from pathlib import Path

from . import reaper, results
from .config import SweepConfig
from .finalize import finalize
from .life import Life, LifeEvents, Served, died, is_simulator, locust_env, render_argv, run_server_life
from .placement import Placement, host_cpus, plan_placement
from .preflight import PreflightError, run_preflight
from .progress import SweepProgress
from .vllm.knob import Setting, check_flags, check_raw_mode, resolve_style
from .vllm.probe import SPEC_STYLE_FLAGS, Capabilities, probe_running_server, run_probe


def plan_lives(config: SweepConfig) -> list[Life]:
    """Settings in K order (the early stop relies on it), the grid's values inside, repeats innermost."""
    raw, grid = config.speculation.raw_lookahead_slots, config.grid
    axis = [(grid.flag, value) for value in grid.values] or [("", "")]
    return [Life(Setting(k, raw, flag, value), r)
            for k in config.speculation.k for flag, value in axis for r in range(config.load.repeats)]


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
    check_flags(caps, config.server.extra_args + ([config.grid.flag] if config.grid.flag else []))


def probe_and_check(config: SweepConfig, run_dir: Path | None = None) -> Capabilities:
    """The probe cached in a resumed run's plan.json, or a fresh one (`--version`, `serve --help=all`)."""
    cached = run_dir / "plan.json" if run_dir else None
    if cached and cached.exists():
        caps = Capabilities.from_dict(results.read_json(cached)["probe"])
    elif config.server.url:
        caps = probe_running_server(config.server.url)
    else:
        caps = run_probe(config.server.command, env=config.server.env)
    check_capabilities(config, caps)
    return caps


def build_plan(config: SweepConfig, caps: Capabilities, run_id: str, mode: str = "sweep",
               placement: Placement | None = None) -> dict:
    port = config.server.port or 8000
    lives = [{"setting": life.setting.name, "k": life.setting.k, "repeat": life.repeat,
              "axis_flag": life.setting.axis_flag, "axis_value": life.setting.axis_value,
              "argv": render_argv(config, caps, life.setting, port), "dir": life.key} for life in plan_lives(config)]
    style = resolve_style(caps, config.speculation.flag_style)
    knob = "--num-lookahead-slots" if config.speculation.raw_lookahead_slots else SPEC_STYLE_FLAGS[style][-1]
    return {
        "version": results.PLAN_VERSION, "mode": mode, "run_id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "probe": caps.to_dict() | {"knob": knob}, "config": config.model_dump(mode="json"),
        "target_users": config.target_users, "is_simulator": is_simulator(config.server.command), "lives": lives,
        "placement": (placement or plan_placement(config, host_cpus())).to_dict(),
    }


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


def _stopped_at(run_dir: Path) -> int | None:
    try:
        return results.read_json(run_dir / "decision.json").get("stopped_at_k")
    except (OSError, ValueError):
        return None


def run_sweep(config: SweepConfig, run_dir: Path, caps: Capabilities, say=None, early_stop: bool = True,
              mode: str = "sweep", web: bool = False, placement: Placement | None = None) -> Path:
    placement = placement or plan_placement(config, host_cpus())
    plan_path = run_dir / "plan.json"
    if not plan_path.exists():
        results.write_json(plan_path, results.redact(build_plan(config, caps, run_dir.name, mode, placement)))
    else:  # a resumed run: what a killed runner of this folder left running goes first
        for stale in reaper.reap_stale(run_dir, config.server.stop_grace_s):
            (say or print)(f"stopped a process the interrupted run left behind: {stale}")
    lives = plan_lives(config)
    number = {life.key: n for n, life in enumerate(lives, 1)}
    with reaper.watchdog(f"watchdog of {run_dir}"), sigterm_as_interrupt(), \
            SweepProgress(config.load.stages, len(lives)) as progress:
        say = say or progress.say
        say(placement.describe())
        placed = {"placement": placement, "preflight_due": config.load.preflight_s > 0}

        def preflight(served: Served, current: Placement) -> Placement:
            alive = (lambda: "") if served.external else (
                lambda: "" if served.server.alive() else died(served.server, "the pre-flight"))
            placed["placement"] = run_preflight(config, served.base_url, current, run_dir, say,
                                                locust_env(config), alive)
            placed["preflight_due"] = False
            return placed["placement"]

        def tag(life: Life) -> str:
            return f"[{number[life.key]}/{len(lives)}] {life.key}"

        def started(life: Life, new_server: bool) -> None:
            say(f"{tag(life)}: {'starting the server' if new_server else 'on the same server'}")
            progress.life_started(life.key)

        def finished(life: Life, outcome) -> None:
            say(f"{tag(life)}: {outcome.state}" + (f" - {outcome.reason.splitlines()[0]}" if outcome.reason else ""))
            progress.life_finished()

        events = LifeEvents(started, progress.load_started, finished)
        stopped_at = None
        for group in server_lives(lives, config.load.repeat_mode == "same-server"):
            todo = []
            for life in group:
                out = results.life_dir(run_dir, life.setting.name, life.repeat)
                if stopped_at is not None:  # lives run in K order: every one left has a larger K
                    out.mkdir(parents=True, exist_ok=True)
                    results.write_status(out, "skipped", f"early stop: the stop rule fired at K={stopped_at}")
                    say(f"{tag(life)}: skipped (early stop at K={stopped_at})")
                    progress.life_finished()
                elif results.life_state(out) == "done":
                    say(f"{tag(life)}: done earlier, kept")
                    progress.life_finished()
                else:
                    todo.append(life)
            if todo:
                try:
                    run_server_life(config, caps, todo[0].setting, [life.repeat for life in todo], run_dir, say,
                                    events, web=web, placement=placed["placement"],
                                    preflight=preflight if placed["preflight_due"] else None)
                except PreflightError as err:  # no life was measured: each is run again by --resume
                    for life in todo:
                        out = results.life_dir(run_dir, life.setting.name, life.repeat)
                        out.mkdir(parents=True, exist_ok=True)
                        results.write_status(out, "failed", f"not measured: {err}")
                    raise
            last = number[group[-1].key]
            if stopped_at is not None or (last < len(lives) and lives[last].setting.k == group[-1].setting.k):
                continue
            finalize(run_dir, render=False)  # the raw files are on disk already: re-made per K
            # with a grid each flag value has its own decision: no early stop across them
            if early_stop and not config.grid.flag:
                stopped_at = _stopped_at(run_dir)
    return finalize(run_dir, render=True)
