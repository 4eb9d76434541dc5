"""One server life: start the server, wait until it is ready and its memory is stable, warm it
up, sample it while Locust runs the stages (once per repeat it hosts), stop the whole process
group, record the outcomes.

Every repeat's files land in its own folder as they happen; its status.json is written `done`
only once its load is over, so a repeat cut by a crash or Ctrl-C is rerun by --resume. Every state a
status.json ends in is written here: done or failed (`_finish`), skipped by an early stop (`skip`), failed
before any load when the pre-flight stops the sweep (`not_measured`).
"""
from __future__ import annotations

import http.client
import json
import shutil
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ...runfolder import columns, results
from ...config import ResolvedServer, SweepConfig
from ...contracts.auth import keyed_request
from ...contracts.paths import inside
from ...contracts.records import SIM_LIFE_ENV
from .load import live_env, live_port_now, locust_argv, locust_deadline_s, run_locust
from .launch import Life, server_launch
from .placement import Placement
from .probe_watch import planned_purpose, probe_watch
from .server_check import check_workload
from ...runfolder.plan import life_state, write_status
from .server import (RunningServer, ServerError, ServerProcess, StartFailed, free_port, port_taken, tail,
                     wait_for_port_free)
from ...telemetry.memory import open_memory_source, server_gpus_env, sim_file_env, wait_memory_stable
from ...telemetry.sampler import Sampler
from ...config.workload_variants import Variant
from ...vllm.endpoints import COMPLETIONS_PATH, METRICS_PATH
from ...vllm.knob import Setting
from ...vllm.probe import Capabilities


DEATH_LOG_LINES = 400  # the end of a log read for why a server died after it was ready


@dataclass(frozen=True)
class Outcome:
    state: str  # done | failed
    reason: str = ""
    start_failed: bool = False  # its server exited before it was ready (server.StartFailed)


@dataclass(frozen=True)
class LifeEvents:
    """What the runner hears from a server life: a repeat starting (on a new server or the same one),
    its load starting (the live sampler, for progress), and its outcome."""

    started: Callable[[Life, bool], None] = lambda life, new_server: None
    load_started: Callable[[Sampler], None] = lambda sampler: None
    finished: Callable[[Life, Outcome], None] = lambda life, outcome: None
    variant_started: Callable[[Variant], None] = lambda variant: None  # a block of the workload variants


@dataclass(frozen=True)
class Served:
    """A ready server and how to reach and watch it."""

    base_url: str
    headers: dict[str, str]
    server: ServerProcess
    memory: object
    external: bool
    sim_file: Path | None
    load_env: dict[str, str]    # Locust's: the API key (ResolvedServer.load_env), the server's CUDA_VISIBLE_DEVICES


def warm_up(base_url: str, model: str, headers: dict[str, str], count: int = 2) -> None:
    """A few short requests before sampling starts, so first-request costs stay out of the results (a refusal was
    caught before them: server_check.check_workload)."""
    request = _post(base_url + COMPLETIONS_PATH, {"model": model, "prompt": "warm up", "max_tokens": 4}, headers)
    for _ in range(count):
        try:
            urllib.request.urlopen(request, timeout=60).read()
        except (OSError, http.client.HTTPException):  # HTTPError, a cut answer too: what the load meets, its records say
            return


def answers(base_url: str, model: str, headers: dict[str, str], timeout_s: float) -> bool:
    """Does the server still complete a 1-token request? An HTTP error is an answer; silence is not."""
    request = _post(base_url + COMPLETIONS_PATH, {"model": model, "prompt": "are you there", "max_tokens": 1}, headers)
    try:
        urllib.request.urlopen(request, timeout=timeout_s).read()
    except (urllib.error.HTTPError, http.client.HTTPException):  # a cut answer is an answer too
        return True
    except OSError:
        return False
    return True


def _post(url: str, body: dict, headers: dict[str, str]) -> urllib.request.Request:
    return keyed_request(url, {"Content-Type": "application/json", **headers}, json.dumps(body).encode())


def fresh_life_dir(run_dir: Path, life: Life) -> Path:
    """The life's folder, emptied: a rerun must not append to a cut run's files. Only ever one inside the run folder
    (contracts/paths.py `inside` raises OutsideFolder for any other)."""
    out = inside(run_dir, life.key)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    return out


