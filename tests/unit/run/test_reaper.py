"""The watchdog's protocol (run/life/reaper.py): what a runner or a Ray slot lists is cleaned up when it ends."""
import io

from lookahead_runner.run.life import reaper


def test_folders_a_slot_listed_are_removed_when_its_process_ends(tmp_path, monkeypatch):
    """A Ray slot killed mid-life (ray.kill) never runs its own cleanup: its watchdog removes the scratch folder
    once the pipe closes, after stopping the groups still listed."""
    scratch = tmp_path / "lookahead-life-abc"
    (scratch / "run" / "k0" / "r0").mkdir(parents=True)
    (scratch / "run" / "k0" / "r0" / "requests.csv").write_text("x")
    kept = tmp_path / "other"
    kept.mkdir()
    stopped = []
    monkeypatch.setattr(reaper.signal, "signal", lambda *args: None)  # the test process keeps its handlers
    monkeypatch.setattr(reaper, "stop_groups", lambda groups: stopped.append(dict(groups)))
    monkeypatch.setattr(reaper.sys, "stdin", io.StringIO(f"+4242 5\n@{scratch}\n-4242\n+4343 2\n"))
    assert reaper.main([]) == 0
    assert stopped == [{4343: 2.0}] and not scratch.exists() and kept.exists()
