"""When the first server life's failed start decides for the whole sweep (run/strategies/start_failure.py)."""
from __future__ import annotations

import pytest

from lookahead_runner.config import config_from_dict
from lookahead_runner.run.life.launch import Life
from lookahead_runner.run.life.life import Outcome
from lookahead_runner.run.runner import plan_lives
from lookahead_runner.run.strategies.start_failure import SharedStartFailure, may_stop_at_first_start, stop_if_shared
from lookahead_runner.runfolder import results
from lookahead_runner.runfolder.plan import write_status


def _may_stop(tmp_path, on_cluster=False, **sections) -> bool:
    config = config_from_dict(sections)
    lives = plan_lives(config)
    return may_stop_at_first_start(config, tmp_path, lives, len(lives), on_cluster)


def test_lives_that_differ_in_k_alone_stop_at_a_failed_first_start(tmp_path):
    assert _may_stop(tmp_path)
    assert _may_stop(tmp_path, load={"prompt_tokens": [64, 128]})  # workload variants: the same server


@pytest.mark.parametrize("sections", [{"grid": {"flag": "--max-num-seqs", "values": ["8", "16"]}},
                                      {"speculation": {"k": [0]}}])
def test_a_grid_or_a_single_start_goes_on(tmp_path, sections):
    assert not _may_stop(tmp_path, **sections)


def test_on_a_cluster_or_after_a_life_ran_the_sweep_goes_on(tmp_path):
    assert not _may_stop(tmp_path, on_cluster=True)
    out = results.life_dir(tmp_path, "k0", 0)
    out.mkdir(parents=True)
    write_status(out, "done")
    assert not _may_stop(tmp_path)  # a --resume of a folder whose server started before


def test_only_a_start_failure_stops_and_the_line_says_how_to_go_on(tmp_path):
    """--resume RUN reruns plan.json's config: after a cause in the config (a flag, a path, a memory fraction) it
    fails alike, so the line sends the user to a fresh sweep (nothing was measured) and --resume to the rest."""
    life = Life(plan_lives(config_from_dict({}))[0].setting, 0)
    stop_if_shared([Outcome("failed", "the server died during the load (exit code 1): x")], life, 4, tmp_path)
    stop_if_shared([Outcome("done")], life, 4, tmp_path)
    with pytest.raises(SharedStartFailure) as stopped:
        stop_if_shared([Outcome("failed", "server exited with code 1 before it was ready: ValueError: v\nlog",
                                start_failed=True)], life, 2, tmp_path)
    assert str(stopped.value) == (
        f"k0/r0: server exited with code 1 before it was ready: ValueError: v; the sweep's 1 other server life starts "
        f"the same server with another K, so it would fail alike: stopped before starting it. Nothing was measured: "
        f"fix the cause (the log: {tmp_path}/k0/r0/server.log) and start the sweep again; --resume {tmp_path} "
        f"would rerun the config this folder recorded (for a cause outside it, e.g. GPU memory another process "
        f"held)")


@pytest.mark.parametrize("reason", [
    # vLLM binds its API port after the runner's free_port() found it free: another process took it meanwhile
    "server exited with code 1 before it was ready: OSError: [Errno 98] Address already in use",
    # the simulator's (uvicorn's) bind failure, and vLLM's internal ports (ZMQ, torch.distributed)
    "server exited with code 1 before it was ready: [Errno 98] error while attempting to bind on address "
    "('127.0.0.1', 8000): address already in use",
    "server exited with code 1 before it was ready: ZMQError: Address already in use (addr='tcp://127.0.0.1:5555')",
    "server exited with code 1 before it was ready: DistNetworkError: The server socket has failed to listen on any "
    "local network address. port: 29500, useIPv6: 0, code: -98, name: EADDRINUSE, message: address already in use",
    # stopped from outside while it started: vLLM raises KeyboardInterrupt("terminated") on SIGTERM
    "server exited with code 1 before it was ready: KeyboardInterrupt: terminated",
    "server exited with code -15 before it was ready: INFO loading weights",
])
def test_a_start_failure_the_next_life_would_not_meet_does_not_stop_the_sweep(tmp_path, reason):
    """A port another process took between lives, or a server stopped from outside, is this start's alone."""
    life = Life(plan_lives(config_from_dict({}))[0].setting, 0)
    stop_if_shared([Outcome("failed", reason + "\nlog", start_failed=True)], life, 4, tmp_path)