def run_server_life(config: SweepConfig, caps: Capabilities, setting: Setting, repeats: list[int], run_dir: Path,
                    say, resolved: ResolvedServer, events: LifeEvents | None = None, web_port: int | None = None,
                    placement: Placement | None = None,
                    preflight: Callable[[Served, Placement], Placement] | None = None,
                    where: dict | None = None, purposes: Mapping[str, str] | None = None) -> list[Outcome]:
    """Start the server once and measure `repeats` of `setting` on it, one after another.

    A failed start or a dead server fails every repeat it leaves unmeasured. The server's own files
    (server.log, server.json) live in the first repeat's folder; each later repeat's status.json
    names that folder (`server_life`). With `web_port`, Locust serves its web UI there (load.live_view_port).
    `placement` says which CPUs the server and Locust run on; `preflight`, run once the server is
    warm, may change Locust's process count or stop the sweep (preflight.PreflightError). `where`: a life on a
    Ray cluster (cluster/worker_life.py): its node, GPUs and slot, recorded in each status.json; every life records its
    start time (t_start_s: the cost's wall minutes). `purposes`: per life key, its purpose in plan.json, sent where
    `run_dir` holds no plan (a Ray worker's scratch folder); None: read from `run_dir`'s plan.json."""
    events = events or LifeEvents()
    placement = placement or Placement("off", processes=1 if config.load.processes == "auto"
                                       else int(config.load.processes))
    lives = [Life(setting, repeat) for repeat in repeats]
    host = fresh_life_dir(run_dir, lives[0])
    where = (where or {}) | {"t_start_s": round(time.time(), 3)}
    write_status(host, "running", **where)
    headers = resolved.headers
    external = bool(config.server.url)
    port = 0 if external else config.server.port or free_port(config.server.host)
    base_url = config.server.url.rstrip("/") if external else f"http://{config.server.host}:{port}"
    simulated = config.server.is_simulator and not external
    sim_file = host / "sim_gpu.json"
    if external:
        server, env = RunningServer(base_url, host / "server.log", headers), {}
    else:
        argv, env, secrets = server_launch(config, caps, setting, port, resolved)
        # the simulator draws each server life's restart spread from its name (sim/restart.py): the run folder's
        # and the life's, or server.env's LOOKAHEAD_SIM_LIFE and the life's (the same draws in every run)
        named = f"{env.get(SIM_LIFE_ENV) or run_dir.name}/{lives[0].key}"
        sim_env = sim_file_env(sim_file) | {SIM_LIFE_ENV: named} if simulated else {}
        env = env | placement.server_env | sim_env
        server = ServerProcess(argv, base_url, host / "server.log", env, config.server.stop_grace_s, headers, secrets,
                               placement.server_cpus)
    memory = open_memory_source(config.server.memory_source, simulated, sim_file, lambda: server.pid,
                                config.server.dcgm_url, env)
    served = Served(base_url, headers, server, memory, external, sim_file if simulated else None,
                    resolved.load_env | server_gpus_env(env))  # the live view's GPU row: the server's GPUs
    status: dict = {"memory_source": memory.name, "memory_note": memory.unavailable_reason, **where}
    outcomes: list[Outcome] = []
    out = host
    started: float | None = None
    try:
        if not external and config.server.port and port_taken(config.server.host, port):
            raise ServerError(f"server.port {port}: {config.server.host}:{port} is in use by another process; "
                              "stop it, or set server.port = 0 (a free port per server life)")
        events.started(lives[0], True)
        started = time.monotonic()  # the server-seconds of the start: process start to ready, stable and warm
        with server:
            startup_memory: list[tuple[float, float]] = []
            ready_s = server.wait_until_ready(config.server.ready_timeout_s,
                                              on_poll=lambda: _remember(memory, startup_memory))
            stable, stable_s = wait_memory_stable(memory, config.server.memory_stable_band_mib,
                                                  config.server.memory_stable_window_s,
                                                  config.server.memory_stable_timeout_s, alive=server.alive,
                                                  history=startup_memory)
            say(f"  ready in {ready_s:.1f} s; memory ({memory.name}) {'stable' if stable else 'NOT stable'} "
                f"after {stable_s:.1f} s")
            check_workload(config, base_url, headers)   # a server refusing the load stops the run here
            warm_up(base_url, config.server.served_model, headers)
            if preflight is not None:
                placement = preflight(served, placement)
            status.update(ready_s=round(ready_s, 2), memory_stable=stable, start_s=round(time.monotonic() - started, 2))
            if len(lives) > 1:
                status.update(server_life=lives[0].key)
            for index, life in enumerate(lives):
                if index:
                    out = fresh_life_dir(run_dir, life)
                    write_status(out, "running", server_life=lives[0].key)
                    events.started(life, False)
                measuring = time.monotonic()
                purpose = purposes.get(life.key, "") if purposes is not None else planned_purpose(run_dir, life.key)
                reason, measured, alive = measure(config, served, life, out, say, events, web_port, placement, purpose)
                measured["measure_s"] = round(time.monotonic() - measuring, 2)
                outcomes.append(_finish(out, life, reason, status | measured, events))
                if not alive and index + 1 < len(lives):
                    cause = f"not measured: the server of {lives[0].key} failed in {life.key}: {reason}"
                    for rest in lives[index + 1:]:
                        outcomes.append(_finish(fresh_life_dir(run_dir, rest), rest, cause, status, events))
                    break
        if not external:
            wait_for_port_free(config.server.host, port)
    except ServerError as err:
        # a start that failed cost its server-seconds too (booked on the life that started it)
        spent = {} if started is None or "start_s" in status else {"start_s": round(time.monotonic() - started, 2)}
        first = True
        for life in lives[len(outcomes):]:
            folder = out if first else fresh_life_dir(run_dir, life)
            outcomes.append(_finish(folder, life, str(err), status | (spent if first else {}), events,
                                    detail=str(err) if first else "", start_failed=isinstance(err, StartFailed)))
            first = False
    return outcomes


