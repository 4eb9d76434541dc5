"""The restart spread remembered per server: a ledger in the user's cache folder, keyed by the server's fingerprint.

A server start is the price of a verdict; the restart spread (how far one life of a K lands from the next,
docs/restart-spread.md) is a fact about the server, so it is bought once: a run that measured it (two or more
restarted lives of a K) adds its part to the ledger, and the next sweep on the same fingerprint starts with it.
The fingerprint is what changes speed (server_fingerprint.py), its hardware the GPUs (model and count, on a Ray
cluster the nodes'; without one, the CPU and its count: `hardware` here). A spread is
taken only at the same target users (it changes with concurrency: vLLM #53436 saw 7.5-19.7 % at 1-4 concurrent
requests and under 0.7 % at 8 and more) and for the target stage alone, only from runs of the same workload, from the
newest MAX_RUNS runs less any whose spread is wider than the others' beyond the F test (an outlier pair). Each run
keeps the part of its spread its windows' own noise makes, so a window of another length adds its own
(decision/cells/restart_spread.py), and its own date (a report made again re-dates nothing).

    $XDG_CACHE_HOME/lookahead-runner/restart-spread.json   (~/.cache when XDG_CACHE_HOME is unset)

The user's alone: 0600 files in a 0700 folder the user owns (a folder of another user's, or a link, is neither read
nor written), no link in it followed; written by the sweeps run here, and by `report` only when asked (cli.py).

What a run used is recorded in its plan.json (`LedgerUse`, Plan.restart_spread), so `--resume` and `report`
decide on the same spread whatever the ledger holds by then; `--no-ledger` neither reads nor writes it. A file
that cannot be read is one warning line and ignored (the next run that measures a spread writes a fresh one).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import json
import math
import os
import platform
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from ..config import SweepConfig
from ..config.decision import EarlierSpread
from ..contracts.paths import open_private, own_folder, read_no_link, write_private
from ..decision.cells.measure import _noisier
from ..decision.schema import Decision, RestartSpread
from ..telemetry.visible_gpus import VISIBLE_ENV, nvml_visible
from .record import Record
from .server_fingerprint import fingerprint, key_of, speed_flags, workload_key  # noqa: F401 (the ledger's API)

LEDGER_VERSION = 2   # 2 (issue 46): each run's window part; a version-1 file is read (no window part) and rewritten
MAX_RUNS = 10
LEDGER_FILE = Path("lookahead-runner") / "restart-spread.json"
LOCK_WAIT_S = 10.0    # a write takes milliseconds: a lock held longer is a stopped process
_BAD_SUFFIX = ".bad"   # an unreadable ledger is moved to restart-spread.json.bad before a fresh one is written


class LedgerRun(Record):
    """One run's measured part: the squared relative deviations of its restarted lives from their K's mean."""

    model_config = ConfigDict(extra="allow", strict=True)  # "0.1" or true for a number: a corrupt entry

    run_id: str
    date: str                 # YYYY-MM-DD
    users: int = Field(ge=0)  # the target users it was measured at
    squares: float = Field(ge=0, allow_inf_nan=False)
    df: int = Field(ge=1)
    lives: int = Field(ge=0)
    rel_sd: float = Field(ge=0, allow_inf_nan=False)
    workload: str = ""        # workload_key: what the spread and the levels were measured with
    levels: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    #                           str(K) -> the objective at the target
    window_squares: float = Field(0.0, ge=0, allow_inf_nan=False)   # the part of `squares` its windows' noise makes
    window_df: int = Field(0, ge=0)                                  # ... on these bins' degrees of freedom


class LedgerServer(Record):
    model_config = ConfigDict(extra="allow", strict=True)

    fingerprint: dict[str, Any]
    runs: list[LedgerRun] = Field(default_factory=list)


class Ledger(Record):
    version: int = LEDGER_VERSION
    servers: dict[str, LedgerServer] = Field(default_factory=dict)


class _EarlierFields(Record):
    """config.decision.EarlierSpread's fields as plan.json holds them (checked where it is read)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    squares: float = Field(ge=0, allow_inf_nan=False)
    df: int = Field(ge=0)
    runs: int = Field(ge=0)
    lives: int = Field(ge=0)
    last: str
    levels: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    window_squares: float = Field(0.0, ge=0, allow_inf_nan=False)
    window_df: int = Field(0, ge=0)
    users: int = Field(0, ge=0)


