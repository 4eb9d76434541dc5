"""sweep.strategy = "adaptive" through real processes on the simulator's demo scenario (tight-kv, K 0/2/4/8 at
64 users), cut by Ctrl-C in its third life and resumed: it keeps the lives done and reaches the grid's verdict,
"Set K=4 at 64 users" (the demo's, and the truth of the decision-accuracy benchmark's tight-kv scenario), with
fewer server lives than the grid's 8. One sweep serves both tests."""
import json
import signal
import uuid
from types import SimpleNamespace

import pytest
from fault_kit import cli, interrupt, no_traceback, processes_of, start, stop_group, wait_for, write_config

from lookahead_runner.decision.gates.looks import Looks

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # a sweep at 64 users cut, resumed: 108 s; CI runs it

GRID_LIVES = 8  # 4 K x load.repeats = 2

DEMO_ADAPTIVE = """
name = "adaptive"
[server]
model = "{model}"
extra_args = ["--max-num-seqs", "128", "--sim-scenario", "tight-kv", "--sim-set", "startup_s=0.5"]
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 2, 4, 8]
[load]
stages = [{{ users = 64, duration_s = 10 }}]
prompt_tokens = 128
output_tokens = 64
repeats = 2
warmup_s = 2.0
[sweep]
strategy = "adaptive"
[decision]
target_users = 64
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
confirm = "off"
"""


def lives_of(run_dir):
    return [life["dir"] for life in json.loads((run_dir / "plan.json").read_text())["lives"]]


@pytest.fixture(scope="module")
def cut_and_resumed(tmp_path_factory):
    """One adaptive sweep, cut by Ctrl-C in its third life and resumed to its end (both tests read it)."""
    tmp_path = tmp_path_factory.mktemp("adaptive")
    model = f"sim/adaptive-cut-{uuid.uuid4().hex[:8]}"
    config = write_config(tmp_path, DEMO_ADAPTIVE.format(model=model))
    runner = start("sweep", "--config", str(config), "--out", str(tmp_path / "runs"))
    try:
        wait_for(lambda: any((run / "k2" / "r0" / "requests.csv").exists() for run in (tmp_path / "runs").glob("*")),
                 150, "the third life's load")
        interrupt(runner, signal.SIGINT)
        _, stderr = runner.communicate(timeout=60)
    finally:
        stop_group(runner)
    wait_for(lambda: not processes_of(model), 10, "every server and Locust process to exit")
    (run_dir,) = list((tmp_path / "runs").iterdir())
    lives_at_cut = lives_of(run_dir)
    kept = (run_dir / "k4/r0/requests.csv").stat().st_mtime_ns
    resumed = cli("sweep", "--resume", str(run_dir))
    return SimpleNamespace(model=model, cut_returncode=runner.returncode, cut_stderr=stderr, run_dir=run_dir,
                           lives_at_cut=lives_at_cut, kept_mtime_ns=kept, resumed=resumed)


def test_a_resumed_adaptive_sweep_keeps_its_lives_and_ends_in_the_same_verdict(cut_and_resumed):
    run = cut_and_resumed
    assert run.cut_returncode == 130 and "Traceback" not in run.cut_stderr
    assert run.lives_at_cut == ["k0/r0", "k4/r0", "k2/r0"]   # the plan holds the lives chosen so far
    no_traceback(run.resumed.stderr)
    assert run.resumed.returncode == 0, run.resumed.stdout[-3000:] + run.resumed.stderr[-2000:]
    assert "k0/r0: done earlier, kept" in run.resumed.stdout and "k4/r0: done earlier, kept" in run.resumed.stdout
    assert (run.run_dir / "k4/r0/requests.csv").stat().st_mtime_ns == run.kept_mtime_ns
    assert not processes_of(run.model)


def test_adaptive_reaches_the_grids_verdict_with_fewer_lives(cut_and_resumed):
    run_dir, done = cut_and_resumed.run_dir, cut_and_resumed.resumed
    decision = json.loads((run_dir / "decision.json").read_text())
    assert decision["verdict"].startswith("Set K=4 at 64 users"), decision["verdict"]
    lives = lives_of(run_dir)
    # the baseline first, then the middle K
    assert lives[0] == "k0/r0" and next(l for l in lives if not l.startswith("k0/")) == "k4/r0"
    assert len(lives) < GRID_LIVES
    cost = decision["cost"]
    assert cost["strategy"] == "adaptive" and cost["lives"] == len(lives) and cost["grid_lives"] == GRID_LIVES
    # each life a look of at most the grid's 8, stopped past the bar the error-spending rule set for it
    bar = Looks(2, GRID_LIVES, 0.1).bar(len(lives))
    assert cost["stopped_because"].startswith(f"decided at look {len(lives)} of at most {GRID_LIVES}: boundary "
                                              f"{bar * 100:.1f} %: K=4 wins"), cost["stopped_because"]
    assert decision["looks"]["stopped_by"] == "boundary" and decision["looks"]["text"] == (
        f"stopped at look {len(lives)} of at most {GRID_LIVES}: boundary {bar * 100:.1f} %")
    assert "; a verdict like this one: at best " in cost["text"] and f"at worst {GRID_LIVES} " in cost["text"]
    assert cost["start_s"] > 0 and cost["measure_s"] >= 10 * len(lives)
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith(f"this verdict cost {len(lives)} lives,") and f"the full grid: {GRID_LIVES} lives" in last
