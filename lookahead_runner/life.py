"""One server life: start the server, wait until it is ready and its memory is stable, warm it
up, sample it while Locust runs the stages, stop the whole process group, record the outcome.

Everything a life produces lands in its own folder as it happens; the life's status.json is
written `done` only at the very end, so a life cut by a crash or Ctrl-C is rerun by --resume.
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from . import results
from .config import SweepConfig
from .load import locust_argv, run_locust
from .server import RunningServer, ServerError, ServerProcess, free_port, wait_for_port_free
from .telemetry.memory import open_memory_source, sim_file_env, wait_memory_stable
from .telemetry.sampler import Sampler
from .vllm.knob import Setting, server_argv
from .vllm.probe import Capabilities

SIM_MARKERS = ("lookahead_runner.sim", "lookahead-sim-vllm")


@dataclass(frozen=True)
class Life:
    setting: Setting
    repeat: int

    @property
    def key(self) -> str:
        return f"{self.setting.name}/r{self.repeat}"


@dataclass(frozen=True)
class Outcome:
    state: str  # done | failed
    reason: str = ""


def is_simulator(command: list[str]) -> bool:
    return any(marker in part for part in command for marker in SIM_MARKERS)


def api_headers(config: SweepConfig) -> dict[str, str]:
    """The bearer header, from the environment variable the config names (never from the config)."""
    key = os.environ.get(config.server.api_key_env, "") if config.server.api_key_env else ""
    return {"Authorization": f"Bearer {key}"} if key else {}


def render_argv(config: SweepConfig, caps: Capabilities, setting: Setting, port: int) -> list[str]:
    s, spec = config.server, config.speculation
    return server_argv(caps, s.command, s.model, s.host, port, s.extra_args, setting, spec.method, spec.draft_model)


def warm_up(base_url: str, model: str, headers: dict[str, str], count: int = 2) -> None:
    """A few short requests before sampling starts, so first-request costs stay out of the results."""
    body = json.dumps({"model": model, "prompt": "warm up", "max_tokens": 4}).encode()
    for _ in range(count):
        request = urllib.request.Request(base_url + "/v1/completions", data=body,
                                         headers={"Content-Type": "application/json", **headers})
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except OSError:
            return


def fresh_life_dir(run_dir: Path, life: Life) -> Path:
    """The life's folder, emptied: a rerun must not append to a cut run's files."""
    out = results.life_dir(run_dir, life.setting.name, life.repeat)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def run_life(config: SweepConfig, caps: Capabilities, life: Life, run_dir: Path, say, watch=None) -> Outcome:
    """Run one server life; a server that fails to start or dies becomes a failed Outcome."""
    out = fresh_life_dir(run_dir, life)
    results.write_status(out, "running")
    headers = api_headers(config)
    external = bool(config.server.url)
    port = 0 if external else config.server.port or free_port(config.server.host)
    base_url = config.server.url.rstrip("/") if external else f"http://{config.server.host}:{port}"
    simulated = is_simulator(config.server.command) and not external
    sim_file = out / "sim_gpu.json"
    env = config.server.env | (sim_file_env(sim_file) if simulated else {})
    server = (RunningServer(base_url, out / "server.log", headers) if external else
              ServerProcess(render_argv(config, caps, life.setting, port), base_url, out / "server.log", env,
                            config.server.stop_grace_s, headers))
    memory = open_memory_source(config.server.memory_source, simulated, sim_file, lambda: server.pid,
                                config.server.dcgm_url)
    status: dict = {"memory_source": memory.name, "memory_note": memory.unavailable_reason}
    try:
        with server:
            ready_s = server.wait_until_ready(config.server.ready_timeout_s)
            stable, stable_s = wait_memory_stable(memory, config.server.memory_stable_band_mib,
                                                  config.server.memory_stable_window_s,
                                                  config.server.memory_stable_timeout_s, alive=server.alive)
            say(f"  ready in {ready_s:.1f} s; memory ({memory.name}) {'stable' if stable else 'NOT stable'} "
                f"after {stable_s:.1f} s")
            warm_up(base_url, config.server.model, headers)
            deadline_s = sum(s.duration_s for s in config.load.stages) + 2 * config.load.request_timeout_s + 60
            with Sampler(base_url + "/metrics", memory, out, headers=headers) as sampler:
                if watch:
                    watch(sampler)
                load = run_locust(locust_argv(base_url, out, config.server.model, config.load), out / "locust.log",
                                  deadline_s, env=_locust_env(config))
                alive_at_end = server.alive()
            status.update(ready_s=round(ready_s, 2), memory_stable=stable, locust_exit=load.exit_code,
                          metrics_errors=sampler.metrics_errors, last_metrics_error=sampler.last_metrics_error)
        if not external:
            wait_for_port_free(config.server.host, port)
    except ServerError as err:
        reason = str(err).splitlines()[0]
        results.write_status(out, "failed", reason, detail=str(err), **status)
        return Outcome("failed", str(err))
    reason = ("Locust overran its deadline" if load.timed_out
              else "the server died during the load" if not alive_at_end
              else f"Locust exited with code {load.exit_code} (see locust.log)" if load.exit_code not in (0, 1)
              else "")
    results.write_status(out, "failed" if reason else "done", reason, **status)
    return Outcome("failed" if reason else "done", reason)


def _locust_env(config: SweepConfig) -> dict[str, str]:
    """The API key reaches Locust through its environment only, never its argv or files."""
    if config.server.api_key_env and config.server.api_key_env in os.environ:
        return {"LOOKAHEAD_API_KEY": os.environ[config.server.api_key_env]}
    return {}
