"""Who writes the restart-spread ledger, and how: a sweep of this host writes it, `report` on a folder (which may be
someone else's) only when asked; its files are the user's alone (0600 in a 0700 folder the user owns), and no link in
its folder is followed, to write or to read."""
import os
import stat

import pytest

from lookahead_runner import cli
from lookahead_runner.config import config_from_dict
from lookahead_runner.runfolder import spread_ledger as ledger

GPU = "1 x NVIDIA H100 80GB HBM3"


def _use():
    config = config_from_dict({"server": {"command": ["vllm"], "model": "org/target-8b"},
                               "speculation": {"k": [0, 4], "draft_model": "org/draft-1b"},
                               "load": {"stages": [{"users": 4, "duration_s": 10}]}})
    return ledger.use_for_run(config, "0.32.0", True, gear=GPU)[0]


def test_report_on_a_folder_remembers_its_spread_only_when_asked(tmp_path, monkeypatch):
    """A run folder someone sends must not write their server's spread into my ledger: `report` remembers it only
    with --remember-spread (a sweep, whose server ran here, always does)."""
    asked = []
    monkeypatch.setattr("lookahead_runner.run.verdict.finalize.finalize",
                        lambda run_dir, steps=None, ledger=True, render=True: asked.append(ledger) or run_dir)
    assert cli.main(["report", str(tmp_path)]) == 0
    assert cli.main(["report", str(tmp_path), "--remember-spread"]) == 0
    assert cli.main(["report", str(tmp_path), "--remember-spread", "--no-ledger"]) == 0
    assert asked == [False, True, False]


def test_the_ledger_is_the_users_alone(cache_dir):
    assert ledger.remember(_use(), "run-1", 4, 0.002, 2, 4) == ""
    path = ledger.ledger_path()
    for written in (path, path.with_suffix(".lock")):
        assert stat.S_IMODE(written.stat().st_mode) == 0o600, written
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert not list(path.parent.glob("*.tmp")), "a temporary file left behind"


def test_a_link_in_place_of_the_temporary_file_is_not_written_through(cache_dir, tmp_path):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    os.symlink(victim, path.with_suffix(".tmp"))
    ledger.remember(_use(), "run-1", 4, 0.002, 2, 4)
    assert victim.read_text() == "mine"
    assert ledger.read_ledger(path)[0].servers, "the ledger was still written"


def test_a_link_in_place_of_the_lock_creates_nothing(cache_dir, tmp_path):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    target = tmp_path / "created-through-the-lock"
    os.symlink(target, path.with_suffix(".lock"))
    with pytest.raises(OSError):
        ledger.remember(_use(), "run-1", 4, 0.002, 2, 4)
    assert not target.exists()


def test_a_link_in_place_of_the_ledger_is_not_read(cache_dir, tmp_path):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    planted = tmp_path / "planted.json"
    planted.write_text('{"version": 2, "servers": {}}')
    os.symlink(planted, path)
    found, warning = ledger.read_ledger(path)
    assert not found.servers and "a link" in warning


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root (CI runs as root)")
def test_a_folder_another_user_owns_is_neither_read_nor_written(cache_dir):
    path = ledger.ledger_path()
    path.parent.mkdir(parents=True)
    path.write_text('{"version": 2, "servers": {}}')
    os.chown(path.parent, 65534, 65534)
    with pytest.raises(PermissionError, match="owned by another user"):
        ledger.remember(_use(), "run-1", 4, 0.002, 2, 4)
    assert "owned by another user" in ledger.read_ledger(path)[1]
