"""The sweep loop: probe, plan, one server life per (setting, repeat), finalize.

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
from .life import Life, is_simulator, render_argv, run_life
from .progress import SweepProgress
from .vllm.knob import Setting, check_flags, check_raw_mode
from .vllm.probe import Capabilities, probe_running_server, run_probe


def plan_lives(config: SweepConfig) -> list[Life]:
    """Settings in K order (the early stop relies on it), the grid's values inside, repeats innermost."""
    raw, grid = config.speculation.raw_lookahead_slots, config.grid
    axis = [(grid.flag, value) for value in grid.values] or [("", "")]
    return [Life(Setting(k, raw, flag, value), r)
            for k in config.speculation.k for flag, value in axis for r in range(config.load.repeats)]


def check_capabilities(config: SweepConfig, caps: Capabilities) -> None:
    """Refuse what this vLLM cannot do, before any server starts."""
    if config.speculation.raw_lookahead_slots:
        check_raw_mode(caps)
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


def build_plan(config: SweepConfig, caps: Capabilities, run_id: str, mode: str = "sweep") -> dict:
    port = config.server.port or 8000
    lives = [{"setting": life.setting.name, "k": life.setting.k, "repeat": life.repeat,
              "axis_flag": life.setting.axis_flag, "axis_value": life.setting.axis_value,
              "argv": render_argv(config, caps, life.setting, port), "dir": life.key} for life in plan_lives(config)]
    knob = ("--num-lookahead-slots" if config.speculation.raw_lookahead_slots
            else "--speculative-config" if caps.spec_style == "config-json" else "--num-speculative-tokens")
    return {
        "version": results.PLAN_VERSION, "mode": mode, "run_id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "probe": caps.to_dict() | {"knob": knob}, "config": config.model_dump(mode="json"),
        "target_users": config.target_users, "is_simulator": is_simulator(config.server.command), "lives": lives,
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
              mode: str = "sweep", web: bool = False) -> Path:
    plan_path = run_dir / "plan.json"
    if not plan_path.exists():
        results.write_json(plan_path, results.redact(build_plan(config, caps, run_dir.name, mode)))
    else:  # a resumed run: what a killed runner of this folder left running goes first
        for stale in reaper.reap_stale(run_dir, config.server.stop_grace_s):
            (say or print)(f"stopped a process the interrupted run left behind: {stale}")
    lives = plan_lives(config)
    with reaper.watchdog(f"watchdog of {run_dir}"), sigterm_as_interrupt(), \
            SweepProgress(config.load.stages, len(lives)) as progress:
        say = say or progress.say
        stopped_at = None
        for number, life in enumerate(lives, 1):
            out = results.life_dir(run_dir, life.setting.name, life.repeat)
            tag = f"[{number}/{len(lives)}] {life.key}"
            if stopped_at is not None:  # lives run in K order: every one left has a larger K
                out.mkdir(parents=True, exist_ok=True)
                results.write_status(out, "skipped", f"early stop: the stop rule fired at K={stopped_at}")
                say(f"{tag}: skipped (early stop at K={stopped_at})")
                progress.life_finished()
                continue
            if results.life_state(out) == "done":
                say(f"{tag}: done earlier, kept")
            else:
                say(f"{tag}: starting the server")
                progress.life_started(life.key)
                outcome = run_life(config, caps, life, run_dir, say, watch=progress.load_started, web=web)
                say(f"{tag}: {outcome.state}" + (f" - {outcome.reason.splitlines()[0]}" if outcome.reason else ""))
            progress.life_finished()
            last_of_k = number == len(lives) or lives[number].setting.k != life.setting.k
            if last_of_k:  # the raw files are on disk already; summary and decision are re-made per K
                finalize(run_dir, render=False)
            # with a grid each flag value has its own decision: no early stop across them
            if early_stop and last_of_k and stopped_at is None and not config.grid.flag:
                stopped_at = _stopped_at(run_dir)
    return finalize(run_dir, render=True)
