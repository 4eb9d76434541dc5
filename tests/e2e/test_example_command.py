"""`lookahead-runner example` as a user runs it, in a folder outside the checkout: the list names every example with
its first line, an example written there (with its request set) passes the dry run as it is, and a second write
without --force, or an unknown name, is one line and exit 2. (The wheel holds the examples: test_wheel.py.)"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lookahead_runner.examples import catalogue

pytestmark = pytest.mark.e2e
TIMEOUT_S = 120


def runner(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lookahead_runner", *args], capture_output=True, text=True,
                          cwd=folder, timeout=TIMEOUT_S)


def test_an_example_written_outside_the_checkout_passes_the_dry_run(tmp_path):
    listed = runner(tmp_path, "example")
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[0] for line in listed.stdout.splitlines()[:-1]] == [e.name for e in catalogue()]
    written = runner(tmp_path, "example", "chat", "--out", "mine/chat.toml")
    assert written.returncode == 0, written.stderr
    assert written.stdout.startswith("wrote mine/chat.toml, mine/chat.jsonl; check it with: ")
    dry = runner(tmp_path, "sweep", "--config", "mine/chat.toml", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "Request set mine/chat.jsonl: 300 requests" in dry.stdout and "k4/r0: " in dry.stdout
    assert not (tmp_path / "reports").exists()   # a dry run starts nothing


@pytest.mark.parametrize("args, says", [(["chat", "--out", "mine.toml"], "mine.toml exists: pass --force"),
                                        (["eagle"], "no example 'eagle'; the nearest is 'eagle3-chat'")])
def test_a_file_already_there_or_an_unknown_name_is_one_line(tmp_path, args, says):
    (tmp_path / "mine.toml").write_text("mine\n", encoding="utf-8")
    done = runner(tmp_path, "example", *args)
    assert (done.returncode, done.stdout) == (2, "") and done.stderr.count("\n") == 1 and says in done.stderr
    assert (tmp_path / "mine.toml").read_text(encoding="utf-8") == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.toml"]
