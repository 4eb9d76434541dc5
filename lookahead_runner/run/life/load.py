"""One server life's load: headless Locust as a subprocess running the scenario's stages
(or, with `sweep --web`, Locust with its web UI, still starting and ending the stages by itself, on one port
for the whole sweep: `live_view_port`, on 127.0.0.1 only, behind the sweep's token: `web_url` prints it, `live_env`
hands it to Locust; live/guard.py checks it).

The runner never imports locust (it monkey-patches the process); it only builds the argv,
runs it under a deadline and hands back where the files are.
"""
from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import reaper
from .package_files import NEEDED, package_file
from .placement import pin
from .server import free_port, port_is_free
from ...contracts.auth import LIVE_TOKEN_ENV
from ...workload.stages import DRAIN_GRACE_S, kind_changes

# inside the package (an installed wheel has it too); `lookahead-runner locustfile` prints it
DEFAULT_LOCUSTFILE = package_file(NEEDED["locustfile"])
WEB_HOST = "127.0.0.1"
# The live view's token: one per runner process, so one per sweep; in the printed address, never on an argv.
# 24 URL-safe characters: 144 random bits.
LIVE_TOKEN = secrets.token_urlsafe(18)
WEB_LINGER_S = 5.0  # with --web, the UI stays up this long after the last stage, showing the final values


@dataclass(frozen=True)
class LoadResult:
    exit_code: int
    timed_out: bool
    log_path: Path
    aborted: str = ""  # why the runner stopped Locust early (the server died or hung); "" = it ran to the end
    ended_early: str = ""  # why the runner ended the stages early without a fault (a capacity probe clearly over)


def stages_arg(stages) -> str:
    """Locust's --stages: "USERS:SECONDS" per user stage, "RATE/s:SECONDS" per rate stage."""
    return ",".join(f"{s.rate!r}/s:{s.duration_s:g}" if getattr(s, "rate", None) is not None
                    else f"{s.users}:{s.duration_s:g}" for s in stages)


def locust_deadline_s(load, stage_s: float) -> float:
    """How long a Locust run of `stage_s` seconds of stages may take before it is killed: its stop (--stop-timeout
    = request_timeout_s, twice) and a minute, plus a drain where the kind of stage changes (workload/shape.py)."""
    drains = kind_changes(load.stages) * (load.request_timeout_s + DRAIN_GRACE_S)
    return stage_s + 2 * load.request_timeout_s + 60 + drains


def locust_argv(base_url: str, out_dir: Path, model: str, load, locustfile: Path = DEFAULT_LOCUSTFILE,
                setting_name: str = "", web_port: int | None = None, variant_name: str = "") -> list[str]:
    """The `locust --headless` command for one server life (all values as separate arguments).

    No secret goes here: an API key reaches Locust only through its environment (LOOKAHEAD_API_KEY).
    With `web_port`, Locust serves its web UI (live tabs included) on 127.0.0.1:web_port instead,
    still starting the stages by itself and quitting WEB_LINGER_S seconds after the last one.
    `load` has one prompt length, output length and temperature (one workload variant: life.py runs each);
    `variant_name` labels it beside the stage in the live view.
    """
    return [
        sys.executable, "-m", "locust", "-f", os.fspath(locustfile), *_ui_args(web_port),
        *(["--setting-name", setting_name] if setting_name else []),
        *(["--variant-name", variant_name] if variant_name else []),
        "--host", base_url,
        "--stages", stages_arg(load.stages),
        "--prompt-tokens", str(load.prompt_tokens),
        "--output-tokens", str(load.output_tokens),
        "--model", model,
        "--temperature", repr(float(load.temperature)),
        *_sampling_args(load),
        *_endpoint_args(load),
        *_arrival_args(load),
        "--request-timeout-s", f"{load.request_timeout_s:g}",
        "--requests-csv", os.fspath(out_dir / "requests.csv"),
        "--stages-csv", os.fspath(out_dir / "stages.csv"),
        "--workload-json", os.fspath(out_dir / "workload.json"),
        "--csv", os.fspath(out_dir / "locust"),
        # in-flight requests finish at the end (not cut), so the life's token count is a closed window
        "--stop-timeout", f"{load.request_timeout_s:g}",
        "--only-summary", "--loglevel", "WARNING",
        *_processes_args(load.processes),
        *load.locust_extra_args,
    ]


def _processes_args(processes: int) -> list[str]:
    """--processes N, with the master on a free port: on Locust's default 5557, the workers of another
    run on this host (a lingering one, or a parallel test) would join this master; and on 127.0.0.1 (Locust's
    default is every interface), where a process of another machine cannot join it and send rows."""
    if processes <= 1:
        return []
    with socket.socket() as probe:
        probe.bind((WEB_HOST, 0))
        port = str(probe.getsockname()[1])
    return ["--processes", str(processes), "--master-port", port, "--master-bind-port", port,
            "--master-bind-host", WEB_HOST]


def _sampling_args(load) -> list[str]:
    """--top-p, --seed and --prompt-file of the load config (fields a bare namespace may lack)."""
    top_p, seed = getattr(load, "top_p", 1.0), getattr(load, "seed", None)
    prompt_file, request_set = getattr(load, "prompt_file", ""), getattr(load, "requests", "")
    return [
        "--top-p", repr(float(top_p)),
        *(["--seed", str(seed)] if seed is not None else []),
        *(["--prompt-file", os.path.abspath(prompt_file)] if prompt_file else []),
        *(["--request-set", os.path.abspath(request_set)] if request_set else []),
    ]