def _finish(out: Path, life: Life, reason: str, status: dict, events: LifeEvents, detail: str = "",
            start_failed: bool = False) -> Outcome:
    """Write the repeat's final status.json (`done` only without a reason) and tell the runner."""
    state = "failed" if reason else "done"
    extra = {"detail": detail} if detail else {}
    write_status(out, state, reason.splitlines()[0] if reason else "", **extra, **status)
    columns.keep(out)  # typed copies of its CSVs: every later read of the folder is a fast one
    outcome = Outcome(state, reason, start_failed)
    events.finished(life, outcome)
    return outcome


def left_to_run(lives: list[Life], run_dir: Path, tag, say, progress) -> list[Life]:
    """The lives not done yet; one done in an earlier run of this folder is kept as it is (--resume), counted as
    ended."""
    todo = []
    for life in lives:
        if life_state(results.life_dir(run_dir, life.setting.name, life.repeat)) != "done":
            todo.append(life)
            continue
        say(f"{tag(life)}: done earlier, kept")
        progress.life_started(life.key)
        progress.life_finished(life.key)
    return todo


def ended(life: Life, outcome: Outcome, tag, say, progress) -> None:
    """A life's outcome, said and credited to the progress display (here or on a Ray slot)."""
    say(f"{tag(life)}: {outcome.state}" + (f" - {outcome.reason.splitlines()[0]}" if outcome.reason else ""))
    progress.life_finished(life.key)


def skip(out: Path, stopped_at: int) -> None:
    """A life (its folder `out`) an early stop leaves out: the stop rule fired at a smaller K."""
    out.mkdir(parents=True, exist_ok=True)
    write_status(out, "skipped", f"early stop: the stop rule fired at K={stopped_at}")


def not_measured(run_dir: Path, setting: Setting, repeats: list[int], why: str) -> None:
    """Lives stopped before their load (a pre-flight that found the client cannot keep up): failed, so
    --resume runs them again."""
    for repeat in repeats:
        out = results.life_dir(run_dir, setting.name, repeat)
        out.mkdir(parents=True, exist_ok=True)
        write_status(out, "failed", f"not measured: {why}")


