"""run/verdict/steps.py: finalize's steps timed; a progress line only for a step still running after a second; each
step's time printed with --verbose."""
import io
import time

from rich.console import Console

from lookahead_runner.run.verdict import steps as steps_module
from lookahead_runner.run.verdict.steps import Steps


def terminal() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=True, width=100), out


def test_a_long_step_shows_a_progress_line_and_a_quick_one_none(monkeypatch):
    monkeypatch.setattr(steps_module, "SHOW_AFTER_S", 0.05)
    console, out = terminal()
    steps = Steps(console=console)
    with steps.step("quick"):
        pass
    assert "quick" not in out.getvalue()
    with steps.step("read the run folder"):
        time.sleep(0.5)
    assert "read the run folder" in out.getvalue()           # drawn while it ran (transient: cleared after)
    assert [name for name, _ in steps.times] == ["quick", "read the run folder"]
    assert steps.times[1][1] >= 0.5 and steps.total_s() >= 0.5


def test_verbose_prints_each_steps_time_and_no_terminal_draws_nothing(capsys):
    steps = Steps(verbose=True, console=Console(file=io.StringIO(), force_terminal=False))
    with steps.step("decide (resampling every stage)"):
        time.sleep(0.01)
    printed = capsys.readouterr().out
    assert printed.startswith("decide (resampling every stage): 0.0") and printed.rstrip().endswith(" s")
    assert not steps.enabled