def _endpoint_args(load) -> list[str]:
    """--endpoint, and the chat template's kwargs as one JSON argument (fields a bare namespace may lack)."""
    endpoint, kwargs = getattr(load, "endpoint", "completions"), getattr(load, "chat_template_kwargs", {})
    return ["--endpoint", endpoint, *(["--chat-template-kwargs", json.dumps(kwargs)] if kwargs else [])]


def _arrival_args(load) -> list[str]:
    """How rate stages pace their arrivals (fields a bare namespace may lack): only where a stage has a rate."""
    if not any(getattr(stage, "rate", None) is not None for stage in load.stages):
        return []
    return ["--arrival", getattr(load, "arrival", "poisson"), "--burstiness", repr(float(getattr(load, "burstiness", 1.0))),
            "--arrival-seed", str(getattr(load, "arrival_seed", 0)),
            "--max-in-flight", str(getattr(load, "max_in_flight", 0))]


def _ui_args(web_port: int | None) -> list[str]:
    if web_port is None:
        return ["--headless"]
    return ["--autostart", "--autoquit", f"{WEB_LINGER_S:g}", "--web-host", WEB_HOST, "--web-port", str(web_port),
            "--follow-sweep"]


def web_url(web_port: int) -> str:
    """The live view of a life's Locust web UI (opens on the "vLLM live" tab), with the sweep's token."""
    return f"http://{WEB_HOST}:{web_port}/?tab=lookahead&token={LIVE_TOKEN}"


def live_env(web_port: int | None) -> dict[str, str]:
    """What Locust's environment carries for its web UI: the sweep's token (none without a web UI)."""
    return {LIVE_TOKEN_ENV: LIVE_TOKEN} if web_port is not None else {}


@contextmanager
def live_view_port(web: bool):
    """`sweep --web`: one port for every life's Locust web UI, so the live view has one address for the whole
    sweep and a browser tab left open follows it from life to life. Between lives the port is held by a socket
    bound to it but not listening (SO_REUSEADDR): Locust's web server (gevent's, SO_REUSEADDR too) binds it
    beside that socket, while a free port asked of the kernel (the next server's, Locust's master's) is never
    this one. Yields the port, or None without --web."""
    if not web:
        yield None
        return
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind((WEB_HOST, 0))
        yield holder.getsockname()[1]


def live_port_now(web_port: int | None) -> tuple[int | None, str]:
    """The port this life's Locust serves its web UI on, and a note when it is not the sweep's: where another
    process took the held port between lives (a web server binds beside the holder as Locust does), Locust would
    exit at once without running a stage, so this life gets a free port instead."""
    if web_port is None or port_is_free(WEB_HOST, web_port):
        return web_port, ""
    port = free_port(WEB_HOST)
    return port, f"live view: port {web_port} is taken by another process; this life's live view is at {web_url(port)}"


def run_locust(argv: list[str], log_path: Path, deadline_s: float, env: dict[str, str] | None = None,
               abort=None, cpus: tuple[int, ...] = (), end_early=None) -> LoadResult:
    """Run Locust to the end of its stages; kill its group if it overruns the deadline.

    `abort()` is asked twice a second; when it returns a reason (the server died or hung), Locust
    is stopped at once (SIGTERM, so it writes its stats; SIGKILL 5 s later) instead of loading a
    dead server until its stages end. `end_early()`, asked as often, stops it the same way when it returns a
    reason that is no fault (a capacity probe clearly over): its open stage ends there, its requests in flight
    finish as --stop-timeout allows. `cpus`: the CPUs Locust and its worker processes run on."""
    with open(log_path, "ab") as log:
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=os.environ | (env or {}), start_new_session=True, preexec_fn=pin(cpus))
        reaper.register(process.pid, 5.0)
        try:
            end = time.monotonic() + deadline_s
            while True:
                try:
                    return LoadResult(process.wait(timeout=max(0.0, min(0.5, end - time.monotonic()))),
                                      False, log_path)
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= end:
                        _kill_group(process)
                        return LoadResult(process.wait(), True, log_path)
                    reason = abort() if abort else ""
                    if reason:
                        _stop_group(process)
                        return LoadResult(process.wait(), False, log_path, reason)
                    enough = end_early() if end_early else ""
                    if enough:
                        _stop_group(process, STOP_TIMEOUT_GRACE_S + _stop_timeout(argv))
                        return LoadResult(process.wait(), False, log_path, ended_early=enough)
        except BaseException:
            _kill_group(process)
            process.wait()
            raise
        finally:
            reaper.unregister(process.pid)


STOP_TIMEOUT_GRACE_S = 5.0


def _stop_timeout(argv: list[str]) -> float:
    """Locust's --stop-timeout in `argv` (the seconds its requests in flight may take to finish), else 0."""
    try:
        return float(argv[argv.index("--stop-timeout") + 1])
    except (ValueError, IndexError):
        return 0.0


def _stop_group(process: subprocess.Popen, grace_s: float = 5.0) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except (ProcessLookupError, PermissionError):
        pass
    except subprocess.TimeoutExpired:
        _kill_group(process)


def _kill_group(process: subprocess.Popen) -> None:
    import signal

    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
