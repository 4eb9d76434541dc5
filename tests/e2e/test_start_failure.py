"""A server that exits before it is ready, through real processes: the line it is reported by is the exception
vLLM raised (the root cause where vLLM says "see root cause above"), read from the whole log; and a first life
that cannot start, in a sweep whose lives differ in K alone, stops the sweep instead of starting the rest."""
from __future__ import annotations

import json
import sys

import pytest
from fault_kit import cli, faults_at_k, kill_all, no_traceback, only_run_dir, status, survivors, sweep_toml, \
    unique_model, write_config

from lookahead_runner.run.life.server import ServerProcess, StartFailed

pytestmark = pytest.mark.e2e

MEMORY_CAUSE = "ValueError: Available memory on node 0 (8.78/10.21 GiB) on startup is less than desired CPU memory"


@pytest.mark.parametrize("log, why", [
    ("server-log-startfail-cpu-memory.txt", MEMORY_CAUSE),
    ("server-log-startfail-draft-name.txt", "ValidationError: 1 validation error for SpeculativeConfig: Value error, "
                                            "Invalid repository ID or local directory specified: 'sim/llama-68m'."),
])
def test_a_start_failure_is_reported_by_the_exception_vllm_raised(fixtures_dir, tmp_path, log, why):
    """A process printing a real vLLM 0.32 start failure's log, then exiting 1, as vLLM did."""
    script = "import sys; sys.stdout.write(open(sys.argv[1], encoding='utf-8').read()); sys.exit(1)"
    server = ServerProcess([sys.executable, "-c", script, str(fixtures_dir / log)],
                           "http://127.0.0.1:9", tmp_path / "server.log", stop_grace_s=2)
    with pytest.raises(StartFailed) as failed:
        with server:
            server.wait_until_ready(30)
    first = str(failed.value).splitlines()[0]
    assert first.startswith(f"server exited with code 1 before it was ready: {why}"), first
    assert failed.value.cause.startswith(why)
    if log.endswith("cpu-memory.txt"):
        assert first.endswith("(the root cause of RuntimeError: Engine core initialization failed)"), first


@pytest.mark.parametrize("strategy", ["grid", "adaptive"])
def test_a_first_life_that_cannot_start_stops_a_sweep_of_lives_that_differ_in_k_alone(tmp_path, strategy):
    model = unique_model("startfail")
    toml = sweep_toml(model, [0, 2, 4], env=faults_at_k({0: ["--sim-fault", "fail-start"]})) + \
        f'[sweep]\nstrategy = "{strategy}"\n'

    try:
        done = cli("sweep", "--config", str(write_config(tmp_path, toml)), "--out", str(tmp_path / "runs"),
                   timeout=120)
        run_dir = only_run_dir(tmp_path / "runs")
        no_traceback(done.stdout, done.stderr)
        assert done.returncode == 2, done.stderr
        line, = done.stderr.strip().splitlines()
        assert line.startswith("lookahead-runner: k0/r0: server exited with code 1 before it was ready: "
                               "RuntimeError: CUDA error: an illegal memory access was encountered"), line
        assert "the sweep's 2 other server lives start the same server with another K" in line
        assert f"Nothing was measured: fix the cause (the log: {run_dir / 'k0/r0/server.log'}) and start the sweep " \
               f"again; --resume {run_dir} would rerun the config this folder recorded" in line, line
        assert status(run_dir, "k0/r0")["state"] == "failed"
        assert not (run_dir / "k2").exists() and not (run_dir / "k4").exists()  # never started
        planned = [life["dir"] for life in json.loads((run_dir / "plan.json").read_text())["lives"]]
        assert planned == (["k0/r0", "k2/r0", "k4/r0"] if strategy == "grid" else ["k0/r0"])  # --resume runs them
        assert survivors(model, str(run_dir)) == []
    finally:
        kill_all(model)


def test_a_server_that_dies_later_is_not_blamed_on_an_exception_it_survived(tmp_path):
    """died() reads the end of the log: a traceback logged and survived long before is not the cause."""
    from lookahead_runner.run.life.life import DEATH_LOG_LINES, died

    script = ("import sys; print('Traceback (most recent call last):'); print('  File \"a.py\", line 1'); "
              "print('ValueError: a request it answered 400'); [print(f'INFO step {i}') for i in range(1000)]; "
              "print('ERROR engine core died: CUDA error: out of memory'); sys.exit(1)")
    server = ServerProcess([sys.executable, "-c", script], "http://127.0.0.1:9", tmp_path / "server.log",
                           stop_grace_s=2)
    with server:
        server.process.wait(timeout=30)
        assert died(server) == ("the server died during the load (exit code 1): ERROR engine core died: CUDA error: "
                                "out of memory")
        assert "ValueError" in server.why_stopped() and DEATH_LOG_LINES < 1000  # the whole log would blame it
