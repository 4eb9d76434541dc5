"""Issue 38 through real processes: a simulator that draws a restart spread (--sim-restart-spread 0.02) is judged
as real vLLM is (its spread unknown). With no sweep.strategy and no load.repeats given the sweep is adaptive: its
first run buys the spread with one repeated life and remembers it in the ledger (XDG_CACHE_HOME); the second run
on the same server decides with one life per K, saying the spread came from that earlier run. A changed flag is
another server (the ledger not used); a corrupt ledger is one warning line. K=4 gains about +60 % at 32 users
(roomy-kv, alpha 0.55): one life each would decide it against the 15 % assumed, so the first run's third life is
bought for the spread alone, never again on this server. So large a gain, because a spread measured by one pair of
lives has one degree of freedom: its Student's t (a Cauchy) leaves a single-life K a few % of resamples far away
whatever the spread, and a +30 % gain is decided on it only when the pair happened to land close.
Deterministic: the simulated lives draw their speeds from server.env's LOOKAHEAD_SIM_LIFE and the life's name, not
from the run folder's timestamped name (which made each run a new draw: the test failed now and then). 10-s
stages: a single-life K whose window is noisier inside than the spread keeps its own noise, with the degrees of
freedom of its window's bins (a 5-s window has one or two: a Cauchy that left the second run undecided)."""
import json
from types import SimpleNamespace

import pytest
from fault_kit import cli, write_config

pytestmark = [pytest.mark.e2e, pytest.mark.slow]  # two adaptive sweeps: 95 s in CI (2026-12-06); CI runs it

CONFIG = """
name = "ledger"
[server]
model = "{model}"
extra_args = {extra_args}
env = {{ LOOKAHEAD_SIM_LIFE = "{life}" }}
ready_timeout_s = 60
memory_stable_window_s = 0.5
[speculation]
k = [0, 4]
[load]
stages = [{{ users = 32, duration_s = 10 }}]
prompt_tokens = 128
output_tokens = 32
warmup_s = 1.0
preflight_s = 0
[decision]
max_client_lag_p99_ms = 250  # a busy host: the parallel test run (tests/conftest.py); not under test here
confirm = "off"
"""
# the lives' draws (sim/restart.py): K=0 1.002 and 1.001, K=4 1.000 and 1.006 of the scenario's speed; any name
# is the same draws in every run, this one lands close (a one-pair spread of 1 degree of freedom decides little)
LIFE = "ledger-e2e-35"
FLAGS = ["--max-num-seqs", "128", "--sim-scenario", "roomy-kv", "--sim-set", "alpha=0.55", "--sim-set",
         "startup_s=0.3", "--sim-restart-spread", "0.02"]


def decision_of(run_dir):
    return json.loads((run_dir / "decision.json").read_text())