class LedgerUse(Record):
    """plan.json's "restart_spread": the server's fingerprint and what the run took from the ledger."""

    key: str                              # the fingerprint's hash
    fingerprint: dict[str, Any]
    enabled: bool = True                  # false: --no-ledger (neither read nor written)
    earlier: dict[str, Any] | None = None  # an EarlierSpread's fields; None: nothing earlier on this server
    note: str = ""                        # what the sweep said about it

    @field_validator("earlier")
    @classmethod
    def _earlier_is_a_spread(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        """Every field of an EarlierSpread, of its type, and no other: a hand-edited or foreign plan.json is one line
        naming the key (plan.py read_plan), never a TypeError when the decision reads it."""
        if value is None:
            return value
        names = {f.name for f in dataclasses.fields(EarlierSpread)}
        if unknown := sorted(set(value) - names):
            raise ValueError(f"unknown key {unknown[0]!r} (it holds {', '.join(sorted(names))})")
        try:
            EarlierSpread(**_EarlierFields.model_validate(value).model_dump())
        except ValidationError as err:
            raise ValueError(_first_error(err)) from None
        return value

    def earlier_spread(self) -> EarlierSpread | None:
        return EarlierSpread(**self.earlier) if self.enabled and self.earlier else None

    def with_earlier(self, earlier: EarlierSpread | None) -> "LedgerUse":
        return self.model_copy(update={"earlier": dataclasses.asdict(earlier) if earlier else None})


def ledger_path(environ: dict[str, str] | None = None) -> Path:
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / LEDGER_FILE


# --- the fingerprint ---------------------------------------------------------------------------------------------
def hardware(config: SweepConfig, node_gpus: tuple[str, ...] | None = None) -> str:
    """The GPUs the server gets (model and count), else the CPU and how many the server may use. On a Ray cluster
    the lives run on its nodes, not here: `node_gpus` are the models of one slot's GPUs as the probe found them
    there (run/cluster/nodes.py; every slot holds the same), None where no slot was probed."""
    if config.server.is_simulator:
        return "simulated"
    if config.cluster.engine == "ray":
        if node_gpus is None:
            return f"Ray cluster, GPUs not probed, {config.cluster.life_gpus(config.server.extra_args)} per life"
        return _counted(list(node_gpus)) or "no GPU: a Ray node"
    visible = config.server.env.get(VISIBLE_ENV, os.environ.get(VISIBLE_ENV))
    nvml, gpus = nvml_visible(visible)
    names = []
    for gpu in gpus[:config.cluster.life_gpus(config.server.extra_args)]:  # those it takes, not the host's count
        with contextlib.suppress(Exception):
            name = nvml.nvmlDeviceGetName(nvml.nvmlDeviceGetHandleByIndex(gpu.index))
            names.append(name.decode() if isinstance(name, bytes) else str(name))
    return _counted(names) or f"no GPU: {_cpu_model()}, CPUs {config.server.cpus or f'all {os.cpu_count()}'}"


def _counted(names: list[str]) -> str:
    """"2 x NVIDIA H100 80GB HBM3" ("" for none)."""
    return ", ".join(f"{names.count(n)} x {n}" for n in sorted(set(names)))


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


# --- reading and writing ---------------------------------------------------------------------------------------
def read_ledger(path: Path) -> tuple[Ledger, str]:
    """The ledger, and a one-line warning when the file is there but unreadable (then an empty one) or holds corrupt
    entries (a wrong type, a spread that is not a finite number >= 0: those runs are left out, the rest kept)."""
    try:
        own_folder(path.parent)  # the user's alone: a folder of another's, or a link, could hold a planted ledger
        data = json.loads(read_no_link(path))
        if not isinstance(data, dict) or not isinstance(data.get("servers", {}), dict):
            raise ValueError("not a ledger: expected {\"version\": 1, \"servers\": {...}}")
    except FileNotFoundError:
        return Ledger(), ""
    except PermissionError as err:
        return Ledger(), f"warning: the restart spread ledger {path} is not used: {err}"
    except (OSError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        return Ledger(), (f"warning: the restart spread ledger {path} is unreadable ({first[:120]}): ignored; the "
                          f"next run that measures a spread writes a fresh one (the old kept as {_BAD_SUFFIX})")
    version = data.get("version", LEDGER_VERSION)
    if isinstance(version, int) and not isinstance(version, bool) and version > LEDGER_VERSION:
        return Ledger(version=version), (f"warning: the restart spread ledger {path} was written by a newer "
                                         f"lookahead-runner (version {version}): not used nor written; upgrade")
    servers, bad = {}, []
    for key, entry in data.get("servers", {}).items():
        runs = entry.get("runs") if isinstance(entry, dict) else None
        try:
            server = LedgerServer.model_validate({**entry, "runs": []})
            if not isinstance(runs, list):
                raise ValueError("runs: not a list")
        except (TypeError, ValueError, ValidationError) as err:
            bad.append(f"server {key}: {_first_error(err)}")
            continue
        for n, run in enumerate(runs):
            try:
                server.runs.append(LedgerRun.model_validate(run))
            except (ValueError, ValidationError) as err:
                bad.append(f"server {key} run {n + 1}: {_first_error(err)}")
        servers[key] = server
    warning = (f"warning: the restart spread ledger {path} has {len(bad)} corrupt entr{'y' if len(bad) == 1 else 'ies'} "
               f"({bad[0][:160]}): ignored, the rest kept" if bad else "")
    return Ledger(version=LEDGER_VERSION, servers=servers), warning


def _first_error(err: Exception) -> str:
    if isinstance(err, ValidationError) and err.errors():
        first = err.errors()[0]
        return f"{'.'.join(map(str, first['loc'])) or 'entry'}: {first['msg']}"
    return (str(err).splitlines() or [type(err).__name__])[0]


def earlier_of(ledger: Ledger, key: str, users: int, run_id: str = "", workload: str = "") -> EarlierSpread | None:
    """The spread earlier runs on this server measured at these users with this workload (any, where `workload` is
    ""): the newest MAX_RUNS (this run's own entry left out), less those wider than the rest beyond the F test, their
    squares, window parts and degrees of freedom pooled; and each K's level in those runs."""
    server = ledger.servers.get(key)
    runs = [r for r in (server.runs if server else []) if r.users == users and r.run_id != run_id and r.df > 0
            and (not workload or r.workload == workload)]
    runs = alike(sorted(runs, key=lambda r: r.date)[-MAX_RUNS:])
    if not runs:
        return None
    by_k: dict[str, list[float]] = {}
    for run in runs:
        for k, value in run.levels.items():
            by_k.setdefault(k, []).append(value)
    window_df = sum(r.window_df for r in runs) if all(r.window_df for r in runs) else 0
    return EarlierSpread(sum(r.squares for r in runs), sum(r.df for r in runs), len(runs), sum(r.lives for r in runs),
                         max(r.date for r in runs), {k: sum(v) / len(v) for k, v in sorted(by_k.items())},
                         sum(r.window_squares for r in runs), window_df, users)


def alike(runs: list[LedgerRun]) -> list[LedgerRun]:
    """The runs less those whose spread is wider than the others' beyond the F test, the widest first, one at a time
    (as a K is set apart at a stage, decision/cells/measure.py `throughput_noises`): one run whose pair landed far
    apart (an outlier life) would otherwise widen every later run's spread for MAX_RUNS runs."""
    kept = list(runs)
    while len(kept) > 1:
        squares, df = sum(r.squares for r in kept), sum(r.df for r in kept)
        excess, worst = max((_noisier((r.squares, r.df), (squares - r.squares, df - r.df)), n)
                            for n, r in enumerate(kept))
        if excess <= 1:
            break
        kept.pop(worst)
    return kept


def run_date(created: str, run_id: str) -> str:
    """A run's date (YYYY-MM-DD): plan.json's `created`, else its folder's stamp (NAME-YYYYMMDD-HHMMSS), else today."""
    for text, pattern in ((created, r"(\d{4})-(\d{2})-(\d{2})"), (run_id, r"(\d{4})(\d{2})(\d{2})-\d{6}")):
        if match := re.search(pattern, text or ""):
            with contextlib.suppress(ValueError):
                return datetime.date(*map(int, match.groups())).isoformat()
    return datetime.date.today().isoformat()


def ledger_run(spread: RestartSpread, run_id: str, users: int, date: str, workload: str = "",
               levels: Mapping[str, float] | None = None) -> LedgerRun | None:
    """What the ledger keeps of a decision's restart spread (decision.json's `restart_spread`): its pooled part, its
    window part, each K's level; None where it measured none."""
    squares = spread.ledger_squares
    if not spread.ledger_df or not math.isfinite(squares) or squares < 0:
        return None
    return LedgerRun(run_id=run_id, date=date, users=users, squares=squares, df=spread.ledger_df,
                     lives=spread.ledger_lives, rel_sd=(squares / spread.ledger_df) ** 0.5, workload=workload,
                     levels={k: v for k, v in (levels or {}).items() if math.isfinite(v) and v >= 0},
                     window_squares=spread.window_squares, window_df=spread.window_df)


def with_run(ledger: Ledger, use: LedgerUse, run: LedgerRun) -> Ledger:
    """The ledger with this run's entry (replacing one of the same run_id: a report made again writes it once)."""
    servers = dict(ledger.servers)
    server = servers.get(use.key) or LedgerServer(fingerprint=use.fingerprint)
    servers[use.key] = server.model_copy(update={"runs": [r for r in server.runs if r.run_id != run.run_id] + [run]})
    return Ledger(version=LEDGER_VERSION, servers=servers)


def levels_of(decision: Decision) -> dict[str, float]:
    """Each K's objective at the target, as the ledger keeps it (str(K) -> value)."""
    return {str(c.k): c.objective for c in decision.candidates if math.isfinite(c.objective)}


def earlier_from(decision: Decision, measured_at: int, users: int, workload: str = "") -> EarlierSpread | None:
    """What the next run at `users` takes from a ledger holding only this decision's spread, measured at
    `measured_at` users: the path finalize.remember_spread and use_for_run take, without the file (pure: a sweep on
    synthetic lives that borrows a spread measured at another stage, or with windows of another length, decides
    with `p.with_earlier(earlier_from(...))`)."""
    spread = decision.restart_spread
    run = ledger_run(spread, "measured", measured_at, "2026-01-01", workload, levels_of(decision)) if spread else None
    if run is None:
        return None
    use = LedgerUse(key="synthetic", fingerprint={})
    return earlier_of(with_run(Ledger(), use, run), use.key, users, workload=workload)


def use_for_run(config: SweepConfig, vllm_version: str, enabled: bool, path: Path | None = None,
                gear: str | None = None) -> tuple[LedgerUse | None, str]:
    """What a new run takes from the ledger (for plan.json), and the line to say about it; None where the server's
    restart spread is not unknown (the simulator's documented one, or decision.restart_spread), for one K (a
    ramp, a running server: nothing to compare), and where none is ever written (a grid axis, workload variants,
    rate stages only)."""
    if not config.decision.spread_unknown or len(config.speculation.k) < 2:
        return None, ""
    if config.grid.axis or len(config.load.variants) > 1:  # as finalize.remember_spread: never written for them
        what = "a grid axis: each value is another server" if config.grid.axis else \
            "workload variants: each has its own target users"
        return None, f"restart spread ledger: not used ({what})"
    if not config.load.user_stages:  # the verdict at a rate carries no users stage's spread: none written, none read
        return None, "restart spread ledger: not used (rate stages only: it holds the spread at users stages)"
    print_ = fingerprint(config, vllm_version, hardware(config) if gear is None else gear)
    key = key_of(print_)
    if not enabled:
        return LedgerUse(key=key, fingerprint=print_, enabled=False, note="--no-ledger"), \
            "restart spread ledger: not used (--no-ledger)"
    path = ledger_path() if path is None else path
    ledger, warning = read_ledger(path)
    earlier = earlier_of(ledger, key, config.target_users, workload=workload_key(config))
    if earlier is None:
        note = f"no earlier run on this server at {config.target_users} users"
        said = f"restart spread ledger: {note}; this run measures it"
    else:
        note = (f"restart spread {earlier.rel_sd:.1%} from {earlier.runs} earlier run{'s' if earlier.runs != 1 else ''} "
                f"on this server (last {earlier.last}, {earlier.df} degrees of freedom)")
        said = f"restart spread ledger: {note}"
    use = LedgerUse(key=key, fingerprint=print_, note=note).with_earlier(earlier)
    return use, "\n".join(line for line in (warning, said) if line)


@contextlib.contextmanager
def _locked(path: Path, wait_s: float | None = None):
    """The ledger to one writer at a time; a TimeoutError (an OSError: finalize says it in one line) where another
    holds it beyond `wait_s` (a process stopped while writing must not hang the report)."""
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    own_folder(path.parent, create=True)  # 0700 and the user's: PermissionError otherwise, as finalize says
    with open_private(path.with_suffix(".lock")) as lock:  # 0600; a link there is an error, never followed
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{path.with_suffix('.lock')} held by another process for {wait_s:g} s") \
                        from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def remember(use: LedgerUse, run_id: str, users: int, squares: float, df: int, lives: int,
             path: Path | None = None, today: str | None = None, workload: str = "",
             levels: dict[str, float] | None = None, window_squares: float = 0.0, window_df: int = 0) -> str:
    """This run's measured part into the ledger (its entry replaced if it was there: a report re-rendered or a run
    resumed writes it once), dated `today` (the run's date; the day it is written where none is given); the warning
    line when the old file was unreadable, else ""."""
    if not use.enabled or df <= 0 or not math.isfinite(squares) or squares < 0:
        return ""
    spread = RestartSpread(rel_sd=(squares / df) ** 0.5, ledger_squares=squares, ledger_df=df, ledger_lives=lives,
                           window_squares=window_squares, window_df=window_df)
    run = ledger_run(spread, run_id, users, today or datetime.date.today().isoformat(), workload, levels)
    path = ledger_path() if path is None else path
    with _locked(path):
        ledger, warning = read_ledger(path)
        if ledger.version > LEDGER_VERSION:  # a newer runner's file: left as it is
            return warning
        if warning and path.exists():  # unreadable or corrupt entries: the old file kept aside, not lost
            with contextlib.suppress(OSError):
                os.replace(path, path.with_name(path.name + _BAD_SUFFIX))
        ledger = with_run(ledger, use, run)
        write_private(path, json.dumps(ledger.model_dump(mode="json"), indent=1))  # 0600, no link followed
    return warning
