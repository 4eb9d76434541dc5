"""benchmarks/cluster_slots.py: a sweep the CLI stopped (the pre-flight, now on by default, on a busy host) ends the
benchmark in one line with the CLI's own, not a traceback on the missing decision.json."""
from __future__ import annotations

import subprocess

import pytest

from .scripts import load

bench = load("cluster_slots")


def test_a_sweep_the_cli_stopped_is_one_line_naming_its_reason(tmp_path, monkeypatch):
    def stopped(argv, **kwargs):
        (tmp_path / "ray" / "20261205-run").mkdir(parents=True)  # the run folder, with no decision.json
        return subprocess.CompletedProcess(argv, 2, "", "lookahead-runner: pre-flight at 2 users: Locust lags\n")

    monkeypatch.setattr(bench.subprocess, "run", stopped)
    with pytest.raises(SystemExit) as stop:
        bench.run("", tmp_path, "ray")
    assert str(stop.value.code) == ("the ray sweep exited 2 with no decision: lookahead-runner: pre-flight at 2 "
                                    "users: Locust lags")
