"""The sweep loop: for every setting and repeat, one server life under staged load.

probe -> plan -> for each life: start server, wait ready + stable memory, warm up, sample
while Locust runs the stages, stop the group, mark the life done -> finalize (summary,
decision, report). Each life's files are written as they arrive; a life without a `done`
status is run again by `--resume`.
"""
from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import results
from .config import SweepConfig
from .finalize import finalize
from .load import locust_argv, run_locust
from .server import ServerError, ServerProcess, free_port, wait_for_port_free
from .telemetry.memory import open_memory_source, sim_file_env, wait_memory_stable
from .telemetry.sampler import Sampler
from .vllm.knob import Setting, check_flags, check_raw_mode, server_argv
from .vllm.probe import Capabilities, run_probe

SIM_MARKERS = ("lookahead_runner.sim", "lookahead-sim-vllm")


@dataclass(frozen=True)
class Life:
    setting: Setting
    repeat: int

    @property
    def key(self) -> str:
        return f"{self.setting.name}/r{self.repeat}"


def is_simulator(command: list[str]) -> bool:
    return any(marker in part for part in command for marker in SIM_MARKERS)


def api_headers(config: SweepConfig) -> dict[str, str]:
    key = os.environ.get(config.server.api_key_env, "") if config.server.api_key_env else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def plan_lives(config: SweepConfig) -> list[Life]:
    raw = config.speculation.raw_lookahead_slots
    return [Life(Setting(k, raw), r) for k in config.speculation.k for r in range(config.load.repeats)]


def render_argv(config: SweepConfig, caps: Capabilities, setting: Setting, port: int) -> list[str]:
    s, spec = config.server, config.speculation
    return server_argv(caps, s.command, s.model, s.host, port, s.extra_args, setting, spec.method, spec.draft_model)


def probe_and_check(config: SweepConfig) -> Capabilities:
    """Probe the installed vLLM and refuse what it cannot do, before any server starts."""
    caps = run_probe(config.server.command)
    if config.speculation.raw_lookahead_slots:
        check_raw_mode(caps)
    check_flags(caps, config.server.extra_args)
    return caps


def build_plan(config: SweepConfig, caps: Capabilities, run_id: str) -> dict:
    port = config.server.port or 8000
    lives = [{"setting": life.setting.name, "k": life.setting.k, "repeat": life.repeat,
              "argv": render_argv(config, caps, life.setting, port), "dir": life.key} for life in plan_lives(config)]
    return {
        "version": results.PLAN_VERSION, "run_id": run_id, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "probe": caps.to_dict() | {"knob": _knob_name(caps, config)},
        "config": config.model_dump(mode="json"), "target_users": config.target_users,
        "is_simulator": is_simulator(config.server.command), "lives": lives,
    }


def _knob_name(caps: Capabilities, config: SweepConfig) -> str:
    if config.speculation.raw_lookahead_slots:
        return "--num-lookahead-slots"
    return "--speculative-config" if caps.spec_style == "config-json" else "--num-speculative-tokens"


def warm_up(base_url: str, model: str, headers: dict[str, str], count: int = 2) -> None:
    """A few short requests before sampling, so first-request costs stay out of the results."""
    body = json.dumps({"model": model, "prompt": "warm up", "max_tokens": 4}).encode()
    for _ in range(count):
        request = urllib.request.Request(base_url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json", **headers})
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except OSError:
            return


def run_life(config: SweepConfig, caps: Capabilities, life: Life, run_dir: Path, say) -> dict:
    """One server life; returns its status record. Server failures become a failed status."""
    out = results.life_dir(run_dir, life.setting.name, life.repeat)
    out.mkdir(parents=True, exist_ok=True)
    results.write_status(out, "running")
    port = config.server.port or free_port(config.server.host)
    base_url = f"http://{config.server.host}:{port}"
    argv = render_argv(config, caps, life.setting, port)
    sim_file = out / "sim_gpu.json"
    headers = api_headers(config)
    env = config.server.env | (sim_file_env(sim_file) if is_simulator(config.server.command) else {})
    server = ServerProcess(argv, base_url, out / "server.log", env, config.server.stop_grace_s, headers)
    memory = open_memory_source(config.server.memory_source, is_simulator(config.server.command),
                                sim_file, lambda: server.pid)
    status: dict = {"memory_source": memory.name, "memory_note": memory.unavailable_reason}
    try:
        with server:
            ready_s = server.wait_until_ready(config.server.ready_timeout_s)
            stable, stable_s = wait_memory_stable(memory, config.server.memory_stable_band_mib,
                                                  config.server.memory_stable_window_s,
                                                  config.server.memory_stable_timeout_s, alive=server.alive)
            say(f"  ready in {ready_s:.1f} s, memory {'stable' if stable else 'NOT stable'} after {stable_s:.1f} s")
            warm_up(base_url, config.server.model, headers)
            deadline_s = sum(s.duration_s for s in config.load.stages) + config.load.request_timeout_s + 60
            with Sampler(base_url + "/metrics", memory, out, headers=headers) as sampler:
                load = run_locust(locust_argv(base_url, out, config.server.model, config.load), out / "locust.log",
                                  deadline_s)
            status.update(ready_s=round(ready_s, 2), memory_stable=stable, locust_exit=load.exit_code,
                          metrics_errors=sampler.metrics_errors, server_alive_at_end=server.alive())
        wait_for_port_free(config.server.host, port)
    except ServerError as err:
        results.write_status(out, "failed", str(err).splitlines()[0], **status)
        return {"state": "failed", "reason": str(err)}
    if load.timed_out or not status["server_alive_at_end"]:
        reason = "Locust overran its deadline" if load.timed_out else "the server died during the load"
        results.write_status(out, "failed", reason, **status)
        return {"state": "failed", "reason": reason}
    results.write_status(out, "done", **status)
    return {"state": "done", "reason": ""}


def run_sweep(config: SweepConfig, run_dir: Path, caps: Capabilities, say=print) -> Path:
    plan_path = run_dir / "plan.json"
    if not plan_path.exists():
        results.write_json(plan_path, results.redact(build_plan(config, caps, run_dir.name)))
    lives = plan_lives(config)
    for number, life in enumerate(lives, 1):
        out = results.life_dir(run_dir, life.setting.name, life.repeat)
        if results.life_state(out) == "done":
            say(f"[{number}/{len(lives)}] {life.key}: done earlier, kept")
            continue
        say(f"[{number}/{len(lives)}] {life.key}: starting the server")
        outcome = run_life(config, caps, life, run_dir, say)
        say(f"[{number}/{len(lives)}] {life.key}: {outcome['state']} {outcome['reason'].splitlines()[0] if outcome['reason'] else ''}")
        finalize(run_dir, render=False)  # summary.csv grows life by life
    return finalize(run_dir, render=True)