def measure(config: SweepConfig, served: Served, life: Life, out: Path, say, events: LifeEvents,
            web_port: int | None, placement: Placement, purpose: str = "") -> tuple[str, dict, bool]:
    """Sample the ready server while Locust runs the stages into `out`, once per workload variant (a block
    each, in order: variants.py says why); with several, each block's files go to out/<variant key>/ and
    variants.json holds each block's times, between samples taken at its edges (its closed window). `purpose`: the
    life's in plan.json (a capacity probe may end early: probe_watch.py).

    Returns (why the repeat failed or "", status fields, whether the server is alive at the end)."""
    server, base_url, headers = served.server, served.base_url, served.headers
    deadline_s = locust_deadline_s(config.load, sum(s.duration_s for s in config.load.stages))
    sim_env = sim_file_env(served.sim_file) if served.sim_file else {}
    variants = config.load.variants
    blocks: list[dict] = []
    with Sampler(base_url + METRICS_PATH, served.memory, out, headers=headers) as sampler:
        hang_s = max(config.load.request_timeout_s, 3.0)

        def abort() -> str:  # asked while Locust runs: stop it at once if the server is gone
            if not served.external and not server.alive():
                return died(server)
            stalled = sampler.stalled_s()
            return (f"the server hung: no token generated for {stalled:.0f} s with requests in flight"
                    if stalled >= hang_s else "")

        for variant in variants:
            folder = out / variant.key if variant.key else out
            folder.mkdir(exist_ok=True)
            if variant.key:
                say(f"  workload variant: {variant.label}")
                sampler.sample_once()  # the block's opening sample
            events.variant_started(variant)
            events.load_started(sampler)
            port, note = live_port_now(web_port)
            if note:
                say(f"  {note}")
            argv = locust_argv(base_url, folder, config.server.served_model, load_with(config, placement, variant),
                               setting_name=life.key, web_port=port, variant_name=variant.label)
            block = {"key": variant.key, "label": variant.label, "t_start_s": time.time()}
            # the simulator's memory file reaches Locust too, for the web UI's GPU memory row
            load = run_locust(argv, folder / "locust.log", deadline_s, env=served.load_env | sim_env | live_env(port),
                              abort=abort, cpus=placement.load_cpus, end_early=probe_watch(config, sampler, purpose))
            if load.ended_early:
                say(f"  {load.ended_early}")
            if variant.key:
                blocks.append(block | {"t_end_s": time.time()})
                sampler.sample_once()  # and its closing one: every request of the block has finished
                results.write_json(out / "variants.json", {"variants": blocks})
            if load.aborted or load.timed_out or (load.exit_code not in (0, 1) and not load.ended_early) \
                    or not (folder / "stages.csv").exists():
                break
        alive_at_end = server.alive()
        out = folder  # the last block's files say why it failed
    # after the closing sample, so this request stays out of the life's token accounting
    hung = (f"the server hung: a 1-token completion got no answer within {hang_s:.0f} s after the load"
            if alive_at_end and not load.aborted
            and not answers(base_url, config.server.served_model, headers, hang_s) else "")
    if hung and not served.external and not server.alive():  # not hung: it was dying meanwhile
        hung, alive_at_end = "", False
    died_at_end = "" if alive_at_end or served.external else died(server)
    measured = dict(locust_exit=load.exit_code, ended_early=load.ended_early, metrics_errors=sampler.metrics_errors,
                    last_metrics_error=sampler.last_metrics_error, write_errors=sampler.write_errors,
                    last_write_error=sampler.last_write_error)
    reason = (load.aborted or hung if load.aborted or hung
              else "Locust overran its deadline" if load.timed_out
              else died_at_end or "the server died during the load" if not alive_at_end
              else f"Locust ran no stage (exit code {load.exit_code}): {last_line(out / 'locust.log')}"
              if not (out / "stages.csv").exists()
              else f"Locust was killed by signal {-load.exit_code} (see locust.log)" if load.exit_code < 0
              else f"Locust exited with code {load.exit_code} (see locust.log)"
              if load.exit_code not in (0, 1) and not load.ended_early
              else "")
    return reason, measured, alive_at_end and not (hung or load.aborted)


def load_with(config: SweepConfig, placement: Placement, variant: Variant | None = None):
    """The load settings with the process count placement resolved ("auto" -> a number), for one workload
    variant (the first when none is given)."""
    variant = variant or config.load.variants[0]
    return config.load.model_copy(update={"processes": placement.processes, "prompt_tokens": variant.prompt_tokens,
                                          "output_tokens": variant.output_setting,
                                          "temperature": variant.temperature})


def died(server: ServerProcess, during: str = "the load") -> str:
    """Why a server process ended: its exit code and the line of its log that says why."""
    code = server.process.poll() if server.process else None
    return f"the server died during {during} (exit code {code}): {server.why_stopped(DEATH_LOG_LINES)}"


def _remember(memory, readings: list[tuple[float, float]]) -> None:
    reading = memory.read()
    if reading is not None:
        readings.append((time.monotonic(), reading.used_mib))


def last_line(path: Path) -> str:
    lines = tail(path, 3).splitlines()
    return lines[-1].strip() if lines else "no output"