def plan_of(run_dir):
    return json.loads((run_dir / "plan.json").read_text())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Two sweeps of one config, one cache folder (both tests read them)."""
    tmp_path = tmp_path_factory.mktemp("ledger")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    model = "sim/ledger-e2e"
    config = write_config(tmp_path, CONFIG.format(model=model, extra_args=json.dumps(FLAGS), life=LIFE))
    runs = []
    for n in range(2):
        out = tmp_path / f"runs{n}"
        done = cli("sweep", "--config", str(config), "--out", str(out), env=env)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        (run_dir,) = list(out.iterdir())
        runs.append(SimpleNamespace(stdout=done.stdout, run_dir=run_dir, decision=decision_of(run_dir),
                                    plan=plan_of(run_dir)))
    return SimpleNamespace(runs=runs, config=config, env=env, model=model, tmp_path=tmp_path)


def test_the_second_run_on_the_same_server_decides_with_one_life_per_k(two_runs):
    first, second = two_runs.runs
    # the first: adaptive by default, one repeated life bought for the spread, remembered
    assert "adaptive sweep (no sweep.strategy given, on a server whose restart spread is unknown" in first.stdout
    assert "restart spread ledger: no earlier run on this server at 32 users; this run measures it" in first.stdout
    spread_lives = [life for life in first.plan["lives"] if life["purpose"] == "spread"]
    assert len(spread_lives) == 1 and len(first.plan["lives"]) >= 3
    assert first.decision["cost"]["spread_lives"] == 1
    assert "; 1 life measured the restart spread;" in first.decision["cost"]["text"]
    assert first.decision["status"] == "decided" and first.decision["recommended"]["k"] == 4
    measured = first.decision["restart_spread"]
    assert measured["this_df"] >= 1 and measured["earlier_runs"] == 0 and "in this run" in measured["text"]
    # the draws come from the name given, never the run folder's (the same in every run of the test)
    assert f"life '{LIFE}/k4/r0' runs at 1.000 x" in (first.run_dir / "k4" / "r0" / "server.log").read_text()
    # the second: the same fingerprint, the spread from the ledger, one life per K
    assert "restart spread ledger: restart spread" in second.stdout and "from 1 earlier run on this server" in \
        second.stdout
    # its plan says it borrows that spread, not that it buys one
    assert "the ledger holds it from 1 earlier run on this server (" in second.stdout and \
        "so no life is bought to measure it" in second.stdout
    assert "one repeated life measures it" not in second.stdout and "one repeated life measures it" in first.stdout
    earlier = second.plan["restart_spread"]["earlier"]
    # the ledger keeps the pooled K's degrees of freedom; the stated spread (this_df) takes in every restarted life,
    # a K the F test set apart included, which the ledger leaves out (an outlier pair would widen later runs)
    assert earlier["runs"] == 1 and earlier["df"] == measured["ledger_df"] >= 1
    assert measured["this_df"] >= measured["ledger_df"]
    assert [life["dir"] for life in second.plan["lives"]] == ["k0/r0", "k4/r0"]
    assert second.decision["status"] == "decided" and second.decision["recommended"]["k"] == 4
    assert "K=0, K=4 on one life each, with the restart spread" in second.decision["verdict"]
    assert "from 1 earlier run on this server (last " in second.decision["verdict"]
    assert second.decision["cost"]["spread_lives"] == 0 and second.decision["cost"]["lives"] == 2


def test_the_report_reproduces_the_verdict_from_plan_json_whatever_the_ledger_holds(two_runs):
    second = two_runs.runs[1]
    ledger = two_runs.tmp_path / "cache" / "lookahead-runner" / "restart-spread.json"
    ledger.write_text("{")  # whatever it holds by now
    again = cli("report", str(second.run_dir), env=two_runs.env)
    assert again.returncode == 0, again.stderr
    assert decision_of(second.run_dir)["verdict"] == second.decision["verdict"]


def test_another_flag_is_another_server_and_a_corrupt_ledger_is_one_warning_line(two_runs):
    changed = cli("sweep", "--config", str(two_runs.config), "--dry-run",
                  "--set", f"server.extra_args={json.dumps(FLAGS + ['--max-num-batched-tokens', '4096'])}",
                  env=two_runs.env)
    assert changed.returncode == 0, changed.stderr
    assert "restart spread ledger: no earlier run on this server at 32 users" in changed.stdout
    (two_runs.tmp_path / "cache" / "lookahead-runner" / "restart-spread.json").write_text('{"version": ')
    corrupt = cli("sweep", "--config", str(two_runs.config), "--dry-run", env=two_runs.env)
    assert corrupt.returncode == 0 and "Traceback" not in corrupt.stderr + corrupt.stdout
    warnings = [line for line in corrupt.stdout.splitlines() if "ledger" in line and "unreadable" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: the restart spread ledger ")
    unused = cli("sweep", "--config", str(two_runs.config), "--dry-run", "--no-ledger", env=two_runs.env)
    assert "restart spread ledger: not used (--no-ledger)" in unused.stdout
